#!/usr/bin/env python3
"""The online controller under a stepped load, against static configurations.

One `streamline serve` per configuration serves the model (or, with --mix, two models together)
while `streamline perf` drives the phases one after another on the same server: 1 client, then 4,
then 32, then 1 again (--phases), each --warmup-s to settle plus --seconds measured. Configurations:

    adaptive   instance_group count = the cores, max_batch_size 8, dynamic batching with no delay,
               latency_slo_ms (--slo-ms) and control_window_ms (--window-ms): the controller starts
               with one instance and retunes queue delay, preferred batch and active instances
    default    what a Triton user starts from: one instance, no dynamic batching
    static     the grid the best static configuration is searched in: instances 1 or the cores,
               times no batching, batching with no delay, batching with a 2 ms delay
    adaptive+admission  (--refusals) adaptive with deadline-aware admission on: requests that
               cannot finish within the SLO are refused on arrival; the server's refusal-time
               histogram (streamline_inference_refusal_duration_ms) gives how fast, per phase. It
               runs with its own, tighter SLO (--admission-slo-ms): under the default one no
               deadline is in danger at these loads and nothing would be refused

Per phase it reports each configuration's throughput, p50 and p99 (perf, the measured window), and
from the server's own histograms over the whole phase: goodput (answers within the SLO per second),
the share of admitted requests within the SLO, and refusals. The best static configuration of a
phase is the one with the lowest p50 in the low-load phases (1 client) and the highest throughput
in the loaded ones; with --mix, the one with the lowest geometric mean of the two models' p50s or
the highest of their throughputs (a configuration is one setting of the whole server), and each
row also names the configuration that would be best for its model alone. Targets: adaptive within 10% of each phase's best static (p50 or throughput),
at the highest load at least 1.3x the default's goodput, at least 99% of admitted requests within
the SLO, refused requests answered in under 1 ms of server time. Prints a table; --json writes
every figure. With --rounds N every configuration runs N times, the rounds in alternating order,
and each figure is the median over them: on a shared machine one run of each can differ by more
than the configurations do (the same settings measured 17% apart in one grid).

    .venv/bin/python bench/adaptive.py
    .venv/bin/python bench/adaptive.py --model squeezenet1_1 --slo-ms 40 --seconds 10 --warmup-s 5
    .venv/bin/python bench/adaptive.py --mix --json bench/adaptive.json
    .venv/bin/python bench/adaptive.py --mix --rounds 3
    .venv/bin/python bench/adaptive.py --refusals --only "static 1i batch" --phases 1,32
    .venv/bin/python bench/adaptive.py --svg docs/benchmarks/adaptive.svg
"""

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_ort as co  # noqa: E402
from server_overhead import Server, run_json  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def mlp(path: Path, width: int, layers: int, seed: int) -> None:
    """x [N, width] -> layers x (MatMul + Add + Relu): a few ms a row on one core at width 512."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, cur = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(np.zeros(width, np.float32), f"b{i}")]
        out = "y" if i == layers - 1 else f"h{i}"
        nodes += [helper.make_node("MatMul", [cur, f"W{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
                  helper.make_node("Relu", [f"a{i}"], [out])]
        cur = out
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))


def slo_of(c: dict, args) -> float:
    return args.admission_slo_ms if c.get("admission") else args.slo_ms


def config_text(name: str, c: dict, args) -> str:
    lines = [f'name: "{name}"', "max_batch_size: 8", f'instance_group [ {{ count: {c["instances"]} kind: KIND_CPU }} ]']
    if c["batching"]:
        lines.append(f'dynamic_batching {{ max_queue_delay_microseconds: {c["delay_us"]} }}')
    if c.get("adaptive"):
        lines += [f'parameters {{ key: "latency_slo_ms" value: {{ string_value: "{slo_of(c, args)}" }} }}',
                  f'parameters {{ key: "control_window_ms" value: {{ string_value: "{args.window_ms}" }} }}']
        if not c.get("admission"):
            lines.append('parameters { key: "admission" value: { string_value: "false" } }')
    return "\n".join(lines) + "\n"


def configurations(cores: int, refusals: bool) -> list:
    out = [{"name": "adaptive", "instances": cores, "batching": True, "delay_us": 0, "adaptive": True},
           {"name": "default", "instances": 1, "batching": False, "delay_us": 0}]
    if refusals:
        out.append({"name": "adaptive+admission", "instances": cores, "batching": True, "delay_us": 0,
                    "adaptive": True, "admission": True})
    for n in sorted({1, cores}):
        out.append({"name": f"static {n}i nobatch", "instances": n, "batching": False, "delay_us": 0})
        out.append({"name": f"static {n}i batch", "instances": n, "batching": True, "delay_us": 0})
        out.append({"name": f"static {n}i batch+2ms", "instances": n, "batching": True, "delay_us": 2000})
    return out


def scrape(server, models, slo_ms) -> dict:
    """Per model: successes, failures, and requests within the SLO (server-side request duration)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for m in models:
        def value(pattern):
            hit = re.search(pattern, text, re.M)
            return float(hit.group(1)) if hit else 0.0
        fails = sum(float(v) for v in re.findall(
            rf'^streamline_inference_request_failure_total\{{[^}}]*model="{m}"[^}}]*\}} (\S+)$', text, re.M))
        out[m] = {"success": value(rf'^streamline_inference_request_success_total\{{[^}}]*model="{m}"[^}}]*\}} (\S+)$'),
                  "failure": fails,
                  "within": value(rf'^streamline_inference_request_duration_ms_bucket\{{[^}}]*model="{m}"[^}}]*'
                                  rf'le="{slo_ms:g}"[^}}]*\}} (\S+)$'),
                  "refusal_buckets": {float(le) if le != "+Inf" else float("inf"): float(v) for le, v in re.findall(
                      rf'^streamline_inference_refusal_duration_ms_bucket\{{model="{m}",le="([^"]+)"\}} (\S+)$',
                      text, re.M)},
                  "active": value(rf'^streamline_controller_active_instances\{{[^}}]*model="{m}"[^}}]*\}} (\S+)$'),
                  "decisions": {f"{k} {d}": float(v) for k, d, v in re.findall(
                      rf'^streamline_controller_decisions_total\{{[^}}]*model="{m}"[^}}]*knob="(\w+)",'
                      rf'direction="(\w+)"\}} (\S+)$', text, re.M)}}
    return out


