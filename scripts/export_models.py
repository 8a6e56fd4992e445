#!/usr/bin/env python3
"""Export test models (random weights, fixed seed) to ONNX for the model tests and benchmarks.

    .venv/bin/python scripts/export_models.py --out build/models
    .venv/bin/python scripts/export_models.py --out build/models --models resnet50,googlenet
    .venv/bin/python scripts/export_models.py --out build/models --models bert,bert_tiny

Weights: torch.manual_seed(0) before each constructor, then BatchNorm layers get seeded random
scale/shift and running statistics measured on a seeded random batch (_calibrate_batchnorm), so
every model's outputs are of order 1.

Two kinds of model:
  - torchvision CNNs (ModelSpec): opset 13, input "input" float32 [batch,3,224,224] (dynamic
    "batch"), output "output"; reference input from numpy RandomState(0).standard_normal.
  - BERT-like encoders (EncoderSpec, see _Encoder): token embedding + learned position embedding
    (gathered at arange(seq), so the sequence length stays dynamic) + torch.nn.TransformerEncoder
    (post-norm layers, GELU, eval mode); input "input_ids" int64 [batch,seq], output
    "last_hidden_state" float32 [batch,seq,d_model], both axes dynamic; reference input: token ids
    from numpy RandomState(0).randint at the spec's reference length. "bert" (BERT-base sizes) is
    exported at opset 17, where LayerNorm becomes LayerNormalization; "bert_tiny" at opset 14, where
    it is decomposed into ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add, so both forms reach the runtime.

For each model NAME it writes, in DIR:
    NAME.onnx         the model
    NAME.input.npy    the reference input, batch 1
    NAME.torch.npy    PyTorch's float32 output on NAME.input.npy (eval mode, torch.no_grad())
    NAME.sha256       digest of the export parameters; a model whose files exist and whose digest
                      matches is not exported again

Files are written under temporary names and moved into place with os.replace, and an exclusive
lock (DIR/NAME.lock) serialises exporters of the same model, so concurrent test processes can
share one directory. torch is imported only when a model has to be built, so callers that only
need existing files (bench/compare_ort.py) work without it.

Adding a model is one entry in MODELS.
"""

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

OPSET = 13
SEED = 0
INPUT_NAME = "input"
OUTPUT_NAME = "output"
# Opset of the model families added for the broad benchmark (bench/zoo.py).
ZOO_OPSET = 17
BATCH_AXIS = "batch"
# Images in the seeded random batch that sets BatchNorm running statistics.
CALIBRATION_BATCH = 8
# Bump when the export procedure changes in a way the parameters below do not capture.
FORMAT_VERSION = 1
# The same for the encoders alone (their module code and weight initialisation).
ENCODER_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """How to build one model: a torchvision constructor name plus its keyword arguments."""

    constructor: str
    kwargs: Dict[str, Any]
    input_shape: Tuple[int, ...] = (3, 224, 224)  # without the batch axis
    # Give BatchNorm layers random affine parameters and running statistics measured on a seeded
    # random batch (see _calibrate_batchnorm); no effect on models without BatchNorm.
    calibrate_bn: bool = True
    opset: int = OPSET
    # Re-draw parameters that torchvision initialises to values that hide most of the network: an
    # all-zero classifier (ViT's head) and per-channel layer scales of 1e-6 (ConvNeXt's blocks).
    # See _enliven.
    enliven: bool = False


@dataclasses.dataclass(frozen=True)
class CustomSpec:
    """A torch module defined in scripts/zoo_models.py (BUILDERS[builder]), random weights."""

    builder: str
    input_shape: Tuple[int, ...]  # without the batch axis
    tokens: int = 0  # > 0: int64 token ids in [0, tokens); 0: float32 standard normal
    opset: int = ZOO_OPSET
    input: str = INPUT_NAME
    output: str = OUTPUT_NAME


