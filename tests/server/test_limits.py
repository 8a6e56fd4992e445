"""`streamline serve` at its limits: memory for a large JSON body stays a small multiple of the
body, the JSON and connection limits answer with their status, and SIGTERM under load loses no
request: pipelining HTTP clients get an answer to every request they sent (never a reset), gRPC
clients get OK or UNAVAILABLE (never CANCELLED).
"""

import collections
import http.client
import json
import re
import socket
import threading
import time

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper, numpy_helper
from tritonclient.utils import InferenceServerException

from conftest import Server, write_model

WIDTH = 1024
GOOD_JSON = {"inputs": [{"name": "x", "shape": [2, 16], "datatype": "FP32", "data": [0.5] * 32}]}


def sum_model() -> onnx.ModelProto:
    """x [N, 1024] float -> y [N] = sum of each row: a large input, a small output."""
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0, name="sum")], "rowsum",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])],
        initializer=[numpy_helper.from_array(np.array([1], np.int64), "axes")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def sum_repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("sum_models")
    write_model(root, "rowsum", sum_model(), "max_batch_size: 0\n")
    return root


def json_body(rows: int, seed: int = 0) -> tuple[bytes, np.ndarray]:
    """A JSON request of `rows` x 1024 floats written with 7 decimals, and the values it holds."""
    x = np.random.default_rng(seed).random((rows, WIDTH), np.float32)
    text = np.char.mod("%.7f", x.ravel())
    data = ",".join(text.tolist())
    body = ('{"inputs":[{"name":"x","datatype":"FP32","shape":[%d,%d],"data":[%s]}]}' % (rows, WIDTH, data)).encode()
    return body, text.astype(np.float32).reshape(rows, WIDTH)


def proc_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def post(port: int, path: str, body: bytes, headers=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def test_large_json_body_memory_is_a_small_multiple_of_the_body(sum_repo):
    srv = Server(sum_repo)  # the body is within the default JSON limit (64 MiB)
    try:
        small, _ = json_body(2)
        assert post(srv.http_port, "/v2/models/rowsum/infer", small)[0] == 200
        body, x = json_body(5000)  # about 50 MB of JSON, a 20 MB tensor
        before = proc_kb(srv.proc.pid, "VmRSS")
        status, data = post(srv.http_port, "/v2/models/rowsum/infer", body)
        peak = proc_kb(srv.proc.pid, "VmHWM")
        assert status == 200, data[:300]
        out = json.loads(data)["outputs"][0]
        np.testing.assert_allclose(np.array(out["data"], np.float32), x.astype(np.float64).sum(1), rtol=1e-4)
        growth = (peak - before) * 1024
        tensor = x.nbytes
        print(f"body {len(body) / 1e6:.1f} MB, tensor {tensor / 1e6:.1f} MB, "
              f"peak RSS growth {growth / 1e6:.1f} MB")
        # The body, its tensor, and a copy of the tensor into the batch: never a document per value.
        assert growth < len(body) + 3 * tensor, f"peak RSS grew by {growth / 1e6:.1f} MB"
    finally:
        srv.stop()


def test_json_limit_and_connection_cap_flags(sum_repo):
    srv = Server(sum_repo, ["--max-json-body-mb", "1", "--max-connections", "3"])
    try:
        body, x = json_body(200)  # about 2 MB
        status, data = post(srv.http_port, "/v2/models/rowsum/infer", body)
        assert status == 413, data[:300]
        assert b"--max-json-body-mb" in data
        # The same tensor as binary data is within the request limit.
        header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [200, WIDTH],
                                         "parameters": {"binary_data_size": x.nbytes}}]}).encode()
        status, data = post(srv.http_port, "/v2/models/rowsum/infer", header + x.tobytes(),
                            {"Inference-Header-Content-Length": str(len(header))})
        assert status == 200, data[:300]

        # The two connections above are closed on this side; the server may count them a moment
        # longer, so a connection it refuses while it does is opened again.
        def hold():
            deadline = time.monotonic() + 10
            while True:
                c = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=30)
                c.request("GET", "/v2/health/live")
                r = c.getresponse()
                data = r.read()
                if r.status == 200:
                    assert data == b""
                    return c
                c.close()
                assert r.status == 503 and time.monotonic() < deadline, (r.status, data[:200])
                time.sleep(0.05)

        held = [hold() for _ in range(3)]
        with socket.create_connection(("127.0.0.1", srv.http_port), timeout=10) as s:
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 503"), reply[:200]
        assert b"too many connections" in reply
        for c in held:
            c.close()
    finally:
        srv.stop()


