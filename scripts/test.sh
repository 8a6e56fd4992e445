#!/usr/bin/env bash
# Runs the test suite (unit, op, model, ...) with ctest in the build made by scripts/setup.sh.
#
#   scripts/test.sh                 # everything but the tests labelled "extended"
#   scripts/test.sh --extended      # everything
#   scripts/test.sh -L unit         # extra arguments go to ctest
#
# Label "extended": more variants of paths the default suite already covers (today the int8
# model variants beyond tests/models/test_int8.py's DEFAULT_VARIANTS), too slow for every run.
# Alone: ctest --test-dir build -L extended -j2 --output-on-failure
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
exclude=(-LE extended)
args=()
for a in "$@"; do
  if [[ $a == --extended ]]; then
    exclude=()
  else
    args+=("$a")
  fi
done
# ctest runs two tests at a time; each may use two intra-op threads.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${SL_TEST_JOBS:-2}" "${exclude[@]}" "${args[@]}"
