#!/usr/bin/env python3
"""Server overhead: what the KServe v2 front ends add on top of the library, in one run.

1. A tiny model (y = x + c on [N,16] floats, so compute is negligible): the library's latency
   (`streamline bench`, direct session and through the serving scheduler) against the served
   latency at concurrency 1 over HTTP/JSON and gRPC (`streamline perf`); the difference of
   medians is the added latency. Then requests per second at concurrency 1, 4 and 16 with
   `streamline perf` (HTTP and gRPC) and with wrk (HTTP/JSON, keep-alive connections).
2. ResNet-50 served (one instance, no batching) against the library's serving path with the same
   instance and thread settings at the same concurrency: throughput ratio.

Client and server share the machine's cores, as they would on one host; the figures include the
client's own cost.

    .venv/bin/python bench/server_overhead.py
    .venv/bin/python bench/server_overhead.py --seconds 3 --skip-resnet --json out.json
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_ort as co  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TINY_WIDTH = 16


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    c = numpy_helper.from_array(np.arange(TINY_WIDTH, dtype=np.float32), "c")
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"], name="add")], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", TINY_WIDTH])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", TINY_WIDTH])], [c])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def config(name: str, inp: str, dims: str, out: str, odims: str, threads: int) -> str:
    return (f'name: "{name}"\nbackend: "streamline"\nmax_batch_size: 8\n'
            f'input [ {{ name: "{inp}" data_type: TYPE_FP32 dims: [ {dims} ] }} ]\n'
            f'output [ {{ name: "{out}" data_type: TYPE_FP32 dims: [ {odims} ] }} ]\n'
            f'instance_group [ {{ count: 1 kind: KIND_CPU }} ]\n'
            f'parameters {{ key: "threads" value: {{ string_value: "{threads}" }} }}\n')


def run_json(cmd, timeout):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


class Server:
    def __init__(self, binary: Path, repo: Path, extra=()):
        self.http, self.grpc, self.metrics = free_port(), free_port(), free_port()
        self.log = open(repo.parent / "server.log", "w")
        self.proc = subprocess.Popen([str(binary), "serve", "--model-repository", str(repo),
                                      "--http-port", str(self.http), "--grpc-port", str(self.grpc),
                                      "--metrics-port", str(self.metrics), *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}; see {self.log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v2/health/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the server did not become ready in 300 s")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)
        self.log.close()


def perf(binary, server, model, protocol, concurrency, seconds, extra=()):
    url = f"127.0.0.1:{server.http if protocol == 'http' else server.grpc}"
    cmd = [binary, "perf", "-m", model, "-u", url, "-i", protocol, "--concurrency-range", concurrency,
           "--seconds", seconds, "--warmup-s", 1, "--json", *extra]
    return run_json(cmd, timeout=600)["steps"]


def wrk(server, model, body: str, connections: int, seconds: float, workdir: Path):
    if shutil.which("wrk") is None:
        return {"error": "wrk not installed (apt-get install wrk)"}
    script = workdir / "infer.lua"
    script.write_text('wrk.method = "POST"\n'
                      f"wrk.body = {json.dumps(body)}\n"
                      'wrk.headers["Content-Type"] = "application/json"\n')
    threads = max(1, min(2, connections))
    r = subprocess.run(["wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, int(seconds))}s", "--latency",
                        "-s", str(script), f"http://127.0.0.1:{server.http}/v2/models/{model}/infer"],
                       capture_output=True, text=True, timeout=seconds + 120)
    out = r.stdout
    res = {"connections": connections}
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    res["throughput"] = float(m.group(1)) if m else None
    for pct in ("50", "99"):
        m = re.search(rf"^\s+{pct}(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if m:
            scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
            res[f"p{pct}_ms"] = float(m.group(1)) * scale
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    res["non_2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors:.*", out)
    res["socket_errors"] = m.group(0) if m else ""
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--binary", default=str(REPO / "build" / "tools" / "streamline"))
    ap.add_argument("--model-dir", default=str(REPO / "build" / "models"))
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads of the ResNet-50 instance")
    ap.add_argument("--resnet-concurrency", type=int, default=2)
    ap.add_argument("--skip-resnet", action="store_true")
    ap.add_argument("--json", help="write all results to this file")
    args = ap.parse_args(argv)
    binary = Path(args.binary)
    if not binary.exists():
        print(f"error: {binary} not found (build first: scripts/setup.sh)", file=sys.stderr)
        return 2
    s = args.seconds
    results = {"date": time.strftime("%Y-%m-%d"), "cpu": co.cpu_model(), "cores": os.cpu_count(),
               "streamline": co.streamline_version(binary)}

    with tempfile.TemporaryDirectory(prefix="sl-overhead-") as tmp:
        tmp = Path(tmp)
        repo = tmp / "repo"
        (repo / "tiny" / "1").mkdir(parents=True)
        tiny = repo / "tiny" / "1" / "model.onnx"
        tiny_model(tiny)
        (repo / "tiny" / "config.pbtxt").write_text(config("tiny", "x", str(TINY_WIDTH), "y", str(TINY_WIDTH), 1))
        if not args.skip_resnet:
            resnet = co.ensure_models(["resnet50"], Path(args.model_dir))["resnet50"]
            (repo / "resnet50" / "1").mkdir(parents=True)
            os.symlink(resnet.resolve(), repo / "resnet50" / "1" / "model.onnx")
            (repo / "resnet50" / "config.pbtxt").write_text(
                config("resnet50", "input", "3, 224, 224", "output", "1000", args.threads))

        # The library, no server.
        lib_direct = run_json([binary, "bench", tiny, "--threads", 1, "--seconds", s, "--warmup", 1, "--json"], 600)
        lib_serving = run_json([binary, "bench", tiny, "--threads", 1, "--instances", 1, "--concurrency", 1,
                                "--max-batch", 1, "--seconds", s, "--warmup", 1, "--json"], 600)
        results["tiny_library"] = {"direct": lib_direct, "serving": lib_serving}
        if not args.skip_resnet:
            results["resnet50_library"] = run_json(
                [binary, "bench", resnet, "--threads", args.threads, "--instances", 1, "--concurrency",
                 args.resnet_concurrency, "--max-batch", 1, "--seconds", 2 * s, "--warmup", 2, "--json"], 900)

        server = Server(binary, repo)
        try:
            for proto in ("http", "grpc"):
                results[f"tiny_{proto}"] = [perf(binary, server, "tiny", proto, str(c), s)[0] for c in (1, 4, 16)]
            body = json.dumps({"inputs": [{"name": "x", "shape": [1, TINY_WIDTH], "datatype": "FP32",
                                           "data": [float(i) for i in range(TINY_WIDTH)]}]})
            results["tiny_wrk"] = [wrk(server, "tiny", body, c, s, tmp) for c in (1, 16)]
            if not args.skip_resnet:
                results["resnet50_served"] = {
                    p: perf(binary, server, "resnet50", p, str(args.resnet_concurrency), 2 * s)[0] for p in ("http", "grpc")}
        finally:
            server.stop()

    # Tables.
    lib_p50 = lib_direct["latency_ms"]["p50"]
    sched_p50 = lib_serving["latency_ms"]["p50"]
    print("Tiny model, concurrency 1 (medians):\n")
    print("| path | p50 ms | added over library ms |")
    print("| --- | --- | --- |")
    print(f"| library, direct session | {lib_p50:.4f} | - |")
    print(f"| library, serving scheduler | {sched_p50:.4f} | {sched_p50 - lib_p50:.4f} |")
    for proto in ("http", "grpc"):
        p50 = results[f"tiny_{proto}"][0]["latency_ms"]["p50"]
        print(f"| served, {proto.upper()} ({'JSON' if proto == 'http' else 'raw tensors'}) | {p50:.4f} | {p50 - lib_p50:.4f} |")
        results[f"added_p50_ms_{proto}"] = p50 - lib_p50
    print("\nTiny model, requests per second:\n")
    print("| client | concurrency | req/s | p50 ms | p99 ms | errors |")
    print("| --- | --- | --- | --- | --- | --- |")
    for proto in ("http", "grpc"):
        for st in results[f"tiny_{proto}"]:
            print(f"| streamline perf, {proto.upper()} | {st['concurrency']} | {st['throughput']:.0f} | "
                  f"{st['latency_ms']['p50']:.3f} | {st['latency_ms']['p99']:.3f} | {st['errors']} |")
    for w in results["tiny_wrk"]:
        if "error" in w:
            print(f"| wrk | - | {w['error']} | | | |")
            continue
        print(f"| wrk, HTTP | {w['connections']} | {w['throughput'] or 0:.0f} | {w.get('p50_ms', float('nan')):.3f} | "
              f"{w.get('p99_ms', float('nan')):.3f} | {w['non_2xx']} |")
    if not args.skip_resnet:
        lib = results["resnet50_library"]
        print(f"\nResNet-50, one instance of {args.threads} threads, no batching, concurrency {args.resnet_concurrency}:\n")
        print("| path | img/s | p50 ms | p99 ms | served/library |")
        print("| --- | --- | --- | --- | --- |")
        print(f"| library (serving path) | {lib['throughput']:.2f} | {lib['latency_ms']['p50']:.1f} | "
              f"{lib['latency_ms']['p99']:.1f} | 1.00 |")
        for proto, st in results["resnet50_served"].items():
            ratio = st["throughput"] / lib["throughput"]
            results[f"resnet50_ratio_{proto}"] = ratio
            print(f"| served, {proto.upper()} | {st['throughput']:.2f} | {st['latency_ms']['p50']:.1f} | "
                  f"{st['latency_ms']['p99']:.1f} | {ratio:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
