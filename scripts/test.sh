#!/usr/bin/env bash
# Runs the whole test suite (unit, op, model) with ctest in the build made by scripts/setup.sh.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -L unit         # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# ctest runs two tests at a time; each may use two intra-op threads.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${SL_TEST_JOBS:-2}" "$@"
