"""Hostile models and requests that used to crash the server, bypass its policy or leak one
request's failure into others, each checked over HTTP and gRPC with Triton's own clients:

- a config.pbtxt nested 20,000 deep (at start-up and on an explicit load): that model is
  unavailable with a located reason; the server and the other models are unharmed;
- model control mode "none": repository load and unload are refused over both front ends
  (HTTP 400, gRPC INVALID_ARGUMENT) and the model keeps serving; mode "explicit" runs them;
- a request whose indices are out of range, batched with good ones: the good ones get the right
  answer, each bad one its own error;
- timeouts at the int64 boundary: no overflow into an instant 504 / DEADLINE_EXCEEDED.
"""

import concurrent.futures as cf
import http.client
import json
import threading

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper, numpy_helper
from tritonclient.utils import InferenceServerException

from conftest import TINY_CONFIG, Server, mlp_model, reference, write_model

INT64_MAX = 2**63 - 1
TABLE = (np.arange(16 * 4, dtype=np.float32).reshape(16, 4) * 0.5 + 1.0)
# Eight one-row requests fill one batch at once; a partial batch would wait 2 s.
GATHER_CONFIG = """
name: "gather"
max_batch_size: 8
input [ { name: "idx" data_type: TYPE_INT64 dims: [ 2 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 2, 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 2000000 }
parameters { key: "threads" value: { string_value: "1" } }
"""


