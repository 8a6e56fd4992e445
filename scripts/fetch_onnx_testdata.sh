#!/usr/bin/env bash
# Fetches the ONNX backend test data that ships inside the `onnx` wheel on PyPI (newer than Debian's
# libonnx-testdata) without installing anything: the wheel is downloaded to a temporary folder and
# only onnx/backend/test/data/ is extracted, so DIR ends up holding node/, pytorch-converted/,
# pytorch-operator/, simple/, light/, real/.
#
#   scripts/fetch_onnx_testdata.sh 1.22.0 build/onnx-testdata
#   build/tools/streamline conformance build/onnx-testdata/node
#
# A folder that already holds a complete extraction of VERSION (the marker file
# DIR/.onnx-testdata-VERSION, written last) is left as it is, so the conformance tests can call
# this on every run and download only once per build folder.
#
# The default version, 1.22.0, is the newest release whose wheel still carries node/ test data
# (1.23 wheels ship only light/, pytorch-*/, real/ and simple/); it has cp311 manylinux wheels.
set -euo pipefail

VERSION=${1:-1.22.0}
DIR=${2:-build/onnx-testdata-$VERSION}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
[[ -x $PYTHON ]] || { echo "fetch_onnx_testdata: $PYTHON not found (run scripts/setup.sh or set PYTHON)" >&2; exit 1; }

marker="$DIR/.onnx-testdata-$VERSION"
if [[ -f $marker ]]; then
  echo "onnx $VERSION test data already in $DIR"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Any Linux x86-64 CPython 3.11 wheel holds the same data; naming the tags keeps the choice
# independent of the host's glibc.
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
  --implementation cp --python-version 3.11 --abi cp311 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
  "onnx==$VERSION" -d "$tmp"

shopt -s nullglob
wheels=("$tmp"/onnx-"$VERSION"-*.whl)
[[ ${#wheels[@]} -eq 1 ]] || { echo "fetch_onnx_testdata: expected one onnx $VERSION wheel, got ${#wheels[@]}" >&2; exit 1; }

mkdir -p "$DIR"
"$PYTHON" - "${wheels[0]}" "$DIR" <<'PY'
import os, shutil, sys, zipfile

wheel, dest = sys.argv[1], sys.argv[2]
prefix = "onnx/backend/test/data/"
dest_real = os.path.realpath(dest)
count = 0
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        target = os.path.realpath(os.path.join(dest, info.filename[len(prefix):]))
        if not target.startswith(dest_real + os.sep):
            sys.exit(f"fetch_onnx_testdata: refusing to write outside {dest}: {info.filename}")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)
        count += 1
if count == 0:
    sys.exit(f"fetch_onnx_testdata: {os.path.basename(wheel)} holds no {prefix} files")
print(f"extracted {count} files into {dest}")
PY

cases=$(find "$DIR/node" -name model.onnx 2>/dev/null | wc -l)
echo "onnx $VERSION test data in $DIR (node: $cases cases)"
[[ $cases -gt 0 ]] || echo "fetch_onnx_testdata: warning: onnx $VERSION carries no node/ test data" >&2
echo "$cases" > "$marker"
