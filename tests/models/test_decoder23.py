"""A LLaMA-style decoder at opset 23 (RMSNormalization, RotaryEmbedding, grouped-query Attention
with a causal mask and a KV cache; scripts/decoder_block.py, two layers, random weights) run by
the streamline CLI and compared with ONNX Runtime, which implements these ops.

    .venv/bin/python -m pytest -q tests/models/test_decoder23.py

Metric: every output (y and each layer's present_key/present_value) within
1e-4 * max(1, max|ORT|). Also: the plan runs the new ops on their fast kernels, and decoding one
token on the prefill's cache gives the last row of a prefill one token longer.
"""

import json

import numpy as np
import pytest

import decoder_block
from conftest import run_cli_ok

TOL = 1e-4
SPEC = decoder_block.BlockSpec(layers=2)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = tmp_path_factory.mktemp("decoder23")
    return {v: decoder_block.write(SPEC, out, f"decoder23_{v}", v == "decode") for v in ("prefill", "decode")}


def ort_run(model, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def streamline_run(model, feeds, out_dir, threads=2):
    in_dir = out_dir / "in"
    in_dir.mkdir(parents=True, exist_ok=True)
    args = ["run", model, "--output-dir", out_dir, "--threads", threads]
    for name, value in feeds.items():
        np.save(in_dir / f"{name}.npy", value)
        args += ["--input", f"{name}={in_dir / f'{name}.npy'}"]
    run_cli_ok(args)
    return {p.stem: np.load(p) for p in out_dir.glob("*.npy")}


def assert_close(ours, ref, what, against="ORT"):
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape}, {against} {ref.shape}"
    assert np.isfinite(ours).all(), f"{what}: non-finite outputs"
    err = float(np.abs(ours.astype(np.float64) - ref).max())
    scale = max(1.0, float(np.abs(ref).max()))
    print(f"{what}: max|ours - {against}| = {err:.3e}, bound {TOL * scale:.3e}")
    assert err <= TOL * scale, f"{what}: max|ours - {against}| = {err:.3e} > {TOL * scale:.3e}"


@pytest.mark.parametrize("variant,batch,seq,past", [
    ("prefill", 1, 1, 0), ("prefill", 2, 70, 0),  # 70 rows: two query blocks, the second causal-trimmed
    ("decode", 2, 1, 100), ("decode", 1, 5, 37),
])
def test_decoder_matches_onnxruntime(models, tmp_path, variant, batch, seq, past):
    feeds = decoder_block.feeds(SPEC, batch, seq, past)
    ref = ort_run(models[variant], feeds)
    ours = streamline_run(models[variant], feeds, tmp_path / "out")
    assert set(ours) == set(ref), f"outputs {sorted(ours)}, ONNX Runtime {sorted(ref)}"
    for name in ref:
        assert_close(ours[name], ref[name], f"{variant} b{batch} s{seq} p{past} {name}")


def test_decode_on_the_prefill_cache_continues_the_prefill(models, tmp_path):
    """Prefill 12 tokens, then decode token 13 on the presents: its y is the 13-token prefill's
    last row, and the decode's presents are the longer prefill's."""
    full = decoder_block.feeds(SPEC, 2, 13, 0, seed=5)
    prompt = {"x": full["x"][:, :12], "position_ids": full["position_ids"][:, :12]}
    first = streamline_run(models["prefill"], prompt, tmp_path / "prompt")
    step = {"x": full["x"][:, 12:], "position_ids": full["position_ids"][:, 12:]}
    for l in range(SPEC.layers):
        step[f"past_key_{l}"] = first[f"present_key_{l}"]
        step[f"past_value_{l}"] = first[f"present_value_{l}"]
    nxt = streamline_run(models["decode"], step, tmp_path / "step")
    whole = streamline_run(models["prefill"], full, tmp_path / "whole")
    assert_close(nxt["y"][:, 0], whole["y"][:, 12].astype(np.float64), "decoded y", "13-token prefill")
    for l in range(SPEC.layers):
        for kind in ("key", "value"):
            name = f"present_{kind}_{l}"
            assert_close(nxt[name], whole[name].astype(np.float64), name, "13-token prefill")


def test_plan_runs_the_new_ops_on_fast_kernels(models):
    """No op falls back to a reference kernel; Attention, RotaryEmbedding and RMSNormalization
    are steps of the plan."""
    r = run_cli_ok(["plan", models["decode"], "--json", "--shape", "x=1,1,512", "--shape", "position_ids=1,1",
                    *[a for l in range(SPEC.layers) for k in ("key", "value")
                      for a in ("--shape", f"past_{k}_{l}=1,2,64,64")]])
    plan = json.loads(r.stdout)
    ops = [n["op"] for n in plan["nodes"]]
    for op in ("Attention", "RotaryEmbedding", "RMSNormalization"):
        assert op in ops, f"{op} missing from the plan's ops {sorted(set(ops))}"
    assert "reference" not in r.stdout
