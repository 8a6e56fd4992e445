"""A generator of broken models and configurations for the robustness tests (test_broken_models.py).

broken_repository(root, rng) writes a model repository holding one good model ("tiny", from
conftest) and many broken ones, each in its own folder named <kind>_<n>, and returns
{name: Broken}. Kinds: corrupt or hostile ONNX files (truncated, random bytes, unknown ops, cycles,
initializers of the wrong size, external data outside the model's folder, ...), config.pbtxt files
that are malformed or disagree with their model, folder layouts without a usable version, and
models that load but fail at every run. Deterministic for a given random.Random.
"""

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import TINY_CONFIG, mlp_model


@dataclass
class Broken:
    kind: str
    request: dict | None = None  # a model that loads: a request whose run fails


def model_bytes(nodes, inputs, outputs, inits=(), opset=13, ir=8):
    g = helper.make_graph(nodes, "broken", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] if opset else [])
    m.ir_version = ir
    return m.SerializeToString()


def vi(name, dims, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, dims)


X, Y = vi("x", ["N", 16]), vi("y", ["N", 8])


def w(name="W", shape=(16, 8)):
    return numpy_helper.from_array(np.ones(shape, np.float32), name)


def matmul(a="x", b="W", out="y"):
    return helper.make_node("MatMul", [a, b], [out])


def external(location):
    t = w()
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(16 * 8 * 4))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return model_bytes([matmul()], [X], [Y], [t])


def bad_raw_size():
    t = w()
    t.raw_data = t.raw_data[:-5]
    return model_bytes([matmul()], [X], [Y], [t])


def huge_initializer():
    t = onnx.TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[1 << 40, 8], raw_data=b"\0" * 32)
    return model_bytes([matmul()], [X], [Y], [t])


def varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def field(num, payload):
    """A length-delimited protobuf field (bytes or str payload)."""
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(num << 3 | 2) + varint(len(data)) + data


def nested_ifs(depth):
    """If inside If, `depth` levels. Written in the wire format by hand: Python's protobuf refuses
    to build messages nested beyond 100 levels. The else branches are leaves (linear size)."""
    def graph(nodes, name, out):
        return b"".join(field(1, n) for n in nodes) + field(2, name) + field(12, vi(out, ["N", 16]).SerializeToString())

    def attr(name, g):
        return field(1, name) + field(6, g) + varint(20 << 3) + varint(5)  # type: GRAPH

    def if_node(out, then_g, else_g):
        return field(1, "c") + field(2, out) + field(4, "If") + field(5, attr("then_branch", then_g)) + \
            field(5, attr("else_branch", else_g))

    def leaf(d):
        return graph([field(1, "x") + field(2, f"e{d}") + field(4, "Identity")], f"leaf{d}", f"e{d}")

    body = leaf(0)
    for d in range(1, depth):
        body = graph([if_node(f"o{d}", body, leaf(d))], f"level{d}", f"o{d}")
    top = helper.make_graph([], "broken", [vi("c", [], TensorProto.BOOL), X], [vi("y", ["N", 16])]).SerializeToString()
    top += field(1, if_node("y", body, leaf(depth)))
    opset = helper.make_opsetid("", 13).SerializeToString()
    return varint(1 << 3) + varint(8) + field(8, opset) + field(7, top)


def onnx_kinds(rng, good):
    """(kind, bytes) of broken ONNX files."""
    return [
        ("empty_file", b""),
        ("random_bytes", bytes(rng.randrange(256) for _ in range(rng.randint(1, 2000)))),
        ("truncated", good[: rng.randrange(1, len(good) - 1)]),
        ("text_file", b"this is not a model\n"),
        ("flipped_bytes", bytes(b ^ 0xFF if rng.random() < 0.2 else b for b in good)),
        ("unknown_op", model_bytes([helper.make_node("FooBar", ["x"], ["y"])], [X], [Y])),
        ("unknown_domain", model_bytes([helper.make_node("Relu", ["x"], ["y"], domain="com.nope")], [X], [Y])),
        ("missing_input", model_bytes([matmul("x", "nowhere")], [X], [Y])),
        ("cycle", model_bytes([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                               helper.make_node("Add", ["x", "a"], ["y"])], [X], [vi("y", ["N", 16])])),
        ("bad_raw_size", bad_raw_size()),
        ("huge_initializer", huge_initializer()),
        ("opset_99", model_bytes([matmul()], [X], [Y], [w()], opset=99)),
        ("no_opset", model_bytes([matmul()], [X], [Y], [w()], opset=0)),
        ("external_traversal", external("../../../../../../etc/passwd")),
        ("external_absolute", external("/etc/passwd")),
        ("external_missing", external("weights.bin")),
        ("type_mismatch", model_bytes([matmul()], [X], [Y], [numpy_helper.from_array(np.ones((16, 8), np.int64), "W")])),
        ("output_not_produced", model_bytes([matmul(out="z")], [X], [Y], [w()])),
        ("shape_mismatch", model_bytes([matmul()], [X], [Y], [w(shape=(15, 8))])),
        ("bad_attribute", model_bytes([helper.make_node("Gemm", ["x", "W"], ["y"], transA="yes")], [X], [Y], [w()])),
        ("deep_ifs", nested_ifs(rng.randint(200, 2000))),
    ]


