#!/usr/bin/env python3
"""Fails when a source file includes a header from a layer above its own.

Layers, bottom to top: core, graph, ops, plan, exec, runtime (with the public headers in
include/streamline/, which it implements), serve, tools. A file may include "<lower>/..." or a
header of its own layer only:
    src/<layer>/...            is in <layer>
    include/streamline/...     is in the public API, at runtime's rank ("streamline/...")
    tools/...                  is the CLI, above every library ("tools/...")
The Python bindings (python/...) sit beside the CLI but may include the public API alone
("streamline/..."): they bind include/streamline/ and nothing under it.
Tests, benchmarks and fuzzers may include anything.
"""
import pathlib
import re
import sys

# Rank of each include prefix; equal ranks may include each other.
RANK = {"core": 0, "graph": 1, "ops": 2, "plan": 3, "exec": 4, "runtime": 5, "streamline": 5,
        "serve": 6, "tools": 7}
# Layers allowed only the listed prefixes, whatever their rank.
ONLY = {"python": {"streamline"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
SUFFIXES = {".h", ".cc", ".cu", ".cuh"}


def layer_of(root: pathlib.Path, path: pathlib.Path):
    rel = path.relative_to(root).parts
    if rel[0] == "src" and len(rel) > 2:
        return rel[1] if rel[1] in RANK else None
    if rel[0] == "include" and len(rel) > 2 and rel[1] == "streamline":
        return "streamline"
    if rel[0] == "tools":
        return "tools"
    if rel[0] == "python":
        return "python"
    return None


def sources(root: pathlib.Path):
    for top in ("src", "include", "tools", "python"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file():
                yield path


def main(root: pathlib.Path) -> int:
    bad = []
    checked = 0
    for path in sources(root):
        layer = layer_of(root, path)
        if layer is None:
            continue
        checked += 1
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) not in RANK:
                continue
            if layer in ONLY:
                if m.group(1) not in ONLY[layer]:
                    bad.append(f"{path.relative_to(root)}:{lineno}: layer '{layer}' may include only "
                               f"{', '.join(p + '/' for p in sorted(ONLY[layer]))}, not '{m.group(1)}/'")
            elif RANK[m.group(1)] > RANK[layer]:
                bad.append(f"{path.relative_to(root)}:{lineno}: layer '{layer}' includes '{m.group(1)}/' from above")
    for b in bad:
        print(b, file=sys.stderr)
    if checked == 0:
        print(f"check_layers: no sources under {root}", file=sys.stderr)
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
