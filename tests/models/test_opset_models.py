"""Models of opsets 18 to 21, compared with ONNX Runtime.

    .venv/bin/python -m pytest -q tests/models/test_opset_models.py

1. A small CNN exported by Debian's PyTorch at opset 17, then converted to opsets 18, 19, 20 and 21
   with onnx.version_converter (onnx from scripts/requirements.txt). Its ops change form across
   those opsets: ReduceMean and ReduceMax take axes as an input from 18, Pad takes axes, Resize
   gets new attributes, Split gets num_outputs. Each opset's model runs through `streamline run`
   and ONNX Runtime on the same input.
2. A stateful model built with onnx.helper (opsets 18 and 21): an If whose branches read an input
   of unknown dimensions and a Loop that carries a state across iterations, run with a concrete
   .npy for every input (and --shape as well), as an audio model's streaming step is; the files'
   shapes win over a contradicting --shape, `bench` (direct and serving) takes them too, and an
   input with neither a file nor a --shape is named in the error.

Metric: max|ours - ort| <= 1e-4 * max(1, max|ort|).
"""

import io
import json

import numpy as np
import pytest

from conftest import run_cli, run_cli_ok, streamline_run

import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper, version_converter

TOL = 1e-4
CNN_OPSETS = [18, 19, 20, 21]


def assert_close(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape}, ONNX Runtime gives {ref.shape}"
    err = float(np.abs(ours.astype(np.float64) - ref.astype(np.float64)).max()) if ref.size else 0.0
    scale = max(1.0, float(np.abs(ref).max()) if ref.size else 0.0)
    print(f"{what}: max|ours - ort| = {err:.3e}, bound {TOL * scale:.3e}")
    assert err <= TOL * scale, f"{what}: max|ours - ort| = {err:.3e} > {TOL * scale:.3e}"


