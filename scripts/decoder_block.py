#!/usr/bin/env python3
"""Build LLaMA-style decoder blocks at opset 23 with onnx.helper (random weights, fixed seed), for
the decoder model test and bench/decoder23.py.

    .venv/bin/python scripts/decoder_block.py --out build/models            # prefill and decode
    .venv/bin/python scripts/decoder_block.py --out build/models --layers 2 --hidden 512

Each layer, on x [batch, seq, hidden]:

    h = RMSNormalization(x)                           axis -1, epsilon 1e-5
    q, k, v = MatMul(h, Wq), MatMul(h, Wk), MatMul(h, Wv)        3-D, heads * head_size wide
    q, k = RotaryEmbedding(q | k, cos, sin, position_ids)       num_heads, non-interleaved
    a, present_key, present_value = Attention(q, k, v, [past_key, past_value])
                                      is_causal 1, q_num_heads, kv_num_heads (grouped-query)
    x = x + MatMul(a, Wo)
    h = RMSNormalization(x)
    x = x + MatMul(Mul(SiLU(MatMul(h, Wg)), MatMul(h, Wu)), Wd)  SiLU = g * Sigmoid(g)

Two variants: "prefill" (no cache inputs; the presents hold the prompt's keys and values) and
"decode" (past_key_L/past_value_L [batch, kv_heads, past, head_size] in, presents of past + seq
out). Inputs: x, position_ids [batch, seq] int64 (into cos/sin caches of --max-positions rows),
then the caches; outputs: y, then present_key_L/present_value_L per layer. Batch, seq and past
are symbolic. Weights are numpy RandomState(seed) normal values scaled by 1/sqrt(fan-in), norm
scales near 1; the caches are cos/sin of position * 10000^(-2i/head_size).
"""

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 23
IR_VERSION = 10


@dataclass(frozen=True)
class BlockSpec:
    layers: int = 1
    hidden: int = 512
    q_heads: int = 8
    kv_heads: int = 2
    head_size: int = 64
    ffn: int = 1408
    max_positions: int = 2048
    seed: int = 0


