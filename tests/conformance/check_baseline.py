#!/usr/bin/env python3
"""Runs `streamline conformance` on one suite and checks the result against a baseline.

    check_baseline.py --runner build/tools/streamline --suite /usr/share/libonnx-testdata/data/node \
        --baseline tests/conformance/baseline_node.txt --out build/tests/conformance/node

Fails (exit 1) when a case listed in the baseline no longer passes (each one is printed with the
runner's detail) or when any case crashed. Cases that pass but are not in the baseline are listed
as a hint to refresh it; `--update` rewrites the baseline with the new passing list. `--peer FILE`
(the cases another runtime passes) adds how many of those pass here and which of them fail with a
wrong answer here.
"""

import argparse
import json
import os
import subprocess
import sys
import time


def read_names(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runner", required=True, help="the streamline binary")
    ap.add_argument("--suite", required=True, help="folder of ONNX backend test cases")
    ap.add_argument("--baseline", required=True, help="file of case names expected to pass")
    ap.add_argument("--out", required=True, help="folder for passing.txt and result.json")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--update", action="store_true", help="rewrite the baseline with the passing list")
    ap.add_argument("--peer", help="file of case names a peer runtime passes, for comparison")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    passing_path = os.path.join(args.out, "passing.txt")
    json_path = os.path.join(args.out, "result.json")
    cmd = [args.runner, "conformance", args.suite, "--json", "--list-passing", passing_path,
           "--jobs", str(args.jobs), "--timeout", str(args.timeout)]
    start = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        print(f"runner failed with exit code {proc.returncode}: {' '.join(cmd)}\n{proc.stderr}", file=sys.stderr)
        return 1
    with open(json_path, "w", encoding="utf-8") as f:
        f.write(proc.stdout)
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        print(f"runner output is not JSON ({e}); see {json_path}", file=sys.stderr)
        return 1

    cases = {c["name"]: c for c in result["cases"]}
    passing = set(read_names(passing_path))
    baseline = read_names(args.baseline)
    print(f"{args.suite}: {len(cases)} cases, {result['passed']} passed, {result['failed']} failed, "
          f"{result['unsupported']} unsupported, {result['crashed']} crashed in {elapsed:.1f}s")

    if args.peer:
        peer = set(read_names(args.peer))
        both = passing & peer
        wrong = sorted(n for n in peer if cases.get(n, {}).get("status") == "failed")
        print(f"peer ({os.path.basename(args.peer)}): {len(both)} of its {len(peer)} passing cases pass here; "
              f"{len(wrong)} of them fail here with a wrong answer{': ' + ', '.join(wrong) if wrong else ''}")

    if args.update:
        with open(args.baseline, "w", encoding="utf-8") as f:
            f.writelines(name + "\n" for name in sorted(passing))
        print(f"wrote {len(passing)} names to {args.baseline}")
        return 0

    ok = True
    missing = [n for n in baseline if n not in passing]
    if missing:
        ok = False
        print(f"FAIL: {len(missing)} baselined case(s) no longer pass:")
        for n in missing:
            c = cases.get(n)
            why = f"{c['status']}: {c['detail']}" if c else "not found in the suite"
            print(f"  {n}  ({why})")
    crashed = [c for c in result["cases"] if c["status"] == "crashed"]
    if crashed:
        ok = False
        print(f"FAIL: {len(crashed)} case(s) crashed:")
        for c in crashed:
            print(f"  {c['name']}  ({c['detail']})")
    new = sorted(passing - set(baseline))
    if new:
        print(f"note: {len(new)} case(s) pass but are not in {os.path.basename(args.baseline)}; "
              f"rerun with --update to add them: {', '.join(new[:20])}{' ...' if len(new) > 20 else ''}")
    if ok:
        print("OK: every baselined case passes and nothing crashed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
