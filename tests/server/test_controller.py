"""The online controller end to end: a model whose config sets latency_slo_ms starts with one
active instance on both cores of the budget (2 intra-op threads), gets a second instance under a
burst of concurrent clients (its p99 misses the objective), each instance then on one thread, and
when the burst is over sheds it, the first one taking both cores again; each decision is counted
in /metrics with its knob and direction, the gauges show the settings in force, and the decision
with its reason is a server event (/dashboard/server_events.json). A model with
`controller: false` keeps every instance active and makes no decision.

The window is 200 ms (control_window_ms) so that the test takes seconds; the core budget is
given (--core-budget 2) so that it does not depend on the machine's cores.
"""

import concurrent.futures as cf
import json
import re
import threading
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient

from conftest import Server, mlp_model, write_model

CONFIG = """
name: "{name}"
max_batch_size: 8
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 512 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 512 ] }} ]
instance_group [ {{ count: 2 kind: KIND_CPU }} ]
dynamic_batching {{ max_queue_delay_microseconds: 0 }}
parameters {{ key: "threads" value: {{ string_value: "1" }} }}
parameters {{ key: "latency_slo_ms" value: {{ string_value: "1" }} }}
parameters {{ key: "admission" value: {{ string_value: "false" }} }}
parameters {{ key: "control_window_ms" value: {{ string_value: "200" }} }}
{extra}
"""
CLIENTS = 12
WAIT_S = 30


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("controller")
    model = mlp_model(512, 512, 8, seed=3)
    write_model(root, "adaptive", model, CONFIG.format(name="adaptive", extra=""))
    write_model(root, "fixed", model, CONFIG.format(
        name="fixed", extra='parameters { key: "controller" value: { string_value: "false" } }'))
    s = Server(root, extra=["--core-budget", "2", "--log-info", "true"])
    yield s
    s.stop()


def metrics(server) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as r:
        return r.read().decode()


def sample(text: str, name: str, **labels) -> float | None:
    """The value of the first sample of `name` whose labels include `labels`; None when absent."""
    for line in text.splitlines():
        m = re.match(rf"^{name}(?:\{{(.*)\}})? (\S+)$", line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(2))
    return None


def wait_for(server, check, what):
    deadline = time.time() + WAIT_S
    while time.time() < deadline:
        text = metrics(server)
        if check(text):
            return text
        time.sleep(0.1)
    pytest.fail(f"{what} within {WAIT_S} s; metrics:\n" +
                "\n".join(l for l in metrics(server).splitlines() if "controller" in l) + "\n" + server.output()[-3000:])


def burst(server, model, stop: threading.Event) -> int:
    """CLIENTS clients sending requests back to back until `stop`; returns the requests answered."""
    x = np.random.default_rng(0).standard_normal((1, 512)).astype(np.float32)

    def client():
        c = httpclient.InferenceServerClient(server.http_addr)
        inp = httpclient.InferInput("x", [1, 512], "FP32")
        inp.set_data_from_numpy(x)
        n = 0
        while not stop.is_set():
            r = c.infer(model, [inp])
            assert r.as_numpy("y").shape == (1, 512)
            n += 1
        return n

    with cf.ThreadPoolExecutor(CLIENTS) as pool:
        futures = [pool.submit(client) for _ in range(CLIENTS)]
        return sum(f.result() for f in futures)


def test_controller_adds_an_instance_under_a_burst_and_sheds_it_after(server):
    text = metrics(server)
    assert sample(text, "streamline_controller_active_instances", model="adaptive") == 1
    assert sample(text, "streamline_controller_active_instances", model="fixed") == 2
    assert sample(text, "streamline_core_budget_cores") == 2
    # Alone, the first instance runs on every core of the budget.
    assert sample(text, "streamline_controller_threads_per_instance", model="adaptive") == 2
    assert sample(text, "streamline_core_budget_held") == 2

    stop = threading.Event()
    with cf.ThreadPoolExecutor(1) as pool:
        load = pool.submit(burst, server, "adaptive", stop)
        try:
            wait_for(server, lambda t: (sample(t, "streamline_controller_decisions_total", model="adaptive",
                                               knob="instances", direction="up") or 0) >= 1,
                     "no instance added under the burst")
            text = wait_for(server, lambda t: sample(t, "streamline_controller_active_instances",
                                                     model="adaptive") == 2, "the second instance not active")
            # The second instance took its core from the first one's threads.
            assert sample(text, "streamline_controller_threads_per_instance", model="adaptive") == 1
            assert sample(text, "streamline_core_budget_held") == 2
            assert sample(text, "streamline_controller_decisions_total", model="adaptive", knob="threads",
                          direction="down") == 1
        finally:
            stop.set()
            answered = load.result()
    assert answered > 0
    # Idle again: the second instance goes back.
    text = wait_for(server, lambda t: (sample(t, "streamline_controller_decisions_total", model="adaptive",
                                              knob="instances", direction="down") or 0) >= 1,
                    "the instance not shed after the burst")
    assert sample(text, "streamline_controller_active_instances", model="adaptive") == 1
    assert sample(text, "streamline_controller_threads_per_instance", model="adaptive") == 2
    # Every request the clients sent was answered with outputs; none was lost to a change.
    assert sample(text, "streamline_inference_request_success_total", model="adaptive") == answered
    # The model without a controller made no decision.
    assert sample(text, "streamline_controller_decisions_total", model="fixed") is None

    with urllib.request.urlopen(f"{server.http_url}/dashboard/server_events.json", timeout=10) as r:
        events = json.loads(r.read())["traceEvents"]
    ups = [e for e in events if e.get("name") == "controller instances up"]
    assert ups, events
    assert ups[0]["args"]["model"] == "adaptive"
    assert "objective" in ups[0]["args"]["reason"] and "+1 instance" in ups[0]["args"]["reason"], ups[0]
    assert "controller adaptive: " in server.output()  # logged with its reason
