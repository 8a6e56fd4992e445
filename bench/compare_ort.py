#!/usr/bin/env python3
"""Latency and throughput of streamline against ONNX Runtime on the same ONNX files.

    .venv/bin/python bench/compare_ort.py
    .venv/bin/python bench/compare_ort.py --models resnet50,mobilenet_v2 --threads 1,2 \
        --seconds 10 --warmup 2 --json bench/results.json
    .venv/bin/python bench/compare_ort.py --models bert --threads 2 --batch 1,8 --seq 128

For every model, thread count and batch size it runs `streamline bench --json` and an
onnxruntime.InferenceSession (ORT_ENABLE_ALL, intra-op threads = T, inter-op threads 1,
sequential execution) with the same input shape, warm-up and measured time. The two engines
take turns going first from one model to the next, so neither always runs on a cooler or
warmer machine. ORT's latencies are timed per session.run and summarised exactly as
`streamline bench` does (percentiles by linear interpolation between order statistics;
throughput = runs * batch / measured seconds).

Input shapes: --shape NAME=d0,d1,... when given; otherwise the model's declared shape with a
symbolic first axis set to the batch size and every other symbolic axis (a sequence length) set
to --seq (default 128). Both engines get the same shapes. Integer inputs (token ids) are drawn
uniformly from [0, 1000) by both engines, so they index any embedding table of 1000+ rows;
floating inputs are standard normal.

Missing models are exported with scripts/export_models.py (needs torch).
"""

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ENGINES = ("streamline", "ort")


def percentile(values: List[float], p: float) -> float:
    """Linear interpolation between the sorted values, as tools/cli_common.cc computes it."""
    if not values:
        return 0.0
    v = sorted(values)
    pos = p / 100.0 * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summarise(lat_ms: List[float], elapsed_s: float, batch: int) -> Dict:
    return {
        "runs": len(lat_ms),
        "seconds": elapsed_s,
        "throughput": len(lat_ms) * batch / elapsed_s if elapsed_s > 0 else 0.0,
        "latency_ms": {
            "p50": percentile(lat_ms, 50),
            "p90": percentile(lat_ms, 90),
            "p99": percentile(lat_ms, 99),
            "mean": sum(lat_ms) / len(lat_ms) if lat_ms else 0.0,
            "min": percentile(lat_ms, 0),
        },
    }


# --- environment ------------------------------------------------------------------------------

def required_ort_version() -> Optional[str]:
    """The onnxruntime pin in scripts/requirements.txt, or None when there is none."""
    try:
        text = (REPO / "scripts" / "requirements.txt").read_text()
    except OSError:
        return None
    m = re.search(r"^\s*onnxruntime\s*==\s*([^\s#;]+)", text, re.MULTILINE)
    return m.group(1) if m else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def streamline_version(binary: Path) -> str:
    try:
        r = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        return f"unavailable ({e})"
    return r.stdout.strip() if r.returncode == 0 else f"unavailable (exit {r.returncode})"


# --- the two engines ---------------------------------------------------------------------------

def parse_shapes(specs: List[str]) -> Dict[str, List[int]]:
    shapes = {}
    for s in specs:
        name, _, dims = s.partition("=")
        if not name or not dims:
            raise ValueError(f"--shape '{s}': expected NAME=d0,d1,...")
        shapes[name] = [int(d) for d in dims.split(",")]
    return shapes


def model_input_shapes(model: Path, batch: int, shapes: Dict[str, List[int]], seq: int) -> Dict[str, List[int]]:
    """Shape per graph input: SHAPES[name] when given, else the declared dims with a symbolic or
    unknown first axis set to BATCH and any other to SEQ."""
    import onnx

    m = onnx.load(str(model), load_external_data=False)
    initializers = {t.name for t in m.graph.initializer}
    out = {}
    for vi in m.graph.input:
        if vi.name in initializers:
            continue
        if vi.name in shapes:
            out[vi.name] = list(shapes[vi.name])
            continue
        dims = []
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            fixed = d.HasField("dim_value") and d.dim_value > 0
            dims.append(int(d.dim_value) if fixed else (batch if i == 0 else seq))
        out[vi.name] = dims
    return out


def run_streamline(binary: Path, model: Path, threads: int, batch: int, shapes: Dict[str, List[int]],
                   args) -> Dict:
    cmd = [str(binary), "bench", str(model), "--threads", str(threads), "--batch", str(batch),
           "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--json"]
    for name, dims in shapes.items():
        cmd += ["--shape", f"{name}={','.join(map(str, dims))}"]
    if args.max_runs:
        cmd += ["--max-runs", str(args.max_runs)]
    limit = args.warmup + args.seconds + 300  # loading and planning a large model take a while
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except FileNotFoundError:
        return {"error": f"streamline binary not found: {binary}"}
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {limit:.0f} s: {' '.join(cmd)}"}
    if r.returncode != 0:
        err = r.stderr.strip().splitlines()
        return {"error": f"exit {r.returncode}: {err[-1] if err else '(no message)'}", "command": " ".join(cmd)}
    # One JSON object; take the last line that parses, in case something logged before it.
    for line in reversed(r.stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    return {"error": f"no JSON object in the output of: {' '.join(cmd)}", "stdout": r.stdout[-2000:]}


def ort_input_shape(inp, batch: int, shapes: Dict[str, List[int]]) -> List[int]:
    """INP's shape: --shape if given, else the model's with a symbolic first axis set to BATCH."""
    if inp.name in shapes:
        return shapes[inp.name]
    dims = []
    for i, d in enumerate(inp.shape):
        if isinstance(d, int) and d >= 0:
            dims.append(d)
        elif i == 0:
            dims.append(batch)
        else:
            raise ValueError(f"input '{inp.name}' axis {i} is symbolic ({d}); give --shape {inp.name}=...")
    return dims


_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}


