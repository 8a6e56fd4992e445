"""`streamline tune` end to end on a small MLP written with onnx.helper: the search runs within its
time limit, shows its progress on a terminal, prints the trials and the frontier, writes a
config.pbtxt that `streamline serve` loads and serves with the chosen settings, an SVG and the
trials as JSON; contradictory flags are refused.

    SL_BINARY=build/tools/streamline .venv/bin/python -m pytest -q tests/tools/test_tune.py
"""

import json
import re
import urllib.request

from test_cli import Server, mlp, progress_lines, run, run_on_terminal

# Short windows: this checks the command, not the machine's figures.
FAST = ["--trial-seconds", 0.05, "--warmup", 0.05, "--max-batch-sizes", "1,4", "--queue-delays-us", "0,300",
        "--streams", "1", "--concurrency", 4]


def test_tune_writes_a_config_that_serve_loads(tmp_path):
    model = mlp(tmp_path / "mlp.onnx")
    out = tmp_path / "tuned"
    code, stdout, screen = run_on_terminal(["tune", model, *FAST, "--max-minutes", 2, "--out", out])
    assert code == 0, (stdout, screen)
    assert progress_lines(screen, "tune"), f"no progress line: {screen!r}"
    assert "configuration" in stdout and "frontier" in stdout and "chosen: " in stdout, stdout

    report = json.loads((out / "trials.json").read_text())
    assert report["search"] == "halving" and report["candidates"] >= 4 and report["met_objective"]
    rounds = {t["round"] for t in report["trials"]}
    assert len(rounds) >= 2, report["trials"]
    # Each later round measures fewer configurations for longer.
    per_round = [sum(t["round"] == r for t in report["trials"]) for r in sorted(rounds)]
    assert per_round == sorted(per_round, reverse=True) and per_round[-1] < per_round[0], per_round
    assert len(report["trials"]) < report["candidates"] * len(rounds)
    chosen = report["chosen"]
    assert chosen["ok"] and chosen["throughput"] > 0 and chosen["rejected"] == 0

    config = (out / "config.pbtxt").read_text()
    assert config.startswith("# Written by `streamline tune`"), config
    assert f"count: {chosen['instances']} kind: KIND_CPU" in config, config
    assert f'key: "threads" value: {{ string_value: "{chosen["threads"]}" }}' in config, config
    assert ("dynamic_batching" in config) == (chosen["max_batch"] > 1), config
    svg = (out / "frontier.svg").read_text()
    assert svg.startswith("<svg") and "<polyline" in svg and svg.rstrip().endswith("</svg>")

    # The written config serves: the server reads the same instance count and batch size.
    repo = tmp_path / "repo"
    (repo / "mlp" / "1").mkdir(parents=True)
    (repo / "mlp" / "1" / "model.onnx").write_bytes(model.read_bytes())
    (repo / "mlp" / "config.pbtxt").write_text(config)
    server = Server(repo)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.http}/v2/models/mlp/config", timeout=10) as r:
            served = json.loads(r.read())
        assert served["max_batch_size"] == chosen["max_batch"], served
        assert served["instance_group"][0]["count"] == chosen["instances"], served
        body = json.dumps({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": [0.5] * 16}]})
        req = urllib.request.Request(f"http://127.0.0.1:{server.http}/v2/models/mlp/infer", body.encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert json.loads(r.read())["outputs"][0]["shape"] == [1, 8]
    finally:
        server.stop()


def test_grid_measures_every_configuration_once(tmp_path):
    model = mlp(tmp_path / "mlp.onnx")
    r = run(["tune", model, *FAST, "--search", "grid", "--out", tmp_path / "grid", "--json"])
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["search"] == "grid" and len(report["trials"]) == report["candidates"]
    assert len({t["config"] for t in report["trials"]}) == report["candidates"]
    assert len({t["seconds"] for t in report["trials"]}) == 1


def test_an_impossible_budget_is_reported_not_hidden(tmp_path):
    model = mlp(tmp_path / "mlp.onnx")
    r = run(["tune", model, *FAST, "--latency-budget-ms", 0.0001, "--out", tmp_path / "t"])
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "no configuration met the objective" in r.stdout, r.stdout
    assert "does NOT meet the objective" in (tmp_path / "t" / "config.pbtxt").read_text()


def test_contradictory_or_bad_flags_are_refused(tmp_path):
    model = mlp(tmp_path / "mlp.onnx")
    r = run(["tune", model, "--concurrency", 2, "--request-rate", 10, "--out", tmp_path / "x"])
    assert r.returncode == 2 and "not both" in r.stderr, r.stderr
    r = run(["tune", model, "--search", "random", "--out", tmp_path / "x"])
    assert r.returncode == 2 and "--search" in r.stderr, r.stderr
    r = run(["tune", model, "--devices", "tpu", "--out", tmp_path / "x"])
    assert r.returncode == 2 and "--devices" in r.stderr, r.stderr
    r = run(["tune", tmp_path / "missing.onnx", "--out", tmp_path / "x"])
    assert r.returncode == 2 and "missing.onnx" in r.stderr, r.stderr
    r = run(["tune", model, *FAST, "--max-minutes", 0.0001, "--out", tmp_path / "x"])
    assert r.returncode == 1 and re.search(r"no configuration ran|stopped at --max-minutes", r.stdout + r.stderr), \
        (r.stdout, r.stderr)
