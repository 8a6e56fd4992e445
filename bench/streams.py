#!/usr/bin/env python3
"""Multi-stream and multi-context comparisons, in one run, on the same model files.

1. Streams: for each model (default googlenet, squeezenet1_1) at batch 1, every single-stream
   configuration (1 stream x T threads) against every multi-stream one (S streams x T/S threads)
   with the same total threads; prints the best of each and their ratio.
2. Contexts: two concurrent requests on two execution contexts of 1 thread each
   (`streamline bench --concurrency 2 --threads 1`) against ONNX Runtime with two sessions of
   1 thread each on two Python threads (ORT releases the GIL while it runs); throughput ratio.

    .venv/bin/python bench/streams.py                       # 2 total threads
    .venv/bin/python bench/streams.py --total-threads 16    # a bigger machine
    .venv/bin/python bench/streams.py --json out.json
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_ort as co  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def sl_bench(binary, model, extra, seconds, warmup):
    cmd = [str(binary), "bench", str(model), "--seconds", str(seconds), "--warmup", str(warmup), "--json"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + warmup + 300)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-500:], "command": " ".join(cmd)}
    return json.loads(r.stdout.strip().splitlines()[-1])


def ort_sessions(model, sessions, threads, seconds, warmup):
    """`sessions` ORT sessions of `threads` intra-op threads each, one Python thread per session,
    closed loop; returns total throughput and latency percentiles."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = [ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"]) for _ in range(sessions)]
    inp = sess[0].get_inputs()[0]
    x = np.random.RandomState(0).standard_normal(co.ort_input_shape(inp, 1, {})).astype(np.float32)
    lat = [[] for _ in range(sessions)]
    start = time.perf_counter() + warmup
    stop = start + seconds

    def client(i):
        while True:
            a = time.perf_counter()
            sess[i].run(None, {inp.name: x})
            b = time.perf_counter()
            if a >= start:
                lat[i].append((b - a) * 1e3)
            if b >= stop:
                return

    ts = [threading.Thread(target=client, args=(i,)) for i in range(sessions)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - start
    all_lat = [v for l in lat for v in l]
    return {"throughput": len(all_lat) / elapsed, "latency_ms": {"p50": co.percentile(all_lat, 50),
                                                                  "p99": co.percentile(all_lat, 99)},
            "runs": len(all_lat)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="googlenet,squeezenet1_1")
    ap.add_argument("--total-threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"))
    ap.add_argument("--binary", default=os.environ.get("SL_BINARY", str(REPO / "build" / "tools" / "streamline")))
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    paths = co.ensure_models(names, Path(args.model_dir))
    T = args.total_threads
    results = {"date": time.strftime("%Y-%m-%d"), "cpu": co.cpu_model(), "cores": os.cpu_count(),
               "streamline": co.streamline_version(Path(args.binary)), "total_threads": T, "models": {}}
    print(f"{results['cpu']}, {results['cores']} cores; total threads {T}; {results['streamline']}\n")
    rows = [["model", "config", "p50 ms", "p99 ms", "throughput/s"]]
    for name in names:
        model = paths[name]
        configs = []
        s = 1
        while s <= T:
            configs.append((s, T // s))
            s *= 2
        res = {}
        for streams, tps in configs:
            key = f"{streams} stream(s) x {tps} thread(s)"
            r = sl_bench(args.binary, model, ["--streams", str(streams), "--threads-per-stream", str(tps)],
                         args.seconds, args.warmup)
            res[key] = r
            if "error" in r:
                rows.append([name, key, "error", r["error"][:60], ""])
                continue
            rows.append([name, key, f"{r['latency_ms']['p50']:.2f}", f"{r['latency_ms']['p99']:.2f}",
                         f"{r['throughput']:.1f}"])
        single = [v for k, v in res.items() if k.startswith("1 stream") and "error" not in v]
        multi = [v for k, v in res.items() if not k.startswith("1 stream") and "error" not in v]
        entry = {"configs": res}
        if single and multi:
            bs = min(single, key=lambda r: r["latency_ms"]["p50"])
            bm = min(multi, key=lambda r: r["latency_ms"]["p50"])
            entry["best_single_p50_ms"] = bs["latency_ms"]["p50"]
            entry["best_multi_p50_ms"] = bm["latency_ms"]["p50"]
            entry["speedup"] = bs["latency_ms"]["p50"] / bm["latency_ms"]["p50"]
            rows.append([name, "best multi-stream speedup over best single-stream", "", "",
                         f"{entry['speedup']:.2f}x"])
        # Two contexts x one thread each, against ORT with two sessions x one thread.
        sl2 = sl_bench(args.binary, model, ["--concurrency", "2", "--threads", "1"], args.seconds, args.warmup)
        ort2 = ort_sessions(model, 2, 1, args.seconds, args.warmup)
        entry["two_contexts"] = {"streamline": sl2, "ort": ort2}
        if "error" not in sl2:
            entry["two_contexts"]["ratio"] = sl2["throughput"] / ort2["throughput"]
            rows.append([name, "2 contexts x 1 thread (streamline)", f"{sl2['latency_ms']['p50']:.2f}",
                         f"{sl2['latency_ms']['p99']:.2f}", f"{sl2['throughput']:.1f}"])
        rows.append([name, "2 sessions x 1 thread (ONNX Runtime)", f"{ort2['latency_ms']['p50']:.2f}",
                     f"{ort2['latency_ms']['p99']:.2f}", f"{ort2['throughput']:.1f}"])
        if "ratio" in entry["two_contexts"]:
            rows.append([name, "throughput ratio streamline / ONNX Runtime", "", "",
                         f"{entry['two_contexts']['ratio']:.2f}x"])
        results["models"][name] = entry
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
