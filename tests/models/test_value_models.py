"""Models that carry sequences and strings, run by the streamline CLI and compared with ONNX Runtime.

    .venv/bin/python -m pytest -q tests/models/test_value_models.py

- chunk_mix: Python code with lists exported by Debian's PyTorch (torch.jit.script, then
  torch.onnx.export at opset 17): torch.split into a list, a loop appending to it, torch.cat of the
  list. The exporter writes SplitToSequence, a Loop carrying the list (SequenceInsert, SequenceAt)
  and ConcatFromSequence.
- stack_rows: a loop over the rows of its input that appends to a list, reading the previous
  entry under an `if`, then torch.stack (opset 17): SequenceEmpty, a Loop with an If inside,
  SequenceAt, SequenceInsert and ConcatFromSequence with new_axis.
- text_category: a text-category lookup built with the onnx helper API (no exporter writes string
  ops): StringNormalizer (lower case, stopwords) -> LabelEncoder (word -> id) -> Gather from an
  embedding table -> ReduceMean -> MatMul -> ArgMax -> LabelEncoder (id -> category name); string
  input, string outputs (the normalised words, the label) through .npy unicode arrays.

Metric: float outputs max|ours - ort| <= 1e-5 * max(1, max|ort|); integer and string outputs equal.
"""

import numpy as np
import pytest

from conftest import run_cli_ok

TOL = 1e-5


def assert_same(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape}, ONNX Runtime has {ref.shape}"
    if ref.dtype.kind in "fc":
        err = float(np.abs(ours.astype(np.float64) - ref.astype(np.float64)).max()) if ref.size else 0.0
        scale = max(1.0, float(np.abs(ref).max()) if ref.size else 0.0)
        print(f"{what}: max|ours - ort| = {err:.3e} (bound {TOL * scale:.3e})")
        assert err <= TOL * scale, f"{what}: max|ours - ort| = {err:.3e} > {TOL * scale:.3e}"
    else:
        assert ours.dtype.kind == ref.dtype.kind, f"{what}: dtype {ours.dtype}, ONNX Runtime has {ref.dtype}"
        assert (ours == ref).all(), f"{what}: ours {ours.tolist()}, ONNX Runtime {ref.tolist()}"


def run_streamline(model, inputs: dict, out_dir, extra=()) -> dict:
    """`streamline run` with each input as a .npy file; returns {output name: array}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    flags = []
    for name, value in inputs.items():
        path = out_dir / f"in_{name}.npy"
        np.save(path, value)
        flags += ["--input", f"{name}={path}"]
    r = run_cli_ok(["run", model, *flags, "--output-dir", out_dir / "out", "--threads", 2, *extra])
    assert "running node by node" in r.stdout, r.stdout
    return {p.stem: np.load(p) for p in (out_dir / "out").glob("*.npy")}


def run_ort(model, inputs: dict) -> dict:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))


@pytest.fixture(scope="module")
def chunk_mix(torch, tmp_path_factory):
    """chunk_mix.onnx exported from a scripted module whose forward builds and joins Python lists."""
    from typing import List

    class ChunkMix(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
            parts = torch.split(x, 4, dim=1)
            outs: List[torch.Tensor] = []
            for i in range(len(parts)):
                outs.append(torch.relu(self.proj(parts[i])) * (i + 1))
            for k in range(int(n)):
                outs.append(outs[k % len(parts)] - 1.0)
            return torch.cat(outs, dim=1)

    torch.manual_seed(0)
    module = torch.jit.script(ChunkMix())
    path = tmp_path_factory.mktemp("chunk_mix") / "chunk_mix.onnx"
    x = torch.randn(2, 8)
    torch.onnx.export(module, (x, torch.tensor(2)), str(path), opset_version=17, input_names=["x", "n"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch", 1: "features"}})
    assert_exported_ops(path, ("SplitToSequence", "Loop", "SequenceInsert", "SequenceAt", "ConcatFromSequence"))
    return path


def assert_exported_ops(path, wanted) -> None:
    """Fails unless the exported model (subgraphs included) holds every op in `wanted`."""
    import onnx

    def ops(g, acc):
        for node in g.node:
            acc.add(node.op_type)
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    ops(a.g, acc)
        return acc

    model = onnx.load(str(path))
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [17]
    found = ops(model.graph, set())
    for op in wanted:
        assert op in found, f"the exporter wrote no {op} (ops: {sorted(found)}); the test would not test sequences"


@pytest.mark.parametrize("batch,features,n", [(1, 8, 0), (2, 8, 3), (3, 20, 7), (4, 4, 1)])
def test_chunk_mix_matches_onnxruntime(chunk_mix, batch, features, n, tmp_path):
    """Lists of chunks through SplitToSequence, a Loop and ConcatFromSequence (n = 0 runs the loop
    no time): output equal to ONNX Runtime's within 1e-5."""
    x = np.random.RandomState(batch * 100 + features).randn(batch, features).astype(np.float32)
    inputs = {"x": x, "n": np.array(n, dtype=np.int64)}
    ref = run_ort(chunk_mix, inputs)["y"]
    assert ref.shape == (batch, features + 4 * n)
    ours = run_streamline(chunk_mix, inputs, tmp_path)
    assert_same(ours["y"], ref, f"chunk_mix x{x.shape} n={n}")


