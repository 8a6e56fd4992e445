#!/usr/bin/env python3
"""streamline against ONNX Runtime on a broad set of models: p50 at batch 1 on 1 and 2 threads.

    .venv/bin/python bench/zoo.py                                   # every fp32 model of the zoo
    .venv/bin/python bench/zoo.py --models efficientnet_b0,yolo_det --rounds 3
    .venv/bin/python bench/zoo.py --add resnet50_int8=build/models/resnet50.int8.onnx \\
        --add-list int8_models.txt --json zoo.json

The zoo is every model scripts/export_models.py knows (torchvision families, the BERT-like
encoders, and the families of scripts/zoo_models.py); missing files are exported first. More
models are added by file: --add NAME=PATH (repeatable) or --add-list FILE, one "NAME PATH" per
line (# starts a comment), so rows made elsewhere (int8 models, say) join the same table.

Per model and thread count, both engines run one after the other, `--rounds` times, alternating
which goes first (bench/compare_ort.py's run_streamline and run_ort, so the figures are
measured and summarised exactly as there). A row shows each engine's median p50 over the rounds
and the median of the per-round ratios streamline/ORT (below 1: streamline is faster). Under the
table: per thread count, the geometric mean of the ratios and the models above 1.0.
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
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "scripts"))

import compare_ort  # noqa: E402

# What each model stands for (the table's second column).
FAMILIES = {
    "resnet50": "ResNet",
    "mobilenet_v2": "MobileNetV2",
    "squeezenet1_1": "SqueezeNet",
    "googlenet": "GoogLeNet",
    "bert": "BERT-base encoder, seq 128",
    "bert_tiny": "BERT-tiny encoder, seq 128",
    "efficientnet_b0": "EfficientNet (SiLU, SE)",
    "efficientnet_b3": "EfficientNet (SiLU, SE), 300x300",
    "mobilenet_v3_large": "MobileNetV3 (HardSwish, SE)",
    "mobilenet_v3_small": "MobileNetV3 (HardSwish, SE)",
    "regnet_y_400mf": "RegNetY (grouped, SE)",
    "regnet_x_400mf": "RegNetX (grouped)",
    "convnext_tiny": "ConvNeXt (7x7 depthwise, LayerNorm, GELU)",
    "shufflenet_v2_x1_0": "ShuffleNetV2 (channel shuffle)",
    "densenet121": "DenseNet (concat)",
    "mnasnet1_0": "MnasNet",
    "resnext50_32x4d": "ResNeXt (grouped)",
    "inception_v3": "Inception-v3, 299x299",
    "vit_b_16": "ViT-B/16",
    "swin_t": "Swin-T",
    "yolo_det": "YOLOv8-style detector, 320x320",
    "ocr_det": "DBNet-style OCR detector, 320x320",
    "bytecnn": "byte-sequence classifier (1-D conv as 2-D)",
    "gpt2": "GPT-2-style decoder, seq 128",
    "llama_tiny": "LLaMA-style decoder, seq 128",
}


def zoo_names() -> List[str]:
    import export_models

    return list(export_models.MODELS)


def read_add_list(path: Path) -> Dict[str, Path]:
    out = {}
    for k, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise SystemExit(f"error: {path}:{k}: expected 'NAME PATH', got '{line}'")
        out[parts[0]] = Path(parts[1])
    return out


def geomean(values: List[float]) -> Optional[float]:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def measure(name: str, model: Path, threads: int, rounds: int, first: int, binary: Path, args) -> Dict:
    """Both engines ROUNDS times on MODEL; the engine going first alternates, starting with FIRST."""
    shapes = compare_ort.model_input_shapes(model, 1, {}, args.seq)
    runs = {"streamline": [], "ort": []}
    ratios = []
    for rnd in range(rounds):
        order = list(compare_ort.ENGINES) if (first + rnd) % 2 == 0 else list(reversed(compare_ort.ENGINES))
        for eng in order:
            print(f"{name}: {eng}, {threads} thread(s), round {rnd + 1}/{rounds} ...", file=sys.stderr, flush=True)
            if eng == "streamline":
                runs[eng].append(compare_ort.run_streamline(binary, model, threads, 1, shapes, args))
            else:
                runs[eng].append(compare_ort.run_ort(model, threads, 1, shapes, args))
        sl = runs["streamline"][-1].get("latency_ms", {}).get("p50")
        ox = runs["ort"][-1].get("latency_ms", {}).get("p50")
        if sl and ox:
            ratios.append(sl / ox)
    row = {"threads": threads, "shapes": shapes}
    for eng, rs in runs.items():
        ok = sorted((r["latency_ms"]["p50"] for r in rs if "latency_ms" in r))
        row[eng + "_p50_ms"] = statistics.median(ok) if ok else None
        row[eng + "_p50_rounds"] = ok
        errors = [r["error"] for r in rs if "error" in r]
        if errors:
            row[eng + "_error"] = errors[0]
    ratios.sort()
    row["ratio_rounds"] = ratios
    row["ratio"] = statistics.median(ratios) if ratios else None
    return row


def print_table(results: List[Dict], threads: List[int]) -> None:
    header = ["model", "family"]
    for t in threads:
        header += [f"SL {t}T ms", f"ORT {t}T ms", f"ratio {t}T"]
    lines = [header]
    for r in results:
        line = [r["model"], r["family"]]
        for t in threads:
            m = r["by_threads"].get(str(t), {})
            line += [compare_ort.fmt(m.get("streamline_p50_ms")), compare_ort.fmt(m.get("ort_p50_ms")),
                     compare_ort.fmt(m.get("ratio"), 3)]
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for k, line in enumerate(lines):
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    for r in results:
        for t, m in r["by_threads"].items():
            for eng in compare_ort.ENGINES:
                if m.get(eng + "_error"):
                    print(f"{r['model']} {t}T {eng}: {m[eng + '_error']}", file=sys.stderr)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated zoo models (default: all of scripts/export_models.py)")
    ap.add_argument("--skip", default="", help="comma-separated zoo models to leave out")
    ap.add_argument("--add", action="append", default=[], metavar="NAME=PATH", help="one more model by file")
    ap.add_argument("--add-list", metavar="FILE", help="more models by file: one 'NAME PATH' per line")
    ap.add_argument("--threads", type=compare_ort.int_list, default=[1, 2], help="thread counts (default 1,2)")
    ap.add_argument("--seconds", type=float, default=4.0, help="measured seconds per engine and round")
    ap.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds (at least one run)")
    ap.add_argument("--max-runs", type=int, default=0, help="stop measuring after this many runs (0: no limit)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each engine per setting (alternating)")
    ap.add_argument("--seq", type=int, default=128, help="size of symbolic axes after the first (sequence)")
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"), help="where zoo models live")
    ap.add_argument("--binary", default=os.environ.get("SL_BINARY", str(REPO / "build" / "tools" / "streamline")))
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.seconds <= 0:
        ap.error("--rounds must be >= 1 and --seconds positive")
    binary = Path(args.binary)
    if not binary.is_file():
        print(f"error: streamline binary not found at {binary}", file=sys.stderr)
        return 2

    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    names = [m.strip() for m in (args.models.split(",") if args.models else zoo_names()) if m.strip()]
    names = [n for n in names if n not in skip]
    models = compare_ort.ensure_models(names, Path(args.model_dir)) if names else {}
    extra: Dict[str, Path] = {}
    if args.add_list:
        extra.update(read_add_list(Path(args.add_list)))
    for spec in args.add:
        name, _, path = spec.partition("=")
        if not name or not path:
            ap.error(f"--add '{spec}': expected NAME=PATH")
        extra[name] = Path(path)
    for name, path in extra.items():
        if not path.is_file():
            print(f"error: {name}: no file {path}", file=sys.stderr)
            return 2
    models.update(extra)

    results = []
    for mi, (name, path) in enumerate(models.items()):
        r = {"model": name, "family": FAMILIES.get(name, "added by file" if name in extra else ""),
             "file": str(path), "by_threads": {}}
        for ti, t in enumerate(args.threads):
            r["by_threads"][str(t)] = measure(name, path, t, args.rounds, mi + ti, binary, args)
        results.append(r)

    print_table(results, args.threads)
    summary = {}
    for t in args.threads:
        ratios = {r["model"]: r["by_threads"][str(t)].get("ratio") for r in results}
        gm = geomean([v for v in ratios.values() if v])
        above = sorted((m for m, v in ratios.items() if v and v > 1.0), key=lambda m: -ratios[m])
        summary[str(t)] = {"geomean_ratio": gm, "models": sum(1 for v in ratios.values() if v),
                           "above_1": {m: ratios[m] for m in above}}
        print(f"{t} thread(s): geometric mean of {summary[str(t)]['models']} ratios = {compare_ort.fmt(gm, 3)}; "
              f"above 1.0: {', '.join(f'{m} {ratios[m]:.2f}' for m in above) or 'none'}")
    if args.json:
        import onnxruntime as ort

        report = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": platform.machine(),
            "cpu": compare_ort.cpu_model(),
            "cores": os.cpu_count(),
            "load_average": os.getloadavg(),
            "streamline_version": compare_ort.streamline_version(binary),
            "onnxruntime_version": ort.__version__,
            "settings": {"threads": args.threads, "seconds": args.seconds, "warmup": args.warmup,
                         "rounds": args.rounds, "seq": args.seq, "batch": 1},
            "summary": summary,
            "results": results,
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    failed = any(m.get(e + "_error") for r in results for m in r["by_threads"].values() for e in compare_ort.ENGINES)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
