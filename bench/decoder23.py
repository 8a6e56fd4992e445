#!/usr/bin/env python3
"""A LLaMA-style decoder at opset 23 (scripts/decoder_block.py: RMSNormalization, RotaryEmbedding,
grouped-query Attention with a causal mask and a KV cache, MatMuls), streamline against ONNX
Runtime, which implements these ops, on the same files.

    .venv/bin/python bench/decoder23.py
    .venv/bin/python bench/decoder23.py --threads 1,2 --rounds 3 --seconds 5 --json bench/decoder23.json

Two settings: "prefill" (batch 1, --prompt tokens, no cache) and "decode" (batch 1, one token on
a cache of --past tokens). For each setting and thread count both engines run --rounds times,
taking turns going first (compare_ort.run_streamline and run_ort: `streamline bench --json`, and
an InferenceSession with ORT_ENABLE_ALL, intra-op threads T, sequential); the table gives each
engine's median p50 over rounds and the median of the per-round p50 ratios. Models: --layers
blocks of hidden 512, 8 query heads and 2 kv heads of 64, FFN 1408, written to --model-dir.
"""

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "scripts"))
import compare_ort as co  # noqa: E402
import decoder_block  # noqa: E402


def median(v):
    v = sorted(v)
    n = len(v)
    return None if n == 0 else v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def shapes_for(spec, setting, prompt, past):
    if setting == "prefill":
        return {"x": [1, prompt, spec.hidden], "position_ids": [1, prompt]}
    s = {"x": [1, 1, spec.hidden], "position_ids": [1, 1]}
    for l in range(spec.layers):
        for kind in ("key", "value"):
            s[f"past_{kind}_{l}"] = [1, spec.kv_heads, past, spec.head_size]
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=co.int_list, default=[1, 2], help="thread counts (default 1,2)")
    ap.add_argument("--layers", type=int, default=2, help="decoder blocks (default 2)")
    ap.add_argument("--prompt", type=int, default=128, help="prefill tokens (default 128)")
    ap.add_argument("--past", type=int, default=511, help="cached tokens when decoding (default 511)")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per engine and round")
    ap.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds (at least one run)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of both engines per setting, alternating")
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"))
    ap.add_argument("--binary", default=os.environ.get("SL_BINARY", str(REPO / "build" / "tools" / "streamline")))
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    args = ap.parse_args(argv)
    args.max_runs = 0
    spec = decoder_block.BlockSpec(layers=args.layers)
    models = {s: decoder_block.write(spec, Path(args.model_dir), f"decoder23_{s}", s == "decode")
              for s in ("prefill", "decode")}

    rows = []
    turn = 0
    for setting in ("prefill", "decode"):
        shapes = shapes_for(spec, setting, args.prompt, args.past)
        for threads in args.threads:
            runs = {"streamline": [], "ort": []}
            for _ in range(args.rounds):
                order = ["streamline", "ort"] if turn % 2 == 0 else ["ort", "streamline"]
                turn += 1
                for eng in order:
                    if eng == "streamline":
                        runs[eng].append(co.run_streamline(Path(args.binary), models[setting], threads, 1, shapes, args))
                    else:
                        runs[eng].append(co.run_ort(models[setting], threads, 1, shapes, args))
            ok = all("error" not in r for rs in runs.values() for r in rs)
            p50 = {e: [r["latency_ms"]["p50"] for r in rs if "error" not in r] for e, rs in runs.items()}
            ratios = [a / b for a, b in zip(p50["streamline"], p50["ort"])] if ok else []
            rows.append({"setting": setting, "threads": threads, "shapes": shapes,
                         "streamline_p50_ms": median(p50["streamline"]), "ort_p50_ms": median(p50["ort"]),
                         "ratio_p50": median(ratios), "runs": runs})
            for eng, rs in runs.items():
                for r in rs:
                    if "error" in r:
                        print(f"{setting} threads={threads} {eng}: {r['error']}", file=sys.stderr)

    header = ["setting", "threads", "streamline p50 ms", "ORT p50 ms", "ratio SL/ORT"]
    lines = [header] + [[r["setting"], str(r["threads"]), co.fmt(r["streamline_p50_ms"], 3), co.fmt(r["ort_p50_ms"], 3),
                         co.fmt(r["ratio_p50"], 3)] for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for k, line in enumerate(lines):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    summary = {"benchmark": "decoder23", "layers": args.layers, "prompt": args.prompt, "past": args.past,
               "rounds": args.rounds, "seconds": args.seconds, "cpu": co.cpu_model(),
               "ort_version": __import__("onnxruntime").__version__,
               "rows": [{k: v for k, v in r.items() if k != "runs"} for r in rows]}
    print(json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({**summary, "rows": rows}, indent=1))
    return 0 if all(r["ratio_p50"] is not None for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