@dataclasses.dataclass(frozen=True)
class EncoderSpec:
    """A BERT-like encoder: embeddings + torch.nn.TransformerEncoder, random weights."""

    layers: int
    d_model: int = 768
    heads: int = 12
    ff: int = 3072
    vocab: int = 30522
    max_positions: int = 512
    opset: int = 17
    ref_seq: int = 8  # sequence length of NAME.input.npy


ENCODER_INPUT = "input_ids"
ENCODER_OUTPUT = "last_hidden_state"
ENCODER_AXES = {0: "batch", 1: "seq"}

MODELS: Dict[str, Union[ModelSpec, EncoderSpec]] = {
    "resnet50": ModelSpec("resnet50", {"weights": None}),
    "mobilenet_v2": ModelSpec("mobilenet_v2", {"weights": None}),
    "squeezenet1_1": ModelSpec("squeezenet1_1", {"weights": None}),
    # No auxiliary heads (they only exist in training), no ImageNet input re-normalisation.
    "googlenet": ModelSpec(
        "googlenet",
        {"weights": None, "aux_logits": False, "init_weights": True, "transform_input": False},
    ),
    # BERT-base sizes: 12 layers, d=768, 12 heads, FFN 3072, WordPiece vocabulary size.
    "bert": EncoderSpec(layers=12),
    # Small and at opset 14 (decomposed LayerNorm) for quick tests of the transformer fusions.
    "bert_tiny": EncoderSpec(layers=2, d_model=128, heads=4, ff=512, vocab=1000, opset=14),
    # The broad benchmark's families (bench/zoo.py), opset 17.
    "efficientnet_b0": ModelSpec("efficientnet_b0", {"weights": None}, opset=ZOO_OPSET),
    "efficientnet_b3": ModelSpec("efficientnet_b3", {"weights": None}, (3, 300, 300), opset=ZOO_OPSET),
    "mobilenet_v3_large": ModelSpec("mobilenet_v3_large", {"weights": None}, opset=ZOO_OPSET),
    "mobilenet_v3_small": ModelSpec("mobilenet_v3_small", {"weights": None}, opset=ZOO_OPSET),
    "regnet_y_400mf": ModelSpec("regnet_y_400mf", {"weights": None}, opset=ZOO_OPSET),
    "regnet_x_400mf": ModelSpec("regnet_x_400mf", {"weights": None}, opset=ZOO_OPSET),
    "convnext_tiny": ModelSpec("convnext_tiny", {"weights": None}, opset=ZOO_OPSET, enliven=True),
    "shufflenet_v2_x1_0": ModelSpec("shufflenet_v2_x1_0", {"weights": None}, opset=ZOO_OPSET),
    "densenet121": ModelSpec("densenet121", {"weights": None}, opset=ZOO_OPSET),
    "mnasnet1_0": ModelSpec("mnasnet1_0", {"weights": None}, opset=ZOO_OPSET),
    "resnext50_32x4d": ModelSpec("resnext50_32x4d", {"weights": None}, opset=ZOO_OPSET),
    "inception_v3": ModelSpec(
        "inception_v3",
        {"weights": None, "aux_logits": False, "init_weights": True, "transform_input": False},
        (3, 299, 299), opset=ZOO_OPSET),
    "vit_b_16": ModelSpec("vit_b_16", {"weights": None}, opset=ZOO_OPSET, enliven=True),
    "swin_t": ModelSpec("swin_t", {"weights": None}, opset=ZOO_OPSET),
    # Families defined in scripts/zoo_models.py.
    "yolo_det": CustomSpec("yolo_det", (3, 320, 320)),
    "ocr_det": CustomSpec("ocr_det", (3, 320, 320)),
    "bytecnn": CustomSpec("bytecnn", (512,), tokens=1024, input="input_ids"),
    "gpt2": CustomSpec("gpt2", (128,), tokens=8192, input="input_ids", output="logits"),
    "llama_tiny": CustomSpec("llama_tiny", (128,), tokens=8192, input="input_ids", output="logits"),
}