def time_calls(call, warmup: float, seconds: float, max_runs: int = 0):
    """Calls CALL for WARMUP seconds (at least once, as streamline bench does), then times each
    call for SECONDS (at least three calls; at most MAX_RUNS when set). Returns (latencies in ms,
    measured seconds)."""
    clock = time.perf_counter
    w0 = clock()
    while True:
        call()
        if clock() - w0 >= warmup:
            break
    lat_ms = []
    t0 = clock()
    elapsed = 0.0
    while True:
        a = clock()
        call()
        b = clock()
        lat_ms.append((b - a) * 1e3)
        elapsed = b - t0
        if not (elapsed < seconds or len(lat_ms) < 3):
            break
        if max_runs and len(lat_ms) >= max_runs:
            break
    return lat_ms, elapsed


def run_ort(model: Path, threads: int, batch: int, shapes: Dict[str, List[int]], args) -> Dict:
    import onnxruntime as ort

    try:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
        rng = np.random.RandomState(0)
        feeds = {}
        shape_strs = []
        for inp in sess.get_inputs():
            dims = ort_input_shape(inp, batch, shapes)
            dtype = _ORT_TYPES.get(inp.type)
            if dtype is None:
                raise ValueError(f"input '{inp.name}' has unsupported type {inp.type}")
            if np.issubdtype(dtype, np.integer):
                # Token ids and the like: valid indices for any table of 1000+ rows, as the
                # streamline CLI draws them.
                feeds[inp.name] = rng.randint(0, 1000, size=dims).astype(dtype)
            else:
                feeds[inp.name] = rng.standard_normal(dims).astype(dtype)
            shape_strs.append(f"{inp.name}=[{','.join(map(str, dims))}]")
    except Exception as e:  # a model ORT cannot load is reported, not fatal
        return {"error": f"{type(e).__name__}: {e}"}
    # Batch as streamline bench reports it: the first input's leading dimension.
    first = feeds[sess.get_inputs()[0].name] if feeds else None
    eff_batch = int(first.shape[0]) if first is not None and first.ndim else 1

    lat_ms, elapsed = time_calls(lambda: sess.run(None, feeds), args.warmup, args.seconds, args.max_runs)
    out = {"model": str(model), "threads": threads, "batch": eff_batch, "shapes": " ".join(shape_strs)}
    out.update(summarise(lat_ms, elapsed, eff_batch))
    return out


# --- driver ------------------------------------------------------------------------------------

def ensure_models(names: List[str], model_dir: Path) -> Dict[str, Path]:
    """Paths of NAME.onnx in MODEL_DIR, exporting the missing ones."""
    missing = [n for n in names if not (model_dir / f"{n}.onnx").is_file()]
    if missing:
        sys.path.insert(0, str(REPO / "scripts"))
        import export_models

        unknown = [n for n in missing if n not in export_models.MODELS]
        if unknown:
            raise SystemExit(f"error: no {', '.join(unknown)} in {model_dir} and export_models.py "
                             f"does not know them (known: {', '.join(export_models.MODELS)})")
        try:
            export_models.ensure_models(missing, model_dir)
        except RuntimeError as e:
            raise SystemExit(f"error: {e}")
    return {n: model_dir / f"{n}.onnx" for n in names}


