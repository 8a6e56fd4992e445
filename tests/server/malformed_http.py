"""Generators of malformed HTTP requests for the robustness tests (test_robustness.py).

Each kind is a function rng -> Case: the bytes to send on a fresh connection, whether the request
is complete (else the client half-closes after sending, as a client that gave up would), and the
statuses the server may answer with. The model is conftest's "tiny": x [N, 16] FP32 -> y [N, 8],
max_batch_size 8. Deterministic for a given random.Random.
"""

import json
import random
import re
import socket
from dataclasses import dataclass

import numpy as np

MODEL = "tiny"
INFER = f"/v2/models/{MODEL}/infer"


@dataclass
class Case:
    kind: str
    data: bytes
    expect: frozenset  # statuses the server may answer with
    complete: bool = True  # False: the client half-closes after sending


def good_doc(rows=2, **extra):
    return {**extra, "inputs": [{"name": "x", "shape": [rows, 16], "datatype": "FP32", "data": [0.5] * (16 * rows)}]}


def request(method, target, body=b"", headers=(), version="1.1", length=True):
    if isinstance(body, str):
        body = body.encode()
    lines = [f"{method} {target} HTTP/{version}", "Host: x", *headers]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def post_json(doc, target=INFER, headers=()):
    body = doc if isinstance(doc, (str, bytes)) else json.dumps(doc)
    return request("POST", target, body, ["Content-Type: application/json", *headers])


def s(*codes):
    return frozenset(codes)


# --- the kinds -------------------------------------------------------------------------------

def request_line(rng):
    line, expect = rng.choice([
        ("GARBAGE\r\n\r\n", s(400)), ("POST\r\n\r\n", s(400)), ("\r\n\r\n\r\n", s(400)),
        ("GET /v2 HTTP/1.1 extra\r\nHost: x\r\n\r\n", s(400)), ("GET /v2 FTP/1.1\r\nHost: x\r\n\r\n", s(400)),
        ("GET /v2 HTTP/1.x\r\nHost: x\r\n\r\n", s(400)), ("G\x00T /v2 HTTP/1.1\r\nHost: x\r\n\r\n", s(400)),
        ("GET  /v2 HTTP/1.1\r\nHost: x\r\n\r\n", s(400)), ("GET /v2\tHTTP/1.1\r\nHost: x\r\n\r\n", s(400)),
        ("GET v2/models HTTP/1.1\r\nHost: x\r\n\r\n", s(400)), ("GET * HTTP/1.1\r\nHost: x\r\n\r\n", s(400)),
        ("GET http://x/v2 HTTP/1.1\r\nHost: x\r\n\r\n", s(400)), ("get /v2 HTTP/1.1\r\nHost: x\r\n\r\n", s(405)),
        ("BREW /v2 HTTP/1.1\r\nHost: x\r\n\r\n", s(405)), ("GET /v2 HTTP/9.9\r\nHost: x\r\n\r\n", s(200, 400, 505)),
        ("GET /" + "a" * rng.randint(1000, 60000) + " HTTP/1.1\r\nHost: x\r\n\r\n", s(404)),
        ("GET /" + "a" * 70000 + " HTTP/1.1\r\nHost: x\r\n\r\n", s(431)),
    ])
    return Case("request_line", line.encode("latin-1"), expect)


def header_flood(rng):
    n = rng.randint(1700, 4000)
    headers = [f"X-H{i}: {'v' * 30}" for i in range(n)]  # over 64 KiB in all
    return Case("header_flood", request("GET", "/v2/health/live", headers=headers, length=False), s(431))


def long_header(rng):
    name = rng.choice(["X-Long", "Cookie", "Inference-Header-Content-Length", "Content-Type"])
    return Case("long_header", request("POST", INFER, json.dumps(good_doc()), [f"{name}: " + "a" * rng.randint(66000, 200000)]),
                s(431))


def header_syntax(rng):
    bad, expect = rng.choice([
        ("X Y: z", s(400)), ("\x00: a", s(400)), ("NoColon", s(400)), (": empty-name", s(400)),
        ("X-A:\x01\x02", s(400)), ("Host x", s(400)), ("X-A: \x7f", s(400)), ("X(A): b", s(400)),
        # obs-fold: a line that starts with a space continues the field before it (Beast joins them,
        # as RFC 9112 5.2 allows), so the request stands.
        ("X-A: b\r\n continued", s(200)), (" folded: line", s(200)),
    ])
    return Case("header_syntax", request("POST", INFER, json.dumps(good_doc()), [bad]), expect)