def is_encoder(name: str) -> bool:
    return isinstance(_spec(name), EncoderSpec)


def is_zoo(name: str) -> bool:
    """True for the families added for the broad benchmark (bench/zoo.py): opset-17 torchvision
    models and the modules of scripts/zoo_models.py."""
    spec = _spec(name)
    return isinstance(spec, CustomSpec) or (isinstance(spec, ModelSpec) and spec.opset == ZOO_OPSET)


def is_token_model(name: str) -> bool:
    """True when the model's input is int64 token ids (encoders and token CustomSpecs)."""
    spec = _spec(name)
    return isinstance(spec, EncoderSpec) or (isinstance(spec, CustomSpec) and spec.tokens > 0)


def input_name(name: str) -> str:
    spec = _spec(name)
    if isinstance(spec, CustomSpec):
        return spec.input
    return ENCODER_INPUT if is_encoder(name) else INPUT_NAME


def output_name(name: str) -> str:
    spec = _spec(name)
    if isinstance(spec, CustomSpec):
        return spec.output
    return ENCODER_OUTPUT if is_encoder(name) else OUTPUT_NAME


def _spec(name: str) -> Union[ModelSpec, EncoderSpec, CustomSpec]:
    if name not in MODELS:
        raise KeyError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    return MODELS[name]


def paths(out_dir: Path, name: str) -> Dict[str, Path]:
    """The files belonging to model NAME in OUT_DIR."""
    out_dir = Path(out_dir)
    return {
        "onnx": out_dir / f"{name}.onnx",
        "input": out_dir / f"{name}.input.npy",
        "torch": out_dir / f"{name}.torch.npy",
        "digest": out_dir / f"{name}.sha256",
        "lock": out_dir / f"{name}.lock",
    }


def _import_torch():
    try:
        import torch
        import torchvision
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            f"cannot import torch/torchvision ({e}); run with the project's venv "
            "(.venv/bin/python, created by scripts/setup.sh)"
        ) from e
    return torch, torchvision


def export_parameters(name: str) -> Dict[str, Any]:
    """Everything that determines the exported files; its digest is the cache key."""
    torch, torchvision = _import_torch()
    spec = _spec(name)
    if isinstance(spec, EncoderSpec):
        return {
            "format": FORMAT_VERSION,
            "model": name,
            "kind": "encoder",
            "encoder_format": ENCODER_FORMAT_VERSION,
            "spec": dataclasses.asdict(spec),
            "seed": SEED,
            "torch": torch.__version__,
            "numpy": np.__version__,
        }
    if isinstance(spec, CustomSpec):
        return {
            "format": FORMAT_VERSION,
            "model": name,
            "kind": "custom",
            "spec": dataclasses.asdict(spec),
            # The module code is part of the export: a change to it must re-export.
            "source": hashlib.sha256((Path(__file__).parent / "zoo_models.py").read_bytes()).hexdigest(),
            "calibration_batch": CALIBRATION_BATCH,
            "seed": SEED,
            "torch": torch.__version__,
            "torchvision": torchvision.__version__,
            "numpy": np.__version__,
        }
    return {
        "format": FORMAT_VERSION,
        "model": name,
        "constructor": spec.constructor,
        "kwargs": spec.kwargs,
        "input_shape": list(spec.input_shape),
        "calibrate_bn": spec.calibrate_bn,
        "calibration_batch": CALIBRATION_BATCH,
        "opset": spec.opset,
        **({"enliven": True} if spec.enliven else {}),
        "seed": SEED,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": np.__version__,
    }


