"""KServe v2 against `streamline serve`, with Triton's own Python client (tritonclient, HTTP and
gRPC) unchanged, plus raw HTTP for the error statuses. Outputs are checked against ONNX Runtime
on the same model file: max|ours - ort| <= 1e-5 * max(1, max|ort|).
"""

import concurrent.futures as cf
import http.client
import json
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conftest import reference

TOL = 1e-5


def assert_close(ours, ref, what):
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape}, reference {ref.shape}"
    err = float(np.abs(ours.astype(np.float64) - ref).max())
    bound = TOL * max(1.0, float(np.abs(ref).max()))
    assert err <= bound, f"{what}: max error {err:.3e} > {bound:.3e}"


def raw(server, method, path, body=None, headers=None):
    """One HTTP request on a fresh connection; returns (status, headers, body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


def tiny_input(rows, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, 16)).astype(np.float32)


# --- tritonclient over HTTP -------------------------------------------------------------------

def test_http_health_and_metadata(server):
    c = httpclient.InferenceServerClient(server.http_addr)
    assert c.is_server_live()
    assert not c.is_server_ready()  # "broken" is in the repository and unavailable
    assert c.is_model_ready("tiny")
    assert not c.is_model_ready("broken")
    meta = c.get_server_metadata()
    assert meta["name"] == "streamline"
    assert "binary_tensor_data" in meta["extensions"]
    m = c.get_model_metadata("tiny")
    assert m["name"] == "tiny"
    assert m["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
    assert m["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, 8]}]
    cfg = c.get_model_config("tiny")
    assert cfg["max_batch_size"] == 8
    # A model without config.pbtxt gets one derived from the model.
    assert c.is_model_ready("nobatch")
    assert c.get_model_metadata("nobatch")["inputs"][0]["name"] == "x"


@pytest.mark.parametrize("binary", [False, True])
def test_http_infer_matches_onnxruntime(server, binary):
    c = httpclient.InferenceServerClient(server.http_addr)
    x = tiny_input(3, seed=1)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    out = httpclient.InferRequestedOutput("y", binary_data=binary)
    r = c.infer("tiny", [inp], outputs=[out], request_id="r1")
    assert r.get_response()["model_name"] == "tiny"
    assert r.get_response()["id"] == "r1"
    assert_close(r.as_numpy("y"), reference(server.repo / "tiny" / "1" / "model.onnx", x), f"http binary={binary}")


def test_http_repository_index(server):
    c = httpclient.InferenceServerClient(server.http_addr)
    index = {m["name"]: m for m in c.get_model_repository_index()}
    assert set(index) == {"tiny", "nobatch", "slow_q", "slow_t", "slow_a", "broken"}
    assert index["tiny"]["state"] == "READY"
    assert index["broken"]["state"] == "UNAVAILABLE"
    assert "config.pbtxt" in index["broken"]["reason"]


def test_http_statistics_count_requests(server):
    c = httpclient.InferenceServerClient(server.http_addr)
    before = c.get_inference_statistics("tiny")["model_stats"][0]["inference_stats"]["success"]["count"]
    x = tiny_input(2, seed=2)
    for _ in range(5):
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        c.infer("tiny", [inp])
    after = c.get_inference_statistics("tiny")["model_stats"][0]["inference_stats"]["success"]["count"]
    assert after - before == 5


# --- tritonclient over gRPC -------------------------------------------------------------------

def test_grpc_health_metadata_and_infer(server):
    c = grpcclient.InferenceServerClient(server.grpc_addr)
    assert c.is_server_live()
    assert c.is_model_ready("tiny")
    assert not c.is_model_ready("broken")
    m = c.get_model_metadata("tiny", as_json=True)
    assert m["inputs"][0]["name"] == "x" and m["inputs"][0]["datatype"] == "FP32"
    assert [int(d) for d in m["inputs"][0]["shape"]] == [-1, 16]
    x = tiny_input(4, seed=3)
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    r = c.infer("tiny", [inp], outputs=[grpcclient.InferRequestedOutput("y")])
    assert_close(r.as_numpy("y"), reference(server.repo / "tiny" / "1" / "model.onnx", x), "grpc")


def test_grpc_errors(server):
    c = grpcclient.InferenceServerClient(server.grpc_addr)
    x = tiny_input(1)
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException) as e:
        c.infer("no_such_model", [inp])
    assert "NOT_FOUND" in str(e.value.status()) or "not found" in str(e.value).lower()
    bad = grpcclient.InferInput("x", [1, 15], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 15), np.float32))
    with pytest.raises(InferenceServerException) as e:
        c.infer("tiny", [bad])
    assert "INVALID_ARGUMENT" in str(e.value.status())


def test_concurrent_clients_all_correct(server):
    """32 requests from 8 threads over both protocols; dynamic batching merges some of them."""
    ref_model = server.repo / "tiny" / "1" / "model.onnx"

    def one(i):
        x = tiny_input(1 + i % 3, seed=100 + i)
        if i % 2:
            c = httpclient.InferenceServerClient(server.http_addr)
            inp = httpclient.InferInput("x", list(x.shape), "FP32")
        else:
            c = grpcclient.InferenceServerClient(server.grpc_addr)
            inp = grpcclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        return x, c.infer("tiny", [inp]).as_numpy("y")

    with cf.ThreadPoolExecutor(8) as ex:
        for x, y in ex.map(one, range(32)):
            assert_close(y, reference(ref_model, x), "concurrent")


# --- error statuses, raw HTTP -----------------------------------------------------------------

def infer_body(rows=1, width=16, datatype="FP32"):
    return json.dumps({"inputs": [{"name": "x", "shape": [rows, width], "datatype": datatype,
                                   "data": [0.5] * (rows * width)}]})


def test_status_400_bad_json(server):
    status, _, body = raw(server, "POST", "/v2/models/tiny/infer", body=b"{not json")
    assert status == 400
    assert "error" in json.loads(body)


def test_status_400_shape_and_dtype(server):
    status, _, body = raw(server, "POST", "/v2/models/tiny/infer", body=infer_body(width=15))
    assert status == 400, body
    assert "error" in json.loads(body)
    status, _, body = raw(server, "POST", "/v2/models/tiny/infer", body=infer_body(datatype="INT64"))
    assert status == 400, body
    # Element count that does not match the shape.
    bad = json.dumps({"inputs": [{"name": "x", "shape": [2, 16], "datatype": "FP32", "data": [1.0] * 5}]})
    status, _, body = raw(server, "POST", "/v2/models/tiny/infer", body=bad)
    assert status == 400, body


def test_status_404_unknown_model(server):
    status, _, body = raw(server, "POST", "/v2/models/nope/infer", body=infer_body())
    assert status == 404
    assert "nope" in json.loads(body)["error"]
    status, _, _ = raw(server, "GET", "/v2/models/nope")
    assert status == 404


def test_status_413_too_large(server):
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    c.putrequest("POST", "/v2/models/tiny/infer")
    c.putheader("Content-Length", str(1 << 40))
    c.putheader("Content-Type", "application/json")
    c.endheaders()
    r = c.getresponse()
    assert r.status == 413
    assert "error" in json.loads(r.read())
    c.close()


def test_status_503_model_not_ready(server):
    status, _, body = raw(server, "POST", "/v2/models/broken/infer", body=infer_body())
    assert status == 503, body
    assert "error" in json.loads(body)
    status, _, _ = raw(server, "GET", "/v2/models/broken/ready")
    assert status == 503


def burst(server, model, n, rows=8):
    body = json.dumps({"inputs": [{"name": "x", "shape": [rows, 1024], "datatype": "FP32",
                                   "data": [0.25] * (rows * 1024)}]})
    with cf.ThreadPoolExecutor(n) as ex:
        return list(ex.map(lambda _: raw(server, "POST", f"/v2/models/{model}/infer", body=body)[0], range(n)))


def test_status_429_queue_full(server):
    statuses = burst(server, "slow_q", 24)
    assert 429 in statuses, statuses
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.count(200) >= 1


def test_status_504_timed_out(server):
    statuses = burst(server, "slow_t", 24, rows=1)
    assert 504 in statuses, statuses
    assert set(statuses) <= {200, 504}, statuses


def test_status_429_refused_at_admission(server):
    """Under a real burst, requests whose timeout the queue ahead would outlast are refused on
    arrival with 429 and the estimate, fast; the rest are answered; the metric counts them."""
    x = {"inputs": [{"name": "x", "shape": [8, 1024], "datatype": "FP32", "data": [0.25] * 8192}]}
    plain = json.dumps(x).encode()

    def infer(body):
        start = time.monotonic()
        status, _, data = raw(server, "POST", "/v2/models/slow_a/infer", body=body)
        return status, data, time.monotonic() - start

    for _ in range(10):  # the server learns the run time
        assert infer(plain)[0] == 200
    status, _, data = raw(server, "GET", "/v2/models/slow_a/stats")
    assert status == 200, data
    infer_stats = json.loads(data)["model_stats"][0]["inference_stats"]
    run_us = infer_stats["compute_infer"]["ns"] / infer_stats["compute_infer"]["count"] / 1000
    # A timeout of 1.5 runs: admitted with at most one request ahead, refused behind two or more.
    tight = json.dumps({**x, "parameters": {"timeout": max(1, int(1.5 * run_us))}}).encode()
    with cf.ThreadPoolExecutor(32) as ex:
        results = list(ex.map(lambda _: infer(tight), range(64)))
    statuses = [s for s, _, _ in results]
    assert 429 in statuses, statuses
    assert set(statuses) <= {200, 429, 504}, statuses
    refused = [(body, t) for s, body, t in results if s == 429]
    for body, _ in refused:
        assert "refused at admission" in json.loads(body)["error"], body
    answered = sorted(t for s, _, t in results if s == 200)
    assert answered, statuses
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    counted = [line for line in text.splitlines()
               if line.startswith("streamline_inference_admission_refused_total") and 'model="slow_a"' in line]
    assert counted and float(counted[0].split()[-1]) >= len(refused), counted
    # Each refusal's server time is in the refusal histogram (its figures: bench/adaptive.py --refusals).
    timed = [line for line in text.splitlines()
             if line.startswith("streamline_inference_refusal_duration_ms_count") and 'model="slow_a"' in line]
    assert timed and float(timed[0].split()[-1]) >= len(refused), timed
    buckets = [float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("streamline_inference_refusal_duration_ms_bucket") and 'model="slow_a"' in line]
    assert buckets == sorted(buckets) and buckets[-1] == float(timed[0].split()[-1]), buckets


def test_status_405_and_unknown_route(server):
    status, _, _ = raw(server, "DELETE", "/v2/models/tiny")
    assert status in (404, 405)
    status, _, _ = raw(server, "GET", "/v3/whatever")
    assert status == 404


def test_keep_alive_many_requests_one_connection(server):
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    for _ in range(20):
        c.request("POST", "/v2/models/tiny/infer", body=infer_body(rows=2),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        body = json.loads(r.read())
        assert r.status == 200, body
        assert body["outputs"][0]["shape"] == [2, 8]
    c.close()
