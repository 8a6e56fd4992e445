"""`streamline perf` with perf_analyzer's options against a real `streamline serve`: the latency
report's columns (-f, --verbose-csv, --percentile), numbers that agree with each other and with
the server, open-loop steps, --async, -x, -b, --shape NAME:dims and --input-data."""

import csv
import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import TINY_CONFIG, Server, binary_path, mlp_model, write_model

# perf_analyzer's columns, in its order (its documentation's example of -f, and --verbose-csv's).
PA_COLUMNS = ["Concurrency", "Inferences/Second", "Client Send", "Network+Server Send/Recv", "Server Queue",
              "Server Compute Input", "Server Compute Infer", "Server Compute Output", "Client Recv",
              "p50 latency", "p90 latency", "p95 latency", "p99 latency"]
PA_VERBOSE = ["Avg latency", "request/response", "response wait"]
WINDOW = ["-p", "1000", "--warmup-s", "0.3"]

GATHER_CONFIG = """
name: "lookup"
max_batch_size: 8
input [ { name: "idx" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "rows" data_type: TYPE_FP32 dims: [ 1, 4 ] } ]
"""


def lookup_model() -> onnx.ModelProto:
    """rows = table[idx]: an index outside [0, 10) fails the request, so the data sent shows."""
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "idx"], ["rows"], axis=0)], "lookup",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, ["N", 1])],
        [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["N", 1, 4])],
        initializer=[table])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("perf_models")
    write_model(root, "tiny", mlp_model(16, 8, 1, seed=1), TINY_CONFIG)
    write_model(root, "lookup", lookup_model(), GATHER_CONFIG)
    s = Server(root)
    yield s
    s.stop()


