"""`streamline classify` end to end: images generated here (PIL), classified by the CLI's
pipeline (decode -> resize 256 / centre-crop 224 -> ImageNet normalise -> NCHW -> model -> softmax
top-k), compared with the same steps in NumPy plus ONNX Runtime.

    SL_BINARY=build/tools/streamline .venv/bin/python -m pytest -q tests/models/test_classify.py

Uses the ResNet-50 in $SL_MODEL_DIR (default build/models), exporting it on first use like the
other model tests.
"""

import re

import numpy as np
import pytest

from conftest import model_dir, run_cli

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
# Score tolerance: the reference re-implements the resize in NumPy, so a pixel may round the other
# way (one grey level) now and then.
SCORE_TOL = 2e-3


@pytest.fixture
def resnet50(exported):
    return exported("resnet50")["onnx"]


def make_image(h, w, seed):
    """A smooth RGB image with some texture, uint8 [h, w, 3]."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([128 + 100 * np.sin(x / (7 + c) + y / (11 - c)) for c in range(3)], axis=-1)
    img += rng.normal(0, 8, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def save(img, path, fmt):
    from PIL import Image

    Image.fromarray(img).save(path, format=fmt, **({"quality": 92} if fmt == "JPEG" else {}))


def taps(n_in, n_out):
    """Half-pixel bilinear taps, clamped at the edges (as runtime::resize_bilinear)."""
    src = np.maximum(0.0, (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5)
    lo = np.minimum(src.astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    return lo, hi, (src - lo).astype(np.float32)


def resize(img, out_h, out_w):
    ylo, yhi, fy = taps(img.shape[0], out_h)
    xlo, xhi, fx = taps(img.shape[1], out_w)
    f = img.astype(np.float32)
    fx = fx[None, :, None]
    top = f[ylo][:, xlo] + fx * (f[ylo][:, xhi] - f[ylo][:, xlo])
    bot = f[yhi][:, xlo] + fx * (f[yhi][:, xhi] - f[yhi][:, xlo])
    v = top + fy[:, None, None] * (bot - top)
    return (np.clip(v, 0, 255) + 0.5).astype(np.uint8)


def preprocess(img, shorter=256, crop=224):
    h, w = img.shape[:2]
    if h <= w:
        img = resize(img, shorter, shorter * w // h)
    else:
        img = resize(img, shorter * h // w, shorter)
    h, w = img.shape[:2]
    top, left = int(round((h - crop) / 2)), int(round((w - crop) / 2))
    img = img[top:top + crop, left:left + crop]
    x = (img.astype(np.float32) * np.float32(1 / 255) - MEAN) / STD
    return x.transpose(2, 0, 1)[None].astype(np.float32)


def reference_probs(onnx_path, x):
    import onnxruntime as ort

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    logits = sess.run(None, {sess.get_inputs()[0].name: x})[0][0].astype(np.float64)
    e = np.exp(logits - logits.max())
    return e / e.sum()


def parse_table(stdout):
    """{image: [(class, score), ...]} from the classify table."""
    rows, image = {}, None
    for line in stdout.splitlines():
        m = re.match(r"^(\S.*?)?\s+(\d+)\s+(\d+)\s+([0-9.eE+-]+)\s*$", line)
        if not m:
            continue
        if m.group(1):
            image = m.group(1).strip()
            rows[image] = []
        rows[image].append((int(m.group(3)), float(m.group(4))))
    return rows


def test_classify_matches_numpy_and_onnxruntime(streamline_binary, resnet50, tmp_path):
    images = {}
    for i, (h, w) in enumerate([(300, 260), (240, 400)]):
        img = make_image(h, w, i)
        path = tmp_path / f"img{i}.png"
        save(img, path, "PNG")  # lossless: the reference sees the same pixels
        images[str(path)] = img
    r = run_cli(["classify", resnet50, *images, "--top-k", "5", "--threads", "2"])
    assert r.returncode == 0, r.stderr
    table = parse_table(r.stdout)
    assert set(table) == set(images), r.stdout
    for path, img in images.items():
        probs = reference_probs(resnet50, preprocess(img))
        got = table[path]
        assert len(got) == 5
        scores = [s for _, s in got]
        assert scores == sorted(scores, reverse=True), got
        for cls, score in got:
            assert abs(probs[cls] - score) <= SCORE_TOL, f"{path}: class {cls}: ours {score}, reference {probs[cls]}"
        # The top class matches unless the reference's first two are closer than the tolerance.
        order = np.argsort(-probs)
        if probs[order[0]] - probs[order[1]] > 2 * SCORE_TOL:
            assert got[0][0] == int(order[0]), f"{path}: ours {got[0]}, reference class {order[0]}"


def test_classify_jpeg_and_a_corrupt_file(streamline_binary, resnet50, tmp_path):
    good = tmp_path / "good.jpg"
    save(make_image(200, 240, 5), good, "JPEG")
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    r = run_cli(["classify", resnet50, good, bad, "--top-k", "3", "--threads", "2", "--stats"])
    assert r.returncode == 1, r.stdout + r.stderr  # one image failed
    assert "stage 'decode'" in r.stderr and "bad.jpg" in r.stderr, r.stderr
    table = parse_table(r.stdout)
    assert list(table) == [str(good)], r.stdout
    assert len(table[str(good)]) == 3
    assert "preprocess" in r.stdout  # --stats table


def test_classify_bad_arguments(streamline_binary, resnet50, tmp_path):
    img = tmp_path / "x.png"
    save(make_image(32, 32, 1), img, "PNG")
    assert run_cli(["classify", tmp_path / "missing.onnx", img]).returncode == 2
    assert run_cli(["classify", resnet50, img, "--mean", "a,b"]).returncode == 2
    r = run_cli(["classify", resnet50, tmp_path / "nope.png", "--threads", "2"])
    assert r.returncode == 1 and "nope.png" in r.stderr, r.stderr
