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

Includes are read in both forms ("layer/..." and <layer/...>). Every folder under src/ must be a
layer in RANK and every header under include/ must be in include/streamline/: a new layer or a
stray public header is an error until it has a place in the order, rather than going unchecked.

The public headers (include/streamline/) are installed on their own, so they may include only
each other ("streamline/..."), the core value types installed with them (PUBLIC_CORE, installed as
include/streamline/core/) and the observer hooks (PUBLIC_EXEC, include/streamline/exec/; see
cmake/install.cmake); those include only each other, by sibling name ("allocator.h"), and the C++
library.
"""
import pathlib
import re
import sys

# Rank of each include prefix; equal ranks may include each other.
RANK = {"core": 0, "graph": 1, "ops": 2, "plan": 3, "exec": 4, "runtime": 5, "streamline": 5,
        "serve": 6, "tools": 7}
# Layers allowed only the listed prefixes, whatever their rank.
ONLY = {"python": {"streamline"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+["<]([a-z_]+)/')
SUFFIXES = {".h", ".cc", ".cu", ".cuh"}
# Keep in step with SL_PUBLIC_CORE_HEADERS and SL_PUBLIC_EXEC_HEADERS in cmake/install.cmake.
PUBLIC_CORE = {"allocator.h", "clock.h", "dtype.h", "plan_choices.h", "shape.h", "status.h", "tensor.h", "value.h"}
PUBLIC_EXEC = {"observer.h"}
ANY_QUOTED = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def public_problems(root: pathlib.Path, path: pathlib.Path, lines):
    """Includes of a public header (or a public core header) that are not installed themselves."""
    rel = path.relative_to(root).parts
    public_header = rel[0] == "include" and len(rel) > 2 and rel[1] == "streamline"
    public_core = len(rel) == 3 and ((rel[:2] == ("src", "core") and rel[2] in PUBLIC_CORE) or
                                     (rel[:2] == ("src", "exec") and rel[2] in PUBLIC_EXEC))
    if not (public_header or public_core):
        return []
    bad = []
    for lineno, line in enumerate(lines, 1):
        m = ANY_QUOTED.match(line)
        if not m:
            continue
        inc = m.group(1)
        if public_header:
            ok = (inc.startswith("streamline/") or (inc.startswith("core/") and inc[5:] in PUBLIC_CORE) or
                  (inc.startswith("exec/") and inc[5:] in PUBLIC_EXEC))
        else:
            ok = inc in (PUBLIC_CORE if rel[1] == "core" else PUBLIC_EXEC)
        if not ok:
            what = "public header" if public_header else "public core header"
            bad.append(f"{path.relative_to(root)}:{lineno}: {what} includes '{inc}', which is not installed "
                       f"(public headers include only streamline/..., core/{{{', '.join(sorted(PUBLIC_CORE))}}} and "
                       f"exec/{{{', '.join(sorted(PUBLIC_EXEC))}}}; those include only each other, by sibling name)")
    return bad


class Unplaced(Exception):
    """A source in a folder the layer order does not know."""


def layer_of(root: pathlib.Path, path: pathlib.Path):
    rel = path.relative_to(root).parts
    if rel[0] == "src" and len(rel) > 2:
        if rel[1] not in RANK or rel[1] in ("streamline", "tools"):
            raise Unplaced(f"{'/'.join(rel[:2])}/ is not a layer of the order "
                           f"({', '.join(sorted(RANK, key=RANK.get))}); add it to RANK in scripts/check_layers.py")
        return rel[1]
    if rel[0] == "include":
        if len(rel) > 2 and rel[1] == "streamline":
            return "streamline"
        raise Unplaced(f"{'/'.join(rel)}: public headers live in include/streamline/")
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
        try:
            layer = layer_of(root, path)
        except Unplaced as e:
            if str(e) not in bad:
                bad.append(str(e))
            continue
        if layer is None:
            continue
        checked += 1
        lines = path.read_text(errors="replace").splitlines()
        bad.extend(public_problems(root, path, lines))
        for lineno, line in enumerate(lines, 1):
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
