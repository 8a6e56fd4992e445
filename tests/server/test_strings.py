"""String (BYTES) tensors through `streamline serve`, with Triton's own clients over HTTP (JSON and
binary) and gRPC, checked against ONNX Runtime on the same model.

    SL_BINARY=build/tools/streamline .venv/bin/python -m pytest -q tests/server/test_strings.py

The model (onnx helper API, default opset 17 + ai.onnx.ml 2): words [N] BYTES -> StringNormalizer
(lower case, stopwords) -> LabelEncoder (word -> id) -> Gather from an embedding table -> ReduceMean
-> MatMul -> ArgMax -> LabelEncoder (id -> category) -> label [1] BYTES, with the normalised words
and the ids as outputs too; strings run node by node, so each request runs eagerly. Served twice:
with a config.pbtxt declaring TYPE_STRING, and with none (the server derives it).
"""

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper, numpy_helper
from tritonclient.utils import InferenceServerException

from conftest import Server, write_model

VOCAB = ["goal", "match", "team", "vote", "election", "senate", "chip", "software", "robot", "league"]
CATEGORIES = ["sports", "politics", "tech"]

CONFIG = """
name: "text"
max_batch_size: 0
input [ { name: "words" data_type: TYPE_STRING dims: [ -1 ] } ]
output [
  { name: "norm" data_type: TYPE_STRING dims: [ -1 ] },
  { name: "ids" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "label" data_type: TYPE_STRING dims: [ 1 ] }
]
instance_group [ { count: 2 kind: KIND_CPU } ]
"""


def text_model():
    rng = np.random.RandomState(0)
    table = rng.randn(len(VOCAB) + 1, 8).astype(np.float32)
    weights = rng.randn(8, len(CATEGORIES)).astype(np.float32)
    nodes = [
        helper.make_node("StringNormalizer", ["words"], ["norm"], case_change_action="LOWER",
                         stopwords=["the", "a", "of"], locale="C.UTF-8"),
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
        nodes, "text",
        [helper.make_tensor_value_info("words", TensorProto.STRING, ["n"])],
        [helper.make_tensor_value_info("norm", TensorProto.STRING, ["m"]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, ["m"]),
         helper.make_tensor_value_info("label", TensorProto.STRING, [1])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(weights, "weights")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 2)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def text_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("string_models")
    model = text_model()
    write_model(root, "text", model, CONFIG)
    write_model(root, "text_derived", model, None)
    s = Server(root)
    yield s, root / "text" / "1" / "model.onnx"
    s.stop()


def reference(path, words):
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    norm, ids, label = sess.run(None, {"words": np.array(words, dtype=object)})
    return [w.encode() for w in norm], ids, [w.encode() for w in label]


SENTENCES = [
    ["The", "TEAM", "scored", "a", "Goal"],
    ["Senate", "vote", "of", "the", "Election", "election"],
    ["Robot", "chip", "SOFTWARE", "\u00c9LAN", "Stra\u00dfe", "ROBOT"],
]


@pytest.mark.parametrize("model", ["text", "text_derived"])
@pytest.mark.parametrize("binary", [False, True])
def test_http_bytes_match_onnxruntime(text_server, model, binary):
    """BYTES in and out over HTTP, as JSON strings and as the binary extension."""
    server, path = text_server
    client = httpclient.InferenceServerClient(server.http_addr)
    meta = client.get_model_metadata(model)
    assert {i["name"]: i["datatype"] for i in meta["inputs"]} == {"words": "BYTES"}
    assert {o["name"]: o["datatype"] for o in meta["outputs"]}["label"] == "BYTES"
    for words in SENTENCES:
        x = httpclient.InferInput("words", [len(words)], "BYTES")
        x.set_data_from_numpy(np.array([w.encode() for w in words], dtype=np.object_), binary_data=binary)
        outs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("norm", "ids", "label")]
        r = client.infer(model, [x], outputs=outs)
        norm, ids, label = reference(path, words)
        got_norm = [v if isinstance(v, bytes) else v.encode() for v in r.as_numpy("norm").tolist()]
        got_label = [v if isinstance(v, bytes) else v.encode() for v in r.as_numpy("label").tolist()]
        assert got_norm == norm, words
        np.testing.assert_array_equal(r.as_numpy("ids"), ids)
        assert got_label == label, words