def test_chunk_mix_without_graph_passes(chunk_mix, tmp_path):
    """The same with --no-optimize: the exporter's Identity nodes on sequences stay and pass them on."""
    inputs = {"x": np.random.RandomState(5).randn(2, 12).astype(np.float32), "n": np.array(4, dtype=np.int64)}
    ref = run_ort(chunk_mix, inputs)["y"]
    ours = run_streamline(chunk_mix, inputs, tmp_path, extra=["--no-optimize"])
    assert_same(ours["y"], ref, "chunk_mix --no-optimize")


@pytest.fixture(scope="module")
def stack_rows(torch, tmp_path_factory):
    """stack_rows.onnx: rows appended to a list in a loop (each adding the previous one), stacked."""
    from typing import List

    class StackRows(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            rows: List[torch.Tensor] = []
            for i in range(x.size(0)):
                r = torch.tanh(self.proj(x[i]))
                if i > 0:
                    r = r + rows[i - 1]
                rows.append(r)
            return torch.stack(rows, dim=0)

    torch.manual_seed(1)
    module = torch.jit.script(StackRows())
    path = tmp_path_factory.mktemp("stack_rows") / "stack_rows.onnx"
    torch.onnx.export(module, (torch.randn(4, 3),), str(path), opset_version=17, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "n"}})
    assert_exported_ops(path, ("SequenceEmpty", "Loop", "If", "SequenceAt", "SequenceInsert", "ConcatFromSequence"))
    return path


@pytest.mark.parametrize("rows", [1, 2, 9])
def test_stack_rows_matches_onnxruntime(stack_rows, rows, tmp_path):
    """A list built in a loop and stacked (ConcatFromSequence new_axis=1): equal to ONNX Runtime's
    within 1e-5, for one row (the If's else branch only) and more."""
    inputs = {"x": np.random.RandomState(rows).randn(rows, 3).astype(np.float32)}
    ref = run_ort(stack_rows, inputs)["y"]
    assert ref.shape == (rows, 3)
    ours = run_streamline(stack_rows, inputs, tmp_path)
    assert_same(ours["y"], ref, f"stack_rows rows={rows}")


VOCAB = ["goal", "match", "team", "vote", "election", "senate", "chip", "software", "robot", "league"]
CATEGORIES = ["sports", "politics", "tech"]


