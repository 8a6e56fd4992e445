#!/usr/bin/env python3
"""Per-call overhead of the Python package against ONNX Runtime's, on a tiny model.

    .venv/bin/python bench/python_overhead.py
    .venv/bin/python bench/python_overhead.py --elements 16 --rounds 200 --calls 100 --json out.json

It prints a table, then the same figures as one line of JSON (also written to --json).

The model is one Add of two float32 [N] tensors (N = --elements, default 16), so a call's time is
almost all overhead: argument checks, numpy conversion, the session lookup, planning's cache
lookup, the run and the output array. Both packages run the same file through
`InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x, "y": y})` with one
intra-op thread, in one process. The engines alternate: each round times --calls calls of one,
then of the other (which one goes first alternates too), so both see the same machine load.
Every call is timed on its own with perf_counter_ns; p50 and p99 are over all calls of an engine.

The package under test is the build tree's (build/python) unless $SL_PYTHON_DIR names another.
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("SL_PYTHON_DIR", str(REPO / "build" / "python")))
sys.path.insert(0, str(REPO / "tests" / "python"))

import models  # noqa: E402  (tests/python/models.py: the Add model)
import onnxruntime  # noqa: E402
import streamline  # noqa: E402


def percentile(values, p):
    v = sorted(values)
    pos = p / 100.0 * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def session(module, path):
    so = module.SessionOptions()
    so.intra_op_num_threads = 1
    return module.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--calls", type=int, default=100, help="calls per engine per round")
    ap.add_argument("--warmup", type=int, default=2000, help="untimed calls per engine first")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = models.save(models.add_model(args.elements), Path(tmp) / "add.onnx")
        engines = {"streamline": session(streamline, path), "onnxruntime": session(onnxruntime, path)}
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal(args.elements, dtype=np.float32),
            "y": rng.standard_normal(args.elements, dtype=np.float32)}
    expected = feed["x"] + feed["y"]
    for name, sess in engines.items():
        np.testing.assert_allclose(sess.run(None, feed)[0], expected, rtol=1e-6, err_msg=name)
        for _ in range(args.warmup):
            sess.run(None, feed)

    times = {name: [] for name in engines}
    order = list(engines)
    clock = time.perf_counter_ns
    for r in range(args.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            run = engines[name].run
            out = times[name]
            for _ in range(args.calls):
                t0 = clock()
                run(None, feed)
                out.append(clock() - t0)

    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "versions": {"streamline": streamline.__version__, "onnxruntime": onnxruntime.__version__,
                     "numpy": np.__version__, "python": platform.python_version()},
        "elements": args.elements,
        "calls_per_engine": args.rounds * args.calls,
        "us_per_call": {name: {"p50": percentile(t, 50) / 1000, "p99": percentile(t, 99) / 1000,
                               "mean": sum(t) / len(t) / 1000} for name, t in times.items()},
    }
    s, o = result["us_per_call"]["streamline"], result["us_per_call"]["onnxruntime"]
    result["ratio_p50"] = s["p50"] / o["p50"]
    result["ratio_p99"] = s["p99"] / o["p99"]
    print(f"Add of two float32[{args.elements}], {result['calls_per_engine']} calls per engine, interleaved")
    print(f"{'engine':12} {'p50 us':>8} {'p99 us':>8} {'mean us':>8}")
    for name, v in result["us_per_call"].items():
        print(f"{name:12} {v['p50']:8.2f} {v['p99']:8.2f} {v['mean']:8.2f}")
    print(f"streamline / onnxruntime: p50 {result['ratio_p50']:.2f}x, p99 {result['ratio_p99']:.2f}x")
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
