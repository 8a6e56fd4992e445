#!/usr/bin/env python3
"""Throughput of one InferenceSession shared by several Python threads.

    .venv/bin/python bench/python_threads.py
    .venv/bin/python bench/python_threads.py --model squeezenet1_1 --threads 1,2,4 --seconds 10

One session (intra_op_num_threads 1, sequential execution) on a CNN from
scripts/export_models.py (exported into build/models when missing; needs torch), run from T
Python threads at once, each calling session.run in a loop on its own batch-1 input for
--seconds. Throughput is runs per second over all threads; the speed-up is against one thread.
Thread counts take turns over --repeats rounds (1, 2, 4, 1, 2, 4, ...) and each count reports its
best round, so the load others put on a shared machine hurts every count alike. --engine
onnxruntime runs the same with ONNX Runtime's session for comparison. It prints a table, then the
same figures as one line of JSON (also written to --json). CPU cores is the process's CPU time
over wall time: when it does not grow with the threads, the machine gave no more CPU (others'
load, a quota) and the speed-up says nothing about the package; CPU ms per run growing with the
threads would be contention in the process.
"""

import argparse
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("SL_PYTHON_DIR", str(REPO / "build" / "python")))
sys.path.insert(0, str(REPO / "scripts"))

import export_models  # noqa: E402


def throughput(sess, feed_name, inputs, seconds):
    stop = threading.Event()
    counts = [0] * len(inputs)
    start = threading.Barrier(len(inputs) + 1)

    def worker(i):
        feed = {feed_name: inputs[i]}
        start.wait()
        n = 0
        while not stop.is_set():
            sess.run(None, feed)
            n += 1
        counts[i] = n

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    start.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    runs = max(1, sum(counts))
    return {"runs_per_s": sum(counts) / wall, "cpu_cores": cpu / wall, "cpu_ms_per_run": cpu * 1000 / runs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="squeezenet1_1")
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engine", choices=["streamline", "onnxruntime"], default="streamline")
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"))
    ap.add_argument("--json")
    args = ap.parse_args()
    paths, _ = export_models.export_model(args.model, args.model_dir)
    module = __import__(args.engine)
    so = module.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = module.ExecutionMode.ORT_SEQUENTIAL
    sess = module.InferenceSession(str(paths["onnx"]), so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    counts = [int(t) for t in args.threads.split(",")]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((1, 3, 224, 224), dtype=np.float32) for _ in range(max(counts))]
    for x in inputs:
        sess.run(None, {name: x})  # plans made and every pooled context warm before timing
    throughput(sess, name, inputs, 1.0)
    best = {t: None for t in counts}
    for _ in range(args.repeats):
        for t in counts:
            r = throughput(sess, name, inputs[:t], args.seconds)
            if best[t] is None or r["runs_per_s"] > best[t]["runs_per_s"]:
                best[t] = r
    print(f"{args.engine}, {args.model}, intra-op threads 1, {os.cpu_count()} cpus, best of {args.repeats} x "
          f"{args.seconds:g} s")
    print(f"{'threads':>7} {'runs/s':>8} {'speed-up':>8} {'CPU cores':>9} {'CPU ms/run':>10}")
    base = best[counts[0]]["runs_per_s"]
    for t in counts:
        b = best[t]
        print(f"{t:7d} {b['runs_per_s']:8.2f} {b['runs_per_s'] / base:7.2f}x {b['cpu_cores']:9.2f} "
              f"{b['cpu_ms_per_run']:10.2f}")
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "engine": args.engine,
        "version": module.__version__,
        "model": args.model,
        "intra_op_threads": 1,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "runs_per_s": {str(t): best[t]["runs_per_s"] for t in counts},
        "speedup": {str(t): best[t]["runs_per_s"] / base for t in counts},
        "cpu_cores": {str(t): best[t]["cpu_cores"] for t in counts},
        "cpu_ms_per_run": {str(t): best[t]["cpu_ms_per_run"] for t in counts},
    }
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
