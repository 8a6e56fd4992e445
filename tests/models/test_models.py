"""End-to-end model tests: torchvision CNNs and BERT-like encoders exported to ONNX, run by the
streamline CLI, compared with PyTorch.

    .venv/bin/python -m pytest -q tests/models/test_models.py            # all models
    .venv/bin/python -m pytest -q tests/models/test_models.py -k resnet50
    .venv/bin/python -m pytest -q tests/models/test_models.py -k "bert and not tiny"

Metric (every comparison): max|ours - torch| <= 1e-4 * max(1, max|torch|), i.e. an absolute
tolerance of 1e-4 for outputs up to 1 in magnitude and a relative one above that.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

import export_models
from conftest import REPO, binary_path, run_cli, run_cli_ok

MODELS = [n for n in export_models.MODELS if not export_models.is_encoder(n)]
# The original CNNs: also checked with several streams, split convolutions and CUDA plans. The
# broad benchmark's families (export_models.is_zoo) are checked for accuracy at batch 1 and 2.
CORE_MODELS = [n for n in MODELS if not export_models.is_zoo(n)]
ENCODERS = [n for n in export_models.MODELS if export_models.is_encoder(n)]
TOL = 1e-4
THREADS = 2
# (batch, seq) per encoder: short, typical and the longest sequence the position table allows.
ENCODER_SHAPES = {
    "bert": [(1, 8), (2, 128), (8, 64), (1, 512)],
    "bert_tiny": [(1, 1), (1, 8), (3, 17), (2, 128), (8, 64), (4, 200), (1, 512)],
}
# Ops the transformer passes must leave in an encoder's plan, and ops they must remove.
ENCODER_FUSED_OPS = ("Attention", "LayerNormalization", "FusedMatMul")
ENCODER_GONE_OPS = ("Softmax", "Erf", "ReduceMean", "Sqrt", "Pow")


def assert_close(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    """max|ours - ref| <= TOL * max(1, max|ref|), with the error and the scale in the message."""
    assert ours.shape == ref.shape, f"{what}: output shape {ours.shape}, torch has {ref.shape}"
    assert ours.dtype == np.float32, f"{what}: output dtype {ours.dtype}, expected float32"
    assert np.isfinite(ours).all(), f"{what}: {np.count_nonzero(~np.isfinite(ours))} non-finite outputs"
    diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
    err = float(diff.max())
    ref_max = float(np.abs(ref).max())
    scale = max(1.0, ref_max)
    worst = np.unravel_index(int(diff.argmax()), diff.shape)
    msg = (f"{what}: max|ours - torch| = {err:.3e}, scale max(1, max|torch|) = {scale:.4g} "
           f"(max|torch| = {ref_max:.4g}), bound 1e-4 * scale = {TOL * scale:.3e}; "
           f"worst at {tuple(int(i) for i in worst)}: ours {float(ours[worst]):.6g}, torch {float(ref[worst]):.6g}")
    print(msg)
    assert err <= TOL * scale, msg


def run_model(onnx_path, input_path, out_dir, input_name="input", output_name="output", extra=None) -> np.ndarray:
    """`streamline run` on one input file (with --threads 2, or EXTRA's flags instead); returns the
    output tensor it wrote."""
    flags = ["--threads", THREADS] if extra is None else list(extra)
    run_cli_ok(["run", onnx_path, "--input", f"{input_name}={input_path}", "--output-dir", out_dir, *flags])
    out = out_dir / f"{output_name}.npy"
    assert out.is_file(), f"streamline exited 0 but wrote no {out}"
    return np.load(out)


@pytest.mark.parametrize("name", MODELS)
def test_model_matches_torch(name, streamline_binary, exported, tmp_path):
    """Batch 1, the exported reference pair: max|ours - torch| <= 1e-4 * max(1, max|torch|)."""
    p = exported(name)
    ref = np.load(p["torch"])
    ours = run_model(p["onnx"], p["input"], tmp_path / "out", export_models.input_name(name),
                     export_models.output_name(name))
    assert_close(ours, ref, f"{name} batch 1")


@pytest.mark.parametrize("name", MODELS)
def test_model_batch2_matches_torch(name, streamline_binary, exported, torch, tmp_path):
    """Batch 2 through the dynamic batch axis, reference computed here with PyTorch:
    max|ours - torch| <= 1e-4 * max(1, max|torch|)."""
    p = exported(name)
    x = export_models.reference_input(name, batch=2, seed=1)
    ref = export_models.torch_forward(export_models.build_model(name), x)
    # Two different images must give two different rows, or mixing them up would go unnoticed.
    assert np.abs(ref[0] - ref[1]).max() > 1e-3, f"{name}: the two reference rows are nearly equal"
    x_path = tmp_path / "input_b2.npy"
    np.save(x_path, x)
    ours = run_model(p["onnx"], x_path, tmp_path / "out", export_models.input_name(name),
                     export_models.output_name(name))
    assert_close(ours, ref, f"{name} batch 2")


def test_cli_binary_from_env(monkeypatch):
    """The binary is $SL_BINARY when set, else <repo>/build/tools/streamline."""
    monkeypatch.setenv("SL_BINARY", "/opt/elsewhere/streamline")
    assert str(binary_path()) == "/opt/elsewhere/streamline"
    monkeypatch.delenv("SL_BINARY")
    from conftest import REPO
    assert binary_path() == REPO / "build" / "tools" / "streamline"


def test_cli_version(streamline_binary):
    r = run_cli_ok(["--version"], timeout=60)
    assert r.stdout.startswith("streamline "), f"unexpected --version output: {r.stdout!r}"


def test_cli_bad_model_is_exit_2(streamline_binary, tmp_path):
    """A file that is not ONNX is a bad-model error: exit code 2, "error: Code: message" on stderr."""
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"this is not a protobuf")
    r = run_cli(["run", junk], timeout=60)
    assert r.returncode == 2, f"exit code {r.returncode}, stderr: {r.stderr!r}"
    assert r.stderr.startswith("error: "), f"stderr: {r.stderr!r}"


@pytest.mark.parametrize("name", CORE_MODELS)
def test_model_streams_match_single_stream(name, streamline_binary, exported, tmp_path):
    """Multi-stream plans (S = 2, 4, 8, one thread per stream, safe mode on: canaries checked and
    dead buffers poisoned) give the S=1 outputs within 1e-5 absolute. Every plan is also proven
    race-free by the planner's verifier (planning fails otherwise); `plan --json` reports it.
    Every run uses the direct convolution (--no-winograd), so the 1e-5 bound holds the plans alone,
    not the Winograd kernels' rounding with other thread splits."""
    p = exported(name)
    run_cli_ok(["run", p["onnx"], "--input", f"input={p['input']}", "--output-dir", tmp_path / "s1",
                "--threads", 1, "--safe", "--no-winograd"])
    base = np.load(tmp_path / "s1" / "output.npy")
    for streams in (2, 4, 8):
        out_dir = tmp_path / f"s{streams}"
        run_cli_ok(["run", p["onnx"], "--input", f"input={p['input']}", "--output-dir", out_dir,
                    "--streams", streams, "--threads-per-stream", 1, "--safe", "--no-winograd"])
        ours = np.load(out_dir / "output.npy")
        err = float(np.abs(ours.astype(np.float64) - base).max())
        assert err <= 1e-5, f"{name}: S={streams} differs from S=1 by {err:.3e} (bound 1e-5)"
        plan = json.loads(run_cli_ok(["plan", p["onnx"], "--streams", streams, "--json"]).stdout)
        assert plan["verified"] is True, f"{name}: S={streams} plan not verified"
        assert plan["streams_used"] <= streams
        assert plan["events_after_pruning"] <= plan["events_inserted"]
        assert plan["arena_bytes"] <= plan["naive_bytes"]
    # Heavy convolutions cut into two slices of their filters, one per stream: same outputs.
    out_dir = tmp_path / "split"
    run_cli_ok(["run", p["onnx"], "--input", f"input={p['input']}", "--output-dir", out_dir,
                "--streams", 2, "--threads-per-stream", 1, "--split-convs", 2, "--safe", "--no-winograd"])
    err = float(np.abs(np.load(out_dir / "output.npy").astype(np.float64) - base).max())
    assert err <= 1e-5, f"{name}: --split-convs 2 differs from S=1 by {err:.3e} (bound 1e-5)"
    plan = json.loads(run_cli_ok(["plan", p["onnx"], "--streams", 2, "--split-convs", 2, "--json"]).stdout)
    assert plan["verified"] is True
    assert any("/slice1" in n["name"] for n in plan["nodes"]), f"{name}: no convolution was split"
    # Elastic threads: each step gets 2 / (busy streams) threads; same outputs.
    out_dir = tmp_path / "elastic"
    run_cli_ok(["run", p["onnx"], "--input", f"input={p['input']}", "--output-dir", out_dir,
                "--streams", 2, "--threads", 2, "--elastic-threads", "--safe", "--no-winograd"])
    err = float(np.abs(np.load(out_dir / "output.npy").astype(np.float64) - base).max())
    assert err <= 1e-5, f"{name}: elastic threads differ from S=1 by {err:.3e} (bound 1e-5)"


@pytest.mark.parametrize("name", ["squeezenet1_1"])  # the id puts it in ctest's model_squeezenet1_1
def test_trace_stats_on_a_two_stream_trace(name, streamline_binary, exported, tmp_path):
    """bench/trace_stats.py on a real two-stream trace: one entry per stream, busy time within the
    span, the cross-stream waits found through the flow arrows, and node names from the plan."""
    p = exported(name)
    plan = json.loads(run_cli_ok(["plan", p["onnx"], "--streams", 2, "--json"]).stdout)
    assert plan["streams_used"] == 2, f"{name} should plan onto two streams"
    trace = tmp_path / "trace.json"
    run_cli_ok(["bench", p["onnx"], "--streams", 2, "--threads", 2, "--max-runs", 5, "--warmup", 0,
                "--trace", trace])
    r = subprocess.run([sys.executable, str(REPO / "bench" / "trace_stats.py"), str(trace), "--json", "--top", "3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["runs"] == 5
    assert sorted(s["streams"]) == ["0", "1"]
    for tid, v in s["streams"].items():
        assert 0 < v["busy_ms"] <= s["span_ms"] + 1e-6, f"stream {tid}: {v} against span {s['span_ms']}"
    assert s["idle_waits_per_run"] > 0, "no cross-stream wait found in a two-stream trace"
    assert s["wake_latency_us"]["p50"] is not None and s["wake_latency_us"]["p50"] >= 0
    names = {n["name"] for n in plan["nodes"]}
    assert len(s["top_nodes"]) == 3 and all(n["name"] in names for n in s["top_nodes"]), s["top_nodes"]
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = subprocess.run([sys.executable, str(REPO / "bench" / "trace_stats.py"), str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "no traceEvents" in r.stderr, r.stderr


@pytest.mark.parametrize("name", CORE_MODELS + ENCODERS)
def test_model_plans_for_cuda(name, streamline_binary, exported, tmp_path):
    """With the CUDA backend built, every test model plans for the GPU (fp32 and fp16, 1 and 4
    streams) on any machine: every step has a CUDA kernel (the planner refuses CPU steps in a GPU
    plan) and the verifier proves the plan. Without a GPU, running it fails cleanly, naming the
    device."""
    version = run_cli_ok(["--version"], timeout=60).stdout
    # Registered only for builds with the CUDA backend (tests/models/CMakeLists.txt).
    assert "CUDA: yes" in version, f"no CUDA backend in this build: {version.strip()}"
    p = exported(name)
    for precision in ("fp32", "fp16"):
        for streams in (1, 4):
            plan = json.loads(run_cli_ok(["plan", p["onnx"], "--device", "cuda", "--precision", precision,
                                          "--streams", streams, "--json"]).stdout)
            what = f"{name} {precision} S={streams}"
            assert plan["device"] == "cuda", what
            assert plan["verified"] is True, what
            assert 1 <= plan["streams_used"] <= streams, what
            if precision == "fp16":
                assert any(n["op"] == "Cast" for n in plan["nodes"]), f"{what}: no Cast at the float32 boundary"
    if "no device" in version:
        r = run_cli(["run", p["onnx"], "--device", "cuda:0"], timeout=120)
        assert r.returncode != 0, f"{name}: a GPU run without a GPU succeeded"
        assert "cuda:0" in r.stderr and "Unavailable" in r.stderr, f"stderr: {r.stderr!r}"


# --- BERT-like encoders --------------------------------------------------------------------------

def run_encoder(name, p, ids: np.ndarray, out_dir, extra=None) -> np.ndarray:
    x_path = out_dir.parent / f"{out_dir.name}_ids.npy"
    np.save(x_path, ids)
    return run_model(p["onnx"], x_path, out_dir, export_models.input_name(name),
                     export_models.output_name(name), extra)


@pytest.mark.parametrize("name", ENCODERS)
def test_encoder_matches_torch(name, streamline_binary, exported, torch, tmp_path):
    """Token ids of several (batch, seq) through the dynamic axes, reference computed here with
    PyTorch: max|ours - torch| <= 1e-4 * max(1, max|torch|) for every shape."""
    p = exported(name)
    model = export_models.build_model(name)
    # The exported reference pair first (it was computed at export time).
    ours = run_model(p["onnx"], p["input"], tmp_path / "ref", export_models.input_name(name),
                     export_models.output_name(name))
    assert_close(ours, np.load(p["torch"]), f"{name} exported pair")
    for k, (batch, seq) in enumerate(ENCODER_SHAPES[name]):
        ids = export_models.reference_input(name, batch=batch, seed=10 + k, seq=seq)
        ref = export_models.torch_forward(model, ids)
        if batch > 1:
            assert np.abs(ref[0] - ref[1]).max() > 1e-3, f"{name}: two reference rows are nearly equal"
        ours = run_encoder(name, p, ids, tmp_path / f"b{batch}s{seq}")
        assert_close(ours, ref, f"{name} batch {batch} seq {seq}")


@pytest.mark.parametrize("name", ENCODERS)
def test_encoder_plan_is_fused(name, streamline_binary, exported):
    """The plan of an exported encoder runs attention, LayerNorm and GELU fused: one Attention and
    two LayerNormalization steps per layer, every GELU inside a FusedMatMul, and none of the ops
    the patterns were made of left over."""
    p = exported(name)
    layers = export_models.MODELS[name].layers
    plan = json.loads(run_cli_ok(["plan", p["onnx"], "--shape", f"{export_models.input_name(name)}=2,16",
                                  "--json"]).stdout)
    ops = [s["op"] for s in plan["nodes"]]
    assert ops.count("Attention") == layers, ops
    assert ops.count("LayerNormalization") == 2 * layers, ops
    for op in ENCODER_GONE_OPS:
        assert op not in ops, f"{name}: {op} left in the plan: {ops}"
    assert "Gelu" not in ops, f"{name}: the GELU did not go into its MatMul: {ops}"
    for op in ENCODER_FUSED_OPS:
        assert op in ops, f"{name}: no {op} in the plan"


@pytest.mark.parametrize("name", ENCODERS)
def test_encoder_streams_match_single_stream(name, streamline_binary, exported, tmp_path):
    """S = 2, 4 and 8 (one thread per stream, safe mode) give the S=1 outputs within 1e-5 absolute."""
    p = exported(name)
    ids = export_models.reference_input(name, batch=2, seed=3, seq=16)
    base = run_encoder(name, p, ids, tmp_path / "s1", ["--threads", 1, "--safe"])
    for streams in (2, 4, 8):
        ours = run_encoder(name, p, ids, tmp_path / f"s{streams}",
                           ["--streams", streams, "--threads-per-stream", 1, "--safe"])
        err = float(np.abs(ours.astype(np.float64) - base).max())
        assert err <= 1e-5, f"{name}: S={streams} differs from S=1 by {err:.3e} (bound 1e-5)"
