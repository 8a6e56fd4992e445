#!/usr/bin/env bash
# Regenerates tests/conformance/baseline_<suite>.txt from a fresh run of every Debian suite, and
# baseline_onnx-1.22.0_node.txt from the onnx 1.22.0 wheel's node suite (fetched into
# build/onnx-testdata-1.22.0 when missing).
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
wheel=1.22.0
wheel_data=$here/../../build/onnx-testdata-$wheel
PYTHON=$python "$here/../../scripts/fetch_onnx_testdata.sh" "$wheel" "$wheel_data"
"$python" "$here/check_baseline.py" --runner "$runner" --suite "$wheel_data/node" \
  --baseline "$here/baseline_onnx-${wheel}_node.txt" --peer "$here/ort-1.31.1-passes-onnx-${wheel}-node.txt" \
  --out "$out/onnx-$wheel" --update
