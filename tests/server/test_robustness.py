"""The server under malformed traffic: 1,150 malformed HTTP requests of 23 kinds and 450 malformed
gRPC requests of 15 kinds (generated in malformed_http.py and malformed_grpc.py, fixed seeds),
sent from several threads while well-formed clients keep running beside them. Asserted:

- every malformed request is answered, with a status its kind allows (a truncated one after the
  client half-closes), with a short JSON error; the server never dies;
- every well-formed request beside them gets its own answer: its id and the output for its own
  input (ONNX Runtime's, on the same model file), over HTTP (JSON and binary) and gRPC;
- pipelined requests on one connection are answered in order, each with its own id, a malformed
  document among them failing alone;
- the server's success count is exactly the 200s the clients saw.

The counts per kind are printed (pytest -s shows them).
"""

import collections
import concurrent.futures as cf
import json
import socket
import threading

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

import malformed_grpc
import malformed_http
from conftest import Server
from malformed_http import exchange, read_response

MAX_REQUEST_MB = 1  # small, so that an oversize message is cheap to send
MAX_ERROR_BODY = 4096 + 64  # the capped message and its JSON


@pytest.fixture(scope="module")
def srv(repository):
    s = Server(repository, ["--max-request-mb", str(MAX_REQUEST_MB)])
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tiny_ref(repository):
    import onnxruntime as ort
    sess = ort.InferenceSession(str(repository / "tiny" / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    lock = threading.Lock()

    def ref(x):
        with lock:
            return sess.run(None, {"x": x})[0]
    return ref


def check_good(x, rid, body_id, y, ref, tag):
    assert body_id == rid, f"{tag}: request {rid} got the answer of {body_id}"
    np.testing.assert_allclose(y, ref(x), rtol=1e-5, atol=1e-6, err_msg=f"{tag}: {rid}")


def http_good_client(port, ref, stop, seed, counts, lock):
    """Keep-alive JSON and binary requests, each with its own id and input, until `stop`."""
    rng = np.random.default_rng(seed)
    c = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
    i = 0
    while not stop.is_set():
        rows = int(rng.integers(1, 9))
        x = rng.standard_normal((rows, 16)).astype(np.float32)
        rid = f"h{seed}-{i}"
        binary = i % 2 == 1
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=binary)
        r = c.infer("tiny", [inp], request_id=rid, outputs=[httpclient.InferRequestedOutput("y", binary_data=binary)])
        check_good(x, rid, r.get_response()["id"], r.as_numpy("y"), ref, "HTTP")
        with lock:
            counts["http_ok"] += 1
        i += 1


def grpc_good_client(addr, ref, stop, seed, counts, lock):
    rng = np.random.default_rng(seed)
    c = grpcclient.InferenceServerClient(addr)
    i = 0
    while not stop.is_set():
        rows = int(rng.integers(1, 9))
        x = rng.standard_normal((rows, 16)).astype(np.float32)
        rid = f"g{seed}-{i}"
        inp = grpcclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        r = c.infer("tiny", [inp], request_id=rid)
        check_good(x, rid, r.get_response().id, r.as_numpy("y"), ref, "gRPC")
        with lock:
            counts["grpc_ok"] += 1
        i += 1
    c.close()


def success_count(server):
    c = httpclient.InferenceServerClient(server.http_addr)
    return int(c.get_inference_statistics("tiny")["model_stats"][0]["inference_stats"]["success"]["count"])


def run_beside_good_clients(server, ref, work):
    """Runs work() while two HTTP and one gRPC well-formed client run; returns their counts."""
    stop = threading.Event()
    lock = threading.Lock()
    counts = collections.Counter()
    with cf.ThreadPoolExecutor(3) as ex:
        good = [ex.submit(http_good_client, server.http_port, ref, stop, seed, counts, lock) for seed in (1, 2)]
        good.append(ex.submit(grpc_good_client, server.grpc_addr, ref, stop, 3, counts, lock))
        try:
            result = work()
        finally:
            stop.set()
        for g in good:
            g.result()  # re-raises a wrong answer
    return result, counts


def print_table(title, per_kind):
    print(f"\n{title}")
    for kind in sorted(per_kind):
        answers = ", ".join(f"{k}: {v}" for k, v in sorted(per_kind[kind].items(), key=str))
        print(f"  {kind:18s} {sum(per_kind[kind].values()):4d}  {answers}")


def test_malformed_http_requests_are_each_answered_alone(srv, tiny_ref):
    cases = malformed_http.cases(seed=20261129, n=1150)
    kinds = {c.kind for c in cases}
    assert len(cases) >= 1000 and len(kinds) >= 15
    before = success_count(srv)

    def work():
        with cf.ThreadPoolExecutor(4) as ex:
            return list(ex.map(lambda c: (c, exchange(srv.http_port, c)), cases))

    results, good = run_beside_good_clients(srv, tiny_ref, work)
    per_kind = collections.defaultdict(collections.Counter)
    wrong, infer_200 = [], 0
    for case, answer in results:
        status = answer[0] if answer else None
        per_kind[case.kind][status] += 1
        if status not in case.expect:
            wrong.append(f"{case.kind}: got {status}, expected {sorted(case.expect)}: {case.data[:160]!r}")
            continue
        _, headers, body = answer
        if status >= 400 and body:
            err = json.loads(body)["error"]
            assert isinstance(err, str) and len(body) <= MAX_ERROR_BODY, (case.kind, len(body))
        infer_200 += status == 200 and malformed_http.is_infer(case)
    print_table(f"HTTP: {len(cases)} malformed requests of {len(kinds)} kinds; well-formed beside them: {dict(good)}",
                per_kind)
    assert srv.proc.poll() is None, srv.output()[-3000:]
    assert not wrong, f"{len(wrong)} answers outside their kind's statuses:\n" + "\n".join(wrong[:30])
    assert good["http_ok"] > 0 and good["grpc_ok"] > 0, good
    assert success_count(srv) - before == infer_200 + good["http_ok"] + good["grpc_ok"]


def test_malformed_grpc_requests_are_each_answered_alone(srv, tiny_ref):
    cases = malformed_grpc.cases(seed=20261130, n=450) + [malformed_grpc.oversize(MAX_REQUEST_MB << 20)]
    kinds = {c.kind for c in cases}
    assert len(kinds) >= 15
    before = success_count(srv)
    channel = grpc.insecure_channel(srv.grpc_addr, options=[("grpc.max_send_message_length", -1)])

    def one(case):
        try:
            malformed_grpc.raw_stub(channel, case.method)(case.data, timeout=30)
            return case, grpc.StatusCode.OK, ""
        except grpc.RpcError as e:
            return case, e.code(), e.details() or ""

    def work():
        with cf.ThreadPoolExecutor(4) as ex:
            return list(ex.map(one, cases))

    results, good = run_beside_good_clients(srv, tiny_ref, work)
    channel.close()
    per_kind = collections.defaultdict(collections.Counter)
    wrong, ok = [], 0
    for case, code, details in results:
        per_kind[case.kind][code.name] += 1
        if code not in case.expect:
            wrong.append(f"{case.kind}/{case.method}: got {code.name} ({details[:200]}), "
                         f"expected {sorted(c.name for c in case.expect)}")
        elif code != grpc.StatusCode.OK:
            assert details, f"{case.kind}: {code.name} without a message"
            assert len(details) <= 4096 + 32, (case.kind, len(details))
        ok += code == grpc.StatusCode.OK and case.method == "ModelInfer"
    print_table(f"gRPC: {len(cases)} malformed requests of {len(kinds)} kinds; well-formed beside them: {dict(good)}",
                per_kind)
    assert srv.proc.poll() is None, srv.output()[-3000:]
    assert not wrong, f"{len(wrong)} answers outside their kind's codes:\n" + "\n".join(wrong[:30])
    assert success_count(srv) - before == ok + good["http_ok"] + good["grpc_ok"]


def test_pipelined_requests_are_answered_in_order_with_their_own_ids(srv, tiny_ref):
    """Rounds of 12 requests sent at once on one connection (JSON and binary, a malformed document
    and an unknown model among them): answered in order, each with its own id and output."""
    rng = np.random.default_rng(11)
    with socket.create_connection(("127.0.0.1", srv.http_port), timeout=30) as s, s.makefile("rb") as f:
        for rnd in range(20):
            sent = []
            data = b""
            for i in range(12):
                rid = f"p{rnd}-{i}"
                x = rng.standard_normal((int(rng.integers(1, 9)), 16)).astype(np.float32)
                if i == 5:
                    data += malformed_http.post_json('{"id":"%s","inputs":[{"name":"x",' % rid)
                    sent.append((rid, None, 400))
                elif i == 9:
                    data += malformed_http.post_json(malformed_http.good_doc(id=rid), "/v2/models/nosuch/infer")
                    sent.append((rid, None, 404))
                elif i % 2:
                    data += malformed_http.binary_good(x, rid)
                    sent.append((rid, x, 200))
                else:
                    doc = {"id": rid, "inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                                  "data": x.ravel().tolist()}]}
                    data += malformed_http.post_json(doc)
                    sent.append((rid, x, 200))
            s.sendall(data)
            for rid, x, expect in sent:
                answer = read_response(f)
                assert answer is not None, f"round {rnd}: no answer for {rid}"
                status, headers, body = answer
                assert status == expect, (rid, status, body[:300])
                if status != 200:
                    continue
                if "inference-header-content-length" in headers:
                    header, y = malformed_http.parse_binary_response(body, int(headers["inference-header-content-length"]))
                else:
                    header = json.loads(body)
                    out = header["outputs"][0]
                    y = np.array(out["data"], np.float32).reshape(out["shape"])
                check_good(x, rid, header["id"], y, tiny_ref, f"pipelined round {rnd}")
