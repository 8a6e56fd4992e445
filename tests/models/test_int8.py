"""Int8 model tests: the variants of scripts/make_int8.py (made with ONNX Runtime's own quantizer)
run by the streamline CLI, compared with the fp32 model and with ONNX Runtime's int8 run.

    .venv/bin/python -m pytest -q tests/models/test_int8.py                 # all 34 variants
    .venv/bin/python -m pytest -q tests/models/test_int8.py -m "not extended"   # the default suite's 8
    .venv/bin/python -m pytest -q tests/models/test_int8.py -k resnet50
    .venv/bin/python -m pytest -q tests/models/test_int8.py -k bert

The default suite (scripts/test.sh) runs DEFAULT_VARIANTS, which between them take every int8
path; the other variants carry the pytest mark `extended` and the ctest label `extended`, which
scripts/test.sh leaves out unless given --extended (see tests/models/CMakeLists.txt).

Accuracy, per variant, on seeded inputs the calibration never saw: against the fp32 model's output
(ONNX Runtime, float32), streamline's int8 error is at most 1.5x ONNX Runtime's int8 error, in
max |err| and in mean |err| (both relative to max |fp32|); for classifiers, streamline's top-1
agreement with fp32 is at most one image below ONNX Runtime's. Structure: the plan runs the
products on int8 kernels (no float Conv, Gemm or MatMul; at most the one DequantizeLinear that
hands the result to the caller for the CNNs; QOperator's com.microsoft ops rewritten onto
streamline's).
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, model_dir, run_cli_ok

sys.path.insert(0, str(REPO / "scripts"))
import make_int8  # noqa: E402  (the path above)

CNN_FAMILIES = ("resnet50", "mobilenet_v2", "googlenet", "squeezenet1_1")
# Both of quantize_static's formats, per-tensor and per-channel weights, int8 and uint8 activations.
CNN_KINDS = [f"{fmt}{pc}{act}" for fmt in ("qdq", "qop") for pc in ("", "_pc") for act in ("", "_u8")]
CNN_VARIANTS = [f"{base}_{kind}" for base in CNN_FAMILIES for kind in CNN_KINDS]
# The int8 convolutions a plan may hold: QDQ graphs become QConv, QOperator's QLinearConv too.
INT8_CONVS = ("QConv", "QLinearConv")
ENCODER_VARIANTS = ["bert_tiny_dyn", "bert_dyn"]
# The variants of the default suite, and the int8 paths each one takes; together every kernel
# path and every rewrite of the int8 passes. The rest repeat these paths on more families and
# combinations (mark `extended`).
DEFAULT_VARIANTS = (
    # QDQ, per-tensor weights, int8 activations; depthwise QConvs, residual adds without an
    # activation (MobileNetV2's linear bottlenecks) folded into the QConv.
    "mobilenet_v2_qdq",
    # QDQ, per-channel weights, uint8 activations.
    "mobilenet_v2_qdq_pc_u8",
    # QDQ, per-channel, int8: Concat (inputs quantised straight to its scale), MaxPool on the
    # 8-bit tensor, the global average pool.
    "squeezenet1_1_qdq_pc",
    # QDQ, per-channel, uint8: bottleneck residual add + Relu into the QConv (ResNet-50).
    "resnet50_qdq_pc_u8",
    # QOperator, int8 activations: QLinearConv, com.microsoft QLinearAdd (residual), QGemm.
    "mobilenet_v2_qop",
    # QOperator, uint8 activations: QLinearConcat, QLinearGlobalAveragePool.
    "squeezenet1_1_qop_u8",
    # QOperator, uint8: GoogLeNet's 13 MaxPools between QLinearConcats and QLinearConvs, whose
    # 8-bit types come on import from the QLinear ops' zero points.
    "googlenet_qop_u8",
    # quantize_dynamic: DynamicQuantizeLinear + MatMulInteger -> MatMulIntegerToFloat.
    "bert_tiny_dyn",
)
IMAGES = 8
TOKENS = (2, 32)
THREADS = 2
ERROR_FACTOR = 1.5
FLOAT_PRODUCTS = ("Conv", "FusedConv", "Gemm", "FusedGemm", "MatMul", "FusedMatMul", "MatMulInteger")


@pytest.fixture(scope="module")
def ort():
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)
    return onnxruntime


def params(names):
    """NAMES as pytest parameters, those outside DEFAULT_VARIANTS marked `extended`."""
    return [pytest.param(n, marks=() if n in DEFAULT_VARIANTS else pytest.mark.extended) for n in names]


def variant(name):
    """The variant's files, quantized on first use (the fp32 base exported if missing)."""
    try:
        p, _ = make_int8.make_variant(name, model_dir())
    except Exception as e:  # a failure to make the model fails the test that needed it
        pytest.fail(f"making {name} in {model_dir()} failed: {type(e).__name__}: {e}", pytrace=False)
    return p


