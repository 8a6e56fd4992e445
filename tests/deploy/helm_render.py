"""Renders deploy/helm/streamline as `helm template` does, for the constructs the chart uses.

Neither Debian nor PyPI (for this Python) ships Helm. The chart's templates are Go text/template
with sprig functions; py-go-template (PyPI) ships Go's own text/template and sprig, compiled into
a shared library, so the templates run on the same engine Helm runs them on. What Helm adds is
done here: the built-in objects .Values (values.yaml deep-merged with overrides, as `--set` and
`-f` do), .Release and .Chart (from Chart.yaml, keys capitalised as Helm does), and the named
templates of `_*.tpl` files visible to every template (each template is rendered with the
helpers prepended). Helm-only functions (include, tpl, lookup, .Files, .Capabilities) do not
exist here; the chart keeps to FUNCTIONS, each of which Helm and this renderer both provide, and
test_deploy.py checks that it does. One difference: this engine refuses a missing map key where
Helm renders it empty, which only makes the check stricter (values.yaml defines every key).
Numbers in .Values are float64 here as in Helm (both read values through JSON), so `eq` on
numbers fails in both; the chart compares strings only.

The library ends the process that calls it when a template fails (it prints the error and exits),
so templates are rendered in a child Python process (`python helm_render.py`, one per chart
rendering), and its exit turns into a RenderError with the library's message.

    docs = render_chart(CHART, {"models": {"source": "emptyDir", "init": {"image": "m:1"}}})
"""

import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

# Actions and functions the chart may use: Go template built-ins, sprig, and Helm's toYaml and
# required (which py-go-template provides too).
FUNCTIONS = {
    "template", "define", "if", "else", "end", "with", "range",  # actions
    "and", "not", "eq", "printf",  # Go built-ins
    "add", "quote", "trunc", "trimSuffix", "contains", "nindent", "toJson", "fail",  # sprig
    "toYaml", "required",  # Helm
}


class RenderError(Exception):
    def __init__(self, message: str, index: int = 0):
        super().__init__(message)
        self.index = index  # which of the texts rendered together failed


def merge(base: dict, override: dict) -> dict:
    """Helm's coalescing of values: maps merge key by key, anything else replaces."""
    out = copy.deepcopy(base)
    for k, v in override.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def chart_object(chart: Path) -> dict:
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    return {k[0].upper() + k[1:]: v for k, v in meta.items()}


def _render_all(texts: list, data: dict) -> list:
    """Renders each text with `data` in a child process; RenderError with the library's message
    (and the failing text's index) when one fails."""
    job = json.dumps({"texts": texts, "data": data})
    r = subprocess.run([sys.executable, __file__], input=job, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        done = r.stdout.count("\0")
        message = r.stdout.split("\0")[-1].strip() or r.stderr.strip()
        raise RenderError(message, done)
    return json.loads(r.stdout.split("\0")[-1])


def render_text(text: str, data: dict) -> str:
    return _render_all([text], data)[0]


def _child():
    import go_template
    job = json.loads(sys.stdin.read())
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, text in enumerate(job["texts"]):
            path = Path(tmp) / f"t{i}.tmpl"
            path.write_text(text)
            out.append(go_template.render(path, job["data"]).decode())
            # One NUL per text rendered: on failure, the parent counts how far it got.
            sys.stdout.write("\0")
            sys.stdout.flush()
    sys.stdout.write(json.dumps(out))


def render_templates(chart: Path, overrides: dict | None = None, release: str = "demo",
                     namespace: str = "default") -> dict:
    """{template file name: rendered text}, as `helm template RELEASE CHART` renders them."""
    values = merge(yaml.safe_load((chart / "values.yaml").read_text()), overrides or {})
    data = {"Values": values, "Chart": chart_object(chart),
            "Release": {"Name": release, "Namespace": namespace, "Service": "Helm", "IsInstall": True,
                        "IsUpgrade": False, "Revision": 1}}
    templates = chart / "templates"
    helpers = "".join(p.read_text() for p in sorted(templates.glob("_*.tpl")))
    files = [p for p in sorted(templates.iterdir()) if not p.name.startswith("_")]
    try:
        texts = _render_all([helpers + p.read_text() for p in files], data)
    except RenderError as e:
        raise RenderError(f"{files[e.index].name}: {e}", e.index) from None
    return {p.name: t for p, t in zip(files, texts)}


def render_chart(chart: Path, overrides: dict | None = None, **kw) -> list:
    """The manifests the chart makes (YAML documents; NOTES.txt left out, as Helm leaves it)."""
    docs = []
    for name, text in render_templates(chart, overrides, **kw).items():
        if name.endswith((".yaml", ".yml")):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


if __name__ == "__main__":
    _child()
