"""The streamline CLI as a person meets it: progress on a terminal (and never in a pipe or in
--json), out-of-range flags, the dimensions a command fills in by itself, missing files, and
`serve` on a busy port.

    SL_BINARY=build/tools/streamline .venv/bin/python -m pytest -q tests/tools/test_cli.py

Models are written here with onnx.helper (small, no PyTorch): an MLP x [N, 16] -> y [N, 8], a
token embedding input_ids [batch, sequence] -> [batch, sequence, 8], and an image classifier
[N, 3, 8, 8] -> [N, 4]. Terminals are pseudo-terminals (pty): only stderr is one, so stdout stays
a pipe the test reads.
"""

import fcntl
import os
import pty
import select
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120


def binary() -> str:
    return os.environ.get("SL_BINARY") or str(REPO / "build" / "tools" / "streamline")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- models and files ----------------------------------------------------------------------

def save_model(graph, path: Path) -> Path:
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return path


def mlp(path: Path) -> Path:
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((16, 8)) / 4).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], initializer=[w, b])
    return save_model(g, path)


def embedding(path: Path) -> Path:
    """input_ids int64 [batch, sequence] -> Gather from a [1000, 8] table -> [batch, sequence, 8]."""
    table = numpy_helper.from_array(np.random.default_rng(2).standard_normal((1000, 8)).astype(np.float32), "table")
    g = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["hidden"], axis=0)], "embed",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "sequence", 8])], initializer=[table])
    return save_model(g, path)


def classifier(path: Path, height=8, width=8) -> Path:
    """image [N, 3, height, width] -> GlobalAveragePool -> Flatten -> Gemm -> logits [N, 4]."""
    w = numpy_helper.from_array(np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32), "W")
    g = helper.make_graph(
        [helper.make_node("GlobalAveragePool", ["image"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
         helper.make_node("Gemm", ["f", "W"], ["logits"])], "cls",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, height, width])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4])], initializer=[w])
    return save_model(g, path)


def write_png(path: Path, h: int, w: int, seed: int) -> Path:
    """An RGB PNG, written with zlib alone."""
    pixels = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
           chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    path.write_bytes(png)
    return path


def conformance_cases(root: Path, n: int) -> Path:
    """n ONNX backend-test style cases (model.onnx + test_data_set_0/) of Relu."""
    for i in range(n):
        d = root / f"test_relu_{i}"
        (d / "test_data_set_0").mkdir(parents=True)
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])])
        save_model(g, d / "model.onnx")
        x = np.random.default_rng(i).standard_normal((3, 4)).astype(np.float32)
        for name, value in (("input_0", x), ("output_0", np.maximum(x, 0))):
            (d / "test_data_set_0" / f"{name}.pb").write_bytes(numpy_helper.from_array(value).SerializeToString())
    return root


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    return {"mlp": mlp(d / "mlp.onnx"), "embed": embedding(d / "embed.onnx"), "cls": classifier(d / "cls.onnx"),
            "cls_any": classifier(d / "cls_any.onnx", "H", "W")}


# ---- running the CLI -----------------------------------------------------------------------