def content_length(rng):
    body = json.dumps(good_doc()).encode()
    value = rng.choice(["-5", "abc", "1, 2", "0x20", "+10", "1e3", str(2**64 + 5), "99999999999999999999999", ""])
    lines = [f"POST {INFER} HTTP/1.1", "Host: x", f"Content-Length: {value}"]
    if rng.random() < 0.3:  # or two different lengths
        lines[2:] = [f"Content-Length: {len(body)}", f"Content-Length: {len(body) + 1}"]
    elif rng.random() < 0.3:  # or a length together with chunked
        lines[2:] = [f"Content-Length: {len(body)}", "Transfer-Encoding: chunked"]
    return Case("content_length", ("\r\n".join(lines) + "\r\n\r\n").encode() + body, s(400))


def huge_length(rng):
    n = rng.choice([1 << 31, 1 << 40, 10**18, 2**64 - 1, (64 << 20) + 1])
    headers = [f"Content-Length: {n}"]
    if rng.random() < 0.5:
        headers.append("Inference-Header-Content-Length: 10")
        if n == (64 << 20) + 1:
            n = (256 << 20) + 1
            headers[0] = f"Content-Length: {n}"
    return Case("huge_length", request("POST", INFER, b"{", headers, length=False), s(413))


def chunked(body, size_text=None, trailer="", ext=""):
    out = b""
    for i in range(0, len(body), 13):
        piece = body[i:i + 13]
        out += (size_text or f"{len(piece):x}").encode() + ext.encode() + b"\r\n" + piece + b"\r\n"
    return out + b"0\r\n" + trailer.encode() + b"\r\n"


def chunking(rng):
    body = json.dumps(good_doc()).encode()
    head = f"POST {INFER} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    choice = rng.randrange(6)
    if choice == 0:
        return Case("chunking", head + chunked(body, size_text="zz"), s(400))
    if choice == 1:
        return Case("chunking", head + chunked(body, size_text="f" * rng.randint(17, 40)), s(400))
    if choice == 2:  # data longer than its size line says
        return Case("chunking", head + b"3\r\nabcdef\r\n0\r\n\r\n", s(400))
    if choice == 3:  # a trailer over 64 KiB
        return Case("chunking", head + chunked(body, trailer="X-T: " + "t" * rng.randint(70000, 150000) + "\r\n"), s(431))
    if choice == 4:  # a chunk-size line over 64 KiB (an extension that never ends)
        return Case("chunking", head + b"5;" + b"e" * rng.randint(70000, 100000) + b"\r\nhello\r\n0\r\n\r\n", s(431))
    return Case("chunking", head + b"-1\r\n\r\n", s(400))


def truncated(rng):
    body = json.dumps(good_doc()).encode()
    full = post_json(body)
    if rng.random() < 0.5:  # in the body
        cut = len(full) - rng.randint(1, len(body))
    else:  # in the header
        cut = rng.randint(5, full.index(b"\r\n\r\n"))
    return Case("truncated", full[:cut], s(400), complete=False)


def bad_json(rng):
    text = json.dumps(good_doc())
    choice = rng.randrange(5)
    if choice == 0:  # flipped bytes
        b = bytearray(text.encode())
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.choice(b'{}[]:,"\\\x00\xff ')
        body, expect = bytes(b), s(400, 200)  # a flip inside a number or the padding may keep it valid
    elif choice == 1:
        body, expect = text[: rng.randrange(len(text))].encode(), s(400)
    elif choice == 2:
        body, expect = ("".join(chr(rng.randrange(32, 127)) for _ in range(rng.randint(0, 300)))).encode(), s(400)
    elif choice == 3:
        body, expect = text.encode() + rng.choice([b" x", b"{}", b",", b"\x00"]), s(400)
    else:  # not UTF-8 inside a string
        body, expect = text.replace('"x"', '"\xff\xfe"').encode("latin-1"), s(400)
    return Case("bad_json", post_json(body), expect)


def deep_json(rng):
    depth = rng.randint(1000, 200000)
    if rng.random() < 0.5:
        body = "[" * depth + "]" * rng.randint(0, depth)
        expect = s(400)
    else:  # an unknown member nested deep, the rest valid: skipped
        body = json.dumps(good_doc())[:-1] + ',"deep":' + "[" * depth + "]" * depth + "}"
        expect = s(200)
    return Case("deep_json", post_json(body), expect)


def field_types(rng):
    d = good_doc()
    target = rng.choice(["shape", "datatype", "data", "name", "inputs", "parameters", "id", "outputs"])
    value = rng.choice([None, 7, "x", [], {}, [[[]]], True, -1.5])
    if target in ("id", "name") and value == "x":  # a string is what these take
        value = 7
    if target in ("inputs", "id", "outputs", "parameters"):
        if target == "inputs" and value == []:
            value = None
        if target == "outputs" and value == []:
            value = 7
        d[target] = value
    else:  # a bare number as data is a one-element tensor: a count mismatch
        d["inputs"][0][target] = value
    return Case("field_types", post_json(d), s(400))


