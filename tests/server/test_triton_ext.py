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
import time
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


LABELLED_CONFIG = """
name: "labelled"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 8 ] label_filename: "labels.txt" } ]
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
    write_model(root, "labelled", mlp_model(16, 8, 1, seed=1), LABELLED_CONFIG)
    (root / "labelled" / "labels.txt").write_text("".join(f"class{i}\n" for i in range(8)))
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
        assert set(index) == {"tiny", "rows", "labelled"}
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


# --- traces --------------------------------------------------------------------------------------

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def raw_infer(srv, x, headers=None):
    import http.client
    import json as js
    body = js.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                 "data": x.flatten().tolist()}]})
    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=30)
    conn.request("POST", "/v2/models/tiny/infer", body=body, headers=headers or {})
    res = conn.getresponse()
    res.read()
    conn.close()
    return res


def test_trace_settings_and_a_chrome_trace_of_the_request(srv, tmp_path):
    import json as js
    h = httpclient.InferenceServerClient(srv.http_addr)
    path = tmp_path / "trace.json"
    s = h.update_trace_settings(settings={"trace_level": ["TIMESTAMPS", "TENSORS"], "trace_rate": "1",
                                          "trace_count": "-1", "log_frequency": "1", "trace_file": str(path)})
    assert s["trace_level"] == ["TIMESTAMPS", "TENSORS"] and s["trace_rate"] == "1"
    try:
        res = raw_infer(srv, x16(2, seed=5), {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
        assert res.status == 200
        assert res.getheader("traceparent").startswith(f"00-{TRACE_ID}-")
        files = sorted(tmp_path.glob("trace.json.*"))
        assert files, "no trace file written"
        events = js.loads(files[-1].read_text())["traceEvents"]
        slices = [e for e in events if e["ph"] == "X"]
        names = {e["name"] for e in slices}
        assert {"request tiny", "receive", "queue", "batch", "compute input", "compute infer", "compute output",
                "response"} <= names, names
        steps = [e for e in slices if e["cat"] == "step"]
        assert steps and all("op" in e["args"] for e in steps)
        tracks = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
        assert "stream 0" in tracks and "request" in tracks
        req = next(e for e in slices if e["name"] == "request tiny")
        assert req["args"]["trace_id"] == TRACE_ID and req["args"]["parent_span_id"] == PARENT_ID
        assert req["args"]["inputs"]["x"]["shape"] == [2, 16]
        assert req["args"]["outputs"]["y"]["shape"] == [2, 8]
        # The request's span holds every other slice of it.
        end = req["ts"] + req["dur"]
        for e in slices:
            assert req["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= end + 1, e
        # Per model: tiny switched off while the global level stays on.
        h.update_trace_settings(model_name="tiny", settings={"trace_level": ["OFF"]})
        assert h.get_trace_settings(model_name="tiny")["trace_level"] == ["OFF"]
        before = len(list(tmp_path.glob("trace.json.*")))
        raw_infer(srv, x16(1, seed=6))
        assert len(list(tmp_path.glob("trace.json.*"))) == before
        h.update_trace_settings(model_name="tiny", settings={"trace_level": None})  # follow the global again
        assert h.get_trace_settings(model_name="tiny")["trace_level"] == ["TIMESTAMPS", "TENSORS"]
        # trace_count: two more traces, then none.
        h.update_trace_settings(settings={"trace_count": "2"})
        for i in range(4):
            raw_infer(srv, x16(1, seed=10 + i))
        assert len(list(tmp_path.glob("trace.json.*"))) == before + 2
        assert h.get_trace_settings()["trace_count"] == "0"
        with pytest.raises(InferenceServerException, match="trace_level"):
            h.update_trace_settings(settings={"trace_level": ["SOMETIMES"]})
    finally:
        h.update_trace_settings(settings={"trace_level": ["OFF"], "trace_count": "-1", "trace_rate": "1000"})


def test_a_traced_grpc_call_sends_its_traceparent_back(srv, repo, tmp_path):
    """As the HTTP front end answers with a traceparent header, a traced unary gRPC call gets its
    span's traceparent in the initial metadata: same trace id, its own span id."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    g = grpcclient.InferenceServerClient(srv.grpc_addr)
    x = x16(1, seed=21)
    req = service_pb2.ModelInferRequest(model_name="tiny")
    req.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
    req.raw_input_contents.append(x.tobytes())
    sent = (("traceparent", f"00-{TRACE_ID}-{PARENT_ID}-01"),)
    channel = grpc.insecure_channel(srv.grpc_addr)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    g.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "log_frequency": "1",
                                      "trace_file": str(tmp_path / "u.json")})
    try:
        resp, call = stub.ModelInfer.with_call(req, metadata=sent, timeout=30)
        got = dict(call.initial_metadata()).get("traceparent", "")
        assert got.startswith(f"00-{TRACE_ID}-"), got
        assert len(got) == 55 and got[36:52] != PARENT_ID, got
        y = np.frombuffer(resp.raw_output_contents[0], dtype=np.float32).reshape(1, 8)
        np.testing.assert_allclose(y, tiny_ref(repo, x), rtol=1e-4, atol=1e-5)
        # Not traced: nothing sent back.
        g.update_trace_settings(settings={"trace_level": ["OFF"]})
        _, call = stub.ModelInfer.with_call(req, metadata=sent, timeout=30)
        assert "traceparent" not in dict(call.initial_metadata())
    finally:
        g.update_trace_settings(settings={"trace_level": ["OFF"], "trace_rate": "1000"})
        channel.close()


