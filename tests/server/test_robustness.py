"""The server under abuse: 1,000 malformed requests leave it serving correct answers, and SIGTERM
under load loses no accepted request.
"""

import http.client
import json
import random
import re
import socket
import threading
import time

import numpy as np

from conftest import Server, reference

GOOD_JSON = {"id": "ok", "inputs": [{"name": "x", "shape": [2, 16], "datatype": "FP32",
                                     "data": [0.5] * 32}]}


def good_request(body: bytes, extra_headers: str = "") -> bytes:
    return (f"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra_headers}\r\n").encode() + body


def mutate_json(rng: random.Random, text: str) -> str:
    """One random structural or byte-level mutation of a JSON document."""
    choice = rng.randrange(8)
    if choice == 0:  # flip bytes
        b = bytearray(text.encode())
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return b.decode("latin-1")
    if choice == 1:  # truncate
        return text[: rng.randrange(len(text))]
    if choice == 2:  # wrong types in fields
        d = json.loads(text)
        d["inputs"][0][rng.choice(["shape", "datatype", "data", "name"])] = rng.choice(
            [None, 7, "x", [], {}, [-1, -5], [1 << 62, 1 << 62], [[[]]], True])
        return json.dumps(d)
    if choice == 3:  # deep nesting
        depth = rng.randint(100, 100000)
        return "[" * depth + "]" * rng.randint(0, depth)
    if choice == 4:  # huge or negative shapes and binary sizes
        d = json.loads(text)
        d["inputs"][0]["shape"] = [rng.choice([-1, 0, 1 << 40, 2, 3]) for _ in range(rng.randint(0, 9))]
        d["inputs"][0]["parameters"] = {"binary_data_size": rng.choice([-1, 0, 1 << 50, 7])}
        return json.dumps(d)
    if choice == 5:  # garbage inputs list
        return json.dumps({"inputs": rng.choice([None, 1, "x", [1, 2], [{}], [{"name": "x"}]])})
    if choice == 6:  # strings where numbers belong, NaN, nested data
        d = json.loads(text)
        d["inputs"][0]["data"] = rng.choice([["a"] * 32, [[0.5] * 16, [0.5] * 15], [1e400] * 32, "NaN"])
        return json.dumps(d)
    return "".join(chr(rng.randrange(32, 127)) for _ in range(rng.randint(0, 300)))


def malformed(rng: random.Random) -> tuple[bytes, bool]:
    """A malformed request and whether the client should wait for an answer (False: the request
    is incomplete on purpose and the connection is closed right after sending)."""
    good = json.dumps(GOOD_JSON)
    kind = rng.randrange(6)
    if kind == 0:  # fuzzed JSON body, correct framing
        return good_request(mutate_json(rng, good).encode("latin-1", "replace")), True
    if kind == 1:  # wrong or garbage headers
        hdr = rng.choice([
            "Content-Length: -5\r\n", "Content-Length: abc\r\n", "Transfer-Encoding: chunked\r\n",
            "Inference-Header-Content-Length: 99999999\r\n", "Inference-Header-Content-Length: -1\r\n",
            "Inference-Header-Content-Length: zz\r\n", "X: " + "y" * 20000 + "\r\n", "\x00\x01: \x02\r\n"])
        return good_request(good.encode(), hdr), True
    if kind == 2:  # truncated body: declares more than it sends
        body = good.encode()
        req = good_request(body)
        return req[: len(req) - rng.randint(1, len(body))], False
    if kind == 3:  # huge declared lengths
        n = rng.choice([1 << 31, 1 << 40, 10 ** 18, 2 ** 64 - 1, 2 ** 64 + 5])
        return (f"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n").encode() + b"{", False
    if kind == 4:  # binary extension with inconsistent sizes
        header = dict(GOOD_JSON)
        header = {"inputs": [{"name": "x", "shape": [2, 16], "datatype": "FP32",
                              "parameters": {"binary_data_size": rng.choice([0, 4, 127, 128, 129, 1 << 33])}}]}
        h = json.dumps(header).encode()
        raw = np.ones(rng.choice([0, 31, 32, 40]), np.float32).tobytes()
        hl = rng.choice([len(h), len(h) + 3, len(h) - 3, 0, len(h) + len(raw) + 10])
        return good_request(h + raw, f"Inference-Header-Content-Length: {hl}\r\n"), True
    # garbage request line / method / path
    line = rng.choice(["GARBAGE\r\n\r\n", "POST\r\n\r\n", "GET /v2/models/%zz%00 HTTP/1.1\r\nHost: x\r\n\r\n",
                       "POST /v2/models/tiny/infer HTTP/9.9\r\nHost: x\r\n\r\n",
                       "GET /" + "a" * 100000 + " HTTP/1.1\r\n\r\n"])
    return line.encode(), True


