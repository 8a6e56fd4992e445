"""Threads: one session shared by many Python threads is correct, and runs release the GIL."""

import os
import subprocess
import sys
import threading
import time

import numpy as np

import streamline
import streamline as onnxruntime


def test_one_session_many_threads_gives_each_its_own_answer(cnn_path):
    import onnxruntime as ort
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxruntime.InferenceSession(cnn_path, so)
    ref = ort.InferenceSession(cnn_path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    # Different shapes per thread, so concurrent runs also plan different shape sets.
    inputs = [rng.standard_normal((1 + i % 3, 3, 8 + 2 * (i % 2), 8), dtype=np.float32) for i in range(8)]
    expected = [ref.run(None, {"x": x})[0] for x in inputs]
    errors = []
    barrier = threading.Barrier(len(inputs))

    def worker(i):
        try:
            barrier.wait()
            for _ in range(10):
                got = sess.run(["logits"], {"x": inputs[i]})[0]
                np.testing.assert_allclose(got, expected[i], rtol=1e-4, atol=1e-5)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _other_thread_progress_during(run, seconds=0.5):
    """How many times another Python thread ran while `run()` was called over and over for
    `seconds`. The switch interval is made huge, so the other thread can only run when the caller
    releases the GIL; calling for a while leaves the scheduler of a loaded machine time to run it."""
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)  # releases the GIL, lets the caller take it back at once

    old = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.01)
        before = count[0]
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            run()
        during = count[0] - before
    finally:
        stop.set()
        sys.setswitchinterval(old)
        t.join()
    return during


def test_runs_release_the_gil(chain_path):
    m = streamline.Model.load(chain_path, num_threads=1)
    x = np.ones((256, 512), np.float32)
    m.run({"x": x})  # plan first
    assert _other_thread_progress_during(lambda: m.run({"x": x})) > 0
    sess = onnxruntime.InferenceSession(chain_path)
    sess.run(None, {"x": x})
    assert _other_thread_progress_during(lambda: sess.run(None, {"x": x})) > 0
    served = streamline.ServingModel(m)
    assert _other_thread_progress_during(lambda: served.infer({"x": x})) > 0
    served.shutdown()


def _cgroup_quota_cores():
    """Cores a cgroup v2 CPU quota allows, rounded up; 0 without one (as core::usable_cores reads it)."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            fields = f.read().split()
    except OSError:
        return 0
    if len(fields) < 2 or not fields[0].isdigit() or not fields[1].isdigit() or int(fields[1]) == 0:
        return 0
    quota, period = int(fields[0]), int(fields[1])
    return -(-quota // period) if quota > 0 else 0


def test_usable_cores_is_the_affinity_capped_by_the_cgroup_quota():
    allowed = len(os.sched_getaffinity(0))
    quota = _cgroup_quota_cores()
    assert streamline.usable_cores() == max(1, min(allowed, quota) if quota else allowed)


def test_a_process_pinned_to_one_cpu_sizes_its_threads_by_it():
    # A fresh process: the runtime reads its CPU set once, at first use, after the pinning here.
    script = (
        "import os, sys\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import streamline, streamline.ort\n"
        "pool = streamline.ort._async_executor()\n"
        "print(streamline.usable_cores(), pool._max_workers)\n")
    package_dir = os.path.dirname(os.path.dirname(streamline.__file__))  # the build's, as imported here
    r = subprocess.run([sys.executable, "-c", script, package_dir], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "2"], r.stdout  # one core; the async pool keeps its floor of 2 workers