def perf(binary, server, model, shape, clients, args) -> dict:
    cmd = [binary, "perf", "-m", model, "-u", f"127.0.0.1:{server.grpc}", "-i", "grpc", "--concurrency-range",
           f"{clients}:{clients}", "--seconds", args.seconds, "--warmup-s", args.warmup_s, "--json"]
    if shape:
        cmd += ["--shape", shape]
    return run_json(cmd, timeout=args.seconds + args.warmup_s + 300)["steps"][0]


def run_config(binary, c, models, args, root: Path) -> list:
    repo = root / c["name"].replace(" ", "_").replace("+", "_")
    for name, (path, _) in models.items():
        (repo / name / "1").mkdir(parents=True)
        os.symlink(path, repo / name / "1" / "model.onnx")
        (repo / name / "config.pbtxt").write_text(config_text(name, c, args))
    slo = slo_of(c, args)
    server = Server(binary, repo, extra=["--metrics-buckets-ms", f"{slo:g}", *args.server_arg])
    phases = []
    try:
        for clients in args.phases:
            before, t0 = scrape(server, models, slo), time.time()
            results, threads = {}, []
            for name, (_, shape) in models.items():
                t = threading.Thread(target=lambda n=name, s=shape: results.__setitem__(
                    n, perf(binary, server, n, s, clients, args)))
                threads.append(t)
                t.start()
            for t in threads:
                t.join()
            after, elapsed = scrape(server, models, slo), time.time() - t0
            row = {"clients": clients, "models": {}}
            for name in models:
                p, a, b = results.get(name, {}), before[name], after[name]
                ok = b["success"] - a["success"]
                row["models"][name] = {
                    "throughput": p.get("throughput"), "p50_ms": p.get("latency_ms", {}).get("p50"),
                    "p99_ms": p.get("latency_ms", {}).get("p99"), "errors": p.get("errors"),
                    "goodput": (b["within"] - a["within"]) / elapsed, "within_slo": (b["within"] - a["within"]) / ok
                    if ok else None, "refused": b["failure"] - a["failure"], "active_instances": b["active"],
                    "decisions": {k: v - a["decisions"].get(k, 0) for k, v in b["decisions"].items()},
                    "refusal_ms": refusal_times(a["refusal_buckets"], b["refusal_buckets"])}
            phases.append(row)
            print(f"  {c['name']:<22} {clients:>3} clients: " + ", ".join(
                f"{n} {m['throughput'] or 0:.0f}/s p50 {m['p50_ms'] or 0:.2f} ms p99 {m['p99_ms'] or 0:.2f} ms "
                f"active {m['active_instances']:.0f} {m['decisions'] or ''}" for n, m in row["models"].items()),
                file=sys.stderr, flush=True)
    finally:
        server.stop()
    return phases


