#!/usr/bin/env python3
"""Dynamic batching sweep: throughput and latency with batching off and on, concurrency 1 to 64.

For every model and concurrency C it runs `streamline bench --concurrency C` through the serving
path (one instance, all threads), once with --max-batch 1 (no batching) and once with
--max-batch B --max-queue-delay-us D, in the same run, one after the other. Clients are closed
loop: each sends its next request when the previous answer arrives. With --rounds R each pair
(off, on) runs R times, alternating, and the table gives medians over rounds (the machines are
shared and noisy; refusals and failures are summed over all runs). Prints a table and, with
--json, writes every figure; the summary line gives, at --target-concurrency, the throughput
ratio (on/off) and whether p99 with batching is at most p99 without, and flags any rejected or
failed request.

    .venv/bin/python bench/batching.py
    .venv/bin/python bench/batching.py --models mobilenet_v2 --concurrency 1,16 --seconds 3
    .venv/bin/python bench/batching.py --json bench/batching.json
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_ort as co  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
LABELS = {"resnet50": "ResNet-50", "mobilenet_v2": "MobileNetV2"}


def sl_serve_bench(binary, model, threads, concurrency, max_batch, delay_us, seconds, warmup):
    cmd = [str(binary), "bench", str(model), "--json", "--threads", str(threads), "--instances", "1",
           "--concurrency", str(concurrency), "--max-batch", str(max_batch),
           "--seconds", str(seconds), "--warmup", str(warmup)]
    if max_batch > 1:
        cmd += ["--max-queue-delay-us", str(delay_us)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + warmup + 600)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-500:], "command": " ".join(cmd)}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["command"] = " ".join(cmd)
    return out


def lost(res):
    """Requests refused or failed in one run (0 when all were answered)."""
    if "error" in res:
        return None
    return int(res.get("rejected", 0)) + sum(int(v) for v in res.get("failures", {}).values())


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def summarise_runs(runs):
    """Medians over rounds of throughput, p50, p99 and mean batch; refusals and failures summed."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    return {"throughput": median([r["throughput"] for r in ok]),
            "latency_ms": {"p50": median([r["latency_ms"]["p50"] for r in ok]),
                           "p99": median([r["latency_ms"]["p99"] for r in ok])},
            "mean_batch": median([r.get("mean_batch", 1.0) for r in ok]),
            "rejected": sum(int(r.get("rejected", 0)) for r in ok),
            "failures": {"total": sum(sum(int(v) for v in r.get("failures", {}).values()) for r in ok)},
            "rounds": len(ok)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mobilenet_v2,resnet50")
    ap.add_argument("--concurrency", default="1,2,4,8,16,32,64")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads of the one instance")
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--max-queue-delay-us", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--target-concurrency", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2, help="runs per configuration, off and on alternating")
    ap.add_argument("--binary", default=str(REPO / "build" / "tools" / "streamline"))
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"))
    ap.add_argument("--json", help="write all results to this file")
    args = ap.parse_args(argv)

    binary = Path(args.binary)
    if not binary.exists():
        print(f"error: {binary} not found (build first: scripts/setup.sh)", file=sys.stderr)
        return 2
    names = [m for m in args.models.split(",") if m]
    models = co.ensure_models(names, Path(args.model_dir))
    concurrencies = [int(c) for c in args.concurrency.split(",") if c]

    rows = []
    for name in names:
        for c in concurrencies:
            row = {"model": name, "concurrency": c, "runs": {"off": [], "on": []}}
            for _ in range(args.rounds):
                for mode, mb in (("off", 1), ("on", args.max_batch)):
                    res = sl_serve_bench(binary, models[name], args.threads, c, mb, args.max_queue_delay_us,
                                         args.seconds, args.warmup)
                    row["runs"][mode].append(res)
                    if "error" in res:
                        print(f"{name} c={c} batching {mode}: {res['error']}", file=sys.stderr)
            for mode in ("off", "on"):
                row[mode] = summarise_runs(row["runs"][mode])
            rows.append(row)
            print(f"{name} c={c}: " + ", ".join(
                f"{m} {row[m].get('throughput', float('nan')):.1f}/s p99 "
                f"{row[m].get('latency_ms', {}).get('p99', float('nan')):.1f} ms" for m in ("off", "on")),
                file=sys.stderr, flush=True)

    def fmt(v, spec=".1f"):
        return "-" if v is None else format(v, spec)

    header = ["model", "concurrency", "off req/s", "off p50 ms", "off p99 ms", "on req/s", "on p50 ms",
              "on p99 ms", "mean batch", "lost", "throughput on/off"]
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    summary = []
    for row in rows:
        off, on = row["off"], row["on"]
        t_off, t_on = off.get("throughput"), on.get("throughput")
        ratio = t_on / t_off if t_off and t_on else None
        row["throughput_ratio"] = ratio
        lost_total = None if lost(off) is None or lost(on) is None else lost(off) + lost(on)
        row["lost"] = lost_total
        print("| " + " | ".join([
            LABELS.get(row["model"], row["model"]), str(row["concurrency"]),
            fmt(t_off), fmt(off.get("latency_ms", {}).get("p50")), fmt(off.get("latency_ms", {}).get("p99")),
            fmt(t_on), fmt(on.get("latency_ms", {}).get("p50")), fmt(on.get("latency_ms", {}).get("p99")),
            fmt(on.get("mean_batch"), ".2f"), fmt(lost_total, "d"), fmt(ratio, ".2f") + ("x" if ratio else "")]) + " |")
        if row["concurrency"] == args.target_concurrency and ratio is not None:
            p99_ok = on["latency_ms"]["p99"] <= off["latency_ms"]["p99"]
            summary.append(f"{LABELS.get(row['model'], row['model'])} at concurrency {row['concurrency']}: "
                           f"throughput {ratio:.2f}x with batching, p99 {on['latency_ms']['p99']:.1f} ms "
                           f"against {off['latency_ms']['p99']:.1f} ms ({'not higher' if p99_ok else 'HIGHER'}), "
                           f"{lost_total} lost")
    print()
    for line in summary:
        print(line)

    if args.json:
        meta = {"rounds": args.rounds, "threads": args.threads, "max_batch": args.max_batch, "max_queue_delay_us": args.max_queue_delay_us,
                "seconds": args.seconds, "warmup": args.warmup, "binary": str(binary)}
        Path(args.json).write_text(json.dumps({"config": meta, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