def fmt(x: Optional[float], digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def print_table(rows: List[Dict]) -> None:
    header = ["model", "threads", "batch", "streamline p50 ms", "ORT p50 ms", "ratio SL/ORT",
              "streamline /s", "ORT /s"]
    lines = [header]
    for r in rows:
        sl, ox = r.get("streamline", {}), r.get("ort", {})
        lines.append([
            r["model"], str(r["threads"]), str(r["batch"]),
            "error" if "error" in sl else fmt(sl.get("latency_ms", {}).get("p50")),
            "error" if "error" in ox else fmt(ox.get("latency_ms", {}).get("p50")),
            fmt(r.get("ratio_p50"), 3),
            "error" if "error" in sl else fmt(sl.get("throughput"), 1),
            "error" if "error" in ox else fmt(ox.get("throughput"), 1),
        ])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for k, line in enumerate(lines):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    for r in rows:
        for eng in ENGINES:
            if "error" in r.get(eng, {}):
                print(f"{r['model']} threads={r['threads']} batch={r['batch']} {eng}: {r[eng]['error']}",
                      file=sys.stderr)


def int_list(s: str) -> List[int]:
    try:
        vals = [int(v) for v in s.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{s}'")
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive integers, got '{s}'")
    return vals


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,mobilenet_v2", help="comma-separated model names")
    ap.add_argument("--threads", type=int_list, default=[1, 2], help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--batch", type=int_list, default=[1], help="comma-separated batch sizes (default 1)")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per engine and setting")
    ap.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds (at least one run)")
    ap.add_argument("--max-runs", type=int, default=0, help="stop measuring after this many runs (0: no limit)")
    ap.add_argument("--shape", action="append", default=[], metavar="NAME=d0,d1,...",
                    help="input shape for both engines (repeatable); overrides --batch for that input")
    ap.add_argument("--seq", type=int, default=128,
                    help="size of symbolic input axes after the first, e.g. a sequence length (default 128)")
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"),
                    help="where NAME.onnx lives (default build/models); missing models are exported")
    ap.add_argument("--binary", default=os.environ.get("SL_BINARY", str(REPO / "build" / "tools" / "streamline")),
                    help="streamline CLI (default $SL_BINARY or build/tools/streamline)")
    ap.add_argument("--engines", default="streamline,ort", help="which engines to run (default both)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run both engines this many times per setting, alternating; the table shows "
                         "the median run of each and the median of the per-round ratios")
    ap.add_argument("--json", metavar="FILE", help="also write all figures to FILE as JSON")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.warmup < 0:
        ap.error("--seconds must be positive and --warmup non-negative")
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if not engines or any(e not in ENGINES for e in engines):
        ap.error(f"--engines: choose from {', '.join(ENGINES)}")
    try:
        shape_map = parse_shapes(args.shape)
    except ValueError as e:
        ap.error(str(e))

    import onnxruntime as ort

    pin = required_ort_version()
    if pin is None:
        print("note: no onnxruntime pin found in scripts/requirements.txt", file=sys.stderr)
    elif ort.__version__ != pin:
        print(f"warning: onnxruntime {ort.__version__} is installed but scripts/requirements.txt pins {pin}; "
              "ORT figures are not comparable with the recorded ones (run scripts/setup.sh)", file=sys.stderr)

    binary = Path(args.binary)
    if "streamline" in engines and not binary.is_file():
        print(f"error: streamline binary not found at {binary} (build it, or pass --binary / "
              "--engines ort)", file=sys.stderr)
        return 2
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    models = ensure_models(names, Path(args.model_dir))

    rows = []
    for mi, name in enumerate(names):
        # Alternate which engine goes first from one model to the next.
        order = engines if mi % 2 == 0 else list(reversed(engines))
        for threads in args.threads:
            for batch in args.batch:
                row = {"model": name, "threads": threads, "batch": batch, "order": order}
                shapes = model_input_shapes(models[name], batch, shape_map, args.seq)
                row["shapes"] = shapes
                runs = {eng: [] for eng in engines}
                ratios = []
                for rnd in range(args.rounds):
                    # Alternate the order between rounds too, so neither engine always goes first.
                    for eng in (order if rnd % 2 == 0 else list(reversed(order))):
                        print(f"{name}: {eng}, {threads} thread(s), batch {batch}, round {rnd + 1} ...",
                              file=sys.stderr, flush=True)
                        if eng == "streamline":
                            runs[eng].append(run_streamline(binary, models[name], threads, batch, shapes, args))
                        else:
                            runs[eng].append(run_ort(models[name], threads, batch, shapes, args))
                    sl = runs.get("streamline", [{}])[-1].get("latency_ms", {}).get("p50")
                    ox = runs.get("ort", [{}])[-1].get("latency_ms", {}).get("p50")
                    if sl and ox:
                        ratios.append(sl / ox)
                for eng in engines:
                    # The run with the median p50 stands for the engine (its figures stay consistent).
                    ok = [r for r in runs[eng] if "latency_ms" in r]
                    row[eng] = sorted(ok, key=lambda r: r["latency_ms"]["p50"])[len(ok) // 2] if ok else runs[eng][0]
                    row[eng + "_p50_rounds"] = [r["latency_ms"]["p50"] for r in ok]
                ratios.sort()
                row["ratio_p50_rounds"] = ratios
                row["ratio_p50"] = statistics.median(ratios) if ratios else None
                rows.append(row)

    print_table(rows)
    if args.json:
        report = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": platform.machine(),
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "streamline_version": streamline_version(binary) if "streamline" in engines else None,
            "onnxruntime_version": ort.__version__,
            "onnxruntime_pin": pin,
            "settings": {"models": names, "threads": args.threads, "batch": args.batch,
                         "seconds": args.seconds, "warmup": args.warmup, "max_runs": args.max_runs,
                         "shapes": args.shape, "seq": args.seq, "engines": engines, "rounds": args.rounds,
                         "model_dir": str(Path(args.model_dir))},
            "results": rows,
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    failed = any("error" in r.get(e, {}) for r in rows for e in engines)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
