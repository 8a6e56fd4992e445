#!/usr/bin/env python3
"""Multi-stream and multi-context comparisons, in one run, on the same model files.

1. Streams: for each model (default googlenet, squeezenet1_1) at batch 1, every single-stream
   configuration (1 stream x T threads) against every multi-stream one (S streams x T/S threads)
   with the same total threads; prints the best of each and their ratio.
2. Contexts: two concurrent requests on two execution contexts of 1 thread each
   (`streamline bench --concurrency 2 --threads 1`) against ONNX Runtime with two sessions of
   1 thread each on two Python threads (ORT releases the GIL while it runs); throughput ratio.

3. With --oversubscribe, also S streams x T threads each (S*T threads on T cores): a stream that
   runs alone (the stem of a network) then uses every core, while concurrent branches share them.
   These are compared with the best single-stream configuration on the same cores.
4. Elastic threads (`--elastic-threads`): S streams sharing the T threads, each step running on
   T / (streams inside a kernel at that moment) threads; counted among the multi-stream
   configurations with T threads.
5. Split convolutions (`--split-convs S`): every multi-stream configuration also runs with the
   heavy convolutions cut into S slices of their filters, which the planner spreads over streams.

Shared machines are noisy, so every configuration runs once per round, the rounds interleave
the configurations, and the tables give the median over rounds (of p50 latency, of throughput,
and of the per-round ratios).

    .venv/bin/python bench/streams.py                       # 2 total threads, 3 rounds
    .venv/bin/python bench/streams.py --total-threads 16    # a bigger machine
    .venv/bin/python bench/streams.py --rounds 5 --oversubscribe --json out.json
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


def median(values):
    v = sorted(values)
    n = len(v)
    return float("nan") if n == 0 else (v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="googlenet,squeezenet1_1")
    ap.add_argument("--total-threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--oversubscribe", action="store_true",
                    help="also S streams x T threads each, and 1 stream x S*T threads")
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"))
    ap.add_argument("--binary", default=os.environ.get("SL_BINARY", str(REPO / "build" / "tools" / "streamline")))
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    paths = co.ensure_models(names, Path(args.model_dir))
    T = args.total_threads
    results = {"date": time.strftime("%Y-%m-%d"), "cpu": co.cpu_model(), "cores": os.cpu_count(),
               "streamline": co.streamline_version(Path(args.binary)), "total_threads": T,
               "rounds": args.rounds, "models": {}}
    print(f"{results['cpu']}, {results['cores']} cores; total threads {T}; {args.rounds} rounds; "
          f"{results['streamline']}\n")

    # (label, streams, threads per stream, split); single-stream configurations have streams == 1;
    # split: heavy convolutions cut into one slice per stream (--split-convs S).
    configs = []
    s = 1
    while s <= T:
        configs.append((f"{s} stream(s) x {T // s} thread(s)", s, T // s, False))
        if s > 1:
            configs.append((f"{s} stream(s) x {T // s} thread(s), split convs", s, T // s, True))
        s *= 2
    # Elastic: S streams whose steps share the T threads among the streams busy at that moment.
    s = 2
    while s <= T:
        configs.append((f"{s} stream(s), elastic {T} thread(s)", s, -T, False))
        configs.append((f"{s} stream(s), elastic {T} thread(s), split convs", s, -T, True))
        s *= 2
    if args.oversubscribe:
        s = 2
        while s <= T:
            configs.append((f"{s} stream(s) x {T} thread(s) ({s * T} threads)", s, T, False))
            s *= 2
        configs.append((f"1 stream(s) x {2 * T} thread(s) ({2 * T} threads)", 1, 2 * T, False))

    runs = {name: {label: [] for label, *_ in configs} for name in names}
    pairs = {name: [] for name in names}
    for rnd in range(args.rounds):
        for name in names:
            model = paths[name]
            for label, streams, tps, split in configs:
                if tps < 0:  # elastic
                    extra = ["--streams", str(streams), "--threads", str(-tps), "--elastic-threads"]
                else:
                    extra = ["--streams", str(streams), "--threads-per-stream", str(tps), "--threads", str(streams * tps)]
                if split:
                    extra += ["--split-convs", str(streams)]
                r = sl_bench(args.binary, model, extra, args.seconds, args.warmup)
                runs[name][label].append(r)
            # Two contexts x one thread each, against ORT with two sessions x one thread.
            sl2 = sl_bench(args.binary, model, ["--concurrency", "2", "--threads", "1"], args.seconds, args.warmup)
            ort2 = ort_sessions(model, 2, 1, args.seconds, args.warmup)
            pairs[name].append({"streamline": sl2, "ort": ort2})
            print(f"round {rnd + 1}/{args.rounds}: {name} done", file=sys.stderr, flush=True)

    rows = [["model", "config", "p50 ms", "p99 ms", "throughput/s"]]
    for name in names:
        entry = {"configs": {}}
        med = {}
        for label, streams, tps, _ in configs:
            ok = [r for r in runs[name][label] if "error" not in r]
            entry["configs"][label] = runs[name][label]
            if not ok:
                rows.append([name, label, "error", runs[name][label][0]["error"][:60], ""])
                continue
            med[label] = {"p50": median([r["latency_ms"]["p50"] for r in ok]),
                          "p99": median([r["latency_ms"]["p99"] for r in ok]),
                          "throughput": median([r["throughput"] for r in ok]), "streams": streams,
                          "threads": -tps if tps < 0 else streams * tps}
            rows.append([name, label, f"{med[label]['p50']:.2f}", f"{med[label]['p99']:.2f}",
                         f"{med[label]['throughput']:.1f}"])
        entry["median"] = med
        same = {k: v for k, v in med.items() if v["threads"] == T}
        single = {k: v for k, v in same.items() if v["streams"] == 1}
        multi = {k: v for k, v in same.items() if v["streams"] > 1}
        if single and multi:
            bs = min(single, key=lambda k: single[k]["p50"])
            bm = min(multi, key=lambda k: multi[k]["p50"])
            entry["speedup"] = single[bs]["p50"] / multi[bm]["p50"]
            entry["best_single"], entry["best_multi"] = bs, bm
            rows.append([name, f"best multi-stream over best single-stream, {T} threads", "", "",
                         f"{entry['speedup']:.2f}x"])
        if args.oversubscribe:
            single_any = {k: v for k, v in med.items() if v["streams"] == 1}
            multi_any = {k: v for k, v in med.items() if v["streams"] > 1}
            if single_any and multi_any:
                bs = min(single_any, key=lambda k: single_any[k]["p50"])
                bm = min(multi_any, key=lambda k: multi_any[k]["p50"])
                entry["speedup_same_cores"] = single_any[bs]["p50"] / multi_any[bm]["p50"]
                entry["best_single_same_cores"], entry["best_multi_same_cores"] = bs, bm
                rows.append([name, f"best multi-stream ({bm.split(' (')[0]}) over best single-stream, {T} cores",
                             "", "", f"{entry['speedup_same_cores']:.2f}x"])
        good = [p for p in pairs[name] if "error" not in p["streamline"]]
        entry["two_contexts"] = pairs[name]
        if good:
            ratio = median([p["streamline"]["throughput"] / p["ort"]["throughput"] for p in good])
            entry["two_contexts_ratio"] = ratio
            rows.append([name, "2 contexts x 1 thread (streamline)",
                         f"{median([p['streamline']['latency_ms']['p50'] for p in good]):.2f}",
                         f"{median([p['streamline']['latency_ms']['p99'] for p in good]):.2f}",
                         f"{median([p['streamline']['throughput'] for p in good]):.1f}"])
            rows.append([name, "2 sessions x 1 thread (ONNX Runtime)",
                         f"{median([p['ort']['latency_ms']['p50'] for p in good]):.2f}",
                         f"{median([p['ort']['latency_ms']['p99'] for p in good]):.2f}",
                         f"{median([p['ort']['throughput'] for p in good]):.1f}"])
            rows.append([name, "throughput ratio streamline / ONNX Runtime (median of rounds)", "", "",
                         f"{ratio:.2f}x"])
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