def merge_rounds(rounds: list) -> list:
    """Per phase and model, the median of each figure over the rounds of one configuration. The
    decisions and refusal times are those of the round whose throughput is the median one."""
    if len(rounds) == 1:
        return rounds[0]
    merged = []
    for i, row in enumerate(rounds[0]):
        out = {"clients": row["clients"], "models": {}}
        for name in row["models"]:
            ms = [rd[i]["models"][name] for rd in rounds]
            pick = sorted(ms, key=lambda m: m.get("throughput") or 0)[len(ms) // 2]
            m = dict(pick)
            for key in ("throughput", "p50_ms", "p99_ms", "goodput", "within_slo", "active_instances"):
                vals = [x[key] for x in ms if x.get(key) is not None]
                m[key] = statistics.median(vals) if vals else None
            for key in ("errors", "refused"):
                m[key] = sum(x.get(key) or 0 for x in ms)
            out["models"][name] = m
        merged.append(out)
    return merged


def refusal_times(before: dict, after: dict) -> dict:
    """Refusals between two scrapes of the histogram: count, share under 1 ms, and upper bounds
    (bucket edges) of their p50 and p99 server time in ms."""
    edges = sorted(after)
    cum = [after[e] - before.get(e, 0) for e in edges]
    n = cum[-1] if cum else 0
    if not n:
        return {"count": 0}

    def bound(q):
        return next((e for e, c in zip(edges, cum) if c >= q * n), float("inf"))
    under = next((c for e, c in zip(edges, cum) if e == 1.0), None)
    return {"count": n, "under_1ms": under / n if under is not None else None, "p50_le_ms": bound(0.5),
            "p99_le_ms": bound(0.99), "max_le_ms": bound(1.0)}


def print_refusals(results: dict, args) -> None:
    """Per phase of the admission configuration: refusals and their server time."""
    if "adaptive+admission" not in results:
        return
    print(f"\nadaptive+admission, SLO {args.admission_slo_ms:g} ms:")
    head = ["phase", "clients", "model", "answered/s", "p99", "admitted in SLO", "refused", "refusals under 1 ms",
            "p50 <=", "p99 <=", "max <="]
    table = [head]
    for i, row in enumerate(results["adaptive+admission"]):
        for name, m in row["models"].items():
            r = m["refusal_ms"]
            ms = lambda v: "-" if v is None else ("> 10 ms" if v == float("inf") else f"{v:g} ms")  # noqa: E731
            within = "-" if m["within_slo"] is None else co.fmt(100 * m["within_slo"], 1) + "%"
            table.append([str(i + 1), str(row["clients"]), name, f"{m['throughput'] or 0:.0f}",
                          f"{m['p99_ms'] or 0:.2f} ms", within, f"{r['count']:.0f}",
                          "-" if not r["count"] else co.fmt(100 * r["under_1ms"], 1) + "%",
                          ms(r.get("p50_le_ms")), ms(r.get("p99_le_ms")), ms(r.get("max_le_ms"))])
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))


