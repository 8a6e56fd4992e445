#!/usr/bin/env python3
"""torchvision's detectors against ONNX Runtime: p50 of one image, both engines on the same input.

    .venv/bin/python bench/detectors.py                       # the default set, 2 threads
    .venv/bin/python bench/detectors.py --models maskrcnn_resnet50_fpn --rounds 5 \\
        --threads 1,2 --json detectors.json

Each model is exported from torchvision (random weights drawn with a fixed seed, opset 17, one
image [3, S, S] in, boxes, scores, labels and masks or keypoints out) into --model-dir unless the
file is there. These models decide shapes from values during the run (how many boxes survive
the threshold and NonMaxSuppression), so streamline runs them node by node rather than from a
plan, and the time depends on the image: both engines get the same one, uniform in [0, 1) from
numpy's RandomState(0), through `streamline bench --input` and the ONNX Runtime Python API.
Per model and thread count the engines take turns going first for --rounds rounds; a row shows
each engine's median p50 over the rounds and the median of the per-round ratios streamline/ORT
(below 1: streamline is faster), and under the table the geometric mean of the ratios.
"""

import argparse
import datetime
import json
import math
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import compare_ort  # noqa: E402

DEFAULT_MODELS = [
    "fasterrcnn_mobilenet_v3_large_320_fpn",
    "ssdlite320_mobilenet_v3_large",
    "ssd300_vgg16",
    "retinanet_resnet50_fpn",
    "fcos_resnet50_fpn",
    "fasterrcnn_resnet50_fpn",
    "maskrcnn_resnet50_fpn",
    "keypointrcnn_resnet50_fpn",
]


def export(name: str, path: Path, size: int) -> None:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None, weights_backbone=None).eval()
    image = torch.rand(3, size, size)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with torch.no_grad():
        torch.onnx.export(model, ([image],), str(tmp), opset_version=17, do_constant_folding=True)
    tmp.rename(path)


def run_streamline(binary: Path, model: Path, image: Path, input_name: str, threads: int, args) -> Dict:
    cmd = [str(binary), "bench", str(model), "--threads", str(threads), "--input", f"{input_name}={image}",
           "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--json"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.warmup + args.seconds + 600)
    except subprocess.TimeoutExpired:
        return {"error": "timed out: " + " ".join(cmd)}
    if r.returncode != 0:
        err = r.stderr.strip().splitlines()
        return {"error": f"exit {r.returncode}: {err[-1] if err else '(no message)'}"}
    for line in reversed(r.stdout.strip().splitlines()):
        if line.strip().startswith("{"):
            return json.loads(line)
    return {"error": "no JSON object in: " + " ".join(cmd)}


def run_ort(model: Path, image: np.ndarray, threads: int, args) -> Dict:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    try:
        sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # reported, not fatal
        return {"error": f"{type(e).__name__}: {e}"}
    feeds = {sess.get_inputs()[0].name: image}
    lat_ms, elapsed = compare_ort.time_calls(lambda: sess.run(None, feeds), args.warmup, args.seconds)
    return compare_ort.summarise(lat_ms, elapsed, 1)


def geomean(values: List[float]) -> Optional[float]:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated torchvision names")
    ap.add_argument("--threads", type=compare_ort.int_list, default=[2], help="thread counts (default 2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0, help="measured time per engine and round")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--size", type=int, default=320, help="image side (default 320)")
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models" / "detectors"))
    ap.add_argument("--binary", default=str(REPO / "build" / "tools" / "streamline"))
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)

    model_dir = Path(args.model_dir)
    image = np.random.RandomState(0).uniform(0, 1, size=(3, args.size, args.size)).astype(np.float32)
    image_path = model_dir / f"image{args.size}.npy"
    model_dir.mkdir(parents=True, exist_ok=True)
    np.save(image_path, image)
    results = []
    for k, name in enumerate(m for m in args.models.split(",") if m):
        path = model_dir / f"{name}_{args.size}.onnx"
        if not path.is_file():
            print(f"exporting {name} ...", file=sys.stderr, flush=True)
            export(name, path, args.size)
        import onnx

        input_name = onnx.load(str(path), load_external_data=False).graph.input[0].name
        row = {"model": name, "by_threads": {}}
        for t in args.threads:
            runs = {"streamline": [], "ort": []}
            ratios = []
            for rnd in range(args.rounds):
                order = ["streamline", "ort"] if (k + rnd) % 2 == 0 else ["ort", "streamline"]
                got = {}
                for eng in order:
                    got[eng] = (run_streamline(Path(args.binary), path, image_path, input_name, t, args)
                                if eng == "streamline" else run_ort(path, image, t, args))
                    runs[eng].append(got[eng])
                if all("error" not in got[e] for e in got):
                    ratios.append(got["streamline"]["latency_ms"]["p50"] / got["ort"]["latency_ms"]["p50"])
            m = {}
            for eng in runs:
                ok = [r["latency_ms"]["p50"] for r in runs[eng] if "error" not in r]
                m[eng + "_p50_ms"] = statistics.median(ok) if ok else None
                errors = [r["error"] for r in runs[eng] if "error" in r]
                if errors:
                    m[eng + "_error"] = errors[0]
            m["ratio"] = statistics.median(ratios) if ratios else None
            row["by_threads"][str(t)] = m
            print(f"{name} threads={t}: streamline {compare_ort.fmt(m['streamline_p50_ms'])} ms, "
                  f"ORT {compare_ort.fmt(m['ort_p50_ms'])} ms, ratio {compare_ort.fmt(m['ratio'], 3)}",
                  file=sys.stderr, flush=True)
        results.append(row)

    header = ["model"]
    for t in args.threads:
        header += [f"{t}T streamline ms", f"{t}T ORT ms", f"{t}T ratio"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for r in results:
        cells = [r["model"]]
        for t in args.threads:
            m = r["by_threads"][str(t)]
            cells += [compare_ort.fmt(m["streamline_p50_ms"], 1), compare_ort.fmt(m["ort_p50_ms"], 1),
                      compare_ort.fmt(m["ratio"], 3)]
        print("| " + " | ".join(cells) + " |")
    summary = {}
    for t in args.threads:
        ratios = [r["by_threads"][str(t)]["ratio"] for r in results if r["by_threads"][str(t)]["ratio"]]
        summary[str(t)] = {"geomean_ratio": geomean(ratios), "models": len(ratios)}
        print(f"{t} thread(s): geometric mean of {len(ratios)} ratios = "
              f"{compare_ort.fmt(summary[str(t)]['geomean_ratio'], 3)}")
    if args.json:
        doc = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "cpu": compare_ort.cpu_model(),
               "machine": platform.machine(), "size": args.size, "rounds": args.rounds,
               "seconds": args.seconds, "warmup": args.warmup, "results": results, "summary": summary}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    failed = any(m.get(e + "_error") for r in results for m in r["by_threads"].values() for e in ("streamline", "ort"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
