#!/usr/bin/env bash
# Builds test_runtime with ThreadSanitizer and runs the batcher and scheduler tests under it.
#
#   scripts/tsan.sh                          # build-tsan/, filter 'Batcher*:Scheduler*', 3 repeats
#   SL_TSAN_FILTER='Scheduler.*' SL_TSAN_REPEAT=10 scripts/tsan.sh
#   SL_TSAN_E2E=1 scripts/tsan.sh            # also the end-to-end Serving tests, OpenMP at 1 thread
#
# SL_SANITIZE is ASan+UBSan, so TSan gets its own flags here. Only tests on the fake executor
# run: libgomp (OpenMP, used by real inference) is not TSan-instrumented and would report its
# own barriers as races.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-tsan}
JOBS=${JOBS:-2}
FILTER=${SL_TSAN_FILTER:-'Batcher*:Scheduler*'}
REPEAT=${SL_TSAN_REPEAT:-3}

cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSL_SANITIZE=OFF -DSL_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" >/dev/null
ninja -C "$BUILD_DIR" -j"$JOBS" test_runtime

export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
prefix=()
# Kernels with wide mmap randomisation break TSan's memory layout; run without ASLR when we can.
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
  prefix=(setarch "$(uname -m)" -R)
fi
test_bin="$BUILD_DIR/tests/test_runtime"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# run_tests FILTER [ARGS...]: the whole log on failure, the summary lines on success.
run_tests() {
  local filter=$1
  shift
  if ! "${prefix[@]}" "$test_bin" --gtest_filter="$filter" "$@" >"$log" 2>&1; then
    cat "$log"
    echo "tsan: FAILED ($filter)"
    exit 1
  fi
  grep -E '^\[ *(=+|PASSED|SKIPPED) *\]' "$log" | tail -3
}
run_tests "$FILTER" --gtest_repeat="$REPEAT"
echo "tsan: OK ($FILTER, $REPEAT repeats)"
if [[ "${SL_TSAN_E2E:-0}" == 1 ]]; then
  # With one OpenMP thread libgomp starts no team, so the real kernels add no false reports.
  OMP_NUM_THREADS=1 run_tests 'Serving.*'
  echo "tsan: OK (Serving.*, OMP_NUM_THREADS=1)"
fi
