#!/usr/bin/env python3
"""Int8 models: streamline against ONNX Runtime, p50 latency at batch 1, interleaved in one run.

    .venv/bin/python bench/int8.py                                   # default models, 1 and 2 threads
    .venv/bin/python bench/int8.py --models resnet50_qdq_pc,bert_dyn --threads 1 --rounds 3 \
        --seconds 10 --json bench/int8-$(date +%Y%m%d).json

Models are the variants of scripts/make_int8.py (quantize_static, QDQ and QOperator formats, for
the CNNs, quantize_dynamic for the encoders), made when missing. For each model and thread count
the two engines take turns (the order alternates between rounds and models) for --rounds rounds; each run is
`streamline bench --json` or an onnxruntime.InferenceSession timed per session.run, both as
bench/compare_ort.py runs them (same inputs' shapes, warm-up and measured time; encoders at
--seq tokens). A model's ratio is the median of its per-round p50 ratios (streamline / ORT; below
1 is faster), and the geometric mean of the ratios is reported per thread count. --json writes
every figure.
"""

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "scripts"))

import compare_ort  # noqa: E402
import make_int8  # noqa: E402

# quantize_static's two formats (QDQ, QOperator) with per-tensor and per-channel weights and int8
# and uint8 activations over four CNN families, and quantize_dynamic's encoder.
DEFAULT_MODELS = [
    "resnet50_qdq", "resnet50_qdq_pc", "resnet50_qdq_pc_u8", "resnet50_qop_u8", "resnet50_qop_pc",
    "mobilenet_v2_qdq", "mobilenet_v2_qdq_pc", "mobilenet_v2_qdq_pc_u8", "mobilenet_v2_qop", "mobilenet_v2_qop_pc_u8",
    "googlenet_qdq_pc", "googlenet_qop_pc", "squeezenet1_1_qdq_pc", "squeezenet1_1_qop", "squeezenet1_1_qop_pc_u8",
    "bert_dyn",
]


def geomean(values: List[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def measure(name: str, model: Path, threads: int, first: int, args, binary: Path) -> Dict:
    """Both engines, args.rounds rounds, alternating which goes first."""
    shapes = compare_ort.model_input_shapes(model, 1, {}, args.seq)
    runs = {"streamline": [], "ort": []}
    ratios = []
    order = ["streamline", "ort"] if first == 0 else ["ort", "streamline"]
    for rnd in range(args.rounds):
        for eng in order if rnd % 2 == 0 else list(reversed(order)):
            print(f"{name}: {eng}, {threads} thread(s), round {rnd + 1} ...", file=sys.stderr, flush=True)
            if eng == "streamline":
                runs[eng].append(compare_ort.run_streamline(binary, model, threads, 1, shapes, args))
            else:
                runs[eng].append(compare_ort.run_ort(model, threads, 1, shapes, args))
        sl = runs["streamline"][-1].get("latency_ms", {}).get("p50")
        ox = runs["ort"][-1].get("latency_ms", {}).get("p50")
        if sl and ox:
            ratios.append(sl / ox)
    row = {"model": name, "threads": threads, "shapes": shapes}
    for eng, rs in runs.items():
        p50s = sorted(r["latency_ms"]["p50"] for r in rs if "latency_ms" in r)
        row[eng + "_p50_rounds"] = p50s
        row[eng + "_p50"] = statistics.median(p50s) if p50s else None
        errors = [r["error"] for r in rs if "error" in r]
        if errors:
            row[eng + "_error"] = errors[0]
    ratios.sort()
    row["ratio_rounds"] = ratios
    row["ratio"] = statistics.median(ratios) if ratios else None
    return row


def print_table(rows: List[Dict], threads: List[int]) -> None:
    header = ["model", "threads", "streamline p50 ms", "ORT p50 ms", "ratio SL/ORT"]
    lines = [header]
    for r in rows:
        lines.append([r["model"], str(r["threads"]), compare_ort.fmt(r.get("streamline_p50")),
                      compare_ort.fmt(r.get("ort_p50")), compare_ort.fmt(r.get("ratio"), 3)])
    for t in threads:
        ratios = [r["ratio"] for r in rows if r["threads"] == t and r.get("ratio")]
        lines.append([f"geometric mean ({len(ratios)} models)", str(t), "", "", compare_ort.fmt(geomean(ratios), 3)])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for k, line in enumerate(lines):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    for r in rows:
        for eng in ("streamline", "ort"):
            if eng + "_error" in r:
                print(f"{r['model']} threads={r['threads']} {eng}: {r[eng + '_error']}", file=sys.stderr)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help=f"comma-separated variants of scripts/make_int8.py (default: {','.join(DEFAULT_MODELS)})")
    ap.add_argument("--threads", type=compare_ort.int_list, default=[1, 2], help="thread counts (default 1,2)")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per engine and round (default 5)")
    ap.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds (default 1)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per model and thread count (default 3)")
    ap.add_argument("--seq", type=int, default=128, help="sequence length of the encoders (default 128)")
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"), help="model files (default build/models)")
    ap.add_argument("--binary", default=os.environ.get("SL_BINARY", str(REPO / "build" / "tools" / "streamline")),
                    help="streamline CLI (default $SL_BINARY or build/tools/streamline)")
    ap.add_argument("--json", metavar="FILE", help="also write all figures to FILE as JSON")
    args = ap.parse_args(argv)
    args.max_runs = 0
    if args.seconds <= 0 or args.warmup < 0 or args.rounds < 1:
        ap.error("--seconds and --rounds must be positive, --warmup non-negative")
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in make_int8.VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(make_int8.VARIANTS)}")
    binary = Path(args.binary)
    if not binary.is_file():
        print(f"error: streamline binary not found at {binary}", file=sys.stderr)
        return 2
    # Quantize first: make_int8 must be the first to import onnx (it needs the newer package).
    try:
        made = make_int8.ensure_variants(names, args.model_dir, log=lambda m: print(m, file=sys.stderr))
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    import onnxruntime as ort

    ort.set_default_logger_severity(3)  # QDQ models make ORT warn about every unused initializer
    rows = []
    for mi, name in enumerate(names):
        for threads in args.threads:
            rows.append(measure(name, made[name]["onnx"], threads, mi % 2, args, binary))
    print_table(rows, args.threads)
    if args.json:
        report = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": platform.machine(),
            "cpu": compare_ort.cpu_model(),
            "cores": os.cpu_count(),
            "streamline_version": compare_ort.streamline_version(binary),
            "onnxruntime_version": ort.__version__,
            "settings": {"models": names, "threads": args.threads, "seconds": args.seconds, "warmup": args.warmup,
                         "rounds": args.rounds, "seq": args.seq},
            "geometric_mean": {str(t): geomean([r["ratio"] for r in rows if r["threads"] == t and r.get("ratio")])
                               for t in args.threads},
            "results": rows,
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 1 if any(k.endswith("_error") for r in rows for k in r) else 0


if __name__ == "__main__":
    sys.exit(main())
