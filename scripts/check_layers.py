#!/usr/bin/env python3
"""Fails when a source file includes a header from a layer above its own.

Layers, bottom to top: core, graph, ops, plan, exec, runtime, serve, tools.
A file in src/<layer>/ may include "<lower>/..." or "<layer>/..." only.
"""
import pathlib
import re
import sys

ORDER = ["core", "graph", "ops", "plan", "exec", "runtime", "serve"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def main(root: pathlib.Path) -> int:
    bad = []
    for path in sorted((root / "src").rglob("*")):
        if path.suffix not in {".h", ".cc", ".cu", ".cuh"}:
            continue
        layer = path.relative_to(root / "src").parts[0]
        if layer not in ORDER:
            continue
        rank = ORDER.index(layer)
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) in ORDER and ORDER.index(m.group(1)) > rank:
                bad.append(f"{path.relative_to(root)}:{lineno}: layer '{layer}' includes '{m.group(1)}/' from above")
    for b in bad:
        print(b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
