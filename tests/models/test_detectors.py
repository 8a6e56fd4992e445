"""Object detectors and the graph patterns their exporters write, compared with ONNX Runtime.

    .venv/bin/python -m pytest -q tests/models/test_detectors.py

1. Patterns built with onnx.helper, each the shape of something a torchvision detector exports:
   - an SSD head on the last, 1x1 feature map: a convolution whose input has one pixel (which the
     planner leaves in the blocked layout it arrives in) and whose output channels do not fill a
     block of 16;
   - batched NMS as torchvision writes it: boxes offset per class, one NonMaxSuppression with
     max_output_boxes_per_class = INT64_MAX ("no limit"), thousands of boxes;
   - a second stage that gets no box: NonZero finds nothing, Gather takes zero rows, and the box
     head (Gemm + Relu) runs on them.
2. Detectors from Debian's torchvision (random weights, exported at opset 17): SSDlite320 with a
   MobileNetV3 backbone and Faster R-CNN with a MobileNetV3-FPN backbone, on one 320x320 image
   (SSDlite finds boxes with these weights, Faster R-CNN's first stage proposes none).
   With random weights their scores are nearly uniform, so detections are compared with ONNX
   Runtime rather than PyTorch: ties between equal scores are broken by index in both.

Metric: float outputs max|ours - ort| <= 1e-4 * max(1, max|ort|); integer outputs equal.
"""

import io

import numpy as np
import pytest

from conftest import streamline_run

import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

TOL = 1e-4
INT64_MAX = np.iinfo(np.int64).max


def assert_same(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape}, ONNX Runtime gives {ref.shape}"
    if ref.dtype.kind == "f":
        err = float(np.abs(ours.astype(np.float64) - ref.astype(np.float64)).max()) if ref.size else 0.0
        scale = max(1.0, float(np.abs(ref).max()) if ref.size else 0.0)
        print(f"{what}: max|ours - ort| = {err:.3e}, bound {TOL * scale:.3e}")
        assert err <= TOL * scale, f"{what}: max|ours - ort| = {err:.3e} > {TOL * scale:.3e}"
    else:
        mismatched = int(np.count_nonzero(ours != ref))
        assert mismatched == 0, f"{what}: {mismatched} of {ref.size} elements differ from ONNX Runtime's"


def ort_run(path, feeds):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def compare(model, feeds, tmp_path, name):
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    ref = ort_run(path, feeds)
    ours = streamline_run(path, feeds, tmp_path / f"{name}_out")
    assert set(ours) == set(ref), f"{name}: outputs {sorted(ours)}, ONNX Runtime has {sorted(ref)}"
    for k in ref:
        assert_same(ours[k], ref[k], f"{name} {k}")
    return ours, ref


def make_model(nodes, inputs, outputs, inits, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def test_head_on_a_one_pixel_map(tmp_path):
    rng = np.random.default_rng(1)
    w1 = numpy_helper.from_array((rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((20, 32, 3, 3)) * 0.1).astype(np.float32), "w2")
    b2 = numpy_helper.from_array(rng.standard_normal(20).astype(np.float32), "b2")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["f"], kernel_shape=[3, 3]),               # 3x3 -> 1x1, blocked
        helper.make_node("Relu", ["f"], ["r"]),
        helper.make_node("Conv", ["r", "w2", "b2"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),  # 20 channels
    ]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32, 3, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w1, w2, b2])
    x = rng.standard_normal((2, 32, 3, 3)).astype(np.float32)
    ours, _ = compare(m, {"x": x}, tmp_path, "one_pixel_head")
    assert ours["y"].shape == (2, 20, 1, 1)