@pytest.fixture(scope="module")
def text_category(tmp_path_factory):
    """text_category.onnx: words -> (ids, logits, label); default opset 17, ai.onnx.ml 2."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.RandomState(0)
    table = rng.randn(len(VOCAB) + 1, 8).astype(np.float32)  # the last row is the unknown word
    weights = rng.randn(8, len(CATEGORIES)).astype(np.float32)
    nodes = [
        # ONNX Runtime builds the locale the node names (en_US.UTF-8 by default, which Debian
        # installs only with the locales package); C.UTF-8 is built into glibc.
        helper.make_node("StringNormalizer", ["words"], ["norm"], case_change_action="LOWER",
                         is_case_sensitive=0, stopwords=["the", "a", "of"], locale="C.UTF-8"),
        helper.make_node("LabelEncoder", ["norm"], ["ids"], domain="ai.onnx.ml", keys_strings=VOCAB,
                         values_int64s=list(range(len(VOCAB))), default_int64=len(VOCAB)),
        helper.make_node("Gather", ["table", "ids"], ["vectors"], axis=0),
        helper.make_node("ReduceMean", ["vectors"], ["pooled"], axes=[0], keepdims=0),
        helper.make_node("MatMul", ["pooled", "weights"], ["logits"]),
        helper.make_node("ArgMax", ["logits"], ["best"], axis=0, keepdims=1),
        helper.make_node("LabelEncoder", ["best"], ["label"], domain="ai.onnx.ml",
                         keys_int64s=list(range(len(CATEGORIES))), values_strings=CATEGORIES,
                         default_string="unknown"),
    ]
    graph = helper.make_graph(
        nodes, "text_category",
        [helper.make_tensor_value_info("words", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info("norm", TensorProto.STRING, ["m"]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, ["m"]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, [len(CATEGORIES)]),
         helper.make_tensor_value_info("label", TensorProto.STRING, [1])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(weights, "weights")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 2)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("text_category") / "text_category.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("words", [
    ["The", "TEAM", "scored", "a", "Goal"],
    ["Senate", "vote", "of", "the", "Election", "election"],
    ["Robot", "chip", "SOFTWARE", "ÉLAN", "Straße", "ROBOT"],
    ["the", "a", "of"],  # every word a stopword
])
def test_text_category_matches_onnxruntime(text_category, words, tmp_path):
    """Strings in, strings out: normalised words, ids and label equal to ONNX Runtime's, logits
    within 1e-5."""
    inputs = {"words": np.array(words, dtype=np.str_)}
    ref = run_ort(text_category, {"words": np.array(words, dtype=object)})
    ours = run_streamline(text_category, inputs, tmp_path)
    assert_same(ours["norm"], ref["norm"].astype(np.str_), f"normalised {words}")
    assert_same(ours["ids"], ref["ids"], f"ids of {words}")
    assert_same(ours["logits"], ref["logits"], f"logits of {words}")
    assert_same(ours["label"], ref["label"].astype(np.str_), f"label of {words}")


@pytest.fixture(scope="module")
def string_shuffle(tmp_path_factory):
    """string_shuffle.onnx: string tensors through the ops that only move elements (helper API,
    opset 17): words [n] -> Unsqueeze -> Concat with a tag column -> Transpose -> Reshape -> Slice,
    Gather, Where (the middle word replaced by a default), Shape (ONNX Runtime has no Pad on
    strings; tests/ops covers it); out as strings and int64."""
    from onnx import TensorProto, helper, numpy_helper

    tag = np.array([["<w>"]], dtype=object)
    nodes = [
        helper.make_node("Unsqueeze", ["words", "ax1"], ["col"]),
        helper.make_node("Shape", ["col"], ["col_shape"]),
        helper.make_node("Expand", ["tag", "col_shape"], ["tags"]),
        helper.make_node("Concat", ["tags", "col"], ["pairs"], axis=1),
        helper.make_node("Transpose", ["pairs"], ["rows"], perm=[1, 0]),
        helper.make_node("Reshape", ["rows", "flat"], ["flat_rows"]),
        helper.make_node("Slice", ["flat_rows", "start", "end", "zero", "step"], ["picked"]),
        helper.make_node("Gather", ["words", "order"], ["gathered"], axis=0),
        helper.make_node("Where", ["keep", "gathered", "default"], ["filled"]),
        helper.make_node("Shape", ["filled"], ["filled_shape"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([1], dtype=np.int64), "ax1"),
        numpy_helper.from_array(tag, "tag"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "flat"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "start"),
        numpy_helper.from_array(np.array([1 << 30], dtype=np.int64), "end"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "step"),
        numpy_helper.from_array(np.array([2, 0, -1], dtype=np.int64), "order"),
        numpy_helper.from_array(np.array([True, False, True]), "keep"),
        numpy_helper.from_array(np.array(["?"], dtype=object), "default"),
    ]
    graph = helper.make_graph(
        nodes, "string_shuffle",
        [helper.make_tensor_value_info("words", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info("rows", TensorProto.STRING, [2, "n"]),
         helper.make_tensor_value_info("picked", TensorProto.STRING, ["k"]),
         helper.make_tensor_value_info("filled", TensorProto.STRING, [3]),
         helper.make_tensor_value_info("filled_shape", TensorProto.INT64, [1])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("string_shuffle") / "string_shuffle.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("words", [["alpha", "", "gamma"], ["x", "y", "", "caf\u00e9", "z"]])
def test_string_moves_match_onnxruntime(string_shuffle, words, tmp_path):
    """Strings moved by Unsqueeze, Expand, Concat, Transpose, Reshape, Slice, Gather, Where (and Shape
    of a string tensor): every output equal to ONNX Runtime's."""
    ref = run_ort(string_shuffle, {"words": np.array(words, dtype=object)})
    ours = run_streamline(string_shuffle, {"words": np.array(words, dtype=np.str_)}, tmp_path)
    for name in ("rows", "picked", "filled"):
        assert_same(ours[name], ref[name].astype(np.str_), f"{name} of {words}")
    assert_same(ours["filled_shape"], ref["filled_shape"], f"filled_shape of {words}")
