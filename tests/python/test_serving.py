"""The serving model (instances, the dynamic batcher, futures, asyncio) and pipelines with Python stages."""

import asyncio
import concurrent.futures
import threading
import time

import numpy as np
import pytest

import streamline


def cnn_reference(path, x):
    import onnxruntime
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["probs"], {"x": x})[0]


def test_submit_returns_futures_and_batches(cnn_path):
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, 3, 8, 8), dtype=np.float32) for _ in range(12)]
    with streamline.ServingModel(cnn_path, instances=2, max_batch_size=4, max_queue_delay_us=200_000,
                                 threads_per_instance=1) as served:
        assert served.planned_batch_sizes[-1] == 4
        futures = [served.submit({"x": x}, id=i) for i, x in enumerate(xs)]
        assert all(isinstance(f, concurrent.futures.Future) for f in futures)
        results = [f.result(timeout=120) for f in futures]
        stats = served.stats()
    for x, r in zip(xs, results):
        np.testing.assert_allclose(r["probs"], cnn_reference(cnn_path, x), rtol=1e-4, atol=1e-6)
    assert stats["succeeded"] == 12 and stats["failed"] == 0
    # With a 200 ms queue delay, requests submitted together were merged.
    assert max(stats["batch_size_hist"]) > 1
    assert sum(size * runs for size, runs in stats["batch_size_hist"].items()) == 12


def test_infer_and_serving_options_object(cnn_path):
    model = streamline.Model.load(cnn_path, num_threads=1)
    opts = streamline.ServingOptions(instances=1, warmup=False)
    opts.batching.max_batch_size = 2
    served = streamline.ServingModel(model, opts)
    assert served.options.batching.max_batch_size == 2 and served.model is model
    x = np.ones((2, 3, 8, 8), np.float32)
    out = served.infer({"x": x}, outputs=["logits"])
    assert list(out) == ["logits"] and out["logits"].shape == (2, 10)
    served.shutdown()
    with pytest.raises(streamline.Unavailable):
        served.infer({"x": x})
    with pytest.raises(TypeError, match="max_batch"):
        streamline.ServingModel(model, max_batch=3)
    with pytest.raises(AttributeError):
        streamline.ServingOptions(instance=2)


def test_request_errors_fail_alone(gather_path):
    with streamline.ServingModel(gather_path, max_batch_size=4, max_queue_delay_us=100_000) as served:
        good = served.submit({"idx": np.array([1], np.int64)})
        bad = served.submit({"idx": np.array([99], np.int64)})
        missing = served.submit({"wrong": np.array([1], np.int64)})
        np.testing.assert_array_equal(good.result(60)["out"], [[2, 3]])
        with pytest.raises(streamline.Error, match="Gather|lookup|99"):
            bad.result(60)
        with pytest.raises(streamline.InvalidArgument):
            missing.result(60)
        assert served.stats()["failed"] == 2


def test_queue_full_is_resource_exhausted(chain_path):
    with streamline.ServingModel(chain_path, max_queue_size=1, threads_per_instance=1) as served:
        x = np.ones((1, 512), np.float32)
        futures = [served.submit({"x": x}) for _ in range(8)]
        outcomes = []
        for f in futures:
            try:
                f.result(120)
                outcomes.append("ok")
            except streamline.ResourceExhausted:
                outcomes.append("full")
        assert "ok" in outcomes and "full" in outcomes


def test_asyncio_awaitable(cnn_path):
    served = streamline.ServingModel(cnn_path, max_batch_size=4, max_queue_delay_us=50_000)
    xs = [np.full((1, 3, 8, 8), i, np.float32) for i in range(6)]

    async def main():
        return await asyncio.gather(*(served.infer_async({"x": x}) for x in xs))

    results = asyncio.run(main())
    served.shutdown()
    for x, r in zip(xs, results):
        np.testing.assert_allclose(r["probs"], cnn_reference(cnn_path, x), rtol=1e-4, atol=1e-6)


