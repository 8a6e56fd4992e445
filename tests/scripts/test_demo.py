"""scripts/demo.sh as the README promises: it answers its sample request, serves until Ctrl-C,
exits 0 on Ctrl-C and leaves no server behind; when it cannot serve, it fails and still leaves
nothing behind.

    BUILD_DIR     the build the demo uses (default build)
    SL_MODEL_DIR  where the exported models are cached (default BUILD_DIR/models)
"""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ANSWER_TIMEOUT_S = 600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_demo(ports, tmp_path):
    env = dict(os.environ, HTTP_PORT=str(ports[0]), GRPC_PORT=str(ports[1]),
               METRICS_PORT=str(ports[2]), REPO=str(tmp_path / "repository"))
    log = open(tmp_path / "demo.log", "w+")
    proc = subprocess.Popen([str(REPO / "scripts" / "demo.sh")], cwd=REPO, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    return proc, log


def read(log) -> str:
    log.flush()
    log.seek(0)
    return log.read()


def wait_for(proc, log, marker: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = read(log)
        if marker in text or proc.poll() is not None:
            return text
        time.sleep(0.5)
    return read(log)


def test_demo_answers_then_stops_cleanly_on_ctrl_c(tmp_path):
    ports = [free_port() for _ in range(3)]
    proc, log = start_demo(ports, tmp_path)
    try:
        text = wait_for(proc, log, "\nAlso: ", ANSWER_TIMEOUT_S)
        assert proc.poll() is None, f"the demo exited with {proc.returncode} before serving:\n{text}"
        assert "\nAlso: " in text, f"no sample answer within {ANSWER_TIMEOUT_S} s:\n{text}"
        answer = text.split("Its answer (first values of last_hidden_state):\n", 1)[1].splitlines()[0]
        assert answer.startswith('{"model_name":"bert"'), answer
        assert '"shape":[1,8,768]' in answer, answer
        # The answer is cut after 400 characters: the demo printed its start, not a broken pipe.
        assert answer.endswith("..."), answer
        for p in ports:
            assert port_in_use(p), f"port {p} is not served while the demo runs"

        proc.send_signal(signal.SIGINT)  # what Ctrl-C delivers to the script
        rc = proc.wait(timeout=60)
        text = read(log)
        assert rc == 0, f"the demo exited with {rc} on Ctrl-C:\n{text}"
        for p in ports:
            assert not port_in_use(p), f"port {p} still in use after the demo ended:\n{text}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_demo_fails_on_a_busy_port_and_leaves_nothing_behind(tmp_path):
    ports = [free_port() for _ in range(3)]
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", ports[1]))
        busy.listen()
        proc, log = start_demo(ports, tmp_path)
        try:
            rc = proc.wait(timeout=ANSWER_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = read(log)
        assert rc != 0, f"the demo succeeded on a busy port:\n{text}"
        assert str(ports[1]) in text, f"the error does not name the busy port:\n{text}"
    for p in (ports[0], ports[2]):
        assert not port_in_use(p), f"port {p} still in use after the demo failed:\n{text}"
