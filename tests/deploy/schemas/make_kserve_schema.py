"""Writes kserve-<version>.json, the JSON Schema the deploy tests check KServe resources against,
from the KServe Python SDK on PyPI (the `kserve` package): its `kserve/models/*.py` are generated
by openapi-generator from the OpenAPI document of KServe's Go API types, the same types its CRDs
are generated from. Each model class lists its fields (`attribute_map`: JSON names), their types
(`openapi_types`) and, in its setters, the fields that must not be None; this turns them into
one schema per type, objects closed to unknown fields (kubectl's strict field validation rejects
them), and points the embedded Kubernetes types (Container, Volume, ObjectMeta, ...) at the
definitions that kubernetes-validate bundles. The models are read with `ast`; nothing of the SDK
is imported or run.

    .venv/bin/python tests/deploy/schemas/make_kserve_schema.py 0.21.0   # needs PyPI
"""

import ast
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import importlib_resources

K8S_DEFS = "https://kubernetes.io/api/_definitions.json"
SCALARS = {"str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
           "bool": {"type": "boolean"}, "object": {}, "datetime": {"type": "string"}, "date": {"type": "string"}}
# SDK names of Kubernetes types that are not V1<Kind> of core/v1 or meta/v1.
K8S_NAMES = {"ResourceQuantity": "io.k8s.apimachinery.pkg.api.resource.Quantity",
             "K8sIoApiAppsV1DeploymentStrategy": "io.k8s.api.apps.v1.DeploymentStrategy",
             "K8sIoApiAutoscalingV2HorizontalPodAutoscalerBehavior":
                 "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerBehavior"}
ROOTS = {"ServingRuntime": ("V1alpha1ServingRuntime", "serving.kserve.io/v1alpha1"),
         "InferenceService": ("V1beta1InferenceService", "serving.kserve.io/v1beta1")}
REQUIRED = re.compile(r"raise ValueError\(\"Invalid value for `(\w+)`, must not be `None`\"\)")


def read_models(wheel: Path) -> dict:
    """class name -> (fields {json name: sdk type}, required json names)."""
    models = {}
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if not re.fullmatch(r"kserve/models/\w+\.py", name):
                continue
            src = z.read(name).decode()
            for node in ast.parse(src).body:
                if not isinstance(node, ast.ClassDef):
                    continue
                values = {}
                for b in node.body:
                    if isinstance(b, ast.Assign) and isinstance(b.targets[0], ast.Name):
                        if b.targets[0].id in ("openapi_types", "attribute_map"):
                            values[b.targets[0].id] = ast.literal_eval(b.value)
                if "openapi_types" not in values:
                    continue
                amap = values["attribute_map"]
                fields = {amap[a]: t for a, t in values["openapi_types"].items()}
                required = sorted(amap[a] for a in set(REQUIRED.findall(src)) if a in amap)
                models[node.name] = (fields, required)
    return models


def k8s_definition(name: str, k8s: set) -> str | None:
    if name in K8S_NAMES:
        return K8S_NAMES[name]
    m = re.fullmatch(r"V1([A-Z]\w*)", name)
    if not m:
        return None
    for prefix in ("io.k8s.api.core.v1.", "io.k8s.apimachinery.pkg.apis.meta.v1."):
        if prefix + m.group(1) in k8s:
            return prefix + m.group(1)
    return None


def generate(models: dict, k8s: set, version: str) -> dict:
    defs, todo, unknown = {}, [r for r, _ in ROOTS.values()], set()

    def schema_of(t: str) -> dict:
        t = t.strip()
        if t in SCALARS:
            return dict(SCALARS[t])
        if m := re.fullmatch(r"list\[(.+)\]", t):
            return {"type": "array", "items": schema_of(m.group(1))}
        if m := re.fullmatch(r"dict\(str, (.+)\)", t):
            return {"type": "object", "additionalProperties": schema_of(m.group(1))}
        if t in models:
            todo.append(t)
            return {"$ref": f"#/$defs/{t}"}
        if d := k8s_definition(t, k8s):
            return {"$ref": f"{K8S_DEFS}#/$defs/{d}"}
        unknown.add(t)
        return {"$comment": f"{t}: not described by the SDK; any value"}

    while todo:
        name = todo.pop()
        if name in defs:
            continue
        fields, required = models[name]
        defs[name] = {}  # placeholder against cycles
        props = {f: schema_of(t) for f, t in sorted(fields.items())}
        d = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            d["required"] = required
        defs[name] = d
    for kind, (root, api_version) in ROOTS.items():
        r = defs[root]
        r["properties"]["apiVersion"] = {"const": api_version}
        r["properties"]["kind"] = {"const": kind}
        r["required"] = sorted(set(r.get("required", [])) | {"apiVersion", "kind", "metadata", "spec"})
        r["properties"].pop("status", None)  # written by the controller, never by us
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": (f"Generated by make_kserve_schema.py from the kserve {version} Python SDK (PyPI), whose "
                     "models openapi-generator makes from KServe's Go API types. Kubernetes types point at "
                     "kubernetes-validate's bundled definitions. Types the SDK does not describe accept any "
                     "value: " + ", ".join(sorted(unknown))),
        "kserve_version": version,
        "roots": {kind: f"#/$defs/{root}" for kind, (root, _) in ROOTS.items()},
        "$defs": dict(sorted(defs.items())),
    }


def main():
    version = sys.argv[1] if len(sys.argv) > 1 else "0.21.0"
    defs_file = sorted(importlib_resources.files("kubernetes_validate").joinpath("kubernetes-json-schema")
                       .iterdir(), key=lambda p: [int(x) for x in p.name[1:].split("-")[0].split(".")])[-1]
    k8s = set(json.loads((defs_file / "_definitions.json").read_text())["$defs"])
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                        f"kserve=={version}"], check=True)
        wheel = next(Path(tmp).glob("kserve-*.whl"))
        schema = generate(read_models(wheel), k8s, version)
    out = Path(__file__).with_name(f"kserve-{version}.json")
    out.write_text(json.dumps(schema, indent=1) + "\n")
    print(f"wrote {out} ({len(schema['$defs'])} types)")


if __name__ == "__main__":
    main()