def parameters_digest(name: str) -> str:
    blob = json.dumps(export_parameters(name), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def _calibrate_batchnorm(model, name: str) -> None:
    """Seeded random BatchNorm affine parameters, running statistics from a random batch.

    With torchvision's default initialisation some networks' outputs vanish (MobileNetV2's
    depthwise convolutions are initialised for a fan-out they do not have, so its logits are
    ~1e-9; GoogLeNet's are ~1e-2), which would make a comparison with an absolute floor meaningless,
    and BatchNorm with mean 0, variance 1, scale 1, shift 0 folds to almost nothing. Measured
    statistics keep every layer's activations near unit scale, as trained weights do, and give
    the BatchNorm folding real work.
    """
    torch, _ = _import_torch()
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    gen = torch.Generator().manual_seed(SEED + 1)
    momenta = []
    with torch.no_grad():
        for bn in bns:
            if bn.affine:
                bn.weight.copy_(0.5 + torch.rand(bn.num_features, generator=gen))
                bn.bias.copy_(0.4 * (torch.rand(bn.num_features, generator=gen) - 0.5))
            bn.reset_running_stats()
            momenta.append(bn.momentum)
            bn.momentum = None  # cumulative average: one batch sets the statistics exactly
        x = reference_input(name, batch=CALIBRATION_BATCH, seed=SEED + 1)
        model.train()
        model(torch.from_numpy(x))
        model.eval()
        for bn, m in zip(bns, momenta):
            bn.momentum = m


def _enliven(model) -> None:
    """Seeded random values for all-zero Linear/Conv weights and for `layer_scale` parameters.

    torchvision's ViT starts with a zero classifier (every output would be its zero bias, so a
    comparison could not fail) and ConvNeXt scales each block's residual branch by 1e-6 (the
    network would be its stem, downsampling layers and head). Trained weights have neither.
    """
    torch, _ = _import_torch()
    gen = torch.Generator().manual_seed(SEED + 2)
    with torch.no_grad():
        for mod in model.modules():
            w = getattr(mod, "weight", None)
            if isinstance(mod, (torch.nn.Linear, torch.nn.Conv2d)) and w is not None and not w.any():
                bound = 1.0 / max(1, w[0].numel()) ** 0.5
                w.copy_((torch.rand(w.shape, generator=gen) * 2 - 1) * bound)
        for name, prm in model.named_parameters():
            if name.endswith("layer_scale"):
                prm.copy_(0.1 + 0.9 * torch.rand(prm.shape, generator=gen))


def _encoder_class():
    """The encoder module class (defined lazily: torch is imported only when a model is built)."""
    torch, _ = _import_torch()

    class _Encoder(torch.nn.Module):
        """Token + learned position embeddings, then a post-norm GELU TransformerEncoder.

        Positions are arange(seq) gathered from the position table (Range + Gather in ONNX), so
        the exported graph keeps the sequence length dynamic.
        """

        def __init__(self, spec: EncoderSpec):
            super().__init__()
            self.tokens = torch.nn.Embedding(spec.vocab, spec.d_model)
            self.positions = torch.nn.Embedding(spec.max_positions, spec.d_model)
            layer = torch.nn.TransformerEncoderLayer(spec.d_model, spec.heads, spec.ff, activation="gelu",
                                                     batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, spec.layers, enable_nested_tensor=False)
            # TransformerEncoder deep-copies one layer, so every layer would start with the same
            # weights (and the exporter would store them once). Draw each layer's own: default
            # initialisation for the projections, small random biases, LayerNorm scale near 1.
            with torch.no_grad():
                for lyr in self.encoder.layers:
                    lyr.self_attn._reset_parameters()
                    for lin in (lyr.self_attn.out_proj, lyr.linear1, lyr.linear2):
                        lin.reset_parameters()
                    for pname, prm in lyr.named_parameters():
                        if pname.endswith("bias"):
                            prm.uniform_(-0.1, 0.1)
                    for norm in (lyr.norm1, lyr.norm2):
                        norm.weight.uniform_(0.8, 1.2)

        def forward(self, input_ids):
            pos = torch.arange(input_ids.shape[1], device=input_ids.device)
            return self.encoder(self.tokens(input_ids) + self.positions(pos))

    return _Encoder


def build_model(name: str):
    """The eval-mode torch module for NAME, with the seeded random weights the ONNX file has."""
    torch, torchvision = _import_torch()
    spec = _spec(name)
    torch.manual_seed(SEED)
    if isinstance(spec, EncoderSpec):
        # nn.Linear's default initialisation keeps activations of order 1 through post-norm layers.
        return _encoder_class()(spec).eval()
    if isinstance(spec, CustomSpec):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import zoo_models

        model = zoo_models.BUILDERS[spec.builder]()
        _calibrate_batchnorm(model, name)
        return model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(torchvision.models, spec.constructor)(**spec.kwargs)
    if spec.enliven:
        _enliven(model)
    if spec.calibrate_bn:
        _calibrate_batchnorm(model, name)
    return model.eval()


def reference_input(name: str, batch: int = 1, seed: int = SEED, seq: Optional[int] = None) -> np.ndarray:
    """Seeded input for NAME: standard-normal float32 [batch, *input_shape] for an image model,
    uniform token ids int64 [batch, seq] (seq defaults to the spec's ref_seq) for an encoder."""
    spec = _spec(name)
    if isinstance(spec, EncoderSpec):
        shape = (batch, seq if seq is not None else spec.ref_seq)
        return np.random.RandomState(seed).randint(0, spec.vocab, size=shape).astype(np.int64)
    shape = (batch,) + tuple(spec.input_shape)
    if isinstance(spec, CustomSpec) and spec.tokens > 0:
        return np.random.RandomState(seed).randint(0, spec.tokens, size=shape).astype(np.int64)
    return np.random.RandomState(seed).standard_normal(shape).astype(np.float32)


@contextlib.contextmanager
def _onednn_products(torch):
    """Runs F.linear, torch.bmm and torch.baddbmm on PyTorch's oneDNN (mkldnn) kernels.

    Debian's torch is built against the generic reference BLAS (about 1 GFLOP/s here), which makes
    one BERT-base reference at seq 512 take minutes; torch's oneDNN linear is an order of magnitude
    faster. Only the float32 matrix products move: LayerNorm, softmax, GELU and the attention code
    are still PyTorch's own (nn.MultiheadAttention's Python path, which calls these three).
    """
    F = torch.nn.functional
    saved = (F.linear, torch.bmm, torch.baddbmm)

    def mk(t):
        return t.detach().contiguous().to_mkldnn()

    def linear(x, w, b=None):
        lead = x.shape[:-1]
        y = torch._C._nn.mkldnn_linear(mk(x.reshape(-1, x.shape[-1])), mk(w), mk(b) if b is not None else None)
        return y.to_dense().reshape(*lead, w.shape[0])

    def bmm(a, b):
        # a[i] @ b[i] as linear(a[i], b[i]^T).
        return torch.stack([torch._C._nn.mkldnn_linear(mk(a[i]), mk(b[i].transpose(0, 1)), None).to_dense()
                            for i in range(a.shape[0])])

    def baddbmm(c, a, b):
        return c + bmm(a, b)

    F.linear, torch.bmm, torch.baddbmm = linear, bmm, baddbmm
    try:
        yield
    finally:
        F.linear, torch.bmm, torch.baddbmm = saved


def torch_forward(model, x: np.ndarray) -> np.ndarray:
    """MODEL's float32 output on X (no autograd). Integer X (token ids) is passed as int64.

    An encoder runs TransformerEncoderLayer's Python path (autograd on, so the fused C++ fast path
    is not taken) with its matrix products on oneDNN (_onednn_products); no autograd graph is kept,
    as those products return plain tensors."""
    torch, _ = _import_torch()
    if np.issubdtype(x.dtype, np.integer):
        ids = torch.from_numpy(np.ascontiguousarray(x, dtype=np.int64))
        with torch.enable_grad(), _onednn_products(torch):
            y = model(ids)
        return y.detach().to(torch.float32).numpy()
    with torch.no_grad():
        y = model(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)))
    return y.detach().to(torch.float32).numpy()


