"""Greedy generation served as a decoupled model: one ModelStreamInfer response per generated token,
driven by Triton's own gRPC client (start_stream / async_stream_infer).

Models (written here with onnx.helper; tokens checked against ONNX Runtime's greedy decode of the
same file):
    gen       input_ids int64 [B, S] -> logits [B, S, 16] = Gather(E, input_ids), E[i] = 10 * one_hot((i + 1) % 16):
              the next token is (last + 1) % 16. max_new_tokens 5 by default.
    gen_mask  the same with input_ids int32 and the inputs attention_mask and position_ids:
              logits = Gather(E, ids) * mask + Gather(P, position_ids), P[p] = 0.5 * one_hot(p % 16), so a
              zero mask would make the next token the position instead.
    gen_long  gen with max_new_tokens 4000 by default: long generations.
    bad_*     generators that do not fit (float input_ids, an input the server cannot fill, no
              decoupled policy, logits of rank 2): unavailable with a reason, the others load.
"""

import queue
import time

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper, numpy_helper
from tritonclient.utils import InferenceServerException

from conftest import Server, write_model

VOCAB = 16


def gen_config(name, max_new=5, decoupled=True, extra=""):
    policy = "model_transaction_policy { decoupled: true }\n" if decoupled else ""
    return (f'name: "{name}"\nmax_batch_size: 0\n{policy}'
            'instance_group [ { count: 1 kind: KIND_CPU } ]\n'
            'parameters { key: "threads" value: { string_value: "1" } }\n'
            'parameters { key: "generate" value: { string_value: "greedy" } }\n'
            f'parameters {{ key: "max_new_tokens" value: {{ string_value: "{max_new}" }} }}\n{extra}')


def successor_table(vocab):
    return (10 * np.eye(vocab, dtype=np.float32)[(np.arange(vocab) + 1) % vocab])


