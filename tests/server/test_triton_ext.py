"""Triton's extensions beyond the core protocol, with Triton's own clients: gRPC streaming
inference (ModelStreamInfer) with per-request errors and a decoupled model, system shared memory
over HTTP and gRPC (tritonclient.utils.shared_memory), the logging settings, and the repository
index of a server in explicit model control mode.

Models (written here):
    tiny     y = Relu(x @ W + b), x [N, 16] -> y [N, 8]; dynamic batching (max 8)
    rows     y = Relu(x), x [N, 4] -> y [N, 4], max_batch_size 0, decoupled: each of the N rows of
             y comes back as its own response ([1, 4]), then an empty final one when asked for
"""

import queue
import uuid

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

from conftest import Server, TINY_CONFIG, mlp_model, reference, write_model

ROWS_CONFIG = """
name: "rows"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
model_transaction_policy { decoupled: true }
"""


def rows_model():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "rows",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("ext_models")
    write_model(root, "tiny", mlp_model(16, 8, 1, seed=1), TINY_CONFIG)
    write_model(root, "rows", rows_model(), ROWS_CONFIG)
    return root


@pytest.fixture(scope="module")
def srv(repo):
    s = Server(repo)
    yield s
    s.stop()


def x16(rows, seed):
    return np.random.default_rng(seed).standard_normal((rows, 16)).astype(np.float32)


def tiny_ref(repo, x):
    return reference(repo / "tiny" / "1" / "model.onnx", x)


def stream_results(q, n, timeout=30):
    out = []
    for _ in range(n):
        out.append(q.get(timeout=timeout))
    return out


# --- gRPC streaming ------------------------------------------------------------------------------

def test_stream_infer_answers_every_request(srv, repo):
    q = queue.Queue()
    c = grpcclient.InferenceServerClient(srv.grpc_addr)
    c.start_stream(callback=lambda result, error: q.put((result, error)))
    try:
        xs = {f"r{i}": x16(1 + i % 3, seed=i) for i in range(12)}
        for rid, x in xs.items():
            inp = grpcclient.InferInput("x", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            c.async_stream_infer("tiny", [inp], request_id=rid)
        got = stream_results(q, len(xs))
    finally:
        c.stop_stream()
    seen = set()
    for result, error in got:
        assert error is None, error
        rid = result.get_response().id
        seen.add(rid)
        y = result.as_numpy("y")
        ref = tiny_ref(repo, xs[rid])
        assert y.shape == ref.shape
        assert np.abs(y - ref).max() <= 1e-5 * max(1.0, float(np.abs(ref).max()))
    assert seen == set(xs)


def test_stream_error_is_per_request_and_stream_stays_open(srv, repo):
    q = queue.Queue()
    c = grpcclient.InferenceServerClient(srv.grpc_addr)
    c.start_stream(callback=lambda result, error: q.put((result, error)))
    try:
        bad = grpcclient.InferInput("x", [1, 3], "FP32")  # wrong width
        bad.set_data_from_numpy(np.zeros((1, 3), np.float32))
        c.async_stream_infer("tiny", [bad], request_id="bad")
        ((result, error),) = stream_results(q, 1)
        assert result is None
        assert isinstance(error, InferenceServerException)
        assert "x" in str(error) and "16" in str(error), str(error)
        c.async_stream_infer("no_such_model", [bad], request_id="gone")
        ((result, error),) = stream_results(q, 1)
        assert error is not None and "no_such_model" in str(error)
        # The same stream still serves.
        x = x16(2, seed=7)
        good = grpcclient.InferInput("x", list(x.shape), "FP32")
        good.set_data_from_numpy(x)
        c.async_stream_infer("tiny", [good], request_id="good")
        ((result, error),) = stream_results(q, 1)
        assert error is None, error
        assert result.get_response().id == "good"
        assert np.allclose(result.as_numpy("y"), tiny_ref(repo, x), atol=1e-5)
    finally:
        c.stop_stream()


def test_decoupled_model_sends_a_response_per_row(srv):
    q = queue.Queue()
    c = grpcclient.InferenceServerClient(srv.grpc_addr)
    c.start_stream(callback=lambda result, error: q.put((result, error)))
    x = np.arange(5 * 4, dtype=np.float32).reshape(5, 4) - 7
    try:
        inp = grpcclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        c.async_stream_infer("rows", [inp], request_id="d", enable_empty_final_response=True)
        got = stream_results(q, 6)
    finally:
        c.stop_stream()
    finals = []
    for i, (result, error) in enumerate(got):
        assert error is None, error
        r = result.get_response()
        assert r.id == "d"
        finals.append(r.parameters["triton_final_response"].bool_param)
        if i < 5:
            assert np.array_equal(result.as_numpy("y"), np.maximum(x[i:i + 1], 0))
    assert finals == [False] * 5 + [True]
    assert len(got[5][0].get_response().outputs) == 0


def test_decoupled_model_is_refused_without_a_stream(srv):
    x = np.ones((2, 4), np.float32)
    g = grpcclient.InferenceServerClient(srv.grpc_addr)
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException, match="decoupled"):
        g.infer("rows", [inp])
    h = httpclient.InferenceServerClient(srv.http_addr)
    hinp = httpclient.InferInput("x", list(x.shape), "FP32")
    hinp.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException, match="decoupled"):
        h.infer("rows", [hinp])


