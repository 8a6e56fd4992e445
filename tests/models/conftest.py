"""Fixtures for the model tests: where the streamline binary and the exported models live.

    SL_BINARY     the streamline CLI (default <repo>/build/tools/streamline)
    SL_MODEL_DIR  exported models, shared between runs (default <repo>/build/models)

A missing binary, torch or export is a test failure, never a skip: a model test that silently
does nothing would hide exactly the regressions it exists for.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import export_models  # noqa: E402  (needs the path above)

def pytest_configure(config):
    config.addinivalue_line(
        "markers", "extended: more variants of paths the default suite covers (ctest label extended, "
        "left out of scripts/test.sh unless --extended)")


# One inference on a CNN takes well under a second; this only bounds a hang.
RUN_TIMEOUT_S = 600


def binary_path() -> Path:
    """The streamline CLI: $SL_BINARY, else <repo>/build/tools/streamline."""
    env = os.environ.get("SL_BINARY")
    return Path(env) if env else REPO / "build" / "tools" / "streamline"


def model_dir() -> Path:
    """Where exported models are cached: $SL_MODEL_DIR, else <repo>/build/models."""
    env = os.environ.get("SL_MODEL_DIR")
    return Path(env) if env else REPO / "build" / "models"


def run_cli(args, timeout=RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Runs the CLI with ARGS (strings or paths); never raises on a non-zero exit."""
    cmd = [str(binary_path())] + [str(a) for a in args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"timed out after {timeout} s: {' '.join(cmd)}")


def run_cli_ok(args, timeout=RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    """run_cli, failing the test with the command and its stderr unless it exits 0."""
    r = run_cli(args, timeout)
    if r.returncode != 0:
        cmd = " ".join([str(binary_path())] + [str(a) for a in args])
        pytest.fail(
            f"streamline exited with {r.returncode}\n  command: {cmd}\n"
            f"  stderr: {r.stderr.strip()[-2000:] or '(empty)'}\n  stdout: {r.stdout.strip()[-1000:] or '(empty)'}",
            pytrace=False,
        )
    return r


@pytest.fixture(scope="session")
def torch():
    """torch, or a failure saying how to get it."""
    try:
        import torch as t
        import torchvision  # noqa: F401
    except ImportError as e:
        pytest.fail(
            f"torch/torchvision not importable ({e}) with {sys.executable}; "
            "run the tests with <repo>/.venv/bin/python (scripts/setup.sh creates it)",
            pytrace=False,
        )
    return t


@pytest.fixture(scope="session")
def streamline_binary() -> Path:
    """The CLI path, checked to exist and be executable."""
    p = binary_path()
    if not p.is_file() or not os.access(p, os.X_OK):
        pytest.fail(f"streamline binary not found at {p}: build it (scripts/setup.sh) or set SL_BINARY",
                    pytrace=False)
    return p


@pytest.fixture(scope="session")
def exported(torch):
    """exported(name) -> dict of paths (onnx, input, torch); exports on first use, then cached."""

    def get(name):
        try:
            p, _ = export_models.export_model(name, model_dir())
        except Exception as e:  # an export failure fails the test that needed the model
            pytest.fail(f"exporting {name} to {model_dir()} failed: {type(e).__name__}: {e}", pytrace=False)
        return p

    return get


def streamline_run(path, feeds, out_dir, extra=()):
    """`streamline run` on two threads with every input from a .npy file written beside OUT_DIR;
    returns {output name: array} as it wrote them to OUT_DIR."""
    import numpy as np

    args = ["run", path, "--threads", 2, "--output-dir", out_dir, *extra]
    for name, value in feeds.items():
        f = out_dir.parent / f"{out_dir.name}_{name}.npy"
        np.save(f, value)
        args += ["--input", f"{name}={f}"]
    run_cli_ok(args)
    return {p.stem: np.load(p) for p in out_dir.glob("*.npy")}