def datatype(rng):
    d = good_doc()
    d["inputs"][0]["datatype"] = rng.choice(["INT64", "FP16", "FP64", "BOOL", "BYTES", "XYZ", "fp32", "", "UINT8"])
    if d["inputs"][0]["datatype"] == "BOOL":
        d["inputs"][0]["data"] = [True] * 32
    return Case("datatype", post_json(d), s(400))


def shape(rng):
    d = good_doc()
    d["inputs"][0]["shape"] = rng.choice([[2, 15], [16], [2, 16, 1], [9, 16], [0, 16, 0], [-1, 16], [2, -16], []])
    n = 1
    for v in d["inputs"][0]["shape"]:
        n *= max(v, 0)
    if rng.random() < 0.5:
        d["inputs"][0]["data"] = [0.5] * n  # the count agrees: the shape itself is refused
    return Case("shape", post_json(d), s(400))


def count(rng):
    d = good_doc()
    d["inputs"][0]["data"] = rng.choice([[0.5] * 31, [0.5] * 33, [], [[0.5] * 16, [0.5] * 15],
                                         [[0.5] * 16, [[0.5]] * 16], [[0.5] * 8] * 4, [0.5] * 16 + [[0.5] * 16]])
    return Case("count", post_json(d), s(400))


def values(rng):
    d = good_doc()
    bad = rng.choice(['"a"', "null", "{}", "true", "1e400"])
    if bad == "1e400":  # beyond float64: refused by the JSON reader
        text = json.dumps(d).replace("0.5", "1e400", 1)
    else:
        text = json.dumps(d).replace("0.5", bad, 1)
    return Case("values", post_json(text), s(400))


def binary(rng):
    h = {"inputs": [{"name": "x", "shape": [2, 16], "datatype": "FP32",
                     "parameters": {"binary_data_size": rng.choice([0, 4, 127, 129, 1 << 33, -1])}}]}
    header = json.dumps(h).encode()
    raw = np.ones(32, np.float32).tobytes()
    choice = rng.randrange(5)
    if choice == 0:  # sizes disagree
        body, hl = header + raw[: rng.choice([0, 31, 64, 100])], [str(len(header))]
    elif choice == 1:  # header length past the body, or inside the JSON
        body = header + raw
        hl = [str(rng.choice([len(body) + 1, len(header) - 3, 2**64 + 1, 0]))]
    elif choice == 2:  # not a number
        body, hl = header + raw, [rng.choice(["zz", "-1", "1.5", " ", "0x10"])]
    elif choice == 3:  # given twice with different values
        body, hl = header + raw, [str(len(header)), str(len(header) + 1)]
    else:  # a binary input beside JSON data in the same input
        h["inputs"][0]["data"] = [0.5] * 32
        h["inputs"][0]["parameters"]["binary_data_size"] = 128
        header = json.dumps(h).encode()
        body, hl = header + raw, [str(len(header))]
    headers = [f"Inference-Header-Content-Length: {v}" for v in hl]
    return Case("binary", request("POST", INFER, body, headers), s(400))


def huge_dims(rng):
    d = good_doc()
    choice = rng.randrange(3)
    if choice == 0:
        d["inputs"][0]["shape"] = [1 << 40, 16]
    elif choice == 1:
        d["inputs"][0]["shape"] = [2] * rng.randint(33, 100000)
    else:
        d["inputs"][0]["shape"] = [2**63 - 1, 2**63 - 1]
    return Case("huge_dims", post_json(d), s(400))


def unknown(rng):
    d = good_doc()
    choice = rng.randrange(5)
    if choice == 0:
        return Case("unknown", post_json(d, "/v2/models/nosuch%d/infer" % rng.randrange(1000)), s(404))
    if choice == 1:
        return Case("unknown", post_json(d, f"/v2/models/{MODEL}/versions/{rng.randint(2, 99)}/infer"), s(404))
    if choice == 2:
        return Case("unknown", post_json(d, "/v2/models/broken/infer"), s(400, 404, 503))
    if choice == 3:
        d["inputs"][0]["name"] = rng.choice(["y", "X", "x ", "\u00e9"])
        return Case("unknown", post_json(d), s(400))
    d["outputs"] = [{"name": rng.choice(["x", "nope", ""])}]
    return Case("unknown", post_json(d), s(400))