# --- system shared memory ------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_system_shared_memory_inputs_and_outputs(srv, repo, protocol):
    client_mod = httpclient if protocol == "http" else grpcclient
    c = client_mod.InferenceServerClient(srv.http_addr if protocol == "http" else srv.grpc_addr)
    tag = uuid.uuid4().hex[:8]
    x = x16(3, seed=11)
    in_bytes, out_bytes = x.nbytes, 3 * 8 * 4
    h_in = shm.create_shared_memory_region(f"in_{tag}", f"/sl_in_{tag}", in_bytes)
    h_out = shm.create_shared_memory_region(f"out_{tag}", f"/sl_out_{tag}", out_bytes)
    try:
        shm.set_shared_memory_region(h_in, [x])
        c.register_system_shared_memory(f"in_{tag}", f"/sl_in_{tag}", in_bytes)
        c.register_system_shared_memory(f"out_{tag}", f"/sl_out_{tag}", out_bytes)
        status = c.get_system_shared_memory_status()
        if protocol == "http":
            names = {r["name"]: r for r in status}
            assert names[f"in_{tag}"]["byte_size"] == in_bytes
        else:
            assert status.regions[f"in_{tag}"].byte_size == in_bytes
        inp = client_mod.InferInput("x", list(x.shape), "FP32")
        inp.set_shared_memory(f"in_{tag}", in_bytes)
        out = client_mod.InferRequestedOutput("y")
        out.set_shared_memory(f"out_{tag}", out_bytes)
        r = c.infer("tiny", [inp], outputs=[out])
        meta = r.get_output("y")
        shape = meta["shape"] if protocol == "http" else list(meta.shape)
        assert shape == [3, 8]
        y = shm.get_contents_as_numpy(h_out, np.float32, [3, 8])
        ref = tiny_ref(repo, x)
        assert np.abs(y - ref).max() <= 1e-5 * max(1.0, float(np.abs(ref).max()))
        # An input region too small for the tensor is refused with a clear error.
        small = client_mod.InferInput("x", [4, 16], "FP32")
        small.set_shared_memory(f"in_{tag}", 4 * 16 * 4)
        with pytest.raises(InferenceServerException, match=f"in_{tag}"):
            c.infer("tiny", [small])
        c.unregister_system_shared_memory(f"in_{tag}")
        with pytest.raises(InferenceServerException, match="not registered"):
            c.infer("tiny", [inp])
    finally:
        c.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)
    status = c.get_system_shared_memory_status()
    assert (len(status) if protocol == "http" else len(status.regions)) == 0


def test_shared_memory_register_errors(srv):
    c = httpclient.InferenceServerClient(srv.http_addr)
    with pytest.raises(InferenceServerException, match="no shared memory object"):
        c.register_system_shared_memory("nope", "/sl_no_such_key_" + uuid.uuid4().hex[:6], 64)
    tag = uuid.uuid4().hex[:8]
    h = shm.create_shared_memory_region(f"r_{tag}", f"/sl_r_{tag}", 64)
    try:
        with pytest.raises(InferenceServerException, match="past the end"):
            c.register_system_shared_memory(f"r_{tag}", f"/sl_r_{tag}", 128)
        c.register_system_shared_memory(f"r_{tag}", f"/sl_r_{tag}", 64)
        with pytest.raises(InferenceServerException, match="already registered"):
            c.register_system_shared_memory(f"r_{tag}", f"/sl_r_{tag}", 64)
    finally:
        c.unregister_system_shared_memory(f"r_{tag}")
        shm.destroy_shared_memory_region(h)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_cuda_shared_memory_handles_that_cannot_be_opened_are_refused(srv, protocol):
    """A handle that opens nothing (64 zero bytes: no allocation) and one of the wrong size are
    refused with the region's name and the reason, whether or not this machine has a GPU or the
    build has the CUDA backend; nothing is registered. Regions that do open are tested on a GPU
    (tests/cuda/shared_memory_test.cc)."""
    import base64
    mod = httpclient if protocol == "http" else grpcclient
    c = mod.InferenceServerClient(srv.http_addr if protocol == "http" else srv.grpc_addr)
    for handle in (bytes(64), b"short"):
        with pytest.raises(InferenceServerException, match="CUDA shared memory region 'gpu_r'") as e:
            c.register_cuda_shared_memory("gpu_r", base64.b64encode(handle).decode(), 0, 64)
        assert any(why in str(e.value) for why in ("cannot open", "no CUDA GPU", "needs the CUDA backend",
                                                   "raw_handle has 5 bytes")), str(e.value)
    status = c.get_cuda_shared_memory_status()
    assert not (status if protocol == "http" else list(status.regions))
    if protocol == "http":  # the handle must be {"b64": base64}
        with pytest.raises(InferenceServerException, match="not base64"):
            c.register_cuda_shared_memory("gpu_r", "@@@@", 0, 64)


