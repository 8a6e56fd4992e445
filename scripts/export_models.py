#!/usr/bin/env python3
"""Export torchvision models (random weights, fixed seed) to ONNX for the model tests and benchmarks.

    .venv/bin/python scripts/export_models.py --out build/models
    .venv/bin/python scripts/export_models.py --out build/models --models resnet50,googlenet

Weights: torch.manual_seed(0) before each constructor, then BatchNorm layers get seeded random
scale/shift and running statistics measured on a seeded random batch (_calibrate_batchnorm), so
every model's outputs are of order 1.

For each model NAME it writes, in DIR:
    NAME.onnx         opset 13, input "input" [batch,3,224,224] (dynamic "batch"), output "output"
    NAME.input.npy    float32 [1,3,224,224] from numpy RandomState(0).standard_normal
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
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

OPSET = 13
SEED = 0
INPUT_NAME = "input"
OUTPUT_NAME = "output"
BATCH_AXIS = "batch"
# Images in the seeded random batch that sets BatchNorm running statistics.
CALIBRATION_BATCH = 8
# Bump when the export procedure changes in a way the parameters below do not capture.
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """How to build one model: a torchvision constructor name plus its keyword arguments."""

    constructor: str
    kwargs: Dict[str, Any]
    input_shape: Tuple[int, ...] = (3, 224, 224)  # without the batch axis
    # Give BatchNorm layers random affine parameters and running statistics measured on a seeded
    # random batch (see _calibrate_batchnorm); no effect on models without BatchNorm.
    calibrate_bn: bool = True


MODELS: Dict[str, ModelSpec] = {
    "resnet50": ModelSpec("resnet50", {"weights": None}),
    "mobilenet_v2": ModelSpec("mobilenet_v2", {"weights": None}),
    "squeezenet1_1": ModelSpec("squeezenet1_1", {"weights": None}),
    # No auxiliary heads (they only exist in training), no ImageNet input re-normalisation.
    "googlenet": ModelSpec(
        "googlenet",
        {"weights": None, "aux_logits": False, "init_weights": True, "transform_input": False},
    ),
}


def _spec(name: str) -> ModelSpec:
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
    return {
        "format": FORMAT_VERSION,
        "model": name,
        "constructor": spec.constructor,
        "kwargs": spec.kwargs,
        "input_shape": list(spec.input_shape),
        "calibrate_bn": spec.calibrate_bn,
        "calibration_batch": CALIBRATION_BATCH,
        "opset": OPSET,
        "seed": SEED,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": np.__version__,
    }


def parameters_digest(name: str) -> str:
    blob = json.dumps(export_parameters(name), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def _calibrate_batchnorm(model, spec: ModelSpec) -> None:
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
        x = np.random.RandomState(SEED + 1).standard_normal((CALIBRATION_BATCH,) + tuple(spec.input_shape))
        model.train()
        model(torch.from_numpy(x.astype(np.float32)))
        model.eval()
        for bn, m in zip(bns, momenta):
            bn.momentum = m


def build_model(name: str):
    """The eval-mode torch module for NAME, with the seeded random weights the ONNX file has."""
    torch, torchvision = _import_torch()
    spec = _spec(name)
    torch.manual_seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(torchvision.models, spec.constructor)(**spec.kwargs)
    if spec.calibrate_bn:
        _calibrate_batchnorm(model, spec)
    return model.eval()


def reference_input(name: str, batch: int = 1, seed: int = SEED) -> np.ndarray:
    """Seeded standard-normal float32 input [batch, *input_shape]."""
    shape = (batch,) + tuple(_spec(name).input_shape)
    return np.random.RandomState(seed).standard_normal(shape).astype(np.float32)


def torch_forward(model, x: np.ndarray) -> np.ndarray:
    """MODEL's float32 output on X (no autograd)."""
    torch, _ = _import_torch()
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
    dummy = torch.from_numpy(reference_input(name))
    tmp = _tmp_name(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            dummy,
            str(tmp),
            opset_version=OPSET,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes={INPUT_NAME: {0: BATCH_AXIS}, OUTPUT_NAME: {0: BATCH_AXIS}},
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
