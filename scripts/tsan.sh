#!/usr/bin/env bash
# Builds the runtime and server tests with ThreadSanitizer and runs them under it.
#
#   scripts/tsan.sh                          # build-tsan/: the runtime and server tests
#   SL_TSAN_FILTER='Scheduler.*' SL_TSAN_REPEAT=10 scripts/tsan.sh
#   SL_TSAN_E2E=0 scripts/tsan.sh            # only the tests on the fake executor
#
# Three passes: (1) the batcher and scheduler tests on the fake executor, repeated
# (SL_TSAN_FILTER, SL_TSAN_REPEAT); (2) every other test of test_runtime and (3) the tests of
# test_serve, with real inference at OMP_NUM_THREADS=1: libgomp (OpenMP, under oneDNN and our
# kernels) is not TSan-instrumented and would report its own barriers as races, but with one
# thread it starts no team. Left out, each for a reason of the third-party libraries, which
# Debian builds without TSan:
#   - ServingMemory.*: it measures RSS, which TSan's shadow memory and allocator make meaningless
#     (the plain build runs it);
#   - the gRPC server tests (Grpc*Server*, GrpcHardening*, GrpcModelControl*): TSan cannot see
#     gRPC's own synchronisation and reports its memory reuse between its threads by the
#     thousand; a suppression wide enough to silence them would also hide our handlers, which run
#     on gRPC's threads;
#   - the tests that parse config.pbtxt (ModelConfig.*, ServerCoreTest.*, RepositoryTest.*):
#     protobuf's map_field.h adds members to MapFieldBase under __SANITIZE_THREAD__, so our
#     instrumented code and Debian's libprotobuf disagree on its layout and TextFormat crashes.
# The HTTP server (Beast), ServerCore, the scheduler and the runtime run in full.
# SL_SANITIZE is ASan+UBSan, so TSan gets its own flags here.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-tsan}
JOBS=${JOBS:-2}
FILTER=${SL_TSAN_FILTER:-'Batcher*:Scheduler*'}
REPEAT=${SL_TSAN_REPEAT:-3}
E2E=${SL_TSAN_E2E:-1}

cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSL_SANITIZE=OFF -DSL_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" >/dev/null
targets=(test_runtime)
[[ "$E2E" == 1 ]] && targets+=(test_serve)
ninja -C "$BUILD_DIR" -j"$JOBS" "${targets[@]}" >"$BUILD_DIR/tsan-build.log" 2>&1 \
  || { tail -50 "$BUILD_DIR/tsan-build.log"; exit 1; }

export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
prefix=()
# Kernels with wide mmap randomisation break TSan's memory layout; run without ASLR when we can.
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
  prefix=(setarch "$(uname -m)" -R)
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# run_tests BINARY FILTER [ARGS...]: the whole log on failure, the summary lines on success.
run_tests() {
  local bin=$1 filter=$2
  shift 2
  if ! "${prefix[@]}" "$BUILD_DIR/tests/$bin" --gtest_filter="$filter" "$@" >"$log" 2>&1; then
    cat "$log"
    echo "tsan: FAILED ($bin $filter)"
    exit 1
  fi
  grep -E '^\[ *(=+|PASSED|SKIPPED) *\]' "$log" | tail -3
}
run_tests test_runtime "$FILTER" --gtest_repeat="$REPEAT"
echo "tsan: OK (test_runtime $FILTER, $REPEAT repeats)"
if [[ "$E2E" == 1 ]]; then
  # With one OpenMP thread libgomp starts no team, so the real kernels add no false reports.
  OMP_NUM_THREADS=1 run_tests test_runtime "-$FILTER:ServingMemory.*"
  echo "tsan: OK (test_runtime, the other tests, OMP_NUM_THREADS=1)"
  OMP_NUM_THREADS=1 run_tests test_serve \
    '-GrpcServerTest.*:GrpcServerStartTest.*:GrpcHardeningTest.*:GrpcModelControlTest.*:ModelConfig.*:ServerCoreTest.*:RepositoryTest.*'
  echo "tsan: OK (test_serve but gRPC's server and config.pbtxt parsing, OMP_NUM_THREADS=1)"
fi
