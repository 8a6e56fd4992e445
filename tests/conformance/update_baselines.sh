#!/usr/bin/env bash
# Regenerates tests/conformance/baseline_<suite>.txt from a fresh run of every Debian suite.
#   tests/conformance/update_baselines.sh build/tools/streamline [/usr/share/libonnx-testdata/data]
set -euo pipefail
runner=${1:?usage: $0 STREAMLINE_BINARY [TESTDATA_DIR]}
data=${2:-/usr/share/libonnx-testdata/data}
here=$(cd "$(dirname "$0")" && pwd)
python=$here/../../.venv/bin/python
[[ -x $python ]] || python=python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for suite in node pytorch-converted pytorch-operator simple; do
  "$python" "$here/check_baseline.py" --runner "$runner" --suite "$data/$suite" \
    --baseline "$here/baseline_$suite.txt" --out "$out/$suite" --update
done
