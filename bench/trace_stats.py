#!/usr/bin/env python3
"""Summarises a trace written by `streamline run/bench --trace FILE.json`.

Per run (medians over the runs in the file): the span from the first step's start to the last
step's end, each stream's busy time and idle gaps, and the event waits. A wait counts as "idle"
when the waiting stream had finished its previous step before the producer recorded the event;
for those, the wake-up latency is the time from the record (the producer's end) to the waiting
step's start. The table after it lists the nodes with the largest median time.

    streamline bench build/models/googlenet.onnx --streams 2 --trace /tmp/g.json
    .venv/bin/python bench/trace_stats.py /tmp/g.json --top 10
    .venv/bin/python bench/trace_stats.py /tmp/g.json --json      # one JSON object
"""

import argparse
import collections
import json
import statistics
import sys


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def summarise(trace, top):
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(events, list):
        raise ValueError("not a trace-event file (no traceEvents list)")
    slices = [e for e in events if e.get("ph") == "X"]
    if not slices:
        raise ValueError("the trace has no step slices")
    runs = collections.defaultdict(list)
    by_stream = collections.defaultdict(list)
    per_node = collections.defaultdict(list)
    node_op = {}
    for e in slices:
        runs[e["args"]["run"]].append(e)
        by_stream[e["tid"]].append(e)
        per_node[e["name"]].append(e["dur"])
        node_op[e["name"]] = e.get("args", {}).get("op", e.get("cat", "?"))
    for v in by_stream.values():
        v.sort(key=lambda e: e["ts"])
    position = {(tid, e["ts"]): i for tid, v in by_stream.items() for i, e in enumerate(v)}

    spans, busy, idle = [], collections.defaultdict(list), collections.defaultdict(list)
    for es in runs.values():
        spans.append(max(e["ts"] + e["dur"] for e in es) - min(e["ts"] for e in es))
        for tid in by_stream:
            mine = sorted((e for e in es if e["tid"] == tid), key=lambda e: e["ts"])
            busy[tid].append(sum(e["dur"] for e in mine))
            idle[tid].append(sum(b["ts"] - a["ts"] - a["dur"] for a, b in zip(mine, mine[1:])))

    flows = collections.defaultdict(dict)
    for e in events:
        if e.get("ph") in ("s", "f"):
            flows[e["id"]][e["ph"]] = e
    wake, waited = [], []
    for f in flows.values():
        if "s" not in f or "f" not in f:
            continue
        i = position.get((f["f"]["tid"], f["f"]["ts"]))
        if not i:
            continue
        prev = by_stream[f["f"]["tid"]][i - 1]
        prev_end = prev["ts"] + prev["dur"]
        if prev_end < f["s"]["ts"]:
            wake.append(f["f"]["ts"] - f["s"]["ts"])
            waited.append(f["s"]["ts"] - prev_end)
    wake.sort()
    waited.sort()
    n_runs = len(runs)
    med = statistics.median
    op_us = collections.defaultdict(float)
    op_steps = collections.Counter()
    for name, durs in per_node.items():
        op_us[node_op[name]] += med(durs)
        op_steps[node_op[name]] += 1
    total_us = sum(op_us.values()) or 1.0
    return {
        "runs": n_runs,
        "span_ms": med(spans) / 1000,
        "streams": {
            str(tid): {"busy_ms": med(busy[tid]) / 1000, "idle_ms": med(idle[tid]) / 1000} for tid in sorted(by_stream)
        },
        "sum_of_node_medians_ms": sum(med(v) for v in per_node.values()) / 1000,
        "idle_waits_per_run": len(wake) / n_runs,
        "wake_latency_us": {"p10": percentile(wake, 0.1), "p50": percentile(wake, 0.5), "p90": percentile(wake, 0.9)},
        "wake_latency_ms_per_run": sum(wake) / n_runs / 1000,
        "wait_before_record_us": {"p10": percentile(waited, 0.1), "p50": percentile(waited, 0.5), "p90": percentile(waited, 0.9)},
        "ops": [
            {"op": op, "ms": us / 1000, "share": us / total_us, "steps": op_steps[op]}
            for op, us in sorted(op_us.items(), key=lambda kv: -kv[1])
        ],
        "top_nodes": [
            {"name": k, "median_us": med(v)} for k, v in sorted(per_node.items(), key=lambda kv: -med(kv[1]))[:top]
        ],
    }


def fmt(v):
    return "-" if v is None else f"{v:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", help="Chrome trace-event JSON from --trace")
    ap.add_argument("--top", type=int, default=10, help="how many nodes to list (default 10)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    args = ap.parse_args()
    try:
        with open(args.trace) as f:
            s = summarise(json.load(f), args.top)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"trace_stats: {args.trace}: {e}")
    if args.json:
        print(json.dumps(s))
        return
    print(f"{s['runs']} runs; median span {s['span_ms']:.2f} ms; sum of per-node medians {s['sum_of_node_medians_ms']:.2f} ms")
    print(f"{'stream':>6}  {'busy ms':>8}  {'idle ms':>8}")
    for tid, v in s["streams"].items():
        print(f"{tid:>6}  {v['busy_ms']:8.2f}  {v['idle_ms']:8.2f}")
    w, b = s["wake_latency_us"], s["wait_before_record_us"]
    print(f"event waits on an idle stream: {s['idle_waits_per_run']:.1f} per run, wake-up p10/p50/p90 "
          f"{fmt(w['p10'])}/{fmt(w['p50'])}/{fmt(w['p90'])} us ({s['wake_latency_ms_per_run']:.3f} ms per run); "
          f"waited before the record p10/p50/p90 {fmt(b['p10'])}/{fmt(b['p50'])}/{fmt(b['p90'])} us")
    print(f"{'op':<28}  {'ms':>8}  {'share':>6}  {'steps':>5}")
    for o in s["ops"]:
        print(f"{o['op']:<28}  {o['ms']:8.3f}  {100 * o['share']:5.1f}%  {o['steps']:5d}")
    print(f"{'node':<60}  {'median us':>10}")
    for n in s["top_nodes"]:
        print(f"{n['name'][-60:]:<60}  {n['median_us']:10.1f}")


if __name__ == "__main__":
    main()
