"""Metrics: a real Prometheus server (Debian's prometheus) scrapes /metrics on the metrics port
and sees the requests we made; and `streamline perf` drives the server over HTTP and gRPC.
"""

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient

from conftest import binary_path, free_port

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def metrics_text(server) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        return r.read().decode()


def sample(text: str, name: str, **labels) -> float:
    """The value of the series NAME{labels...} (labels given must match; others ignored)."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, lab = head.partition("{")
        if metric != name:
            continue
        pairs = dict(p.split("=", 1) for p in lab.rstrip("}").split(",") if "=" in p)
        pairs = {k: v.strip('"') for k, v in pairs.items()}
        if all(pairs.get(k) == str(v) for k, v in labels.items()):
            return float(value)
    raise AssertionError(f"no series {name}{labels} in:\n{text[:3000]}")


def run_tiny(server, n, rows=2):
    c = httpclient.InferenceServerClient(server.http_addr)
    x = np.ones((rows, 16), np.float32)
    for _ in range(n):
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        c.infer("tiny", [inp])


def test_metrics_text_counts_requests(server):
    before = sample(metrics_text(server), "streamline_inference_request_success_total", model="tiny")
    run_tiny(server, 7)
    text = metrics_text(server)
    assert sample(text, "streamline_inference_request_success_total", model="tiny") - before == 7
    for name in ["streamline_inference_count_total", "streamline_inference_exec_count_total",
                 "streamline_inference_queue_duration_us_total", "streamline_inference_compute_duration_us_total",
                 "streamline_inference_pending_requests", "process_cpu_seconds_total",
                 "process_resident_memory_bytes"]:
        assert name in text, name
    assert 'streamline_inference_batch_size_bucket{' in text
    assert 'quantile="0.99"' in text
    assert "streamline_instance_busy_us_total" in text
    assert sample(text, "process_resident_memory_bytes") > 1e6


def test_prometheus_scrapes_metrics(server, tmp_path):
    run_tiny(server, 5)
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: streamline\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{server.metrics_port}']\n")
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        expected = sample(metrics_text(server), "streamline_inference_request_success_total", model="tiny")
        q = urllib.parse.quote('streamline_inference_request_success_total{model="tiny"}')
        deadline, value, health = time.time() + 60, None, None
        while time.time() < deadline:
            time.sleep(1)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets", timeout=5) as r:
                    targets = json.load(r)["data"]["activeTargets"]
                health = [t["health"] for t in targets]
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?query={q}", timeout=5) as r:
                    result = json.load(r)["data"]["result"]
                if result:
                    value = float(result[0]["value"][1])
                    if value >= expected:
                        break
            except OSError:
                continue
        assert health == ["up"], f"scrape target health {health}"
        assert value == expected, f"Prometheus saw {value}, the server says {expected}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_client(server, protocol):
    url = server.http_addr if protocol == "http" else server.grpc_addr
    r = subprocess.run(
        [str(binary_path()), "perf", "-m", "tiny", "-u", url, "-i", protocol,
         "--concurrency-range", "1:4:3", "--seconds", "1", "--json"],
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert [s["concurrency"] for s in report["steps"]] == [1, 4]
    for s in report["steps"]:
        assert s["errors"] == 0, s
        assert s["requests"] > 0 and s["throughput"] > 0, s
        lat = s["latency_ms"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"], lat


def test_perf_client_server_down():
    r = subprocess.run([str(binary_path()), "perf", "-m", "tiny", "-u", f"127.0.0.1:{free_port()}",
                        "--seconds", "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip(), "no error message"