def perf(server, *args, protocol="http", timeout=120):
    url = server.http_addr if protocol == "http" else server.grpc_addr
    return subprocess.run([str(binary_path()), "perf", "-u", url, "-i", protocol, *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def read_report(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("mode", ["--sync", "--async"])
def test_latency_report_columns_and_consistency(server, tmp_path, protocol, mode):
    report = tmp_path / "perf.csv"
    r = perf(server, "-m", "tiny", "--concurrency-range", "1:2", *WINDOW, mode, "-f", report, "--verbose-csv",
             protocol=protocol)
    assert r.returncode == 0, r.stderr
    header, rows = read_report(report)
    assert header == PA_COLUMNS + PA_VERBOSE
    assert sorted(int(row["Concurrency"]) for row in rows) == [1, 2]
    throughputs = [float(row["Inferences/Second"]) for row in rows]
    assert throughputs == sorted(throughputs), "perf_analyzer sorts rows by throughput"
    for row in rows:
        us = {k: int(v) for k, v in row.items() if k not in ("Concurrency", "Inferences/Second")}
        assert all(v >= 0 for v in us.values()), row
        assert float(row["Inferences/Second"]) > 0, row
        assert us["p50 latency"] <= us["p90 latency"] <= us["p95 latency"] <= us["p99 latency"], row
        assert us["Server Compute Infer"] > 0, row
        server_us = (us["Server Queue"] + us["Server Compute Input"] + us["Server Compute Infer"]
                     + us["Server Compute Output"])
        # The server's share fits in what the client waited (the windows line up to a request).
        assert server_us <= us["Avg latency"] * 1.05 + 50, row
        assert us["request/response"] == us["Client Send"] + us["Client Recv"], row
        assert us["response wait"] == us["Avg latency"] - us["request/response"], row
        # The client's wait is the network's share plus the server's.
        wait = us["Avg latency"] - us["Client Send"] - us["Client Recv"]
        assert abs(us["Network+Server Send/Recv"] + server_us - wait) <= 5 or us["Network+Server Send/Recv"] == 0, row


def test_default_report_has_perf_analyzers_columns(server, tmp_path):
    report = tmp_path / "perf.csv"
    r = perf(server, "-m", "tiny", *WINDOW, "-f", report)
    assert r.returncode == 0, r.stderr
    header, rows = read_report(report)
    assert header == PA_COLUMNS
    assert len(rows) == 1 and rows[0]["Concurrency"] == "1"


def test_percentile_adds_its_column_and_drops_the_average(server, tmp_path):
    report = tmp_path / "perf.csv"
    r = perf(server, "-m", "tiny", *WINDOW, "--percentile", "85", "--verbose-csv", "-f", report)
    assert r.returncode == 0, r.stderr
    header, rows = read_report(report)
    assert header[9:14] == ["p50 latency", "p85 latency", "p90 latency", "p95 latency", "p99 latency"]
    assert header[14:] == ["request/response", "response wait"]
    assert int(rows[0]["p50 latency"]) <= int(rows[0]["p85 latency"]) <= int(rows[0]["p90 latency"])


@pytest.mark.parametrize("mode", ["--sync", "--async"])
def test_request_rate_range(server, tmp_path, mode):
    report = tmp_path / "perf.csv"
    r = perf(server, "-m", "tiny", "--request-rate-range", "100:200:100", *WINDOW, mode, "-f", report)
    assert r.returncode == 0, r.stderr
    header, rows = read_report(report)
    assert header[0] == "Request Rate" and header[1:] == PA_COLUMNS[1:]
    assert sorted(float(row["Request Rate"]) for row in rows) == [100, 200]
    for row in rows:
        rate, got = float(row["Request Rate"]), float(row["Inferences/Second"])
        assert 0.6 * rate <= got <= 1.4 * rate, row


def test_json_has_the_server_side_split(server):
    r = perf(server, "-m", "tiny", *WINDOW, "--json", protocol="grpc")
    assert r.returncode == 0, r.stderr
    step = json.loads(r.stdout)["steps"][0]
    assert step["errors"] == 0 and step["server_us"]["requests"] > 0, step
    assert step["server_us"]["compute_infer"] > 0, step
    assert step["latency_ms"]["avg"] > 0, step


def test_batch_and_perf_analyzers_shape_form(server):
    for args, rows in ((["-b", "4"], 4), (["--shape", "x:3,16"], 3), (["--shape", "x=2,16"], 2)):
        r = perf(server, "-m", "tiny", *WINDOW, *args, "--json")
        assert r.returncode == 0, (args, r.stderr)
        step = json.loads(r.stdout)["steps"][0]
        assert step["errors"] == 0, step
        # A 1 s window: inferences/s is rows x answered requests.
        assert step["throughput"] == pytest.approx(rows * step["requests"], rel=1e-3), (args, step)


def test_model_version(server):
    r = perf(server, "-m", "tiny", "-x", "1", *WINDOW, "--json")
    assert r.returncode == 0, r.stderr
    r = perf(server, "-m", "tiny", "-x", "9", *WINDOW)
    assert r.returncode == 1
    assert "version 9" in r.stderr and "no version '9'" in r.stderr, r.stderr


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_input_data_is_what_is_sent(server, tmp_path, protocol):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"data": [{"idx": [3]}, {"idx": {"content": [9], "shape": [1]}}]}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"data": [{"idx": [42]}]}))
    for data in ("zero", good):
        r = perf(server, "-m", "lookup", *WINDOW, "--input-data", data, "--json", protocol=protocol)
        assert r.returncode == 0, (data, r.stderr)
        assert json.loads(r.stdout)["steps"][0]["errors"] == 0
    r = perf(server, "-m", "lookup", *WINDOW, "--input-data", bad, protocol=protocol)
    assert r.returncode == 1, r.stderr
    assert "the first request failed" in r.stderr, r.stderr


def test_bad_input_data_is_refused_before_any_load(server, tmp_path):
    r = perf(server, "-m", "lookup", "--input-data", tmp_path / "missing.json")
    assert r.returncode == 2 and "--input-data" in r.stderr, r.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"data": [{"idx": [1, 2, 3]}]}))
    r = perf(server, "-m", "lookup", "--input-data", wrong)
    assert r.returncode == 2, r.stderr
    assert "entry 0, input 'idx': has 3 values" in r.stderr, r.stderr
