"""The native surface: Model and Session with their options, tensors without copies, traces."""

import json

import numpy as np
import pytest

import streamline


def reference_cnn(x, path):
    import onnxruntime
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})


def test_model_load_with_options_and_run(cnn_path):
    m = streamline.Model.load(cnn_path, num_streams=2, threads_per_stream=1)
    assert (m.options.num_streams, m.threads_per_stream) == (2, 1)
    assert [i.name for i in m.inputs] == ["x"] and m.inputs[0].symbols == ["N", "", "H", "W"]
    assert m.inputs[0].dims == [-1, 3, -1, -1] and m.inputs[0].dtype == "float32"
    assert m.metadata.producer_version == "1.2.3" and m.metadata.graph_description == "two branches"
    x = np.random.default_rng(1).standard_normal((2, 3, 10, 10), dtype=np.float32)
    out = m.run({"x": x})
    assert list(out) == ["logits", "probs"]
    ref = reference_cnn(x, cnn_path)
    np.testing.assert_allclose(out["logits"], ref[0], rtol=1e-4, atol=1e-5)
    as_list = m.run([x], outputs=["probs"])
    np.testing.assert_allclose(as_list[0], ref[1], rtol=1e-4, atol=1e-6)
    assert m.execution_mode([[2, 3, 10, 10]]) == "planned"


def test_model_options_object_and_unknown_fields(cnn_path):
    opts = streamline.ModelOptions(safe=True, num_threads=1)
    assert opts.safe and opts.num_threads == 1 and opts.precision == streamline.Precision.FP32
    m = streamline.Model.load(cnn_path, opts)
    assert m.options.safe
    with pytest.raises(AttributeError):
        streamline.ModelOptions(num_stream=2)
    with pytest.raises(AttributeError):
        streamline.Model.load(cnn_path, threads=2)
    with pytest.raises(streamline.InvalidArgument, match="precision must be"):
        streamline.ModelOptions(precision="fp8")


def test_session_has_its_own_context(cnn_path):
    m = streamline.Model.load(cnn_path, num_threads=1)
    s = streamline.Session(m)
    assert s.model is m and s.arena_bytes == 0
    x = np.ones((1, 3, 8, 8), np.float32)
    y = s.run({"x": x})["probs"]
    assert s.arena_bytes > 0
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(m.run({"x": x})["probs"], y, rtol=0, atol=0)


def test_safe_mode_gives_the_same_results(cnn_path):
    x = np.random.default_rng(2).standard_normal((1, 3, 9, 9), dtype=np.float32)
    plain = streamline.Model.load(cnn_path).run({"x": x})["logits"]
    safe = streamline.Model.load(cnn_path, safe=True).run({"x": x})["logits"]
    np.testing.assert_array_equal(plain, safe)


def test_precision_and_device_errors_name_the_problem(cnn_path):
    with pytest.raises(streamline.InvalidGraph, match="precision fp16 needs a GPU device"):
        streamline.Model.load(cnn_path, precision="fp16")
    with pytest.raises(streamline.Error, match="device"):
        streamline.Model.load(cnn_path, device="tpu")
    if "cuda:0" not in streamline.available_devices():
        # Plans for CUDA can be made anywhere; running needs a GPU, and says so.
        try:
            m = streamline.Model.load(cnn_path, device="cuda:0")
        except streamline.NotImplemented as e:
            assert "CUDA" in str(e)  # a build without the CUDA backend
        else:
            with pytest.raises(streamline.Error, match="cuda"):
                m.run({"x": np.ones((1, 3, 8, 8), np.float32)})


def test_outputs_are_handed_over_without_a_copy(add_path):
    m = streamline.Model.load(add_path)
    z = m.run({"x": np.ones(4, np.float32), "y": np.full(4, 2, np.float32)})["z"]
    assert not z.flags.owndata and z.base is not None  # numpy does not own it: the runtime's buffer does
    assert z.flags.writeable and z.flags.c_contiguous
    z += 1  # the caller owns the array
    np.testing.assert_array_equal(z, [4, 4, 4, 4])


def test_tensor_borrows_contiguous_arrays_and_copies_others():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = streamline.Tensor(a)
    assert (t.dtype, t.shape, t.nbytes) == ("float32", [3, 4], 48)
    assert np.shares_memory(t.numpy(), a)
    strided = a[:, ::2]
    t2 = streamline.Tensor(strided)
    assert not np.shares_memory(t2.numpy(), a)
    np.testing.assert_array_equal(t2.numpy(), strided)
    big_endian = a.astype(">f4")
    np.testing.assert_array_equal(streamline.Tensor(big_endian).numpy(), a)
    del a  # the Tensor keeps the memory alive
    np.testing.assert_array_equal(t.numpy()[2], [8, 9, 10, 11])
    with pytest.raises(streamline.InvalidArgument, match="complex128"):
        streamline.Tensor(np.zeros(2, np.complex128))


def test_runs_accept_non_contiguous_and_foreign_byte_order(add_path):
    m = streamline.Model.load(add_path)
    base = np.arange(8, dtype=np.float32)
    z = m.run({"x": base[::2], "y": base[1::2].astype(">f4")})["z"]
    np.testing.assert_array_equal(z, base[::2] + base[1::2])


def test_runs_accept_array_likes(add_path):
    # Lists become arrays made for the run, which must live until it ends: freed early, the first
    # one's memory would be reused for the second and the run would read the second twice.
    m = streamline.Model.load(add_path)
    x = [np.float32(v) for v in (1, 2, 3, 4)]
    y = [np.float32(v) for v in (10, 20, 30, 40)]
    np.testing.assert_array_equal(m.run({"x": x, "y": y})["z"], [11, 22, 33, 44])
    np.testing.assert_array_equal(m.run([x, y])[0], [11, 22, 33, 44])


def test_trace_records_runs(cnn_path, tmp_path):
    # The small model would fit one stream: pin a branch on the second.
    m = streamline.Model.load(cnn_path, num_streams=2, threads_per_stream=1, pinned_streams={"branch_b": 1})
    trace = streamline.Trace()
    x = np.ones((1, 3, 8, 8), np.float32)
    m.run({"x": x}, trace=trace)
    first = trace.slices
    assert first > 0
    s = streamline.Session(m)
    s.run({"x": x}, trace=trace)
    assert trace.slices == 2 * first
    events = json.loads(trace.to_json())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e.get("ph") == "M"}
    assert tracks == {"stream 0", "stream 1"}
    path = tmp_path / "t.json"
    trace.write(str(path))
    assert json.loads(path.read_text()) == json.loads(trace.to_json())
    with pytest.raises(streamline.Unavailable, match="nope"):
        trace.write(str(tmp_path / "nope" / "t.json"))


def test_log_severity_round_trip():
    before = streamline.log_severity()
    streamline.set_log_severity(streamline.LogSeverity.ERROR)
    assert streamline.log_severity() == streamline.LogSeverity.ERROR
    streamline.set_default_logger_severity(0)
    assert streamline.log_severity() == streamline.LogSeverity.DEBUG
    streamline.set_log_severity(before)