def _weights(spec: BlockSpec) -> Dict[str, np.ndarray]:
    rng = np.random.RandomState(spec.seed)

    def dense(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(np.float32)

    w = {}
    qd, kd = spec.q_heads * spec.head_size, spec.kv_heads * spec.head_size
    for l in range(spec.layers):
        w[f"ln1_{l}"] = (1.0 + 0.1 * rng.standard_normal(spec.hidden)).astype(np.float32)
        w[f"wq_{l}"] = dense(spec.hidden, qd)
        w[f"wk_{l}"] = dense(spec.hidden, kd)
        w[f"wv_{l}"] = dense(spec.hidden, kd)
        w[f"wo_{l}"] = dense(qd, spec.hidden)
        w[f"ln2_{l}"] = (1.0 + 0.1 * rng.standard_normal(spec.hidden)).astype(np.float32)
        w[f"wg_{l}"] = dense(spec.hidden, spec.ffn)
        w[f"wu_{l}"] = dense(spec.hidden, spec.ffn)
        w[f"wd_{l}"] = dense(spec.ffn, spec.hidden)
    half = spec.head_size // 2
    inv_freq = 10000.0 ** (-np.arange(half, dtype=np.float64) * 2.0 / spec.head_size)
    angles = np.arange(spec.max_positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    w["cos_cache"] = np.cos(angles).astype(np.float32)
    w["sin_cache"] = np.sin(angles).astype(np.float32)
    return w


def build(spec: BlockSpec, decode: bool) -> onnx.ModelProto:
    """The block as an opset-23 ModelProto (see the module docstring)."""
    w = _weights(spec)
    nodes = []
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", spec.hidden]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", spec.hidden])]
    total = "total" if decode else "seq"
    x = "x"
    for l in range(spec.layers):
        def n(op, ins, outs, **attrs):
            nodes.append(helper.make_node(op, ins, outs, name=f"{outs[0]}_node", **attrs))
            return outs[0]

        h = n("RMSNormalization", [x, f"ln1_{l}"], [f"h1_{l}"], axis=-1, epsilon=1e-5)
        q = n("MatMul", [h, f"wq_{l}"], [f"q_{l}"])
        k = n("MatMul", [h, f"wk_{l}"], [f"k_{l}"])
        v = n("MatMul", [h, f"wv_{l}"], [f"v_{l}"])
        q = n("RotaryEmbedding", [q, "cos_cache", "sin_cache", "position_ids"], [f"qr_{l}"], num_heads=spec.q_heads)
        k = n("RotaryEmbedding", [k, "cos_cache", "sin_cache", "position_ids"], [f"kr_{l}"], num_heads=spec.kv_heads)
        att_in = [q, k, v]
        if decode:
            att_in += ["", f"past_key_{l}", f"past_value_{l}"]
            for kind in ("key", "value"):
                inputs.append(helper.make_tensor_value_info(
                    f"past_{kind}_{l}", TensorProto.FLOAT, ["batch", spec.kv_heads, "past", spec.head_size]))
        nodes.append(helper.make_node("Attention", att_in, [f"a_{l}", f"present_key_{l}", f"present_value_{l}"],
                                      name=f"attention_{l}", is_causal=1, q_num_heads=spec.q_heads,
                                      kv_num_heads=spec.kv_heads))
        for kind in ("key", "value"):
            outputs.append(helper.make_tensor_value_info(
                f"present_{kind}_{l}", TensorProto.FLOAT, ["batch", spec.kv_heads, total, spec.head_size]))
        o = n("MatMul", [f"a_{l}", f"wo_{l}"], [f"o_{l}"])
        x1 = n("Add", [x, o], [f"x1_{l}"])
        h2 = n("RMSNormalization", [x1, f"ln2_{l}"], [f"h2_{l}"], axis=-1, epsilon=1e-5)
        g = n("MatMul", [h2, f"wg_{l}"], [f"g_{l}"])
        sg = n("Sigmoid", [g], [f"sg_{l}"])
        silu = n("Mul", [g, sg], [f"silu_{l}"])
        u = n("MatMul", [h2, f"wu_{l}"], [f"u_{l}"])
        m = n("Mul", [silu, u], [f"m_{l}"])
        d = n("MatMul", [m, f"wd_{l}"], [f"d_{l}"])
        x = n("Add", [x1, d], ["y" if l == spec.layers - 1 else f"x_{l + 1}"])
    graph = helper.make_graph(nodes, f"decoder_{'decode' if decode else 'prefill'}", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in w.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="streamline-decoder-block")
    model.ir_version = IR_VERSION
    return model


def feeds(spec: BlockSpec, batch: int, seq: int, past: int, seed: int = 1) -> Dict[str, np.ndarray]:
    """Inputs for one run: x normal, positions past..past+seq-1 per row, caches normal."""
    rng = np.random.RandomState(seed)
    f = {"x": rng.standard_normal((batch, seq, spec.hidden)).astype(np.float32),
         "position_ids": np.tile(np.arange(past, past + seq, dtype=np.int64), (batch, 1))}
    if past > 0:
        for l in range(spec.layers):
            for kind in ("key", "value"):
                f[f"past_{kind}_{l}"] = rng.standard_normal(
                    (batch, spec.kv_heads, past, spec.head_size)).astype(np.float32)
    return f


def write(spec: BlockSpec, out_dir: Path, name: str, decode: bool) -> Path:
    """Writes OUT_DIR/NAME.onnx (under a temporary name, then moved into place) and returns it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.onnx"
    tmp = path.with_suffix(f".onnx.tmp{np.random.randint(1 << 30)}")
    onnx.save(build(spec, decode), str(tmp))
    tmp.replace(path)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/models", help="output folder (default build/models)")
    ap.add_argument("--layers", type=int, default=BlockSpec.layers)
    ap.add_argument("--hidden", type=int, default=BlockSpec.hidden)
    args = ap.parse_args(argv)
    spec = BlockSpec(layers=args.layers, hidden=args.hidden)
    for variant in ("prefill", "decode"):
        print(write(spec, Path(args.out), f"decoder23_{variant}", variant == "decode"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