def test_trace_settings_over_grpc_and_a_traced_stream(srv, tmp_path):
    import json as js
    g = grpcclient.InferenceServerClient(srv.grpc_addr)
    path = tmp_path / "g.json"
    g.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "1", "log_frequency": "1",
                                      "trace_file": str(path)})
    try:
        got = g.get_trace_settings(as_json=True)["settings"]
        assert got["trace_level"]["value"] == ["TIMESTAMPS"]
        q = queue.Queue()
        g.start_stream(callback=lambda result, error: q.put((result, error)),
                       headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
        x = x16(1, seed=3)
        inp = grpcclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        g.async_stream_infer("tiny", [inp])
        ((result, error),) = stream_results(q, 1)
        g.stop_stream()
        assert error is None
        # A stream's trace is written once its response has gone out: wait for the whole file.
        deadline = time.monotonic() + 10
        events = None
        while events is None:
            files = sorted(tmp_path.glob("g.json.*"))
            try:
                events = js.loads(files[-1].read_text())["traceEvents"] if files else None
            except ValueError:
                events = None
            assert events is not None or time.monotonic() < deadline, "no trace file written for the stream"
            if events is None:
                time.sleep(0.02)
        req = next(e for e in events if e["ph"] == "X" and e["name"] == "request tiny")
        assert req["args"]["trace_id"] == TRACE_ID
    finally:
        g.update_trace_settings(settings={"trace_level": ["OFF"], "trace_rate": "1000"})


# --- classification ------------------------------------------------------------------------------

def expected_classes(y, k, labels=None):
    out = []
    for row in y:
        idx = sorted(range(len(row)), key=lambda i: (-row[i], i))[:k]
        out.append([f"{row[i]:f}:{i}" + (f":{labels[i]}" if labels else "") for i in idx])
    return out


@pytest.mark.parametrize("protocol,binary", [("http", False), ("http", True), ("grpc", True)])
def test_class_count_classification(srv, repo, protocol, binary):
    client_mod = httpclient if protocol == "http" else grpcclient
    c = client_mod.InferenceServerClient(srv.http_addr if protocol == "http" else srv.grpc_addr)
    x = x16(3, seed=31)
    ref = tiny_ref(repo, x)
    for model, labels in [("tiny", None), ("labelled", [f"class{i}" for i in range(8)])]:
        inp = client_mod.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        out = (httpclient.InferRequestedOutput("y", binary_data=binary, class_count=3) if protocol == "http"
               else grpcclient.InferRequestedOutput("y", class_count=3))
        r = c.infer(model, [inp], outputs=[out])
        got = r.as_numpy("y")
        assert got.shape == (3, 3)
        got = [[v.decode() if isinstance(v, bytes) else v for v in row] for row in got]
        want = expected_classes(ref, 3, labels)
        # The value's text is rounded to 6 decimals on both sides; compare index and label exactly.
        for g_row, w_row in zip(got, want):
            assert [g.split(":")[1:] for g in g_row] == [w.split(":")[1:] for w in w_row], (g_row, w_row)
            assert all(abs(float(g.split(":")[0]) - float(w.split(":")[0])) < 1e-4 for g, w in zip(g_row, w_row))
