#!/usr/bin/env python3
"""Per-stage throughput of a pipeline before and after its workers are rebalanced.

    .venv/bin/python bench/pipeline_balance.py
    .venv/bin/python bench/pipeline_balance.py --costs-ms 4,12,8 --workers 4,1,1 --seconds 5 --json out.json

A chain of Python stages whose work is time.sleep(cost) (it releases the GIL, so a stage's
workers run in parallel and a stage's capacity is workers / cost whatever the machine's load),
driven by --clients closed-loop client threads. First the pipeline runs with the configured
workers and no rebalancing ("before"); then the same pipeline is built with rebalancing on and
the same total as its worker budget, left to settle until --settle-windows windows in a row move
nothing (or --max-settle-s), and measured again ("after"). For each stage it prints workers,
items/s, capacity (workers x items per second of busy time, from the stage's process-time
counters) and busy fraction, and for the pipeline its throughput and the spread of stage
capacities (highest / lowest - 1); then the moves with their reasons, and the same figures as one
line of JSON (also written to --json).
"""

import argparse
import json
import os
import platform
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("SL_PYTHON_DIR", str(REPO / "build" / "python")))

import streamline  # noqa: E402


def build(costs_ms, workers, rebalance, window_us):
    b = streamline.PipelineBuilder().input("t0")
    for i, (cost, w) in enumerate(zip(costs_ms, workers)):
        src, dst = f"t{i}", f"t{i + 1}"

        def fn(t, src=src, dst=dst, seconds=cost / 1000):
            time.sleep(seconds)
            return {dst: t[src] + 1}

        b.add_function(f"s{i}", [src], [dst], fn, instances=w, queue_capacity=8)
    return b.build(rebalance=rebalance, rebalance_window_us=window_us)


class Clients:
    """Closed-loop clients, each with one request in flight, checking every answer."""

    def __init__(self, pipe, n, stages):
        self.pipe, self.stages, self.stop = pipe, stages, threading.Event()
        self.wrong = 0
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(n)]
        for t in self.threads:
            t.start()

    def run(self, i):
        x = np.array([float(i)], np.float32)
        while not self.stop.is_set():
            out = self.pipe.infer({"t0": x})[f"t{self.stages}"]
            if out[0] != x[0] + self.stages:
                self.wrong += 1

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def measure(pipe, seconds):
    a, t0 = pipe.stats(), time.monotonic()
    time.sleep(seconds)
    b, t1 = pipe.stats(), time.monotonic()
    wall = t1 - t0
    stages = []
    for sa, sb in zip(a["stages"], b["stages"]):
        items = sb["process"]["count"] - sa["process"]["count"]
        busy_s = (sb["process"]["sum_us"] - sa["process"]["sum_us"]) / 1e6
        stages.append({
            "name": sb["name"],
            "workers": sb["workers"],
            "items_per_s": items / wall,
            "capacity_per_s": sb["workers"] * items / busy_s if busy_s > 0 else 0.0,
            "busy": busy_s / (sb["workers"] * wall),
        })
    caps = [s["capacity_per_s"] for s in stages]
    return {
        "seconds": wall,
        "throughput_per_s": (b["succeeded"] - a["succeeded"]) / wall,
        "capacity_spread": max(caps) / min(caps) - 1 if min(caps) > 0 else None,
        "stages": stages,
    }


def settle(pipe, windows_in_a_row, max_s):
    start = time.monotonic()
    last_moves, quiet_since = pipe.stats()["rebalance"]["moves"], pipe.stats()["rebalance"]["windows"]
    while time.monotonic() - start < max_s:
        time.sleep(0.05)
        r = pipe.stats()["rebalance"]
        if r["moves"] != last_moves:
            last_moves, quiet_since = r["moves"], r["windows"]
        elif r["windows"] - quiet_since >= windows_in_a_row:
            return time.monotonic() - start, True
    return time.monotonic() - start, False


def table(title, m):
    print(f"{title}: pipeline {m['throughput_per_s']:.1f}/s, capacity spread "
          f"{100 * m['capacity_spread']:.1f}%")
    print(f"  {'stage':<6} {'workers':>7} {'items/s':>9} {'capacity/s':>11} {'busy':>6}")
    for s in m["stages"]:
        print(f"  {s['name']:<6} {s['workers']:>7} {s['items_per_s']:>9.1f} {s['capacity_per_s']:>11.1f} "
              f"{100 * s['busy']:>5.0f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--costs-ms", default="4,12,8", help="per-item cost of each stage (ms, comma-separated)")
    ap.add_argument("--workers", default="4,1,1", help="workers each stage starts with")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=5, help="measuring time of each phase")
    ap.add_argument("--window-ms", type=float, default=300, help="rebalancing window")
    ap.add_argument("--settle-windows", type=int, default=6, help="quiet windows that count as settled")
    ap.add_argument("--max-settle-s", type=float, default=60)
    ap.add_argument("--json", help="also write the JSON here")
    args = ap.parse_args()
    costs = [float(c) for c in args.costs_ms.split(",")]
    workers = [int(w) for w in args.workers.split(",")]
    if len(costs) != len(workers):
        ap.error("--costs-ms and --workers need one entry per stage")

    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": platform.machine(),
              "cpus": os.cpu_count(), "costs_ms": costs, "start_workers": workers, "clients": args.clients}
    wrong = 0
    with build(costs, workers, False, int(args.window_ms * 1000)) as pipe:
        clients = Clients(pipe, args.clients, len(costs))
        time.sleep(1)
        result["before"] = measure(pipe, args.seconds)
        clients.close()
        wrong += clients.wrong
    with build(costs, workers, True, int(args.window_ms * 1000)) as pipe:
        clients = Clients(pipe, args.clients, len(costs))
        settle_s, settled = settle(pipe, args.settle_windows, args.max_settle_s)
        result["settle_s"], result["settled"] = settle_s, settled
        result["after"] = measure(pipe, args.seconds)
        clients.close()
        wrong += clients.wrong
        r = pipe.stats()["rebalance"]
        result["moves"] = [{k: m[k] for k in ("from", "to", "from_workers", "to_workers", "reason")}
                           for m in r["recent"]]
    result["wrong_answers"] = wrong

    table("before (no rebalancing)", result["before"])
    table(f"after (rebalanced, settled in {settle_s:.1f} s{'' if settled else ', NOT settled'})", result["after"])
    print("moves:")
    for m in result["moves"]:
        print(f"  {m['from'] or '(budget)'} -> {m['to']}: {m['reason']}")
    print(f"speed-up {result['after']['throughput_per_s'] / result['before']['throughput_per_s']:.2f}x, "
          f"wrong answers {wrong}")
    line = json.dumps(result)
    print(line)
    if args.json:
        Path(args.json).write_text(line + "\n")
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