# --- logging -------------------------------------------------------------------------------------

def test_log_settings_over_http_and_grpc(srv):
    h = httpclient.InferenceServerClient(srv.http_addr)
    s = h.get_log_settings()
    assert set(s) >= {"log_file", "log_info", "log_warning", "log_error", "log_verbose_level", "log_format"}
    s = h.update_log_settings({"log_verbose_level": 2, "log_info": True})
    assert s["log_verbose_level"] == 2 and s["log_info"] is True
    g = grpcclient.InferenceServerClient(srv.grpc_addr)
    gs = g.get_log_settings(as_json=True)["settings"]
    assert gs["log_verbose_level"]["uint32_param"] == 2
    g.update_log_settings({"log_verbose_level": 0, "log_info": False})
    assert h.get_log_settings()["log_verbose_level"] == 0
    with pytest.raises(InferenceServerException, match="log_format"):
        h.update_log_settings({"log_format": "xml"})


def test_log_verbose_flag(repo):
    s = Server(repo, extra=["--log-verbose", "1", "--log-info", "true"])
    try:
        settings = httpclient.InferenceServerClient(s.http_addr).get_log_settings()
        assert settings["log_verbose_level"] == 1 and settings["log_info"] is True
        assert "is ready" in s.output()  # an info message, logged because --log-info is on
    finally:
        s.stop()


# --- repository index in explicit mode ------------------------------------------------------------

def test_index_lists_unloaded_models_in_explicit_mode(repo):
    s = Server(repo, extra=["--model-control-mode", "explicit"])
    try:
        c = httpclient.InferenceServerClient(s.http_addr)
        index = {m["name"]: m for m in c.get_model_repository_index()}
        assert set(index) == {"tiny", "rows"}
        assert index["tiny"]["state"] == "UNAVAILABLE" and index["tiny"]["reason"] == "not loaded"
        c.load_model("tiny")
        index = {m["name"]: m for m in c.get_model_repository_index()}
        assert index["tiny"]["state"] == "READY" and index["rows"]["reason"] == "not loaded"
        g = grpcclient.InferenceServerClient(s.grpc_addr)
        gi = {m.name: m for m in g.get_model_repository_index().models}
        assert gi["rows"].state == "UNAVAILABLE" and gi["tiny"].state == "READY"
    finally:
        s.stop()


# --- HTTP compression ----------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_http_compression_both_ways(srv, repo, algorithm):
    c = httpclient.InferenceServerClient(srv.http_addr)
    x = x16(4, seed=21)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=False)
    r = c.infer("tiny", [inp], outputs=[httpclient.InferRequestedOutput("y", binary_data=False)],
                request_compression_algorithm=algorithm, response_compression_algorithm=algorithm)
    ref = tiny_ref(repo, x)
    assert np.abs(r.as_numpy("y") - ref).max() <= 1e-5 * max(1.0, float(np.abs(ref).max()))


def test_http_response_is_compressed_when_accepted_and_corrupt_bodies_refused(srv):
    import gzip
    import http.client
    import json as js
    # Eight rows: a response body well above the size under which nothing is compressed (256 bytes).
    x = x16(8, seed=41)
    body = js.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [8, 16],
                                 "data": x.flatten().tolist()}]}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=30)
    conn.request("POST", "/v2/models/tiny/infer", body=gzip.compress(body),
                 headers={"Content-Encoding": "gzip", "Accept-Encoding": "gzip"})
    res = conn.getresponse()
    data = res.read()
    assert res.status == 200
    assert res.getheader("Content-Encoding") == "gzip"
    assert js.loads(gzip.decompress(data))["outputs"][0]["shape"] == [8, 8]
    # A small body goes as it is, whatever the client accepts.
    small = js.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16], "data": [0.5] * 16}]})
    conn.request("POST", "/v2/models/tiny/infer", body=small, headers={"Accept-Encoding": "gzip"})
    res = conn.getresponse()
    assert res.status == 200 and res.getheader("Content-Encoding") is None
    assert js.loads(res.read())["outputs"][0]["shape"] == [1, 8]
    conn.request("POST", "/v2/models/tiny/infer", body=gzip.compress(body)[:-9], headers={"Content-Encoding": "gzip"})
    res = conn.getresponse()
    err = js.loads(res.read())["error"]
    assert res.status == 400 and "gzip" in err, err
    conn.request("POST", "/v2/models/tiny/infer", body=body, headers={"Content-Encoding": "br"})
    res = conn.getresponse()
    assert res.status == 400 and "br" in js.loads(res.read())["error"]
    conn.close()