def finish(nodes, inputs, outputs, inits, name):
    m = helper.make_model(helper.make_graph(nodes, name, inputs, outputs, initializer=inits),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def gen_model(vocab=VOCAB):
    return finish(
        [helper.make_node("Gather", ["E", "input_ids"], ["logits"], axis=0)],
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "S"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", "S", vocab])],
        [numpy_helper.from_array(successor_table(vocab), "E")], "gen")


def gen_mask_model():
    p = 0.5 * np.eye(VOCAB, dtype=np.float32)[np.arange(64) % VOCAB]
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["g"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["mf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mf", "axes"], ["m3"]),
        helper.make_node("Mul", ["g", "m3"], ["gm"]),
        helper.make_node("Gather", ["P", "position_ids"], ["pe"], axis=0),
        helper.make_node("Add", ["gm", "pe"], ["logits"]),
    ]
    return finish(
        nodes,
        [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["B", "S"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["B", "S"]),
         helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["B", "S"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", "S", VOCAB])],
        [numpy_helper.from_array(successor_table(VOCAB), "E"), numpy_helper.from_array(p, "P"),
         numpy_helper.from_array(np.array([2], np.int64), "axes")], "gen_mask")


def float_ids_model():
    return finish([helper.make_node("Identity", ["input_ids"], ["logits"])],
                  [helper.make_tensor_value_info("input_ids", TensorProto.FLOAT, ["B", "S", VOCAB])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", "S", VOCAB])], [], "bad")


def extra_input_model():
    return finish(
        [helper.make_node("Gather", ["E", "input_ids"], ["g"], axis=0),
         helper.make_node("Add", ["g", "past"], ["logits"])],
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "S"]),
         helper.make_tensor_value_info("past", TensorProto.FLOAT, ["B", "S", VOCAB])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", "S", VOCAB])],
        [numpy_helper.from_array(successor_table(VOCAB), "E")], "bad")


def rank2_logits_model():
    return finish(
        [helper.make_node("Gather", ["E", "input_ids"], ["logits"], axis=0)],
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["S"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["S", VOCAB])],
        [numpy_helper.from_array(successor_table(VOCAB), "E")], "bad")


BAD = {
    "bad_float_ids": (float_ids_model, True, "input_ids"),
    "bad_extra_input": (extra_input_model, True, "past"),
    "bad_not_decoupled": (gen_model, False, "decoupled"),
    "bad_rank2_logits": (rank2_logits_model, True, "rank"),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen_models")
    write_model(root, "gen", gen_model(), gen_config("gen"))
    write_model(root, "gen_mask", gen_mask_model(), gen_config("gen_mask", max_new=6))
    write_model(root, "gen_long", gen_model(), gen_config("gen_long", max_new=4000))
    for name, (build, decoupled, _) in BAD.items():
        write_model(root, name, build(), gen_config(name, decoupled=decoupled))
    return root


@pytest.fixture(scope="module")
def srv(repo):
    s = Server(repo)
    yield s
    s.stop()


def ort_greedy(path, prompt, n, ids_dtype=np.int64, eos=None):
    """ONNX Runtime's greedy decode of the model file: the independent reference."""
    import onnxruntime as ort
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    ids = list(prompt)
    out = []
    for _ in range(n):
        feed = {"input_ids": np.array([ids], ids_dtype)}
        if "attention_mask" in names:
            feed["attention_mask"] = np.ones((1, len(ids)), np.int64)
        if "position_ids" in names:
            feed["position_ids"] = np.arange(len(ids), dtype=np.int64)[None]
        logits = sess.run(["logits"], feed)[0]
        t = int(np.argmax(logits[0, -1]))
        out.append(t)
        ids.append(t)
        if t == eos:
            break
    return out


class Stream:
    """One gRPC stream; every response (or error) lands in a queue in arrival order."""

    def __init__(self, srv, log=None, tag=None):
        self.q = queue.Queue()
        self.c = grpcclient.InferenceServerClient(srv.grpc_addr)

        def on_result(result, error):
            self.q.put((result, error))
            if log is not None:
                log.put((tag, result, error))

        self.c.start_stream(callback=on_result)

    def send(self, model, prompt, rid, dtype="INT64", **kw):
        x = np.array([prompt], np.int64 if dtype == "INT64" else np.int32)
        inp = grpcclient.InferInput("input_ids", list(x.shape), dtype)
        inp.set_data_from_numpy(x)
        self.c.async_stream_infer(model, [inp], request_id=rid, **kw)

    def until_final(self, timeout=60):
        """The responses of one request up to and including its final one."""
        got = []
        while True:
            result, error = self.q.get(timeout=timeout)
            assert error is None, error
            got.append(result)
            if result.get_response().parameters["triton_final_response"].bool_param:
                return got

    def close(self, cancel=False):
        self.c.stop_stream(cancel_requests=cancel)


def tokens_of(responses):
    return [int(r.as_numpy("token")[0, 0]) for r in responses if r.as_numpy("token") is not None]


def test_one_response_per_token_matches_onnxruntime(srv, repo):
    s = Stream(srv)
    try:
        s.send("gen", [3, 7], "a")
        got = s.until_final()
        s.send("gen", [1], "after")
        nxt = s.q.get(timeout=30)
    finally:
        s.close()
    assert tokens_of(got) == ort_greedy(repo / "gen" / "1" / "model.onnx", [3, 7], 5) == [8, 9, 10, 11, 12]
    assert [int(r.as_numpy("index")[0, 0]) for r in got] == [0, 1, 2, 3, 4]
    assert [r.get_response().parameters["triton_final_response"].bool_param for r in got] == [False] * 4 + [True]
    assert all(r.get_response().id == "a" and r.as_numpy("token").shape == (1, 1) for r in got)
    # Nothing of "a" follows its final response: the next message is the next request's.
    assert nxt[1] is None and nxt[0].get_response().id == "after"


def test_max_new_tokens_eos_and_empty_final(srv):
    s = Stream(srv)
    try:
        s.send("gen", [14], "wrap", parameters={"max_new_tokens": 4})
        assert tokens_of(s.until_final()) == [15, 0, 1, 2]
        s.send("gen", [3], "eos", parameters={"eos_token_id": 6, "max_new_tokens": 10})
        assert tokens_of(s.until_final()) == [4, 5, 6]
        s.send("gen", [3], "empty", parameters={"max_new_tokens": 2}, enable_empty_final_response=True)
        got = s.until_final()
    finally:
        s.close()
    assert len(got) == 3 and tokens_of(got) == [4, 5]
    assert [r.get_response().parameters["triton_final_response"].bool_param for r in got] == [False, False, True]
    assert len(got[2].get_response().outputs) == 0


def test_int32_ids_with_mask_and_positions(srv, repo):
    s = Stream(srv)
    try:
        s.send("gen_mask", [1, 2, 3], "m", dtype="INT32")
        got = s.until_final()
    finally:
        s.close()
    ref = ort_greedy(repo / "gen_mask" / "1" / "model.onnx", [1, 2, 3], 6, ids_dtype=np.int32)
    assert tokens_of(got) == ref == [4, 5, 6, 7, 8, 9]


@pytest.mark.parametrize("case", ["float", "rank1", "batch2", "extra_input", "bad_param"])
def test_invalid_request_is_answered_with_an_error(srv, case):
    s = Stream(srv)
    try:
        if case == "float":
            inp = grpcclient.InferInput("input_ids", [1, 2], "FP32")
            inp.set_data_from_numpy(np.ones((1, 2), np.float32))
            inputs, params = [inp], None
        elif case in ("rank1", "batch2"):
            x = np.array([1, 2], np.int64) if case == "rank1" else np.ones((2, 2), np.int64)
            inp = grpcclient.InferInput("input_ids", list(x.shape), "INT64")
            inp.set_data_from_numpy(x)
            inputs, params = [inp], None
        elif case == "extra_input":
            a = grpcclient.InferInput("input_ids", [1, 2], "INT64")
            a.set_data_from_numpy(np.ones((1, 2), np.int64))
            b = grpcclient.InferInput("attention_mask", [1, 2], "INT64")
            b.set_data_from_numpy(np.ones((1, 2), np.int64))
            inputs, params = [a, b], None
        else:
            inp = grpcclient.InferInput("input_ids", [1, 2], "INT64")
            inp.set_data_from_numpy(np.ones((1, 2), np.int64))
            inputs, params = [inp], {"max_new_tokens": 0}
        s.c.async_stream_infer("gen", inputs, request_id="bad", parameters=params)
        result, error = s.q.get(timeout=30)
        assert result is None and isinstance(error, InferenceServerException)
        want = {"float": "input_ids", "rank1": "input_ids", "batch2": "input_ids",
                "extra_input": "attention_mask", "bad_param": "max_new_tokens"}[case]
        assert "gen" in str(error) and want in str(error), str(error)
        # The stream still serves.
        s.send("gen", [0], "good", parameters={"max_new_tokens": 2})
        assert tokens_of(s.until_final()) == [1, 2]
    finally:
        s.close()


def test_concurrent_streams_interleave(srv):
    log = queue.Queue()
    long_s, short_s = Stream(srv, log, "long"), Stream(srv, log, "short")
    try:
        # A long generation first; the short one's steps queue between its steps, so the short one
        # ends long before the long one does instead of waiting for all of it.
        long_s.send("gen_long", [0], "long", parameters={"max_new_tokens": 3000})
        first = long_s.q.get(timeout=60)
        assert first[1] is None, first[1]
        short_s.send("gen", [5], "short", parameters={"max_new_tokens": 3})
        short = short_s.until_final()
        long_rest = long_s.until_final(timeout=120)
    finally:
        long_s.close()
        short_s.close()
    assert tokens_of(short) == [6, 7, 8]
    assert tokens_of([first[0]] + long_rest) == [i % VOCAB for i in range(1, 3001)]
    order = []
    while not log.empty():
        tag, result, error = log.get()
        assert error is None, error
        order.append(tag)
    # The short request finished while the long one was still generating.
    last_short = len(order) - 1 - order[::-1].index("short")
    assert order.count("short") == 3 and order[last_short + 1:].count("long") > 0, order.count("long")


def test_cancelled_stream_stops_generation(srv):
    h = httpclient.InferenceServerClient(srv.http_addr)

    def executions():
        return int(h.get_inference_statistics("gen_long")["model_stats"][0]["execution_count"])

    before = executions()
    s = Stream(srv)
    s.send("gen_long", [0], "c", parameters={"max_new_tokens": 4000})
    for _ in range(20):
        result, error = s.q.get(timeout=60)
        assert error is None, error
    s.close(cancel=True)
    # The count stops growing well short of the 4000 steps asked for.
    deadline = time.time() + 60
    last = executions()
    while time.time() < deadline:
        time.sleep(0.2)
        now = executions()
        if now == last:
            break
        last = now
    assert 20 <= last - before < 4000, last - before
    # The server still generates for others.
    t = Stream(srv)
    try:
        t.send("gen", [2], "next", parameters={"max_new_tokens": 2})
        assert tokens_of(t.until_final()) == [3, 4]
    finally:
        t.close()


def test_unary_and_http_are_refused_like_decoupled_models(srv):
    x = np.array([[1, 2]], np.int64)
    g = grpcclient.InferenceServerClient(srv.grpc_addr)
    inp = grpcclient.InferInput("input_ids", list(x.shape), "INT64")
    inp.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException, match="decoupled"):
        g.infer("gen", [inp])
    h = httpclient.InferenceServerClient(srv.http_addr)
    hinp = httpclient.InferInput("input_ids", list(x.shape), "INT64")
    hinp.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException, match="decoupled"):
        h.infer("gen", [hinp])
    md = h.get_model_metadata("gen")
    assert [(o["name"], o["datatype"]) for o in md["outputs"]] == [("token", "INT64"), ("index", "INT64")]