def send_raw(port: int, data: bytes, wait: bool) -> int | None:
    """Sends DATA on a fresh connection; returns the HTTP status read back, or None."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(data)
        except OSError:
            return None  # the server closed early (e.g. header too large): fine
        if not wait:
            return None
        s.settimeout(5)
        buf = b""
        try:
            while b"\r\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
        except OSError:
            return None
        m = re.match(rb"HTTP/1\.[01] (\d{3})", buf)
        return int(m.group(1)) if m else None


def infer_ok(server) -> np.ndarray:
    c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    c.request("POST", "/v2/models/tiny/infer", body=json.dumps(GOOD_JSON))
    r = c.getresponse()
    body = json.loads(r.read())
    assert r.status == 200, body
    return np.array(body["outputs"][0]["data"], np.float32).reshape(body["outputs"][0]["shape"])


def test_malformed_requests_leave_server_serving(server):
    rng = random.Random(20261129)
    x = np.full((2, 16), 0.5, np.float32)
    expected = reference(server.repo / "tiny" / "1" / "model.onnx", x)
    statuses = {}
    for i in range(1000):
        data, wait = malformed(rng)
        st = send_raw(server.http_port, data, wait)
        statuses[st] = statuses.get(st, 0) + 1
        assert server.proc.poll() is None, f"server died on malformed request {i}: {data[:200]!r}\n{server.output()[-3000:]}"
        assert st is None or st < 500 or st == 503, f"request {i} got {st}: {data[:300]!r}"
        if i % 100 == 99:
            np.testing.assert_allclose(infer_ok(server), expected, rtol=1e-5, atol=1e-6)
    print("statuses:", statuses)
    np.testing.assert_allclose(infer_ok(server), expected, rtol=1e-5, atol=1e-6)
    assert statuses.get(400, 0) > 100, statuses


def test_sigterm_under_load_loses_nothing(repository):
    """Clients hammer the server; SIGTERM arrives mid-load. Every request the server answered OK
    reached its client (the server prints its totals at exit), every 200 carries the right answer,
    and the server exits 0."""
    srv = Server(repository)
    x = np.full((2, 16), 0.5, np.float32)
    expected = reference(repository / "tiny" / "1" / "model.onnx", x)
    body = json.dumps(GOOD_JSON)
    lock = threading.Lock()
    counts = {"ok": 0, "refused": 0, "wrong": 0, "conn": 0}
    stop = threading.Event()

    def client():
        while not stop.is_set():
            try:
                c = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=30)
                while not stop.is_set():
                    c.request("POST", "/v2/models/tiny/infer", body=body)
                    r = c.getresponse()
                    data = r.read()
                    with lock:
                        if r.status == 200:
                            out = json.loads(data)["outputs"][0]
                            y = np.array(out["data"], np.float32).reshape(out["shape"])
                            ok = np.allclose(y, expected, rtol=1e-5, atol=1e-6)
                            counts["ok" if ok else "wrong"] += 1
                        else:
                            counts["refused"] += 1
            except (OSError, http.client.HTTPException):
                with lock:
                    counts["conn"] += 1
                time.sleep(0.01)

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    assert counts["ok"] > 0, srv.output()
    rc = srv.terminate(timeout=60)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    out = srv.output()
    assert rc == 0, f"exit code {rc}\n{out[-3000:]}"
    assert counts["wrong"] == 0, counts
    m = re.search(r"tiny: (\d+) succeeded", out)
    assert m, f"the server did not print its totals at exit:\n{out[-3000:]}"
    assert int(m.group(1)) == counts["ok"], f"server answered {m.group(1)} OK, clients got {counts}"
