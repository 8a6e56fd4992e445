"""Small ONNX models for the Python package's tests, written with onnx.helper (fixed seeds)."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


def _model(graph, **meta):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name=meta.pop("producer_name", "streamline-tests"))
    m.ir_version = 8
    for key, value in meta.pop("props", {}).items():
        p = m.metadata_props.add()
        p.key, p.value = key, value
    for key, value in meta.items():
        setattr(m, key, value)
    onnx.checker.check_model(m)
    return m


def add_model(n=4):
    """z = x + y over float32 [n] (the per-call overhead benchmark's model)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [n])
    g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"], name="add")], "add", [x, y], [z])
    return _model(g)


def branchy_cnn(channels=8, seed=0):
    """x float32 [N, 3, H, W] -> two convolution branches -> sum -> global pool -> Gemm ->
    'logits' [N, 10] and 'probs' [N, 10] (softmax). Symbolic N, H, W; metadata set."""
    rng = np.random.default_rng(seed)

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    inits = [
        weight("w_stem", [channels, 3, 3, 3]), weight("b_stem", [channels]),
        weight("w_a", [channels, channels, 3, 3]), weight("b_a", [channels]),
        weight("w_b", [channels, channels, 1, 1]), weight("b_b", [channels]),
        weight("w_fc", [10, channels]), weight("b_fc", [10]),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w_stem", "b_stem"], ["s"], name="stem", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["s"], ["s_r"], name="stem_relu"),
        helper.make_node("Conv", ["s_r", "w_a", "b_a"], ["a"], name="branch_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["a_r"], name="branch_a_relu"),
        helper.make_node("Conv", ["s_r", "w_b", "b_b"], ["b"], name="branch_b"),
        helper.make_node("Sigmoid", ["b"], ["b_s"], name="branch_b_sigmoid"),
        helper.make_node("Add", ["a_r", "b_s"], ["sum"], name="merge"),
        helper.make_node("GlobalAveragePool", ["sum"], ["pool"], name="pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "w_fc", "b_fc"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10]),
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])]
    g = helper.make_graph(nodes, "branchy", [x], outs, initializer=inits, doc_string="two branches")
    return _model(g, producer_name="tests-exporter", producer_version="1.2.3", domain="org.example",
                  doc_string="a branchy CNN", model_version=3, props={"labels": "ten classes", "seed": str(seed)})


def gather_model(rows=5):
    """out = Gather(table [rows, 2] float32, idx int64 [K]); an index outside [-rows, rows) fails the run."""
    table = numpy_helper.from_array(np.arange(rows * 2, dtype=np.float32).reshape(rows, 2), "table")
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, ["K"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["K", 2])
    g = helper.make_graph([helper.make_node("Gather", ["table", "idx"], ["out"], name="lookup", axis=0)],
                          "gather", [idx], [out], initializer=[table])
    return _model(g)


def matmul_chain(size=512, depth=6, seed=1):
    """x float32 [B, size] -> depth MatMuls with Tanh between them: a model whose run takes long
    enough (tens of ms) to watch what other threads do meanwhile."""
    rng = np.random.default_rng(seed)
    inits, nodes, prev = [], [], "x"
    for i in range(depth):
        w = numpy_helper.from_array((rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32), f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"], name=f"tanh{i}"))
        prev = f"t{i}"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", size])
    y = helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["B", size])
    return _model(helper.make_graph(nodes, "chain", [x], [y], initializer=inits))


def save(model, path):
    onnx.save(model, str(path))
    return str(path)
