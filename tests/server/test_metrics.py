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


# --- histograms, Triton's names, reloads ----------------------------------------------------------

def scrape_until(port, query, want, timeout=60):
    """Polls Prometheus' HTTP API until `query` returns a value for which want(value) holds."""
    q = urllib.parse.quote(query)
    deadline, value = time.time() + timeout, None
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?query={q}", timeout=5) as r:
                result = json.load(r)["data"]["result"]
            if result:
                value = float(result[0]["value"][1])
                if want(value):
                    return value
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"Prometheus: {query} = {value} after {timeout} s")


def start_prometheus(tmp_path, target_port):
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: streamline\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n")
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, port


def test_histogram_quantile_matches_exact_and_client_percentiles(repository, tmp_path):
    """A load on a model of ~10 ms per request; Prometheus' histogram_quantile over the server's
    request-duration histogram agrees with the server's exact percentiles of the same requests to
    within two buckets (0.5 ms each) and is never above the client's own percentiles. slow_q, not
    slow_t: one request at a time never waits, but a 1 ms queue timeout can still expire on a
    loaded machine."""
    from conftest import Server
    width_ms = 0.5
    buckets = ",".join(str(round(width_ms * i, 1)) for i in range(1, 401))  # 0.5 .. 200 ms
    s = Server(repository, extra=["--metrics-buckets-ms", buckets])
    prom, port = start_prometheus(tmp_path, s.metrics_port)
    try:
        c = httpclient.InferenceServerClient(s.http_addr)
        x = np.random.default_rng(3).standard_normal((1, 1024)).astype(np.float32)
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=True)
        out = httpclient.InferRequestedOutput("y", binary_data=True)
        c.infer("slow_q", [inp], outputs=[out])  # warm
        n, lat = 200, []
        for _ in range(n):
            t0 = time.perf_counter()
            c.infer("slow_q", [inp], outputs=[out])
            lat.append((time.perf_counter() - t0) * 1000)
        text = metrics_text(s)
        total = sample(text, "streamline_inference_request_duration_ms_count", model="slow_q")
        assert total == n + 1
        assert sample(text, "nv_inference_first_response_histogram_ms_count", model="slow_q") == n + 1
        # The histogram's +Inf bucket is its count, and buckets are cumulative.
        assert sample(text, "streamline_inference_request_duration_ms_bucket", model="slow_q", le="+Inf") == n + 1
        scrape_until(port, 'streamline_inference_request_duration_ms_count{model="slow_q"}', lambda v: v == n + 1)
        lat.sort()
        for q in (0.5, 0.9, 0.99):
            client = lat[min(n - 1, int(q * n))]
            # The server's exact percentile of the same requests (its windowed summary holds them all).
            exact = sample(text, "streamline_inference_request_duration_us", model="slow_q", quantile=str(q)) / 1000
            for family in ("streamline_inference_request_duration_ms", "nv_inference_first_response_histogram_ms"):
                server = scrape_until(port, f'histogram_quantile({q}, {family}_bucket{{model="slow_q"}})',
                                      lambda v: v == v)
                # histogram_quantile interpolates inside the bucket that holds the true percentile
                # (a neighbour when the ranks round apart): within two buckets of the exact one.
                assert abs(server - exact) <= 2 * width_ms, (family, q, server, exact)
                # Each request's server time is part of its client time, so every order statistic
                # of the server's is at most the client's. (How far below depends on the client's
                # own overhead, which a loaded machine makes unbounded: not asserted.)
                assert 0 < server <= client + width_ms, (family, q, server, client)
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        s.stop()


def test_triton_metric_names(server):
    run_tiny(server, 4, rows=2)
    text = metrics_text(server)
    for name in ["nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count",
                 "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                 "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
                 "nv_inference_compute_output_duration_us", "nv_inference_pending_request_count"]:
        assert f"# TYPE {name} " in text, name
    assert sample(text, "nv_inference_request_success", model="tiny", version="1") == \
        sample(text, "streamline_inference_request_success_total", model="tiny")
    assert sample(text, "nv_inference_count", model="tiny") == sample(text, "streamline_inference_count_total",
                                                                      model="tiny")
    assert sample(text, "nv_inference_request_failure", model="tiny", reason="REJECTED") >= 0
    assert sample(text, "nv_inference_compute_infer_duration_us", model="tiny") > 0


def test_triton_metric_names_can_be_turned_off(repository):
    from conftest import Server
    s = Server(repository, extra=["--no-triton-metrics"])
    try:
        text = metrics_text(s)
        assert "nv_inference" not in text
        assert "streamline_inference_request_duration_ms_bucket" in text
    finally:
        s.stop()


def test_statistics_report_compute_input_and_output(server):
    run_tiny(server, 20, rows=3)
    stats = httpclient.InferenceServerClient(server.http_addr).get_inference_statistics("tiny")["model_stats"][0]
    inf = stats["inference_stats"]
    for part in ("compute_input", "compute_infer", "compute_output"):
        assert inf[part]["count"] >= 20, part
        assert inf[part]["ns"] > 0, part
    assert any(b["compute_infer"]["ns"] > 0 for b in stats["batch_stats"])


def test_counters_survive_a_reload(repository):
    """Success and failure counters keep counting across a reload of the same version."""
    from conftest import Server
    s = Server(repository, extra=["--model-control-mode", "explicit", "--load-model", "tiny"])
    try:
        c = httpclient.InferenceServerClient(s.http_addr)
        run_tiny(s, 3)
        x = np.ones((1, 16), np.float32)
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        for _ in range(2):  # refused by the model (no such output): a runtime failure
            with pytest.raises(Exception):
                c.infer("tiny", [inp], outputs=[httpclient.InferRequestedOutput("nope")])
        before = metrics_text(s)
        ok0 = sample(before, "streamline_inference_request_success_total", model="tiny")
        bad0 = sample(before, "streamline_inference_request_failure_total", model="tiny", reason="InvalidArgument")
        assert ok0 == 3 and bad0 == 2
        c.load_model("tiny")  # reload: a new ServingModel for the same version
        run_tiny(s, 1)
        after = metrics_text(s)
        assert sample(after, "streamline_inference_request_success_total", model="tiny") == ok0 + 1
        assert sample(after, "streamline_inference_request_failure_total", model="tiny",
                      reason="InvalidArgument") == bad0
        assert sample(after, "nv_inference_request_success", model="tiny") == ok0 + 1
        assert sample(after, "streamline_inference_request_duration_ms_count", model="tiny") == ok0 + 1
        stats = c.get_inference_statistics("tiny")["model_stats"][0]["inference_stats"]
        assert stats["success"]["count"] == ok0 + 1
    finally:
        s.stop()