def test_generators_that_do_not_fit_are_unavailable_with_a_reason(srv):
    index = {m["name"]: m for m in httpclient.InferenceServerClient(srv.http_addr).get_model_repository_index()}
    for name, (_, _, word) in BAD.items():
        e = index[name]
        assert e["state"] == "UNAVAILABLE", (name, e)
        assert name in e["reason"] and word in e["reason"], (name, e["reason"])
    assert index["gen"]["state"] == "READY" and index["gen_mask"]["state"] == "READY"


def test_drain_ends_a_generation_with_an_answer(repo):
    s_srv = Server(repo)
    try:
        s = Stream(s_srv)
        s.send("gen_long", [0], "d", parameters={"max_new_tokens": 4000})
        assert s.q.get(timeout=60)[1] is None
        code = s_srv.terminate()
        assert code == 0, s_srv.output()[-2000:]
        # Every message up to the stream's end: tokens, then the request's error (or its final).
        msgs = []
        while True:
            result, error = s.q.get(timeout=30)
            msgs.append((result, error))
            if error is not None or result.get_response().parameters["triton_final_response"].bool_param:
                break
        result, error = msgs[-1]
        if error is not None:
            assert "shutting down" in str(error), str(error)
        assert all(e is None for _, e in msgs[:-1])
        s.close()
    finally:
        s_srv.stop()