def test_pipeline_with_python_stages(cnn_path):
    served = streamline.ServingModel(cnn_path, max_batch_size=4, max_queue_delay_us=20_000)
    seen_threads = set()

    def pre(t):
        seen_threads.add(threading.get_ident())
        raw = t["raw"]
        assert not raw.flags.writeable  # stage inputs are shared: read only
        return {"x": (raw.astype(np.float32) / 255.0)[np.newaxis]}

    def post(t):
        return {"best": np.argmax(t["probs"], axis=1).astype(np.int64)}

    b = streamline.PipelineBuilder()
    b.input("raw")
    b.add_function("pre", ["raw"], ["x"], pre, instances=2)
    b.add_model("model", ["x"], ["probs"], served)
    b.add_function("post", ["probs"], ["best"], post)
    b.add_stage("top", ["probs"], ["classes", "scores"], streamline.stages.top_k(k=3, softmax=False))
    b.output("best").output("classes")
    rng = np.random.default_rng(4)
    raws = [rng.integers(0, 255, (3, 8, 8), dtype=np.uint8) for _ in range(8)]
    with b.build() as pipe:
        assert pipe.input_names == ["raw"] and sorted(pipe.output_names) == ["best", "classes"]
        futures = [pipe.submit({"raw": r}) for r in raws]
        results = [f.result(120) for f in futures]
        one = pipe.infer({"raw": raws[0]})
        stats = pipe.stats()
    served.shutdown()
    assert threading.get_ident() not in seen_threads  # stages ran on the pipeline's threads
    for r, out in zip(raws, results):
        ref = cnn_reference(cnn_path, (r.astype(np.float32) / 255.0)[np.newaxis])
        assert out["best"].tolist() == [int(np.argmax(ref))]
        assert out["classes"][0, 0] == out["best"][0]
    assert one["best"].tolist() == results[0]["best"].tolist()
    assert stats["succeeded"] == 9 and [s["name"] for s in stats["stages"]][0] == "pre"


def test_pipeline_stage_errors_name_the_stage(add_path):
    def bad_type(t):
        return [t["a"]]

    def raises(t):
        raise ValueError("no thanks")

    def wrong_name(t):
        return {"nope": t["a"]}

    for fn, message in [(bad_type, "stage 'f'.*not a dict"), (raises, "stage 'f'.*ValueError: no thanks"),
                        (wrong_name, "stage 'f'.*'nope', which is not one of its outputs")]:
        b = streamline.PipelineBuilder().input("a")
        b.add_function("f", ["a"], ["b"], fn)
        with b.build() as pipe:
            with pytest.raises(streamline.Error, match=message):
                pipe.infer({"a": np.ones(2, np.float32)})
            # The pipeline goes on serving after a failed request.
            with pytest.raises(streamline.Error):
                pipe.submit({"a": np.ones(2, np.float32)}).result(60)
    b = streamline.PipelineBuilder().input("a")
    b.add_function("f", ["a"], ["b"], lambda t: {"b": t["a"]})
    b.add_function("g", ["b"], ["a"], lambda t: {"a": t["b"]})
    with pytest.raises(streamline.InvalidArgument, match="cycle|two producers|'a'"):
        b.build()


def test_pipeline_rebalances_python_stages():
    # time.sleep releases the GIL, so a second worker doubles a sleeping stage's capacity. 2 ms and
    # 10 ms stages started 2/1 with a budget of 3 end 1/2; the serial stage keeps its one worker.
    def sleeper(ms, src, dst):
        def fn(t):
            time.sleep(ms / 1000)
            return {dst: t[src] + 1}
        return fn

    b = streamline.PipelineBuilder().input("a")
    b.add_function("fast", ["a"], ["b"], sleeper(2, "a", "b"), instances=2, queue_capacity=8)
    b.add_function("slow", ["b"], ["c"], sleeper(10, "b", "c"), queue_capacity=8)
    b.add_function("last", ["c"], ["d"], lambda t: {"d": t["c"] + 1}, serial=True)
    with b.build(rebalance=True, rebalance_window_us=200_000) as pipe:
        stop = threading.Event()
        wrong = []

        def client():
            while not stop.is_set():
                x = np.array([float(threading.get_ident() % 1000)], np.float32)
                if pipe.infer({"a": x})["d"][0] != x[0] + 3:
                    wrong.append(x)

        clients = [threading.Thread(target=client) for _ in range(6)]
        for c in clients:
            c.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and [s["workers"] for s in pipe.stats()["stages"]] != [1, 2, 1]:
            time.sleep(0.05)
        stop.set()
        for c in clients:
            c.join()
        stats = pipe.stats()
    assert [s["workers"] for s in stats["stages"]] == [1, 2, 1], stats["rebalance"]
    assert stats["stages"][2]["max_workers"] == 1
    assert stats["rebalance"]["enabled"] and stats["rebalance"]["worker_budget"] == 4
    assert stats["rebalance"]["moves"] == 1
    move = stats["rebalance"]["recent"][0]
    assert (move["from"], move["to"], move["to_workers"]) == ("fast", "slow", 2)
    assert "is the bottleneck" in move["reason"]
    assert not wrong and stats["failed"] == 0