def config_kinds(rng):
    """(kind, config.pbtxt bytes) that the good tiny model cannot be served with."""
    deep = rng.randint(2000, 20000)
    return [
        ("cfg_syntax", b'name: "m"\nmax_batch_size: [ 8\n'),
        ("cfg_wrong_type", b'max_batch_size: "eight"\n'),
        ("cfg_negative_batch", b"max_batch_size: -1\n"),
        ("cfg_unknown_dtype", b'input [ { name: "x" data_type: TYPE_FOO dims: [ 16 ] } ]\n'),
        ("cfg_unknown_input", b'max_batch_size: 8\ninput [ { name: "nope" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'),
        ("cfg_dims", b'max_batch_size: 8\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 17 ] } ]\n'),
        ("cfg_dtype", b'max_batch_size: 8\ninput [ { name: "x" data_type: TYPE_INT64 dims: [ 16 ] } ]\n'),
        ("cfg_duplicate_input", b'max_batch_size: 8\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] },'
                                b' { name: "x" data_type: TYPE_FP32 dims: [ 16 ] } ]\n'),
        ("cfg_count_zero", b"instance_group [ { count: 0 kind: KIND_CPU } ]\n"),
        ("cfg_count_huge", b"instance_group [ { count: 100000 kind: KIND_CPU } ]\n"),
        ("cfg_gpu_99", b"instance_group [ { kind: KIND_GPU gpus: [ 99 ] } ]\n"),
        ("cfg_deep", b"max_batch_size: 8\n" + b"u { " * deep + b"} " * deep + b"\n"),
        ("cfg_huge", b"# " + b"x" * (5 << 20) + b"\n"),
        ("cfg_binary", bytes(rng.randrange(256) for _ in range(rng.randint(10, 500)))),
        ("cfg_nul", b'name: "ti\x00ny"\n'),
        ("cfg_bad_utf8", b'name: "\xff\xfe"\n'),
        ("cfg_threads", b'parameters { key: "threads" value: { string_value: "-1" } }\n'),
        ("cfg_streams", b'parameters { key: "streams" value: { string_value: "1000" } }\n'),
        ("cfg_precision", b'parameters { key: "precision" value: { string_value: "fp8" } }\n'),
        ("cfg_pin", b'parameters { key: "pin" value: { string_value: "maybe" } }\n'),
        ("cfg_preferred", b"max_batch_size: 4\ndynamic_batching { preferred_batch_size: [ 8 ] }\n"),
        ("cfg_priority", b"max_batch_size: 4\ndynamic_batching { priority_levels: 2 default_priority_level: 5 }\n"),
        ("cfg_platform", b'platform: "tensorflow_savedmodel"\n'),
        ("cfg_backend", b'backend: "python"\n'),
        ("cfg_batch_too_big", b"max_batch_size: 2147483647\n" + b'input [ { name: "x" data_type: TYPE_FP32 dims: [ 16, 4 ] } ]\n'),
    ]


def runtime_broken():
    """(kind, bytes, request body) of models that load (the warm-up run at load passes) but fail
    the run for a request's data: a gather of a row the table does not have, the index taken from
    the request, for Gather and for GatherElements."""
    table = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(16, 4), "table")
    gather = model_bytes([helper.make_node("Gather", ["table", "idx"], ["y"], axis=0)],
                         [vi("idx", ["N"], TensorProto.INT64)], [vi("y", ["N", 4])], [table])
    gather_req = {"inputs": [{"name": "idx", "shape": [2], "datatype": "INT64", "data": [1, 1000]}]}
    elements = model_bytes([helper.make_node("GatherElements", ["table", "idx"], ["y"], axis=0)],
                           [vi("idx", ["N", 4], TensorProto.INT64)], [vi("y", ["N", 4])], [table])
    elements_req = {"inputs": [{"name": "idx", "shape": [1, 4], "datatype": "INT64", "data": [0, 1, -99, 2]}]}
    return [("run_gather", gather, gather_req), ("run_gather_elements", elements, elements_req)]


def broken_repository(root: Path, rng: random.Random) -> dict:
    """Writes the repository; returns {model name: Broken} for every broken model in it."""
    good = mlp_model(16, 8, 1, seed=1)
    good_bytes = good.SerializeToString()
    (root / "tiny" / "1").mkdir(parents=True)
    (root / "tiny" / "1" / "model.onnx").write_bytes(good_bytes)
    (root / "tiny" / "config.pbtxt").write_text(TINY_CONFIG)
    out = {}

    def add(kind, model, config=None, request=None):
        name = f"{kind}_{sum(1 for b in out.values() if b.kind == kind)}"
        d = root / name / "1"
        d.mkdir(parents=True)
        if model is not None:
            (d / "model.onnx").write_bytes(model)
        if config is not None:
            (root / name / "config.pbtxt").write_bytes(config)
        out[name] = Broken(kind, request)
        return root / name

    for kind, data in onnx_kinds(rng, good_bytes):
        add(kind, data)
    for kind, cfg in config_kinds(rng):
        add(kind, good_bytes, cfg)
    for kind, data, request in runtime_broken():
        add(kind, data, b"max_batch_size: 0\n", request)
    # Layouts: no version folder, versions that are not numbers, model.onnx a folder, a link loop.
    no_version = add("layout_no_version", None)
    (no_version / "1").rmdir()
    (no_version / "model.onnx").write_bytes(good_bytes)
    words = add("layout_word_version", None)
    (words / "1").rename(words / "latest")
    (words / "latest" / "model.onnx").write_bytes(good_bytes)
    folder = add("layout_model_is_folder", None)
    (folder / "1" / "model.onnx").mkdir()
    loop = add("layout_link_loop", None)
    (loop / "1" / "model.onnx").symlink_to(loop / "1" / "model.onnx")
    return out


def kinds_of(models: dict) -> set:
    return {b.kind for b in models.values()}

