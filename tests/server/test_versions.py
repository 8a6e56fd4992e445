"""Version policies as Triton's (latest N, all, specific) and loads with a config override over
both front ends, with Triton's own clients. Each version of a model has its own weights, so the
version that answered is known from the output (ONNX Runtime on that version's file).
"""

import json

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conftest import Server, mlp_model, reference, write_model

BASE = """
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 8 ] } ]
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("versions")
    policies = {"all3": "version_policy { all {} }", "latest2": "version_policy { latest { num_versions: 2 } }",
                "pick": "version_policy { specific { versions: [ 1, 3 ] } }", "plain": ""}
    for name, policy in policies.items():
        for v in (1, 2, 3):
            write_model(root, name, mlp_model(16, 8, 1, seed=100 + v), f'name: "{name}"\n{BASE}\n{policy}\n',
                        version=str(v))
    return root


@pytest.fixture(scope="module")
def srv(repo):
    s = Server(repo)
    yield s
    s.stop()


def x16(seed=0):
    return np.random.default_rng(seed).standard_normal((2, 16)).astype(np.float32)


def answered_by(repo, name, y, x):
    """The version whose weights gave y."""
    for v in (1, 2, 3):
        if np.allclose(y, reference(repo / name / str(v) / "model.onnx", x), atol=1e-5):
            return str(v)
    return None


def http_infer(srv, name, version=""):
    c = httpclient.InferenceServerClient(srv.http_addr)
    x = x16()
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    r = c.infer(name, [inp], model_version=version)
    return r.as_numpy("y"), r.get_response()["model_version"], x


@pytest.mark.parametrize("name,served", [("all3", ["1", "2", "3"]), ("latest2", ["2", "3"]), ("pick", ["1", "3"]),
                                         ("plain", ["3"])])
def test_version_policy_serves_the_versions_it_names(srv, repo, name, served):
    c = httpclient.InferenceServerClient(srv.http_addr)
    assert c.get_model_metadata(name)["versions"] == served
    for v in ("1", "2", "3"):
        assert c.is_model_ready(name, v) == (v in served)
    for v in served:
        y, reported, x = http_infer(srv, name, v)
        assert reported == v and answered_by(repo, name, y, x) == v
    y, reported, x = http_infer(srv, name)  # no version: the highest
    assert reported == served[-1] and answered_by(repo, name, y, x) == served[-1]
    missing = [v for v in ("1", "2", "3") if v not in served]
    for v in missing:
        with pytest.raises(InferenceServerException, match="no version"):
            http_infer(srv, name, v)
    g = grpcclient.InferenceServerClient(srv.grpc_addr)
    assert list(g.get_model_metadata(name).versions) == served
    index = [(m["name"], m["version"]) for m in c.get_model_repository_index() if m["name"] == name]
    assert index == [(name, v) for v in served]
    stats = c.get_inference_statistics(name)["model_stats"]
    assert sorted(s["version"] for s in stats) == served
    policy = c.get_model_config(name)["version_policy"]
    assert set(policy) == {"all3": {"all"}, "latest2": {"latest"}, "pick": {"specific"}, "plain": {"latest"}}[name]


def test_metrics_are_per_version(srv):
    http_infer(srv, "all3", "1")
    http_infer(srv, "all3", "2")
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    assert 'nv_inference_request_success{model="all3",version="1"}' in text
    assert 'nv_inference_request_success{model="all3",version="2"}' in text


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_load_with_a_config_override(repo, protocol):
    s = Server(repo, extra=["--model-control-mode", "explicit"])
    try:
        mod = httpclient if protocol == "http" else grpcclient
        c = mod.InferenceServerClient(s.http_addr if protocol == "http" else s.grpc_addr)
        override = {"name": "plain", "max_batch_size": 4,
                    "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [16]}],
                    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [8]}],
                    "version_policy": {"specific": {"versions": [2]}},
                    "instance_group": [{"count": 2, "kind": "KIND_CPU"}]}
        c.load_model("plain", config=json.dumps(override))
        h = httpclient.InferenceServerClient(s.http_addr)
        cfg = h.get_model_config("plain")
        assert cfg["max_batch_size"] == 4 and cfg["instance_group"][0]["count"] == 2
        assert h.get_model_metadata("plain")["versions"] == ["2"]
        y, reported, x = http_infer(s, "plain")
        assert reported == "2" and answered_by(repo, "plain", y, x) == "2"
        # A bad override is refused with its reason, and what was served stays.
        with pytest.raises(InferenceServerException, match="max_batch_size"):
            c.load_model("plain", config=json.dumps({"max_batch_size": -3}))
        assert h.get_model_metadata("plain")["versions"] == ["2"]
        with pytest.raises(InferenceServerException, match="does not match"):
            c.load_model("plain", config=json.dumps({"name": "other"}))
        # Without an override the folder's config.pbtxt applies again.
        c.load_model("plain")
        assert h.get_model_config("plain")["max_batch_size"] == 8
        assert h.get_model_metadata("plain")["versions"] == ["3"]
    finally:
        s.stop()
