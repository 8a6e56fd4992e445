#!/usr/bin/env python3
"""`streamline tune`'s successive halving against a full grid over the same configurations.

For each model it runs `streamline tune --search grid` and `streamline tune --search halving`
(same load, same latency budget, same first window: the grid measures every configuration for the
halving search's final window), taking turns going first, and records each search's wall time.
Then it measures the two chosen configurations again with `streamline bench` on the serving path,
--verify-rounds times each, alternating, and compares their median throughput and p99. Targets:
the halving choice within 5% of the grid choice's throughput, under the same budget, in at most a
quarter of the grid's time. Prints a table, and with --json writes every figure.

    .venv/bin/python bench/tune.py
    .venv/bin/python bench/tune.py --models squeezenet1_1 --latency-budget-ms 80 --concurrency 8
    .venv/bin/python bench/tune.py --json bench/tune.json
"""

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_ort as co  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def tune(binary, model, search, args, out_dir):
    cmd = [str(binary), "tune", str(model), "--json", "--search", search, "--concurrency", str(args.concurrency),
           "--trial-seconds", str(args.trial_seconds), "--warmup", str(args.warmup), "--eta", str(args.eta),
           "--max-minutes", str(args.max_minutes), "--out", str(out_dir)]
    if args.latency_budget_ms > 0:
        cmd += ["--latency-budget-ms", str(args.latency_budget_ms)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.max_minutes * 60 + 600)
    if r.returncode not in (0, 1) or not r.stdout.strip():
        raise SystemExit(f"error: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-800:]}")
    report = json.loads(r.stdout.strip().splitlines()[-1])
    report["command"] = " ".join(cmd)
    return report


def bench(binary, model, chosen, args):
    t = chosen["threads"]
    cmd = [str(binary), "bench", str(model), "--json", "--instances", str(chosen["instances"]),
           "--threads", str(t), "--threads-per-instance", str(t), "--streams", str(chosen["streams"]),
           "--max-batch", str(chosen["max_batch"]), "--max-queue-delay-us", str(chosen["queue_delay_us"]),
           "--concurrency", str(args.concurrency), "--seconds", str(args.verify_seconds), "--warmup", "1"]
    if chosen["elastic"]:
        cmd.append("--elastic-threads")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.verify_seconds + 600)
    if r.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed: {r.stderr.strip()[-800:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="squeezenet1_1,mobilenet_v2")
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"))
    ap.add_argument("--binary", default=str(REPO / "build" / "tools" / "streamline"))
    ap.add_argument("--latency-budget-ms", type=float, default=100)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--trial-seconds", type=float, default=0.5, help="first round's window")
    ap.add_argument("--warmup", type=float, default=0.3)
    ap.add_argument("--eta", type=int, default=3)
    ap.add_argument("--max-minutes", type=float, default=60)
    ap.add_argument("--verify-rounds", type=int, default=3)
    ap.add_argument("--verify-seconds", type=float, default=4)
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args(argv)
    models = co.ensure_models(args.models.split(","), Path(args.model_dir))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, path) in enumerate(models.items()):
            order = ["grid", "halving"] if i % 2 == 0 else ["halving", "grid"]
            reports = {s: tune(args.binary, path, s, args, Path(tmp) / f"{name}-{s}") for s in order}
            verify = {"grid": [], "halving": []}
            for r in range(args.verify_rounds):
                for s in (order if r % 2 == 0 else order[::-1]):
                    verify[s].append(bench(args.binary, path, reports[s]["chosen"], args))
            row = {"model": name}
            for s in ("grid", "halving"):
                runs = verify[s]
                row[s] = {"chosen": reports[s]["chosen"]["config"], "wall_s": reports[s]["wall_s"],
                          "trials": len(reports[s]["trials"]), "candidates": reports[s]["candidates"],
                          "met_objective": reports[s]["met_objective"],
                          "throughput": median([x["throughput"] for x in runs]),
                          "p99_ms": median([x["latency_ms"]["p99"] for x in runs]),
                          "runs": runs, "command": reports[s]["command"]}
            row["throughput_ratio"] = row["halving"]["throughput"] / row["grid"]["throughput"]
            row["time_ratio"] = row["halving"]["wall_s"] / row["grid"]["wall_s"]
            row["halving_p99_within_budget"] = (args.latency_budget_ms <= 0 or
                                                row["halving"]["p99_ms"] <= args.latency_budget_ms)
            rows.append(row)
            print(f"{name}: grid {row['grid']['chosen']} ({row['grid']['wall_s']:.0f} s), halving "
                  f"{row['halving']['chosen']} ({row['halving']['wall_s']:.0f} s)", file=sys.stderr)
    header = ["model", "configs", "grid choice", "halving choice", "grid rows/s", "halving rows/s", "tp ratio",
              "grid p99", "halving p99", "grid s", "halving s", "time ratio"]
    table = [header]
    for r in rows:
        table.append([r["model"], str(r["grid"]["candidates"]), r["grid"]["chosen"], r["halving"]["chosen"],
                      f"{r['grid']['throughput']:.1f}", f"{r['halving']['throughput']:.1f}",
                      f"{r['throughput_ratio']:.3f}", f"{r['grid']['p99_ms']:.2f}", f"{r['halving']['p99_ms']:.2f}",
                      f"{r['grid']['wall_s']:.0f}", f"{r['halving']['wall_s']:.0f}", f"{r['time_ratio']:.3f}"])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for k, row in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    geo_tp = math.exp(sum(math.log(r["throughput_ratio"]) for r in rows) / len(rows))
    geo_time = math.exp(sum(math.log(r["time_ratio"]) for r in rows) / len(rows))
    summary = {"throughput_ratio_geomean": geo_tp, "time_ratio_geomean": geo_time,
               "all_within_5pct": all(r["throughput_ratio"] >= 0.95 for r in rows),
               "all_within_quarter_time": all(r["time_ratio"] <= 0.25 for r in rows),
               "halving_within_budget": all(r["halving_p99_within_budget"] for r in rows),
               "machine": co.cpu_model(), "latency_budget_ms": args.latency_budget_ms,
               "concurrency": args.concurrency}
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "models": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