def percent(rng):
    method, target, expect = rng.choice([
        ("POST", "/v2/models/%zz/infer", s(400)), ("POST", "/v2/models/%2/infer", s(400)),
        ("POST", "/v2/models/%/infer", s(400)), ("POST", "/v2/models/%00/infer", s(404)),
        ("POST", "/v2/models/ti%6Ey/infer", s(200)), ("GET", "/v2/%6Dodels/tiny/ready", s(200)),
        ("GET", "/v2/models/tiny%2Fready", s(404)), ("POST", "/v2/models/..%2F..%2Fetc/infer", s(404)),
        ("POST", "/v2/models/%E9%FF/infer", s(404)), ("POST", "/v2//models/tiny/infer", s(404)),
        ("GET", "/v2/models/%74iny/versions/%31", s(200)),
    ])
    body = json.dumps(good_doc()) if method == "POST" else b""
    return Case("percent", request(method, target, body, ["Content-Type: application/json"]), expect)


def method_route(rng):
    method, target, expect = rng.choice([
        ("GET", INFER, s(405)), ("PUT", INFER, s(405)), ("DELETE", "/v2/health/live", s(405)),
        ("POST", "/v2/health/ready", s(405)), ("GET", "/v2/repository/index", s(405)), ("GET", "/v3", s(404)),
        ("GET", "/v2/models/tiny/nothing", s(404)), ("GET", "/v2/health/dead", s(404)), ("OPTIONS", "/v2", s(405)),
        ("GET", "/v2/models/tiny/versions/1/infer/extra", s(404)), ("POST", "/metrics", s(405)),
    ])
    return Case("method_route", request(method, target, json.dumps(good_doc()) if method != "GET" else b""), expect)


def parameters(rng):
    key, value = rng.choice([("priority", -1), ("priority", "high"), ("priority", 1e30), ("priority", 2**64),
                             ("timeout", -1), ("timeout", 2**64), ("timeout", "soon"), ("binary_data_output", "yes"),
                             ("priority", [1]), ("timeout", {"us": 1})])
    return Case("parameters", post_json(good_doc(parameters={key: value})), s(400))


def encoding(rng):
    return Case("encoding", post_json(good_doc(), headers=[f"Content-Encoding: {rng.choice(['gzip', 'br', 'x' * 400])}"]),
                s(400))


def expect_continue(rng):
    value = rng.choice(["100-continue", "200-ok", "x" * 100])
    body = json.dumps(good_doc()).encode()
    return Case("expect", request("POST", INFER, body, [f"Expect: {value}"]), s(200))


KINDS = [request_line, header_flood, long_header, header_syntax, content_length, huge_length, chunking, truncated,
         bad_json, deep_json, field_types, datatype, shape, count, values, binary, huge_dims, unknown, percent,
         method_route, parameters, encoding, expect_continue]


def cases(seed: int, n: int):
    """n cases, every kind at least n // len(KINDS) times, in a shuffled order."""
    rng = random.Random(seed)
    out = [KINDS[i % len(KINDS)](rng) for i in range(n)]
    rng.shuffle(out)
    return out


def binary_good(x: np.ndarray, rid: str) -> bytes:
    """A valid binary-extension request for tiny with input x and id rid."""
    raw = x.astype(np.float32).tobytes()
    header = json.dumps({"id": rid, "inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                               "parameters": {"binary_data_size": len(raw)}}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    return request("POST", INFER, header + raw, [f"Inference-Header-Content-Length: {len(header)}"])


def parse_binary_response(body: bytes, header_length: int):
    """(the JSON header, y as float32 array) of a binary response."""
    header = json.loads(body[:header_length])
    out = header["outputs"][0]
    y = np.frombuffer(body[header_length:], np.float32).reshape(out["shape"])
    return header, y



def read_response(f):
    """(status, headers, body) of one response from a buffered socket file (a 100 Continue before
    it skipped), or None when the connection ends first."""
    while True:
        line = f.readline()
        m = re.match(rb"HTTP/\d\.\d (\d{3})", line)
        if not m:
            return None
        headers = {}
        while (h := f.readline()) not in (b"\r\n", b""):
            k, _, v = h.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        if not 100 <= int(m.group(1)) < 200:
            break
    n = int(headers.get("content-length", "0"))
    body = f.read(n)
    if len(body) < n:
        return None
    return int(m.group(1)), headers, body


def exchange(port, case):
    """Sends a case on a fresh connection (half-closing after an incomplete one) and reads the
    answer: (status, headers, body), or None when the connection ends without one."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        try:
            s.sendall(case.data)
            if not case.complete:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered early and stopped reading: its answer is still there
        with s.makefile("rb") as f:
            try:
                return read_response(f)
            except OSError:
                return None


def is_infer(case):
    return b"/infer " in case.data.split(b"\r\n", 1)[0]
