#!/usr/bin/env python3
"""Int8 versions of the exported fp32 models, made with ONNX Runtime's own quantization tool.

    .venv/bin/python scripts/make_int8.py --out build/models                        # all variants
    .venv/bin/python scripts/make_int8.py --out build/models --models resnet50_qdq_pc,bert_dyn
    .venv/bin/python scripts/make_int8.py --list

Variants of a CNN NAME from scripts/export_models.py (onnxruntime.quantization.quantize_static,
QuantFormat.QDQ, weights QInt8, MinMax calibration on CALIBRATION_IMAGES seeded standard-normal
images, numpy RandomState(CALIBRATION_SEED + i)):

    NAME_qdq        the tool's defaults: per-tensor weights, QInt8 activations
    NAME_qdq_u8     per-tensor weights, QUInt8 activations
    NAME_qdq_pc     per_channel=True, QInt8 activations
    NAME_qdq_pc_u8  per_channel=True, QUInt8 activations
    NAME_qop, NAME_qop_u8, NAME_qop_pc, NAME_qop_pc_u8
                    the same four with QuantFormat.QOperator (QLinearConv, QLinearMatMul and
                    onnxruntime's com.microsoft QLinearAdd, QLinearConcat, QGemm, ... in place
                    of the Q/DQ pairs)

and of an encoder NAME: NAME_dyn (onnxruntime.quantization.quantize_dynamic with its defaults:
DynamicQuantizeLinear + MatMulInteger for every MatMul with constant weights, QInt8 weights).

For each variant V the directory receives V.onnx, V.input.npy (the base model's reference input),
V.sha256 (digest of the parameters below and the base model's digest; a current variant is not
made again) and V.lock (serialises concurrent makers). The fp32 base is exported first when missing.

onnxruntime.quantization needs a newer ONNX Python package than Debian's python3-onnx 1.12;
scripts/setup.sh installs the one pinned in scripts/requirements-quant.txt into
.venv/quant-packages, which this script puts first on sys.path before importing onnx.
"""

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

REPO = Path(__file__).resolve().parents[1]
QUANT_PACKAGES = REPO / ".venv" / "quant-packages"
sys.path.insert(0, str(REPO / "scripts"))

import export_models  # noqa: E402  (needs the path above)

CALIBRATION_IMAGES = 8
CALIBRATION_SEED = 100
# Bump when the procedure changes in a way the parameters below do not capture.
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Int8Spec:
    """One int8 variant of an fp32 model in export_models.MODELS."""

    base: str
    method: str  # "static" or "dynamic"
    per_channel: bool = False
    activations: str = "s8"  # static only: "s8" (QInt8) or "u8" (QUInt8)
    quant_format: str = "qdq"  # static only: "qdq" (QuantFormat.QDQ) or "qop" (QuantFormat.QOperator)


def _variants() -> Dict[str, Int8Spec]:
    out = {}
    for base in export_models.MODELS:
        if export_models.is_encoder(base):
            out[f"{base}_dyn"] = Int8Spec(base, "dynamic")
            continue
        for fmt in ("qdq", "qop"):
            for pc in (False, True):
                for act in ("s8", "u8"):
                    name = f"{base}_{fmt}" + ("_pc" if pc else "") + ("_u8" if act == "u8" else "")
                    out[name] = Int8Spec(base, "static", pc, act, fmt)
    return out


VARIANTS: Dict[str, Int8Spec] = _variants()


def paths(out_dir: Path, name: str) -> Dict[str, Path]:
    out_dir = Path(out_dir)
    return {
        "onnx": out_dir / f"{name}.onnx",
        "input": out_dir / f"{name}.input.npy",
        "digest": out_dir / f"{name}.sha256",
        "lock": out_dir / f"{name}.lock",
    }


def import_quantization():
    """onnxruntime.quantization with the newer ONNX package from .venv/quant-packages."""
    if QUANT_PACKAGES.is_dir() and str(QUANT_PACKAGES) not in sys.path:
        sys.path.insert(0, str(QUANT_PACKAGES))
    if "onnx" in sys.modules and not sys.modules["onnx"].__file__.startswith(str(QUANT_PACKAGES)):
        raise RuntimeError("make_int8 must import onnx itself (an older onnx is already loaded)")
    try:
        import onnxruntime
        from onnxruntime import quantization
    except ImportError as e:
        raise RuntimeError(
            f"cannot import onnxruntime.quantization ({e}); run scripts/setup.sh, which installs "
            f"scripts/requirements-quant.txt into {QUANT_PACKAGES}"
        ) from e
    return onnxruntime, quantization


def parameters(name: str, base_digest: str) -> Dict:
    import onnxruntime

    spec = VARIANTS[name]
    fields = dataclasses.asdict(spec)
    if spec.quant_format == "qdq":
        del fields["quant_format"]  # the field came later; QDQ variants keep their digests
    return {
        "format": FORMAT_VERSION,
        "variant": name,
        "spec": fields,
        "base_digest": base_digest,
        "calibration_images": CALIBRATION_IMAGES if spec.method == "static" else 0,
        "calibration_seed": CALIBRATION_SEED,
        "onnxruntime": onnxruntime.__version__,
    }