def test_batched_nms_without_a_limit(tmp_path):
    """torchvision's batched_nms: boxes shifted by class * (max coordinate + 1), one NMS call."""
    rng = np.random.default_rng(2)
    n = 3000
    xy = rng.uniform(0, 300, (n, 2)).astype(np.float32)
    wh = rng.uniform(4, 60, (n, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + wh], axis=1)
    scores = rng.permutation(n).astype(np.float32) / n          # distinct scores: no ties
    labels = rng.integers(0, 5, n).astype(np.int64)
    consts = [numpy_helper.from_array(np.array([INT64_MAX], np.int64), "max_out"),
              numpy_helper.from_array(np.array([0.5], np.float32), "iou"),
              numpy_helper.from_array(np.array(1.0, np.float32), "one"),
              numpy_helper.from_array(np.array([1], np.int64), "ax1"),
              numpy_helper.from_array(np.array([0], np.int64), "ax0"),
              numpy_helper.from_array(np.array([2], np.int64), "col2")]
    nodes = [
        helper.make_node("ReduceMax", ["boxes"], ["mx"], keepdims=0),
        helper.make_node("Add", ["mx", "one"], ["span"]),
        helper.make_node("Cast", ["labels"], ["lf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["lf", "span"], ["off"]),
        helper.make_node("Unsqueeze", ["off", "ax1"], ["off2"]),
        helper.make_node("Add", ["boxes", "off2"], ["shifted"]),
        helper.make_node("Unsqueeze", ["shifted", "ax0"], ["b3"]),
        helper.make_node("Unsqueeze", ["scores", "ax0"], ["s2"]),
        helper.make_node("Unsqueeze", ["s2", "ax0"], ["s3"]),
        helper.make_node("NonMaxSuppression", ["b3", "s3", "max_out", "iou"], ["sel"]),
        helper.make_node("Gather", ["sel", "col2"], ["keep2"], axis=1),
        helper.make_node("Squeeze", ["keep2", "ax1"], ["keep"]),
    ]
    m = make_model(nodes, [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [n, 4]),
                           helper.make_tensor_value_info("scores", TensorProto.FLOAT, [n]),
                           helper.make_tensor_value_info("labels", TensorProto.INT64, [n])],
                   [helper.make_tensor_value_info("keep", TensorProto.INT64, None)], consts)
    ours, _ = compare(m, {"boxes": boxes, "scores": scores, "labels": labels}, tmp_path, "batched_nms")
    # Overlapping boxes of one class suppress each other: some are dropped, many are kept.
    assert 100 < ours["keep"].size < n, ours["keep"].size


def test_second_stage_without_boxes(tmp_path):
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array((rng.standard_normal((6, 16)) * 0.1).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    nodes = [
        helper.make_node("Greater", ["scores", "two"], ["hit"]),                 # scores are below 2
        helper.make_node("NonZero", ["hit"], ["idx2"]),
        helper.make_node("Squeeze", ["idx2"], ["idx"]),
        helper.make_node("Gather", ["feats", "idx"], ["rows"], axis=0),            # [0, 16]
        helper.make_node("Gemm", ["rows", "w", "b"], ["g"], transB=1),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    m = make_model(nodes, [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [40]),
                           helper.make_tensor_value_info("feats", TensorProto.FLOAT, [40, 16])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, b, two])
    feeds = {"scores": rng.uniform(0, 1, 40).astype(np.float32),
             "feats": rng.standard_normal((40, 16)).astype(np.float32)}
    ours, _ = compare(m, feeds, tmp_path, "empty_second_stage")
    assert ours["y"].shape == (0, 6)


# Detector -> whether it finds boxes with these random weights: SSDlite keeps hundreds through its
# NMS without a limit; Faster R-CNN's first stage proposes none, so its box head runs on zero rows.
DETECTORS = {"ssdlite320_mobilenet_v3_large": True, "fasterrcnn_mobilenet_v3_large_320_fpn": False}


@pytest.mark.parametrize("name", list(DETECTORS))
def test_torchvision_detector_matches_onnxruntime(torch, name, tmp_path):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None, weights_backbone=None).eval()
    image = torch.rand(3, 320, 320)
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, ([image],), buf, opset_version=17, input_names=["image"],
                          output_names=["boxes", "labels", "scores"])
    m = onnx.load_from_string(buf.getvalue())
    assert "NonMaxSuppression" in {n.op_type for g in [m.graph] + [a.g for n in m.graph.node for a in n.attribute
                                                                   if a.type == onnx.AttributeProto.GRAPH]
                                   for n in g.node}
    ours, ref = compare(m, {"image": image.numpy()}, tmp_path, name)
    assert (ref["boxes"].shape[0] > 0) == DETECTORS[name], f"{name}: ONNX Runtime found {ref['boxes'].shape[0]} boxes"