def is_current(out_dir: Path, name: str, digest: Optional[str] = None) -> bool:
    """True when all files of NAME exist and were exported with the current parameters."""
    p = paths(out_dir, name)
    if not all(p[k].is_file() for k in ("onnx", "input", "torch", "digest")):
        return False
    if digest is None:
        digest = parameters_digest(name)
    return p["digest"].read_text().strip() == digest


@contextlib.contextmanager
def _exclusive(lock_path: Path):
    with open(lock_path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _tmp_name(path: Path) -> Path:
    # Keep the suffix so tools that look at it (np.save adds ".npy") behave.
    return path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")


def _save_npy(path: Path, a: np.ndarray) -> None:
    tmp = _tmp_name(path)
    np.save(tmp, a)
    os.replace(tmp, path)


def _export_onnx(model, name: str, path: Path) -> None:
    torch, _ = _import_torch()
    spec = _spec(name)
    dummy = torch.from_numpy(reference_input(name))
    tmp = _tmp_name(path)
    if isinstance(spec, EncoderSpec):
        # Tracing (which export does) never takes TransformerEncoderLayer's fused fast path: that
        # path needs autograd off, and export traces with it on, so the graph holds plain ONNX ops.
        opset = spec.opset
        axes = {ENCODER_INPUT: ENCODER_AXES, ENCODER_OUTPUT: ENCODER_AXES}
    else:
        opset = spec.opset
        axes = {input_name(name): {0: BATCH_AXIS}, output_name(name): {0: BATCH_AXIS}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            dummy,
            str(tmp),
            opset_version=opset,
            input_names=[input_name(name)],
            output_names=[output_name(name)],
            dynamic_axes=axes,
            do_constant_folding=True,
            export_params=True,
            verbose=False,
        )
    try:
        import onnx

        onnx.checker.check_model(onnx.load(str(tmp)))
    except ImportError:
        pass
    os.replace(tmp, path)


def export_model(name: str, out_dir, force: bool = False) -> Tuple[Dict[str, Path], bool]:
    """Make sure NAME's files in OUT_DIR are current; returns (paths, whether it exported).

    Safe to call from several processes at once: one exports, the others wait and reuse.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    p = paths(out_dir, name)
    digest = parameters_digest(name)
    with _exclusive(p["lock"]):
        if not force and is_current(out_dir, name, digest):
            return p, False
        # Drop the digest first: a crash part-way leaves the model marked stale.
        p["digest"].unlink(missing_ok=True)
        model = build_model(name)
        x = reference_input(name)
        _export_onnx(model, name, p["onnx"])
        _save_npy(p["input"], x)
        _save_npy(p["torch"], torch_forward(model, x))
        tmp = _tmp_name(p["digest"])
        tmp.write_text(digest + "\n")
        os.replace(tmp, p["digest"])
    return p, True


def ensure_models(names: List[str], out_dir, force: bool = False,
                  log: Optional[Callable[[str], None]] = print) -> Dict[str, Dict[str, Path]]:
    """export_model for each name, printing one line per model through LOG (None: silent)."""
    result = {}
    for name in names:
        t0 = time.monotonic()
        p, exported = export_model(name, out_dir, force=force)
        if log is not None:
            if exported:
                size = p["onnx"].stat().st_size / 1e6
                log(f"{name}: exported {p['onnx']} ({size:.1f} MB) in {time.monotonic() - t0:.1f} s")
            else:
                log(f"{name}: up to date ({p['onnx']})")
        result[name] = p
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated subset of: {', '.join(MODELS)} (default: all)")
    ap.add_argument("--force", action="store_true", help="export even when the cached files match")
    args = ap.parse_args(argv)
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        print(f"error: unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    try:
        ensure_models(names, args.out, force=args.force)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