def svg_plot(rows, slo_ms: float) -> str:
    """The phases as two bar charts, one model after another: throughput (left) and p99 with the
    SLO as a line (right), adaptive beside the phase's best static configuration and the default."""
    series = [("adaptive", "#1f77b4", lambda r: r["adaptive"]), ("best static", "#2ca02c", lambda r: r["best"]),
              ("default", "#aaaaaa", lambda r: r["default"])]
    panel_w, panel_h, left, top, gap = 420, 220, 60, 40, 70
    width = left + 2 * panel_w + gap + 20
    height = top + panel_h + 70
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>']

    def panel(x0, title, key, line=None):
        values = [key(get(r)) or 0 for r in rows for _, _, get in series]
        top_value = max(values + ([line] if line else []) + [1e-9]) * 1.1
        out.append(f'<text x="{x0}" y="{top - 16}" font-size="13">{title}</text>')
        out.append(f'<line x1="{x0}" y1="{top + panel_h}" x2="{x0 + panel_w}" y2="{top + panel_h}" stroke="black"/>')
        out.append(f'<line x1="{x0}" y1="{top}" x2="{x0}" y2="{top + panel_h}" stroke="black"/>')
        for k in range(5):
            v = top_value * k / 4
            y = top + panel_h - panel_h * k / 4
            text = f"{v:.0f}" if top_value >= 100 else f"{v:.3g}"
            out.append(f'<text x="{x0 - 6}" y="{y + 4}" text-anchor="end">{text}</text>')
        group_w = panel_w / max(1, len(rows))
        bar_w = group_w * 0.8 / len(series)
        for i, r in enumerate(rows):
            gx = x0 + i * group_w + group_w * 0.1
            for j, (_, color, get) in enumerate(series):
                v = key(get(r)) or 0
                h = panel_h * v / top_value
                out.append(f'<rect x="{gx + j * bar_w:.1f}" y="{top + panel_h - h:.1f}" width="{bar_w - 1:.1f}" '
                           f'height="{h:.1f}" fill="{color}"/>')
            label = f'{r["clients"]} cl.' + (f' {r["model"]}' if len({x["model"] for x in rows}) > 1 else "")
            out.append(f'<text x="{gx + group_w * 0.4:.1f}" y="{top + panel_h + 14}" text-anchor="middle">'
                       f'{label}</text>')
        if line:
            y = top + panel_h - panel_h * line / top_value
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + panel_w}" y2="{y:.1f}" stroke="red" '
                       f'stroke-dasharray="4 3"/>')
            out.append(f'<text x="{x0 + panel_w - 2}" y="{y - 4:.1f}" text-anchor="end" fill="red">SLO</text>')
        out.append(f'<text x="{x0 + panel_w / 2}" y="{top + panel_h + 30}" text-anchor="middle">phase (clients)</text>')

    panel(left, "throughput (requests/s)", lambda m: m["throughput"])
    panel(left + panel_w + gap, "p99 latency (ms)", lambda m: m["p99_ms"], line=slo_ms)
    for j, (name, color, _) in enumerate(series):
        x = left + j * 130
        out.append(f'<rect x="{x}" y="{height - 22}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{x + 16}" y="{height - 12}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def summarise(results: dict, models, args) -> list:
    """Per phase and model: the adaptive server against the phase's best static configuration.

    A configuration is one setting of the whole server, so with several models served together the
    best static configuration of a phase is chosen for all of them at once: the highest geometric
    mean of the models' throughputs in the loaded phases, the lowest geometric mean of their p50s
    in the low-load ones (each model's relative gain counts alike). Each row also names the static
    configuration that would be best for its model alone ("best alone"): with two models that is
    often one that starves the other, so no configuration reaches every model's figure at once.
    """
    rows = []
    statics = [c for c in results if c.startswith("static")]
    if not statics:
        return rows
    for i, clients in enumerate(args.phases):
        low = clients == min(args.phases)
        get = lambda c, name: results[c][i]["models"][name]  # noqa: E731

        def score(c, names):
            # Lower is better: the geometric mean of p50 (low load) or of 1 / throughput.
            logs = []
            for name in names:
                m = get(c, name)
                v = (m["p50_ms"] or 1e9) if low else 1.0 / max(m["throughput"] or 0, 1e-9)
                logs.append(math.log(v))
            return sum(logs) / len(logs)

        joint = min(statics, key=lambda c: score(c, list(models)))
        for name in models:
            alone = min(statics, key=lambda c: score(c, [name]))

            def versus(b):
                a = get("adaptive", name)
                if low:
                    return (b["p50_ms"] or 0) / a["p50_ms"] if a["p50_ms"] else None  # >= 0.9: within 10%
                return (a["throughput"] or 0) / b["throughput"] if b["throughput"] else None

            a, b, d = get("adaptive", name), get(joint, name), get("default", name)
            rows.append({"phase": i + 1, "clients": clients, "model": name, "metric": "p50" if low else "throughput",
                         "adaptive": a, "best_static": joint, "best": b, "default": d, "vs_best": versus(b),
                         "best_alone": alone, "vs_best_alone": versus(get(alone, name)),
                         "goodput_vs_default": a["goodput"] / d["goodput"] if d["goodput"] else None})
    return rows


def print_table(rows) -> None:
    head = ["phase", "clients", "model", "adaptive thr/p50/p99", "best static", "its thr/p50/p99", "default thr/p50",
            "vs best", "best alone", "vs it", "goodput x default", "in SLO", "active"]
    fmt = lambda m: f"{m['throughput'] or 0:.0f}/{m['p50_ms'] or 0:.2f}/{m['p99_ms'] or 0:.2f}"  # noqa: E731
    table = [head] + [[str(r["phase"]), str(r["clients"]), r["model"], fmt(r["adaptive"]), r["best_static"],
                       fmt(r["best"]), f"{r['default']['throughput'] or 0:.0f}/{r['default']['p50_ms'] or 0:.2f}",
                       co.fmt(r["vs_best"]), r["best_alone"], co.fmt(r["vs_best_alone"]),
                       co.fmt(r["goodput_vs_default"]),
                       co.fmt(100 * r["adaptive"]["within_slo"] if r["adaptive"]["within_slo"] is not None else None,
                              1) + "%", f"{r['adaptive']['active_instances']:.0f}"] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=str(REPO / "build" / "tools" / "streamline"))
    ap.add_argument("--model", help="a zoo model (scripts/export_models.py) instead of the generated MLP")
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"))
    ap.add_argument("--mix", action="store_true", help="serve two models together (the MLP at two widths)")
    ap.add_argument("--phases", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 32, 1],
                    help="clients per phase (default 1,4,32,1)")
    ap.add_argument("--seconds", type=float, default=5, help="measured time per phase")
    ap.add_argument("--warmup-s", type=float, default=3, help="time per phase to settle, not measured by perf")
    ap.add_argument("--slo-ms", type=float, default=20)
    ap.add_argument("--window-ms", type=float, default=500, help="the controller's window")
    ap.add_argument("--only", help="comma-separated configuration names to run (default all)")
    ap.add_argument("--refusals", action="store_true",
                    help="also run the adaptive configuration with admission on and report refusal times")
    ap.add_argument("--admission-slo-ms", type=float, default=4,
                    help="the SLO of the admission configuration (--refusals), tighter than --slo-ms so that "
                         "the loaded phases put deadlines in danger")
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of every configuration, in alternating order; each figure is the median over "
                         "them (the shared machine's drift can exceed the differences measured)")
    ap.add_argument("--server-arg", action="append", default=[], metavar="FLAG",
                    help="one more flag for `streamline serve` in every configuration (repeatable)")
    ap.add_argument("--json", help="write every figure to this file")
    ap.add_argument("--svg", help="draw the phases (throughput, p99 against the SLO) into this SVG file")
    args = ap.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="sl-adaptive-") as tmp:
        root = Path(tmp)
        models = {}
        if args.model:
            models[args.model] = (co.ensure_models([args.model], Path(args.model_dir))[args.model], None)
        else:
            mlp(root / "mlp.onnx", 512, 8, seed=1)
            models["mlp"] = (root / "mlp.onnx", None)
        if args.mix:
            mlp(root / "mlp_small.onnx", 256, 4, seed=2)
            models["mlp_small"] = (root / "mlp_small.onnx", None)
        configs = configurations(cores, args.refusals)
        if args.only:
            keep = set(args.only.split(","))
            configs = [c for c in configs
                       if c["name"] in keep or c["name"] in ("adaptive", "default", "adaptive+admission")]
        by_round = {c["name"]: [] for c in configs}
        for r in range(args.rounds):
            # Rounds alternate the order of the configurations, so drift in the machine's speed
            # falls on each of them alike.
            for c in (configs if r % 2 == 0 else list(reversed(configs))):
                print(f"{c['name']}" + (f" (round {r + 1}/{args.rounds})" if args.rounds > 1 else "") + ":",
                      file=sys.stderr, flush=True)
                by_round[c["name"]].append(run_config(args.binary, c, models, args, root / f"round{r + 1}"))
        results = {name: merge_rounds(rounds) for name, rounds in by_round.items()}
    rows = summarise(results, models, args)
    print_table(rows)
    print_refusals(results, args)
    if args.svg:
        Path(args.svg).write_text(svg_plot(rows, args.slo_ms))
    report = {"cores": cores, "cpu": co.cpu_model(), "args": {k: v for k, v in vars(args).items()},
              "configurations": configs, "phases": results, "summary": rows}
    if args.rounds > 1:
        report["phases_by_round"] = by_round
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    print(json.dumps({"summary": [{k: r[k] for k in ("phase", "clients", "model", "metric", "best_static", "vs_best",
                                                      "best_alone", "vs_best_alone", "goodput_vs_default")}
                                  for r in rows]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
