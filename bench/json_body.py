"""Large JSON request bodies on `streamline serve`: memory, time, and what they do to the others.

    .venv/bin/python bench/json_body.py [--binary build/tools/streamline] [--body-mb 200] [--pair-mb 57]

1. One JSON body of about --body-mb MB (x [N, 1024] float32, --decimals per value) to a model that
   sums each row: the server's resident memory before, its peak (VmHWM) after, the time from
   sending the request to the answer (mostly decoding) and the server CPU time it took (steadier
   than the time on a shared machine).
2. Two bodies of about --pair-mb MB sent at once; while they are in flight, a health probe
   (GET /v2/health/ready) and a one-row inference run back to back on their own connections: their
   latency (p50, p99, max) over that window.

Each part runs on a fresh server (its peak memory is its own). --binary may be an older build to
compare with: flags it does not know (--max-json-body-mb) are left out.
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]
WIDTH = 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_repository(root: Path):
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], "rowsum",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])],
        initializer=[numpy_helper.from_array(np.array([1], np.int64), "axes")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    (root / "rowsum" / "1").mkdir(parents=True)
    onnx.save(m, str(root / "rowsum" / "1" / "model.onnx"))
    (root / "rowsum" / "config.pbtxt").write_text("max_batch_size: 0\n")


def json_body(mb: float, seed: int, decimals: int = 7) -> tuple[bytes, int]:
    """About `mb` MB of JSON: rows of 1024 random values with `decimals` decimals (a pool of rows
    reused). Returns the body and the row count."""
    rng = np.random.default_rng(seed)
    fmt = f"%.{decimals}f"
    pool = [",".join(np.char.mod(fmt, rng.random(WIDTH, np.float32)).tolist()).encode() for _ in range(512)]
    rows = max(1, int(mb * 1e6 / (len(pool[0]) + 1)))
    data = b",".join(pool[i % len(pool)] for i in range(rows))
    head = b'{"inputs":[{"name":"x","datatype":"FP32","shape":[%d,%d],"data":[' % (rows, WIDTH)
    return head + data + b"]}]}", rows


class Server:
    def __init__(self, binary: str, repo: Path):
        self.port = free_port()
        flags = []
        help_text = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True).stdout
        if "--max-json-body-mb" in help_text:
            flags = ["--max-json-body-mb", "256"]
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            [binary, "serve", "--model-repository", str(repo), "--http-port", str(self.port), "--grpc-port",
             str(free_port()), "--metrics-port", str(free_port()), *flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if self.request("GET", "/v2/health/ready")[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the server did not come up")

    def request(self, method, path, body=None, timeout=600):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.request(method, path, body=body)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def kb(self, field: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        return -1

    def cpu_seconds(self) -> float:
        """User plus system CPU time of the server so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def one_body(binary: str, repo: Path, mb: float, decimals: int):
    body, rows = json_body(mb, seed=1, decimals=decimals)
    srv = Server(binary, repo)
    try:
        small, _ = json_body(0.01, seed=2)
        srv.request("POST", "/v2/models/rowsum/infer", small)
        rss = srv.kb("VmRSS")
        cpu0 = srv.cpu_seconds()
        t0 = time.perf_counter()
        status, data = srv.request("POST", "/v2/models/rowsum/infer", body)
        seconds = time.perf_counter() - t0
        cpu = srv.cpu_seconds() - cpu0
        peak = srv.kb("VmHWM")
        ok = status == 200 and len(json.loads(data)["outputs"][0]["data"]) == rows
        print(f"one body:  {len(body) / 1e6:7.1f} MB JSON, tensor {rows * WIDTH * 4 / 1e6:.1f} MB, "
              f"answer {status}{'' if ok else ' (WRONG)'} in {seconds:.2f} s ({cpu:.2f} s of server CPU); "
              f"RSS {rss / 1024:.0f} MB before, "
              f"peak {peak / 1024:.0f} MB (+{(peak - rss) / 1024:.0f} MB = {(peak - rss) * 1024 / len(body):.2f} x the body)")
    finally:
        srv.stop()


def latencies(name: str, values: list[float]):
    if not values:
        print(f"  {name}: none completed")
        return
    v = np.array(values) * 1e3
    print(f"  {name:<12} {len(v):5d} requests: p50 {np.percentile(v, 50):8.2f} ms  p99 {np.percentile(v, 99):8.2f} ms"
          f"  max {v.max():8.2f} ms")


def pair(binary: str, repo: Path, mb: float, decimals: int):
    bodies = [json_body(mb, seed=3 + i, decimals=decimals)[0] for i in range(2)]
    small, _ = json_body(0.01, seed=5)
    srv = Server(binary, repo)
    try:
        done = threading.Event()
        big_times = []

        def big(body):
            t0 = time.perf_counter()
            status, _ = srv.request("POST", "/v2/models/rowsum/infer", body)
            big_times.append((status, time.perf_counter() - t0))

        def probe(method, path, body, out):
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
            while not done.is_set():
                t0 = time.perf_counter()
                c.request(method, path, body=body)
                r = c.getresponse()
                r.read()
                out.append(time.perf_counter() - t0)
                time.sleep(0.005)
            c.close()

        health, infer = [], []
        probes = [threading.Thread(target=probe, args=("GET", "/v2/health/ready", None, health)),
                  threading.Thread(target=probe, args=("POST", "/v2/models/rowsum/infer", small, infer))]
        bigs = [threading.Thread(target=big, args=(b,)) for b in bodies]
        for t in bigs + probes:
            t.start()
        for t in bigs:
            t.join()
        done.set()
        for t in probes:
            t.join()
        print(f"two bodies of {len(bodies[0]) / 1e6:.1f} MB in flight: "
              + ", ".join(f"{s} in {t:.2f} s" for s, t in big_times))
        latencies("health probe", health)
        latencies("small infer", infer)
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=str(REPO / "build" / "tools" / "streamline"))
    ap.add_argument("--body-mb", type=float, default=200)
    ap.add_argument("--pair-mb", type=float, default=57)
    ap.add_argument("--decimals", type=int, default=7, help="decimals per value: fewer = more values per MB")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        repo = Path(d) / "models"
        write_repository(repo)
        print(f"binary: {args.binary}, values with {args.decimals} decimals")
        one_body(args.binary, repo, args.body_mb, args.decimals)
        pair(args.binary, repo, args.pair_mb, args.decimals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