def run(args, timeout=TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([binary(), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def run_on_terminal(args, timeout=TIMEOUT_S):
    """Runs the CLI with stderr on a pseudo-terminal (200 columns) and stdout on a pipe; returns
    (exit code, stdout, what the terminal received)."""
    screen, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    proc = subprocess.Popen([binary(), *map(str, args)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=terminal)
    os.close(terminal)
    out = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))
    reader.start()
    seen = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([screen], [], [], 0.5)
        if ready:
            try:
                data = os.read(screen, 4096)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not data:
                break
            seen += data
        elif proc.poll() is not None:
            break
    else:
        proc.kill()
        pytest.fail(f"timed out after {timeout} s: {args}")
    code = proc.wait(timeout=30)
    reader.join()
    os.close(screen)
    return code, out[0].decode(), seen.decode(errors="replace")


class Server:
    """`streamline serve` on free loopback ports."""

    def __init__(self, repo: Path):
        self.http, self.grpc, self.metrics = free_port(), free_port(), free_port()
        self.proc = subprocess.Popen(
            [binary(), "serve", "--model-repository", str(repo), "--http-port", str(self.http), "--grpc-port",
             str(self.grpc), "--metrics-port", str(self.metrics)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"serve exited: {self.proc.stderr.read().decode()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v2/health/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        pytest.fail("serve did not become ready in 60 s")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def server(models, tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    for name in ("mlp", "embed"):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.onnx").write_bytes(models[name].read_bytes())
    s = Server(repo)
    yield s
    s.stop()


# ---- progress ------------------------------------------------------------------------------

def progress_lines(screen: str, title: str) -> list[str]:
    """The progress lines a terminal received: each redraw starts with a carriage return."""
    return [part.strip() for part in screen.split("\r") if part.startswith(title + ": ")]


def test_bench_progress_on_a_terminal_only(models):
    args = ["bench", models["mlp"], "--threads", 1, "--seconds", 1, "--warmup", 0.3]
    code, out, screen = run_on_terminal(args)
    assert code == 0, screen
    lines = progress_lines(screen, "bench")
    assert lines, f"no progress line on the terminal: {screen!r}"
    assert all(" elapsed" in line for line in lines), lines
    assert any("measuring" in line and "left" in line for line in lines), lines
    assert screen.rstrip(" ").endswith("\r"), f"the last progress line was not erased: {screen[-200:]!r}"
    assert "throughput/s" in out and "elapsed" not in out and "\r" not in out
    # A pipe never sees it, nor --json on a terminal.
    piped = run(args)
    assert piped.returncode == 0 and "elapsed" not in piped.stderr and "\r" not in piped.stderr, piped.stderr
    code, out, screen = run_on_terminal([*args, "--json"])
    assert code == 0 and out.startswith("{"), out
    assert not progress_lines(screen, "bench") and "elapsed" not in screen, screen


def test_perf_progress_counts_steps(server):
    args = ["perf", "-m", "mlp", "-u", f"127.0.0.1:{server.http}", "--concurrency-range", "1:2",
            "--seconds", 0.5, "--warmup-s", 0.1]
    code, out, screen = run_on_terminal(args)
    assert code == 0, screen
    lines = progress_lines(screen, "perf")
    assert any(line.startswith("perf: 0/2 steps, concurrency 1 | ") for line in lines), lines
    assert any(" left" in line for line in lines), lines
    assert "concurrency" in out and "elapsed" not in out
    for machine in ("--json", "--csv"):
        code, out, screen = run_on_terminal([*args, machine])
        assert code == 0, screen
        assert not progress_lines(screen, "perf") and "elapsed" not in screen, (machine, screen)


def test_conformance_progress_counts_cases(tmp_path):
    cases = conformance_cases(tmp_path / "cases", 3)
    code, out, screen = run_on_terminal(["conformance", cases, "--jobs", 1])
    assert code == 0, screen
    assert any(line.startswith("conformance: ") and "/3 cases" in line for line in progress_lines(screen, "conformance"))
    assert "total: 3 cases, 3 passed" in out, out
    code, out, screen = run_on_terminal(["conformance", cases, "--jobs", 1, "--json"])
    assert code == 0 and '"passed": 3' in out
    assert not progress_lines(screen, "conformance"), screen


def test_classify_progress_counts_images(models, tmp_path):
    images = [write_png(tmp_path / f"img{i}.png", 12, 10, i) for i in range(5)]
    code, out, screen = run_on_terminal(["classify", models["cls"], *images, "--top-k", 2, "--threads", 1])
    assert code == 0, screen
    assert any("/5 images" in line for line in progress_lines(screen, "classify")), screen
    assert "5 image(s)" in out and "elapsed" not in out
    piped = run(["classify", models["cls"], *images, "--top-k", 2, "--threads", 1])
    assert piped.returncode == 0 and "elapsed" not in piped.stderr, piped.stderr


# ---- flags out of range --------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["bench", "m.onnx", "--seconds", "0"],
     "error: --seconds: 0 is out of range: expected a number above 0 and at most 86400 (seconds)"),
    (["bench", "m.onnx", "--concurrency", "0"], "error: --concurrency: 0 is out of range: expected an integer from 1"),
    (["run", "m.onnx", "--threads", "-4"], "error: --threads: -4 is out of range: expected an integer from 0 to 1024"),
    (["perf", "-m", "m", "--concurrency-range", "8:1"], "error: --concurrency-range: '8:1': end 1 is below start 8"),
    (["serve", "--model-repository", ".", "--grpc-port", "70000"],
     "error: --grpc-port: 70000 is out of range: expected an integer from -1 to 65535"),
    (["classify", "m.onnx", "a.png", "--top-k", "0"], "error: --top-k: 0 is out of range"),
])
def test_out_of_range_flags_are_refused(args, message):
    r = run(args, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith(message), r.stderr
    assert len(r.stderr) < 300, r.stderr


def test_perf_url_port_out_of_range():
    r = run(["perf", "-m", "m", "-u", "127.0.0.1:99999"], timeout=30)
    assert r.returncode == 2 and "port 99999 is out of range" in r.stderr, r.stderr


# ---- dimensions filled in ------------------------------------------------------------------

SEQ_NOTE = ("note: input 'input_ids': dimension 1 ('sequence') is dynamic; using 1 "
            "(set it with --shape input_ids=1,<sequence>)")
BATCH_NOTE = "note: input 'input_ids': dimension 0 ('batch') is dynamic; using 1 (set it with --batch N)"


def test_run_prints_the_dimensions_it_fills(models, tmp_path):
    r = run(["run", models["embed"], "--threads", 1, "--output-dir", tmp_path])
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(SEQ_NOTE) == 1 and r.stderr.count(BATCH_NOTE) == 1, r.stderr
    assert np.load(tmp_path / "hidden.npy").shape == (1, 1, 8)
    # The flags the notes name change the dimension, and the note goes away.
    r = run(["run", models["embed"], "--threads", 1, "--batch", 3, "--output-dir", tmp_path])
    assert r.returncode == 0 and BATCH_NOTE not in r.stderr, r.stderr
    assert "--shape input_ids=3,<sequence>" in r.stderr, r.stderr
    r = run(["run", models["embed"], "--threads", 1, "--shape", "input_ids=2,5", "--output-dir", tmp_path])
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr
    assert np.load(tmp_path / "hidden.npy").shape == (2, 5, 8)


@pytest.mark.parametrize("command", [["plan"], ["bench", "--max-runs", 2, "--warmup", 0, "--json"]])
def test_plan_and_bench_print_the_dimensions_they_fill(models, command):
    r = run([command[0], models["embed"], "--threads", 1, *command[1:]])
    assert r.returncode == 0, r.stderr
    assert SEQ_NOTE in r.stderr and BATCH_NOTE in r.stderr, r.stderr
    assert "note:" not in r.stdout


def test_perf_prints_the_dimensions_it_fills(server):
    r = run(["perf", "-m", "embed", "-u", f"127.0.0.1:{server.http}", "--seconds", 0.3, "--warmup-s", 0, "--json"])
    assert r.returncode == 0, r.stderr
    assert ("note: input 'input_ids': dimension 1 is dynamic; using 1 (set it with --shape input_ids=1,<d1>)"
            in r.stderr), r.stderr
    r = run(["perf", "-m", "embed", "-u", f"127.0.0.1:{server.http}", "--seconds", 0.3, "--warmup-s", 0,
             "--shape", "input_ids=1,16", "--json"])
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr


def test_classify_prints_the_crop_it_picks(models, tmp_path):
    img = write_png(tmp_path / "a.png", 40, 30, 1)
    r = run(["classify", models["cls_any"], img, "--top-k", 1, "--threads", 1], timeout=60)
    assert r.returncode == 0, r.stderr
    assert ("note: input 'image': the image size is dynamic; using a 224x224 crop (set it with --size S)"
            in r.stderr), r.stderr
    r = run(["classify", models["cls_any"], img, "--top-k", 1, "--threads", 1, "--size", 16], timeout=60)
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr
    r = run(["classify", models["cls"], img, "--top-k", 1, "--threads", 1], timeout=60)  # 8x8: fixed
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr


# ---- missing files -------------------------------------------------------------------------

def test_missing_labels_file_says_so(models, tmp_path):
    img = write_png(tmp_path / "a.png", 8, 8, 1)
    missing = tmp_path / "missing.txt"
    r = run(["classify", models["cls"], img, "--labels", missing], timeout=60)
    assert r.returncode == 2, r.stderr
    assert f"--labels: cannot open '{missing}': No such file or directory" in r.stderr, r.stderr
    assert "no labels in" not in r.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    r = run(["classify", models["cls"], img, "--labels", empty], timeout=60)
    assert r.returncode == 2 and "no labels in" in r.stderr, r.stderr


def test_missing_input_and_image_files_say_why(models, tmp_path):
    r = run(["run", models["mlp"], "--input", f"x={tmp_path / 'x.npy'}"], timeout=60)
    assert r.returncode == 2 and "--input x: cannot open" in r.stderr and "No such file or directory" in r.stderr, \
        r.stderr
    r = run(["classify", models["cls"], tmp_path / "nope.png", "--threads", 1], timeout=60)
    assert r.returncode == 1 and "nope.png': No such file or directory" in r.stderr, r.stderr


# ---- serve on a busy port ------------------------------------------------------------------

def test_serve_fails_on_a_busy_port_before_loading_models(models, tmp_path):
    repo = tmp_path / "repo"
    for name in ("mlp", "embed"):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.onnx").write_bytes(models[name].read_bytes())
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        start = time.monotonic()
        r = run(["serve", "--model-repository", repo, "--http-port", 0, "--grpc-port", port,
                 "--metrics-port", 0], timeout=60)
        elapsed = time.monotonic() - start
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert f"--grpc-port: 127.0.0.1:{port} is already in use" in r.stderr, r.stderr
    # Nothing was loaded: the repository index (printed after loading) never appears.
    assert "READY" not in r.stdout and "mlp" not in r.stdout, r.stdout
    assert elapsed < 5, f"took {elapsed:.1f} s to notice a busy port"
