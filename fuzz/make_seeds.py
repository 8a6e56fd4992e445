#!/usr/bin/python3
"""Writes a few small, valid ONNX models into a folder, as seeds for fuzz/loader_fuzz.

Usage: /usr/bin/python3 fuzz/make_seeds.py OUT_DIR
Needs Debian's python3-onnx. Each model exercises a different corner of the loader: symbolic
dims, raw and typed initializers of several element types, every attribute kind, optional inputs,
subgraphs with outer-scope references, external data and an IR 3 style graph.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, outputs, inits=(), opset=13, ir=8, extra_opsets=()):
    graph = helper.make_graph(nodes, "seed", inputs, outputs, initializer=list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(graph, opset_imports=opsets, producer_name="streamline-seeds")
    m.ir_version = ir
    return m


def conv_relu():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    b = helper.make_tensor("B", TensorProto.FLOAT, [4], [0.1, 0.2, 0.3, 0.4])
    conv = helper.make_node("Conv", ["X", "W", "B"], ["c"], name="conv1", pads=[1, 1, 1, 1],
                            strides=[1, 1], kernel_shape=[3, 3], group=1)
    relu = helper.make_node("Relu", ["c"], ["Y"])
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3, 8, 8])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4, 8, 8])
    return model([conv, relu], [x], [y], [w, b])


def gemm_reshape():
    shape = numpy_helper.from_array(np.array([2, -1], dtype=np.int64), "shape")
    w = helper.make_tensor("Wg", TensorProto.FLOAT, [4, 3], [float(i) for i in range(12)])
    k = helper.make_node("Constant", [], ["k"], value=helper.make_tensor("kv", TensorProto.FLOAT, [3], [1, 2, 3]))
    gemm = helper.make_node("Gemm", ["A", "Wg", "k"], ["g"], alpha=0.5, beta=1.0, transB=0)
    clip = helper.make_node("Clip", ["g", "", "mx"], ["cl"], name="clip")
    mx = numpy_helper.from_array(np.array(6.0, dtype=np.float32), "mx")
    rs = helper.make_node("Reshape", ["cl", "shape"], ["Y"])
    a = helper.make_tensor_value_info("A", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])
    return model([k, gemm, clip, rs], [a], [y], [shape, w, mx])


def dtypes():
    arrays = {
        "f16": np.arange(6, dtype=np.float16), "f64": np.arange(6, dtype=np.float64),
        "i8": np.arange(-3, 3, dtype=np.int8), "u8": np.arange(6, dtype=np.uint8),
        "i16": np.arange(6, dtype=np.int16), "u16": np.arange(6, dtype=np.uint16),
        "i32": np.arange(6, dtype=np.int32), "u32": np.arange(6, dtype=np.uint32),
        "i64": np.arange(6, dtype=np.int64), "u64": np.arange(6, dtype=np.uint64),
        "b": np.array([1, 0, 1, 1, 0, 0], dtype=np.bool_),
    }
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()]
    inits.append(helper.make_tensor("bf", TensorProto.BFLOAT16, [2], [16256, 16384]))
    inits.append(helper.make_tensor("typed_i8", TensorProto.INT8, [3], [-1, 0, 1]))
    nodes, outs = [], []
    for n in list(arrays) + ["bf", "typed_i8"]:
        nodes.append(helper.make_node("Identity", [n], [n + "_out"]))
        outs.append(helper.make_tensor_value_info(n + "_out", inits[len(outs)].data_type, None))
    return model(nodes, [], outs, inits)


def attributes():
    node = helper.make_node("Gadget", ["x"], ["y"], domain="com.example", f=0.5, i=3, s="mode",
                            fs=[1.0, 2.0], is_=[1, 2], ss=["a", "b"],
                            t=helper.make_tensor("t", TensorProto.INT64, [2], [4, 5]))
    node.attribute.append(helper.make_attribute("ts", [helper.make_tensor("u", TensorProto.FLOAT, [1], [1.0])]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, "seq"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return model([node], [x], [y], extra_opsets=[("com.example", 1)])


def if_subgraph():
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    node = helper.make_node("If", ["cond"], ["y"], name="if0", then_branch=then_g, else_branch=else_g)
    inputs = [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    return model([node], inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])


def external_and_ir3():
    w = helper.make_tensor("W", TensorProto.FLOAT, [2], [0.0, 0.0])
    w.ClearField("float_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", "8")):
        e = w.external_data.add()
        e.key, e.value = k, v
    add = helper.make_node("Add", ["x", "W"], ["y"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    w_in = onnx.ValueInfoProto(name="W")  # IR 3: weights listed as untyped inputs
    return model([add], [x, w_in], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [w], opset=7, ir=3)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for fn in (conv_relu, gemm_reshape, dtypes, attributes, if_subgraph, external_and_ir3):
        with open(os.path.join(out, fn.__name__ + ".onnx"), "wb") as f:
            f.write(fn().SerializeToString())


if __name__ == "__main__":
    main()
