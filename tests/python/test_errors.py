"""Errors: ONNX Runtime's class names, our context in the messages, and nothing that crashes."""

import numpy as np
import pytest

import streamline
import streamline as onnxruntime


def test_error_hierarchy():
    for cls in (streamline.Fail, streamline.InvalidArgument, streamline.NoSuchFile, streamline.InvalidGraph,
                streamline.NotImplemented, streamline.RuntimeException):
        assert issubclass(cls, streamline.Error) and issubclass(cls, RuntimeError)
    assert issubclass(streamline.InvalidArgument, ValueError)
    assert issubclass(streamline.NotImplemented, NotImplementedError)
    assert issubclass(streamline.ResourceExhausted, streamline.Fail)


def test_missing_file(tmp_path):
    with pytest.raises(streamline.NoSuchFile, match="does not exist") as e:
        onnxruntime.InferenceSession(str(tmp_path / "absent.onnx"))
    assert e.value.code == "NotFound" and "absent.onnx" in str(e.value)


def test_corrupt_model(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage that is not a model")
    with pytest.raises(streamline.InvalidGraph, match="cannot parse"):
        onnxruntime.InferenceSession(str(bad))
    with pytest.raises(streamline.InvalidGraph, match="model bytes"):
        onnxruntime.InferenceSession(b"")


def test_unsupported_op_names_the_node(model_dir):
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    node = helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example")
    m = helper.make_model(helper.make_graph([node], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
    m.ir_version = 8
    path = model_dir / "fancy.onnx"
    onnx.save(m, str(path))
    with pytest.raises(streamline.NotImplemented, match="FancyOp") as e:
        onnxruntime.InferenceSession(str(path))
    assert "fancy" in str(e.value)


def test_input_errors_name_the_input(add_path):
    sess = onnxruntime.InferenceSession(add_path)
    x = np.ones(4, np.float32)
    with pytest.raises(streamline.InvalidArgument, match=r"missing input\(s\) 'y'"):
        sess.run(None, {"x": x})
    with pytest.raises(streamline.InvalidArgument, match="no input named 'w'.*'x', 'y'"):
        sess.run(None, {"x": x, "y": x, "w": x})
    with pytest.raises(streamline.InvalidArgument, match=r"input 'y': expected tensor\(float\).*tensor\(double\)"):
        sess.run(None, {"x": x, "y": np.ones(4)})
    with pytest.raises(streamline.InvalidArgument, match="no output named 'q'"):
        sess.run(["q"], {"x": x, "y": x})
    with pytest.raises(streamline.InvalidArgument, match="'y'"):
        sess.run(None, {"x": x, "y": np.ones(5, np.float32)})
    with pytest.raises(streamline.InvalidArgument, match="dict"):
        sess.run(None, "x")
    with pytest.raises(streamline.InvalidArgument, match="input 'y'.*no streamline tensor type"):
        sess.run(None, {"x": x, "y": np.array(["a", "b", "c", "d"])})
    # The session still works after all of that.
    np.testing.assert_array_equal(sess.run(None, {"x": x, "y": x})[0], 2 * x)


def test_bad_values_fail_the_run_with_the_node(gather_path):
    sess = onnxruntime.InferenceSession(gather_path)
    with pytest.raises(streamline.Error, match="lookup|Gather"):
        sess.run(None, {"idx": np.array([0, 9], np.int64)})
    out = sess.run(None, {"idx": np.array([4, -1], np.int64)})[0]
    np.testing.assert_array_equal(out, [[8, 9], [8, 9]])