def _calibration_reader(quantization, base: str):
    spec = export_models.MODELS[base]
    shape = (1,) + tuple(spec.input_shape)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self._i = 0

        def get_next(self):
            if self._i >= CALIBRATION_IMAGES:
                return None
            x = np.random.RandomState(CALIBRATION_SEED + self._i).standard_normal(shape).astype(np.float32)
            self._i += 1
            return {export_models.INPUT_NAME: x}

    return Reader()


def _without_shared_initializers(src: Path, dst: Path) -> None:
    """Writes SRC to DST with every Identity of an initializer replaced by a copy of it.

    PyTorch's exporter shares equal initializers (the zero biases of untrained layers) through
    Identity nodes; the QOperator quantizer reads a Conv's bias only from an initializer."""
    import onnx

    m = onnx.load(str(src))
    inits = {i.name: i for i in m.graph.initializer}
    keep = []
    for n in m.graph.node:
        if n.op_type == "Identity" and n.input[0] in inits and n.output[0] not in inits:
            copy = onnx.TensorProto()
            copy.CopyFrom(inits[n.input[0]])
            copy.name = n.output[0]
            m.graph.initializer.append(copy)
            inits[copy.name] = copy
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    onnx.save(m, str(dst))


def _quantize(name: str, src: Path, dst: Path) -> None:
    _, q = import_quantization()
    spec = VARIANTS[name]
    tmp = dst.with_name(f".{dst.stem}.tmp{os.getpid()}{dst.suffix}")
    if spec.method == "static" and spec.quant_format == "qop":
        flat = dst.with_name(f".{dst.stem}.flat{os.getpid()}{dst.suffix}")
        _without_shared_initializers(src, flat)
        try:
            _quantize_static(q, spec, flat, tmp)
        finally:
            flat.unlink(missing_ok=True)
        os.replace(tmp, dst)
        return
    if spec.method == "dynamic":
        q.quantize_dynamic(str(src), str(tmp), weight_type=q.QuantType.QInt8)
    else:
        _quantize_static(q, spec, src, tmp)
    os.replace(tmp, dst)


def _quantize_static(q, spec: Int8Spec, src: Path, dst: Path) -> None:
    act = q.QuantType.QUInt8 if spec.activations == "u8" else q.QuantType.QInt8
    fmt = q.QuantFormat.QOperator if spec.quant_format == "qop" else q.QuantFormat.QDQ
    q.quantize_static(str(src), str(dst), _calibration_reader(q, spec.base), quant_format=fmt,
                      per_channel=spec.per_channel, activation_type=act, weight_type=q.QuantType.QInt8)


def make_variant(name: str, out_dir, force: bool = False):
    """Makes NAME's files in OUT_DIR current; returns (paths, whether it quantized)."""
    out_dir = Path(out_dir)
    spec = VARIANTS[name]
    base = export_models.ensure_models([spec.base], out_dir, log=None)[spec.base]
    base_digest = base["digest"].read_text().strip()
    p = paths(out_dir, name)
    digest = hashlib.sha256(json.dumps(parameters(name, base_digest), sort_keys=True).encode()).hexdigest()
    with export_models._exclusive(p["lock"]):
        current = all(p[k].is_file() for k in ("onnx", "input", "digest"))
        if not force and current and p["digest"].read_text().strip() == digest:
            return p, False
        p["digest"].unlink(missing_ok=True)
        _quantize(name, base["onnx"], p["onnx"])
        export_models._save_npy(p["input"], np.load(base["input"]))
        tmp = export_models._tmp_name(p["digest"])
        tmp.write_text(digest + "\n")
        os.replace(tmp, p["digest"])
    return p, True


def ensure_variants(names: List[str], out_dir, force: bool = False,
                    log: Optional[Callable[[str], None]] = print) -> Dict[str, Dict[str, Path]]:
    result = {}
    for name in names:
        t0 = time.monotonic()
        p, made = make_variant(name, out_dir, force=force)
        if log is not None:
            log(f"{name}: {'quantized' if made else 'up to date'} {p['onnx']}"
                + (f" in {time.monotonic() - t0:.1f} s" if made else ""))
        result[name] = p
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="output directory (the fp32 models are exported there too)")
    ap.add_argument("--models", default=",".join(VARIANTS), help="comma-separated variants (default: all)")
    ap.add_argument("--force", action="store_true", help="quantize even when the cached files match")
    ap.add_argument("--list", action="store_true", help="print the variants and exit")
    args = ap.parse_args(argv)
    if args.list:
        for name, spec in VARIANTS.items():
            print(f"{name}: {spec}")
        return 0
    if not args.out:
        ap.error("--out is required")
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in VARIANTS]
    if unknown:
        print(f"error: unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    try:
        ensure_variants(names, args.out, force=args.force)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