def read_response(f):
    """One HTTP response from a buffered socket file: (status, headers, body). EOFError when the
    connection ends before a whole response."""
    line = f.readline()
    if not line:
        raise EOFError
    m = re.match(rb"HTTP/1\.1 (\d{3})", line)
    assert m, line
    headers = {}
    while (h := f.readline()) not in (b"\r\n", b""):
        k, _, v = h.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    body = f.read(int(headers.get("content-length", "0")))
    if len(body) < int(headers.get("content-length", "0")):
        raise EOFError
    return int(m.group(1)), headers, body


def test_sigterm_answers_every_pipelined_request(repository):
    """16 keep-alive clients pipeline 4 requests at a time; SIGTERM arrives mid-load. Every request
    sent gets a response (a 503 during the drain, the last on a connection with Connection: close);
    no connection is reset; clients reconnect until the server is gone."""
    srv = Server(repository)
    body = json.dumps(GOOD_JSON).encode()
    request = (f"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    lock = threading.Lock()
    counts = collections.Counter()

    def client():
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=30)
            except ConnectionRefusedError:
                return  # the server is gone
            sent = answered = 0
            f = s.makefile("rb")
            try:
                while True:
                    s.sendall(request * 4)
                    sent += 4
                    closing = False
                    for _ in range(4):
                        status, headers, _ = read_response(f)
                        answered += 1
                        with lock:
                            counts[status] += 1
                        closing = closing or headers.get("connection", "").lower() == "close"
                    if closing:
                        break
            except (ConnectionResetError, BrokenPipeError):
                with lock:
                    counts["reset"] += 1
            except EOFError:
                pass
            finally:
                with lock:
                    counts["sent"] += sent
                    counts["unanswered"] += sent - answered
                f.close()
                s.close()

    threads = [threading.Thread(target=client) for _ in range(16)]
    for t in threads:
        t.start()
    deadline = time.time() + 60
    while counts[200] < 400 and time.time() < deadline:
        time.sleep(0.01)
    assert counts[200] >= 400, f"{counts}\n{srv.output()[-2000:]}"
    rc = srv.terminate(timeout=60)
    for t in threads:
        t.join(timeout=120)
    out = srv.output()
    print("clients:", dict(counts))
    assert rc == 0, f"exit code {rc}\n{out[-3000:]}"
    assert counts["reset"] == 0, dict(counts)
    assert counts["unanswered"] == 0, dict(counts)
    assert counts[503] > 0, dict(counts)
    assert set(counts) <= {200, 503, "sent", "unanswered", "reset"}, dict(counts)
    m = re.search(r"tiny: (\d+) succeeded", out)
    assert m, out[-3000:]
    assert int(m.group(1)) == counts[200], f"server answered {m.group(1)} OK, clients got {dict(counts)}"


def test_sigterm_grpc_calls_are_unavailable_never_cancelled(repository):
    srv = Server(repository)
    x = np.full((1, 16), 0.5, np.float32)
    lock = threading.Lock()
    codes = collections.Counter()

    def client():
        c = grpcclient.InferenceServerClient(srv.grpc_addr)
        deadline = time.time() + 120
        while time.time() < deadline:
            inp = grpcclient.InferInput("x", [1, 16], "FP32")
            inp.set_data_from_numpy(x)
            try:
                c.infer("tiny", [inp])
                code = "OK"
            except InferenceServerException as e:
                code = str(e.status())
            with lock:
                codes[code] += 1
            if code != "OK" and srv.proc.poll() is not None:
                return  # the server is gone
        c.close()

    threads = [threading.Thread(target=client) for _ in range(16)]
    for t in threads:
        t.start()
    deadline = time.time() + 60
    while codes["OK"] < 400 and time.time() < deadline:
        time.sleep(0.01)
    assert codes["OK"] >= 400, f"{codes}\n{srv.output()[-2000:]}"
    rc = srv.terminate(timeout=60)
    for t in threads:
        t.join(timeout=120)
    print("gRPC calls:", dict(codes))
    assert rc == 0, srv.output()[-3000:]
    assert codes["StatusCode.CANCELLED"] == 0, dict(codes)
    assert set(codes) <= {"OK", "StatusCode.UNAVAILABLE"}, dict(codes)