def gather_model() -> onnx.ModelProto:
    """idx [N, 2] int64 -> y = Gather(TABLE, idx) [N, 2, 4]: the request's values pick rows, and
    an index outside [-16, 16) fails the run."""
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "idx"], ["y"], name="gather", axis=0)], "gather",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 4])],
        initializer=[numpy_helper.from_array(TABLE, "table")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def deep_config(depth: int = 20000) -> str:
    return "max_batch_size: 8\n" + "unknown_field { " * depth + "} " * depth + "\n"


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    """plain: tiny and gather. deep: tiny and a model whose config.pbtxt nests 20,000 deep."""
    tiny = mlp_model(16, 8, 1, seed=1)
    plain = tmp_path_factory.mktemp("plain")
    write_model(plain, "tiny", tiny, TINY_CONFIG)
    write_model(plain, "gather", gather_model(), GATHER_CONFIG)
    deep = tmp_path_factory.mktemp("deep")
    write_model(deep, "tiny", tiny, TINY_CONFIG)
    write_model(deep, "deep", tiny, deep_config())
    return {"plain": plain, "deep": deep}


@pytest.fixture(scope="module")
def plain_server(repos):
    s = Server(repos["plain"])
    yield s
    s.stop()


@pytest.fixture(scope="module")
def explicit_server(repos):
    s = Server(repos["deep"], ["--model-control-mode", "explicit", "--load-model", "tiny"])
    yield s
    s.stop()


def raw(server, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    c.request(method, path, body=body)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def tiny_x(seed=0):
    return np.random.default_rng(seed).standard_normal((2, 16)).astype(np.float32)


def infer_tiny_http(server, **kw):
    c = httpclient.InferenceServerClient(server.http_addr)
    x = tiny_x()
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    y = c.infer("tiny", [inp], **kw).as_numpy("y")
    np.testing.assert_allclose(y, reference(server.repo / "tiny" / "1" / "model.onnx", x), rtol=1e-5, atol=1e-6)


def infer_tiny_grpc(server, **kw):
    c = grpcclient.InferenceServerClient(server.grpc_addr)
    x = tiny_x()
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    y = c.infer("tiny", [inp], **kw).as_numpy("y")
    np.testing.assert_allclose(y, reference(server.repo / "tiny" / "1" / "model.onnx", x), rtol=1e-5, atol=1e-6)


def grpc_code(excinfo) -> str:
    return str(excinfo.value.status())


# --- 1. config.pbtxt nested 20,000 deep ---------------------------------------------------------

def test_deep_config_at_start_up_fails_that_model_only(repos):
    srv = Server(repos["deep"])  # control mode none: every model loads at start
    try:
        index = {m["name"]: m for m in httpclient.InferenceServerClient(srv.http_addr).get_model_repository_index()}
        assert index["tiny"]["state"] == "READY"
        assert index["deep"]["state"] == "UNAVAILABLE"
        assert index["deep"]["reason"].startswith("deep/config.pbtxt: line 2 col "), index["deep"]
        assert "nested deeper than 64 levels" in index["deep"]["reason"], index["deep"]
        infer_tiny_http(srv)
        assert srv.proc.poll() is None
    finally:
        srv.stop()


def test_deep_config_on_explicit_load_is_an_error_not_a_crash(explicit_server):
    status, body = raw(explicit_server, "POST", "/v2/repository/models/deep/load")
    assert status == 400, body
    assert "deep/config.pbtxt: line 2" in json.loads(body)["error"]
    assert "nested deeper than 64 levels" in json.loads(body)["error"]
    with pytest.raises(InferenceServerException) as e:
        grpcclient.InferenceServerClient(explicit_server.grpc_addr).load_model("deep")
    assert "INVALID_ARGUMENT" in grpc_code(e)
    assert "nested deeper than 64 levels" in str(e.value)
    assert explicit_server.proc.poll() is None, explicit_server.output()[-2000:]
    infer_tiny_grpc(explicit_server)


# --- 2. model control mode ----------------------------------------------------------------------

def test_mode_none_refuses_load_and_unload_over_both_front_ends(plain_server):
    g = grpcclient.InferenceServerClient(plain_server.grpc_addr)
    for call in (g.unload_model, g.load_model):
        with pytest.raises(InferenceServerException) as e:
            call("tiny")
        assert "INVALID_ARGUMENT" in grpc_code(e)
        assert "explicit model load / unload is not allowed" in str(e.value)
    for op in ("unload", "load"):
        status, body = raw(plain_server, "POST", f"/v2/repository/models/tiny/{op}")
        assert status == 400, body
        assert json.loads(body)["error"].startswith("explicit model load / unload is not allowed"), body
    # Nothing changed: tiny still serves over both.
    assert g.is_model_ready("tiny")
    infer_tiny_http(plain_server)
    infer_tiny_grpc(plain_server)


def test_mode_explicit_runs_load_and_unload_over_both_front_ends(explicit_server):
    g = grpcclient.InferenceServerClient(explicit_server.grpc_addr)
    h = httpclient.InferenceServerClient(explicit_server.http_addr)
    g.unload_model("tiny")
    assert not h.is_model_ready("tiny")
    with pytest.raises(InferenceServerException):
        infer_tiny_http(explicit_server)
    g.load_model("tiny")
    infer_tiny_http(explicit_server)
    h.unload_model("tiny")
    assert not g.is_model_ready("tiny")
    h.load_model("tiny")
    infer_tiny_grpc(explicit_server)


# --- 3. a bad request fails alone in its batch --------------------------------------------------

def test_bad_indices_fail_alone_in_a_shared_batch(plain_server):
    """Rounds of 8 concurrent one-row requests (one full batch each), 2 of them with an index out
    of range, over HTTP and gRPC alternately."""
    def one(k, idx, over_grpc):
        arr = np.array([idx], np.int64)
        try:  # a client per call: tritonclient's clients are not shared between threads
            if over_grpc:
                inp = grpcclient.InferInput("idx", [1, 2], "INT64")
                inp.set_data_from_numpy(arr)
                c = grpcclient.InferenceServerClient(plain_server.grpc_addr)
                return k, c.infer("gather", [inp]).as_numpy("y"), None
            inp = httpclient.InferInput("idx", [1, 2], "INT64")
            inp.set_data_from_numpy(arr)
            c = httpclient.InferenceServerClient(plain_server.http_addr)
            return k, c.infer("gather", [inp]).as_numpy("y"), None
        except InferenceServerException as e:
            return k, None, str(e)

    rng = np.random.default_rng(7)
    bad_seen = 0
    for rnd in range(6):
        reqs = [[int(v) for v in rng.integers(-16, 16, 2)] for _ in range(8)]
        bad = {1 + rnd % 3: 1000 + 10 * rnd, 5 + rnd % 3: 2000 + 10 * rnd}
        for k, v in bad.items():
            reqs[k][k % 2] = v
        start = threading.Barrier(8)

        def run(k):
            start.wait()
            return one(k, reqs[k], over_grpc=(k + rnd) % 2 == 1)

        with cf.ThreadPoolExecutor(8) as ex:
            results = list(ex.map(run, range(8)))
        for k, y, err in results:
            if k in bad:
                assert y is None, f"round {rnd}: request {k} with index {bad[k]} succeeded"
                assert str(bad[k]) in err, f"round {rnd}: request {k} got another's error: {err}"
                for other, v in bad.items():
                    if other != k:
                        assert str(v) not in err, f"round {rnd}: request {k} got request {other}'s error: {err}"
                bad_seen += 1
            else:
                assert err is None, f"round {rnd}: good request {k} {reqs[k]} failed: {err}"
                np.testing.assert_array_equal(y, TABLE[np.array([reqs[k]])])
    assert bad_seen == 12
    # The requests did share batches: full batches of 8 ran (then each of a failed one alone).
    h = httpclient.InferenceServerClient(plain_server.http_addr)
    stats = h.get_inference_statistics("gather")["model_stats"][0]
    sizes = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]}
    assert sizes.get(8, 0) >= 1, stats["batch_stats"]
    assert int(stats["inference_stats"]["success"]["count"]) == 36
    assert int(stats["inference_stats"]["fail"]["count"]) == 12


# --- 5. timeouts at the int64 boundary ----------------------------------------------------------

@pytest.mark.parametrize("timeout", [INT64_MAX, INT64_MAX - 1, 2**62])
def test_huge_timeouts_do_not_overflow(plain_server, timeout):
    infer_tiny_http(plain_server, timeout=timeout)
    infer_tiny_grpc(plain_server, timeout=timeout)


def test_negative_and_out_of_range_timeouts_are_refused(plain_server):
    body = {"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16}]}
    for t in (-1, -INT64_MAX - 1, 2**63, 2**64):
        status, data = raw(plain_server, "POST", "/v2/models/tiny/infer",
                           json.dumps({**body, "parameters": {"timeout": t}}))
        assert status == 400, (t, data)
        assert "timeout" in json.loads(data)["error"], data
    with pytest.raises(InferenceServerException) as e:
        infer_tiny_grpc(plain_server, timeout=-1)
    assert "INVALID_ARGUMENT" in grpc_code(e)
    assert "timeout" in str(e.value)


def test_huge_priority_runs_at_the_lowest_level(plain_server):
    infer_tiny_http(plain_server, priority=INT64_MAX)
    infer_tiny_grpc(plain_server, priority=INT64_MAX)
    infer_tiny_grpc(plain_server, priority=2**64 - 1)