def ort_run(ort, path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


def streamline_run(path, name, x, tmp_path):
    x_path = tmp_path / "x.npy"
    np.save(x_path, x)
    out_dir = tmp_path / "out"
    run_cli_ok(["run", path, "--input", f"{name}={x_path}", "--output-dir", out_dir, "--threads", THREADS])
    outs = list(out_dir.glob("*.npy"))
    assert len(outs) == 1, f"expected one output, got {outs}"
    return np.load(outs[0])


def errors(out, ref):
    scale = float(np.abs(ref).max())
    diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    return float(diff.max()) / scale, float(diff.mean()) / scale


def plan_ops(path, shape_flag):
    r = run_cli_ok(["plan", path, "--json", *shape_flag])
    return [n["op"] for n in json.loads(r.stdout)["nodes"]]


def check_errors(name, sl, ox, ref):
    sl_max, sl_mean = errors(sl, ref)
    ort_max, ort_mean = errors(ox, ref)
    msg = (f"{name}: streamline max {sl_max:.4f} mean {sl_mean:.5f}, ONNX Runtime max {ort_max:.4f} "
           f"mean {ort_mean:.5f} (relative to max|fp32|); bound {ERROR_FACTOR}x ORT's")
    print(msg)
    assert np.isfinite(sl).all(), f"{name}: non-finite outputs"
    assert sl_max <= ERROR_FACTOR * ort_max and sl_mean <= ERROR_FACTOR * ort_mean, msg


@pytest.mark.parametrize("name", params(CNN_VARIANTS))
def test_int8_cnn_accuracy_and_kernels(name, streamline_binary, ort, tmp_path):
    p = variant(name)
    base = make_int8.VARIANTS[name].base
    fp32 = make_int8.paths(model_dir(), base)["onnx"]
    x = np.concatenate([np.random.RandomState(1000 + i).standard_normal((1, 3, 224, 224)) for i in range(IMAGES)])
    x = x.astype(np.float32)
    ref = ort_run(ort, fp32, {"input": x})
    ox = ort_run(ort, p["onnx"], {"input": x})
    sl = streamline_run(p["onnx"], "input", x, tmp_path)
    assert sl.shape == ref.shape and sl.dtype == np.float32
    check_errors(name, sl, ox, ref)
    top1 = lambda o: float(np.mean(o.argmax(1) == ref.argmax(1)))  # noqa: E731
    print(f"{name}: top-1 agreement with fp32: streamline {top1(sl):.3f}, ONNX Runtime {top1(ox):.3f}")
    assert top1(sl) >= top1(ox) - 1.0 / IMAGES, f"{name}: top-1 agreement {top1(sl)} vs ORT's {top1(ox)}"

    ops = plan_ops(p["onnx"], [])
    assert not [o for o in ops if o in FLOAT_PRODUCTS], f"{name}: float products left in the plan: {ops}"
    convs = sum(ops.count(o) for o in INT8_CONVS)
    assert convs >= 20 and ops.count("DequantizeLinear") <= 1, f"{name}: plan {ops}"
    assert not [o for o in ops if o.startswith("QLinear") and o != "QLinearConv"], f"{name}: plan {ops}"


@pytest.mark.parametrize("name", params(ENCODER_VARIANTS))
def test_int8_encoder_accuracy_and_kernels(name, streamline_binary, ort, tmp_path):
    p = variant(name)
    base = make_int8.VARIANTS[name].base
    fp32 = make_int8.paths(model_dir(), base)["onnx"]
    ids = np.random.RandomState(77).randint(0, 1000, size=TOKENS).astype(np.int64)
    ref = ort_run(ort, fp32, {"input_ids": ids})
    ox = ort_run(ort, p["onnx"], {"input_ids": ids})
    sl = streamline_run(p["onnx"], "input_ids", ids, tmp_path)
    assert sl.shape == ref.shape and sl.dtype == np.float32
    check_errors(name, sl, ox, ref)

    ops = plan_ops(p["onnx"], ["--shape", f"input_ids={TOKENS[0]},{TOKENS[1]}"])
    assert not [o for o in ops if o in FLOAT_PRODUCTS], f"{name}: float products left in the plan: {ops}"
    assert ops.count("MatMulIntegerToFloat") >= 8, f"{name}: plan {ops}"
