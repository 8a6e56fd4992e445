#!/usr/bin/env python3
"""streamline on a GPU against PyTorch on the same GPU, in one run.

    python3 bench/gpu_compare.py --binary build-gpu/tools/streamline --models-dir DIR --out OUT

Workloads (issue targets in parentheses are for an H200):
  resnet50 fp16 batch 1 latency, batch 32 and 256 throughput, batch 1 on 1/2/4/8 concurrent
  contexts; the BERT-like encoder fp16 at sequence 128, batch 1 and 128.
PyTorch runs the same architectures with the same seeded weights (scripts/export_models.py), fp16,
channels-last for the CNN: eager, and under a CUDA graph where the anchors quote one. streamline runs
`streamline bench --device cuda --precision fp16 --json` on the exported ONNX files.
Prints a table and writes OUT/gpu_compare.json.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def torch_timings(name, batch, seq, graph, contexts, iters):
    """Median ms per batch (and images/s over all contexts) for PyTorch fp16."""
    import torch
    import export_models as em

    model = em.build_model(name).eval().half().cuda()
    if em.is_encoder(name):
        x = torch.randint(0, 1000, (batch, seq), device="cuda")
    else:
        model = model.to(memory_format=torch.channels_last)
        x = torch.randn(batch, 3, 224, 224, device="cuda").half().to(memory_format=torch.channels_last)
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        if contexts > 1 or graph:
            streams = [torch.cuda.Stream() for _ in range(contexts)]
            graphs = []
            for s in streams:
                g = torch.cuda.CUDAGraph()
                with torch.cuda.stream(s):
                    model(x)
                    torch.cuda.synchronize()
                    with torch.cuda.graph(g, stream=s):
                        model(x)
                graphs.append(g)
            torch.cuda.synchronize()
            times = []
            for _ in range(iters):
                t0 = time.perf_counter()
                for g in graphs:
                    g.replay()
                torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) * 1e3)
        else:
            times = []
            for _ in range(iters):
                t0 = time.perf_counter()
                model(x)
                torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) * 1e3)
    ms = statistics.median(times)
    return {"ms": ms, "items_per_s": batch * contexts * 1e3 / ms}


def streamline_timings(binary, model_path, batch, seq, contexts, seconds, encoder):
    cmd = [binary, "bench", str(model_path), "--device", "cuda", "--precision", "fp16", "--batch", str(batch),
           "--seconds", str(seconds), "--warmup", "1", "--json", "--concurrency", str(contexts)]
    if encoder:
        import export_models as em
        cmd += ["--shape", f"{em.input_name(model_path.stem)}={batch},{seq}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip().splitlines()[-1:]}
    r = json.loads(out.stdout)
    return {"ms": r["latency_ms"]["p50"], "items_per_s": r["throughput"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    d = Path(args.models_dir)
    work = [
        ("resnet50", 1, None, True, 1), ("resnet50", 32, None, False, 1), ("resnet50", 256, None, False, 1),
        ("resnet50", 1, None, True, 2), ("resnet50", 1, None, True, 4), ("resnet50", 1, None, True, 8),
        ("bert", 1, 128, True, 1), ("bert", 128, 128, False, 1),
    ]
    rows = []
    for name, batch, seq, graph, contexts in work:
        path = d / f"{name}.onnx"
        encoder = name.startswith("bert")
        row = {"model": name, "batch": batch, "seq": seq, "contexts": contexts, "torch_cuda_graph": graph}
        try:
            row["torch"] = torch_timings(name, batch, seq or 128, graph, contexts, args.iters)
        except Exception as e:  # report and go on: one failure should not hide the others
            row["torch"] = {"error": str(e)}
        row["streamline"] = streamline_timings(args.binary, path, batch, seq, contexts, args.seconds, encoder)
        s, t = row["streamline"], row["torch"]
        if "items_per_s" in s and "items_per_s" in t:
            row["throughput_ratio"] = s["items_per_s"] / t["items_per_s"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "gpu_compare.json").write_text(json.dumps(rows, indent=1))
    print("\n| model | batch | contexts | streamline p50 ms | streamline items/s | PyTorch ms | PyTorch items/s | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        s, t = r["streamline"], r["torch"]
        f = lambda v, k: f"{v[k]:.3f}" if k in v else v.get("error", "?")
        print(f"| {r['model']} | {r['batch']} | {r['contexts']} | {f(s, 'ms')} | {f(s, 'items_per_s')} | "
              f"{f(t, 'ms')} | {f(t, 'items_per_s')} | {r.get('throughput_ratio', float('nan')):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
