"""Fixtures for the server tests: a model repository built in a temporary folder, and a
`streamline serve` process on free loopback ports.

    SL_BINARY   the streamline CLI (default <repo>/build/tools/streamline)

Models (ONNX written here with onnx.helper; the reference outputs come from ONNX Runtime):
    tiny     y = Relu(x @ W + b), x [N, 16] float32 -> y [N, 8]; dynamic batching, max 8
    nobatch  the same graph with max_batch_size 0 and no config.pbtxt (derived by the server)
    slow_q   8 x (MatMul 1024x1024 + Relu), queue of at most 1 request: a burst gets 429
    slow_t   the same model, 1 ms queue timeout (REJECT), admission off: a burst gets 504
    slow_a   the same model, one instance, admission on: a burst with tight timeouts gets 429
    broken   a config.pbtxt with a syntax error: the model is unavailable, the others load
"""

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60


def binary_path() -> Path:
    env = os.environ.get("SL_BINARY")
    return Path(env) if env else REPO / "build" / "tools" / "streamline"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """n distinct free ports (held together while they are picked, so none repeats)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def mlp_model(width_in: int, width_out: int, layers: int, seed: int) -> onnx.ModelProto:
    """x [N, width_in] -> layers x (MatMul + Add + Relu) -> y [N, width_out]."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    cur, w_in = "x", width_in
    for i in range(layers):
        w_out = width_out if i == layers - 1 else width_in
        w = (rng.standard_normal((w_in, w_out)) / np.sqrt(w_in)).astype(np.float32)
        b = (rng.standard_normal(w_out) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"b{i}")]
        out = "y" if i == layers - 1 else f"h{i}"
        nodes += [helper.make_node("MatMul", [cur, f"W{i}"], [f"m{i}"], name=f"matmul{i}"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("Relu", [f"a{i}"], [out], name=f"relu{i}")]
        cur, w_in = out, w_out
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width_in])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width_out])],
        initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


TINY_CONFIG = """
name: "tiny"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 8 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 500 }
parameters { key: "threads" value: { string_value: "1" } }
"""

SLOW_Q_CONFIG = """
name: "slow_q"
max_batch_size: 8
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching {
  max_queue_delay_microseconds: 0
  default_queue_policy { max_queue_size: 1 }
}
"""

SLOW_T_CONFIG = """
name: "slow_t"
max_batch_size: 1
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching {
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 1000 }
}
parameters { key: "admission" value: { string_value: "false" } }
"""

SLOW_A_CONFIG = """
name: "slow_a"
max_batch_size: 8
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters { key: "threads" value: { string_value: "1" } }
"""


def write_model(root: Path, name: str, model: onnx.ModelProto, config: str | None, version: str = "1"):
    d = root / name / version
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(d / "model.onnx"))
    if config is not None:
        (root / name / "config.pbtxt").write_text(config)


@pytest.fixture(scope="session")
def repository(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("models")
    tiny = mlp_model(16, 8, 1, seed=1)
    write_model(root, "tiny", tiny, TINY_CONFIG)
    write_model(root, "nobatch", tiny, None)
    slow = mlp_model(1024, 1024, 8, seed=2)
    write_model(root, "slow_q", slow, SLOW_Q_CONFIG)
    write_model(root, "slow_t", slow, SLOW_T_CONFIG)
    write_model(root, "slow_a", slow, SLOW_A_CONFIG)
    write_model(root, "broken", tiny, 'name: "broken"\nmax_batch_size: [ 8\n')
    return root


def reference(model_path: Path, x: np.ndarray) -> np.ndarray:
    """ONNX Runtime's output for input x: the independent reference."""
    import onnxruntime as ort
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


class Server:
    """A running `streamline serve` on free loopback ports; `env` adds to its environment."""

    def __init__(self, repo: Path, extra=(), env=None):
        self.repo = repo
        for attempt in range(3):
            self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
            cmd = [str(binary_path()), "serve", "--model-repository", str(repo),
                   "--http-port", str(self.http_port), "--grpc-port", str(self.grpc_port),
                   "--metrics-port", str(self.metrics_port), *extra]
            self.log = open(repo.parent / f"serve-{self.http_port}.log", "w+")
            self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, text=True,
                                         env={**os.environ, **(env or {})})
            # Another process may take a port between our pick and the server's check: pick again.
            try:
                if self.proc.wait(timeout=0.5) == 2 and "already in use" in self.output() and attempt < 2:
                    continue
            except subprocess.TimeoutExpired:
                pass
            break
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamline serve exited with {self.proc.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(f"{self.http_url}/v2/health/live", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError(f"streamline serve did not come up in {START_TIMEOUT_S} s:\n{self.output()}")
        # gRPC may bind a moment after HTTP.
        deadline = time.time() + 10
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.grpc_port)) == 0:
                    break
            time.sleep(0.1)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def http_addr(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def terminate(self, timeout=60) -> int:
        """SIGTERM, then wait; returns the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def server(repository):
    s = Server(repository)
    yield s
    s.stop()
