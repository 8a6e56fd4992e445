"""Thread roles of `streamline serve`: the front end's threads (gRPC's, HTTP I/O and decoding,
metrics) run as SCHED_BATCH, so that one waking up for a request never preempts a running
inference, while the threads that run inferences keep the default policy; --no-yield-to-inference
leaves every thread on the default policy. Read from /proc, after the server has answered.
"""

import json
import os
import urllib.request

import pytest

from conftest import Server

SCHED_OTHER, SCHED_BATCH = 0, 3


def thread_policies(pid: int) -> list[tuple[str, int]]:
    """(name, scheduling policy) of every thread of `pid`."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out.append((name, int(fields[38])))  # field 41 of stat; fields[0] is field 3
    return out


def infer_tiny(server: Server):
    body = {"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": [0.25] * 16}]}
    req = urllib.request.Request(f"{server.http_url}/v2/models/tiny/infer", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
        assert len(json.loads(r.read())["outputs"][0]["data"]) == 8


@pytest.mark.parametrize("flag", [None, "--no-yield-to-inference"])
def test_front_end_threads_yield_to_inference_threads(repository, flag):
    server = Server(repository, extra=[flag] if flag else [])
    try:
        infer_tiny(server)
        policies = thread_policies(server.proc.pid)
        names = {name for name, _ in policies}
        front_end = [(n, p) for n, p in policies if n.startswith("sl-http") or n.startswith("sl-grpc")]
        assert front_end, f"no front-end thread found among {sorted(names)}"
        compute = [(n, p) for n, p in policies if p == SCHED_OTHER]
        if flag is None:
            assert all(p == SCHED_BATCH for _, p in front_end), front_end
            # The model's instances (at least one worker per loaded model) run as compute threads.
            assert compute, policies
        else:
            assert all(p == SCHED_OTHER for _, p in policies), policies
        # The server still answers after the check (nothing was disturbed by it).
        infer_tiny(server)
    finally:
        server.stop()