def ort_run(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def default_opset(model):
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def op_types(model):
    return {n.op_type for n in model.graph.node}


@pytest.fixture(scope="module")
def cnn17(torch):
    """The CNN at opset 17, with its reference input."""
    if onnx.defs.onnx_opset_version() < max(CNN_OPSETS):
        pytest.fail(f"onnx {onnx.__version__} converts only up to opset {onnx.defs.onnx_opset_version()}; "
                    "scripts/setup.sh installs the onnx that scripts/requirements.txt pins", pytrace=False)
    nn = torch.nn
    F = torch.nn.functional

    class SmallCnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.branch_a = nn.Conv2d(4, 4, 3, padding=1, groups=2)
            self.branch_b = nn.Conv2d(4, 4, 1)
            self.head = nn.Conv2d(8, 6, 3, stride=2)
            self.fc = nn.Linear(6, 5)

        def forward(self, x):
            y = F.relu(self.bn(self.stem(x)))
            a, b = torch.split(y, 4, dim=1)                     # Split
            y = torch.cat([self.branch_a(a), self.branch_b(b)], 1)
            y = F.max_pool2d(y, 2, ceil_mode=True)             # MaxPool, ceil mode
            y = F.interpolate(y, scale_factor=2, mode="nearest")  # Resize
            y = F.pad(y, (1, 0, 0, 1), mode="reflect")          # Pad
            y = F.relu(self.head(y))
            y = y - y.mean(dim=(2, 3), keepdim=True)            # ReduceMean
            y = y.amax(dim=(2, 3))                              # ReduceMax
            return self.fc(y)

    torch.manual_seed(0)
    model = SmallCnn().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 1.5)
    x = np.random.RandomState(0).standard_normal((2, 3, 17, 15)).astype(np.float32)
    buf = io.BytesIO()
    torch.onnx.export(model, torch.from_numpy(x), buf, opset_version=17, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    m = onnx.load_from_string(buf.getvalue())
    assert default_opset(m) == 17
    return m, x


@pytest.mark.parametrize("opset", CNN_OPSETS)
def test_converted_cnn_matches_onnxruntime(cnn17, opset, streamline_binary, tmp_path):
    m17, x = cnn17
    m = version_converter.convert_version(m17, opset)
    onnx.checker.check_model(m)
    assert default_opset(m) == opset
    assert {"Conv", "Split", "MaxPool", "Resize", "Pad", "ReduceMean", "ReduceMax"} <= op_types(m), op_types(m)
    if opset >= 18:
        # The converter moved the axes of the reductions into inputs: the opset-18 form.
        reduce_mean = next(n for n in m.graph.node if n.op_type == "ReduceMean")
        assert len(reduce_mean.input) == 2 and not any(a.name == "axes" for a in reduce_mean.attribute)
    path = tmp_path / f"cnn_opset{opset}.onnx"
    onnx.save(m, path)
    ref = ort_run(path, {"input": x})["output"]
    ours = streamline_run(path, {"input": x}, tmp_path / "out")["output"]
    assert_close(ours, ref, f"cnn opset {opset}")


def stateful_model(opset: int):
    """input [?, ?] (no sizes, no names), state [2, ?, 8], sr [] int64.

    output = sr == 16000 ? input * mean(input, axis 1) : -input     (an If reading the outer input)
    state' = Loop rows(input) times: state = tanh(state * 0.5 + mean(input))
    """
    def unknown(name, elem, dims):
        """A tensor type whose None dims have neither a size nor a name."""
        t = helper.make_tensor_value_info(name, elem, None)
        shape = t.type.tensor_type.shape
        shape.SetInParent()
        for d in dims:
            dim = shape.dim.add()
            if d is not None:
                dim.dim_value = d
        return t

    f32 = TensorProto.FLOAT
    matrix, state = [None, None], [2, None, 8]
    then_g = helper.make_graph(
        [helper.make_node("ReduceMean", ["input", "axis1"], ["m"], keepdims=1),
         helper.make_node("Mul", ["input", "m"], ["then_out"])],
        "then", [], [unknown("then_out", f32, matrix)],
        initializer=[numpy_helper.from_array(np.array([1], np.int64), "axis1")])
    else_g = helper.make_graph([helper.make_node("Neg", ["input"], ["else_out"])], "else", [],
                               [unknown("else_out", f32, matrix)])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("ReduceMean", ["input", "no_axes"], ["gm"], keepdims=0),
         helper.make_node("Mul", ["s_in", "half"], ["s_half"]),
         helper.make_node("Add", ["s_half", "gm"], ["s_sum"]),
         helper.make_node("Tanh", ["s_sum"], ["s_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         unknown("s_in", f32, state)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), unknown("s_out", f32, state)],
        initializer=[numpy_helper.from_array(np.array(0.5, np.float32), "half"),
                     numpy_helper.from_array(np.array([], np.int64), "no_axes")])
    nodes = [
        helper.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["output"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Shape", ["input"], ["input_shape"]),
        helper.make_node("Gather", ["input_shape", "zero"], ["trips"], axis=0),
        helper.make_node("Loop", ["trips", "true", "state"], ["state_out"], body=body),
    ]
    g = helper.make_graph(
        nodes, "stateful",
        [unknown("input", f32, matrix), unknown("state", f32, state),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [unknown("output", f32, matrix), unknown("state_out", f32, state)],
        initializer=[numpy_helper.from_array(np.array(16000, np.int64), "sr16k"),
                     numpy_helper.from_array(np.array(0, np.int64), "zero"),
                     numpy_helper.from_array(np.array(True), "true")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 21 else 10
    onnx.checker.check_model(m)
    return m


@pytest.mark.parametrize("opset", [18, 21])
def test_stateful_if_loop_matches_onnxruntime(opset, streamline_binary, tmp_path):
    path = tmp_path / f"stateful_opset{opset}.onnx"
    onnx.save(stateful_model(opset), path)
    rng = np.random.RandomState(opset)
    state = np.zeros((2, 1, 8), np.float32)
    # Streaming steps of different lengths, both branches, the state carried from step to step.
    for step, (rows, cols, sr) in enumerate([(3, 5, 16000), (1, 9, 8000), (4, 2, 16000)]):
        feeds = {"input": rng.standard_normal((rows, cols)).astype(np.float32), "state": state,
                 "sr": np.array(sr, np.int64)}
        ref = ort_run(path, feeds)
        # A concrete file for every input, and --shape for each as well: the files' shapes rule.
        shapes = [f"--shape=input={rows},{cols}", "--shape=state=2,1,8", "--shape=sr="]
        for extra in ([], shapes):
            ours = streamline_run(path, feeds, tmp_path / f"out{step}_{len(extra)}", extra)
            for name in ("output", "state_out"):
                assert_close(ours[name], ref[name], f"opset {opset} step {step} {name}")
        state = ref["state_out"]


def test_file_shape_wins_over_shape_flag(streamline_binary, tmp_path):
    """A --shape that contradicts the --input file is ignored with a note: the tensor is the truth."""
    path = tmp_path / "stateful.onnx"
    onnx.save(stateful_model(18), path)
    feeds = {"input": np.ones((3, 5), np.float32), "state": np.zeros((2, 1, 8), np.float32),
             "sr": np.array(8000, np.int64)}
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
    args = ["run", path, "--output-dir", tmp_path / "out", "--shape", "input=7,7"]
    for name in feeds:
        args += ["--input", f"{name}={tmp_path / (name + '.npy')}"]
    r = run_cli_ok(args)
    assert "--shape input=7,7 ignored" in r.stderr, r.stderr
    assert np.load(tmp_path / "out" / "output.npy").shape == (3, 5)


@pytest.mark.parametrize("serving", [False, True])
def test_bench_takes_shapes_from_input_files(serving, streamline_binary, tmp_path):
    """`bench` (direct and through serving instances) runs the stateful model from its .npy files."""
    path = tmp_path / "stateful.onnx"
    onnx.save(stateful_model(18), path)
    feeds = {"input": np.ones((3, 5), np.float32), "state": np.zeros((2, 1, 8), np.float32),
             "sr": np.array(16000, np.int64)}
    args = ["bench", path, "--threads", 2, "--warmup", 0, "--seconds", 0.2, "--max-runs", 5, "--json"]
    if serving:
        args += ["--instances", 2]
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--input", f"{name}={tmp_path / (name + '.npy')}"]
    r = run_cli_ok(args)
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["runs"] >= 1, report
    assert "3,5" in report["shapes"].replace(" ", ""), report
    if serving:
        assert report["failures"] == {}, report
    else:
        assert report["mode"] == "eager", report


def test_stateful_input_without_shape_is_named(streamline_binary, tmp_path):
    """With no file and no --shape for the input of unknown dims, the error names it."""
    path = tmp_path / "stateful.onnx"
    onnx.save(stateful_model(18), path)
    state = tmp_path / "state.npy"
    np.save(state, np.zeros((2, 1, 8), np.float32))
    r = run_cli(["run", path, "--input", f"state={state}"], timeout=60)
    assert r.returncode != 0
    assert "input 'input'" in r.stderr and "--shape" in r.stderr, r.stderr