def test_grpc_bytes_match_onnxruntime(text_server):
    """BYTES over gRPC (raw_input_contents in, raw_output_contents out)."""
    server, path = text_server
    client = grpcclient.InferenceServerClient(server.grpc_addr)
    for words in SENTENCES:
        x = grpcclient.InferInput("words", [len(words)], "BYTES")
        x.set_data_from_numpy(np.array([w.encode() for w in words], dtype=np.object_))
        r = client.infer("text", [x])
        norm, ids, label = reference(path, words)
        assert r.as_numpy("norm").tolist() == norm
        np.testing.assert_array_equal(r.as_numpy("ids"), ids)
        assert r.as_numpy("label").tolist() == label


def test_wrong_datatype_is_refused_and_the_server_serves_on(text_server):
    """A number where the model takes strings is InvalidArgument naming the input; the next request
    is answered."""
    server, _ = text_server
    client = httpclient.InferenceServerClient(server.http_addr)
    x = httpclient.InferInput("words", [2], "INT64")
    x.set_data_from_numpy(np.array([1, 2], dtype=np.int64))
    with pytest.raises(InferenceServerException, match="words"):
        client.infer("text", [x])
    ok = httpclient.InferInput("words", [1], "BYTES")
    ok.set_data_from_numpy(np.array([b"robot"], dtype=np.object_))
    assert client.infer("text", [ok]).as_numpy("label").tolist() == [b"tech"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_bytes_through_system_shared_memory(text_server, protocol):
    """BYTES inputs read from and outputs written into system shared memory in Triton's raw form
    (4-byte length, then the bytes), as tritonclient.utils.shared_memory writes and reads them."""
    import uuid

    import tritonclient.utils.shared_memory as shm
    from tritonclient.utils import serialize_byte_tensor

    server, path = text_server
    mod = httpclient if protocol == "http" else grpcclient
    client = mod.InferenceServerClient(server.http_addr if protocol == "http" else server.grpc_addr)
    words = SENTENCES[2]
    data = np.array([w.encode() for w in words], dtype=np.object_)
    raw = serialize_byte_tensor(data)  # a 0-d object array holding the raw bytes, as Triton's examples use it
    in_bytes = len(raw.item())
    out_bytes = 256
    tag = uuid.uuid4().hex[:8]
    h_in = shm.create_shared_memory_region(f"win_{tag}", f"/sl_win_{tag}", in_bytes)
    h_out = shm.create_shared_memory_region(f"wout_{tag}", f"/sl_wout_{tag}", out_bytes)
    try:
        shm.set_shared_memory_region(h_in, [raw])
        client.register_system_shared_memory(f"win_{tag}", f"/sl_win_{tag}", in_bytes)
        client.register_system_shared_memory(f"wout_{tag}", f"/sl_wout_{tag}", out_bytes)
        x = mod.InferInput("words", [len(words)], "BYTES")
        x.set_shared_memory(f"win_{tag}", in_bytes)
        out = mod.InferRequestedOutput("norm")
        out.set_shared_memory(f"wout_{tag}", out_bytes)
        r = client.infer("text", [x], outputs=[out])
        norm, _, _ = reference(path, words)
        meta = r.get_output("norm")
        params = meta["parameters"] if protocol == "http" else meta.parameters
        size = params["shared_memory_byte_size"] if protocol == "http" else params["shared_memory_byte_size"].int64_param
        assert size == sum(4 + len(w) for w in norm)
        got = shm.get_contents_as_numpy(h_out, np.object_, [len(norm)])
        assert got.tolist() == norm
        # A byte size that cuts the last string is refused naming the input; the server serves on.
        short = mod.InferInput("words", [len(words)], "BYTES")
        short.set_shared_memory(f"win_{tag}", in_bytes - 1)
        with pytest.raises(InferenceServerException, match="words"):
            client.infer("text", [short])
        assert client.infer("text", [x], outputs=[out]).get_output("norm") is not None
    finally:
        client.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)
