#!/usr/bin/env bash
# Builds the ONNX loader fuzzer with clang (libFuzzer + ASan + UBSan) in its own build folder,
# makes a seed corpus and runs it.
#
#   scripts/fuzz.sh          # 60 seconds
#   scripts/fuzz.sh 600      # ten minutes
#
# Exits non-zero on any crash, leak, timeout or out-of-memory; the reproducer is written to
# build-fuzz/fuzz/artifacts/. Environment: SL_FUZZ_BUILD_DIR (default <repo>/build-fuzz),
# SL_FUZZ_JOBS (ninja -j, default 2).
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SL_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${SL_FUZZ_JOBS:-2}"

CC=clang CXX=clang++ cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSL_BUILD_FUZZERS=ON -DSL_BUILD_TESTS=OFF -DSL_NATIVE=OFF -DSL_CUDA=OFF >/dev/null
ninja -C "$build" -j "$jobs" loader_fuzz

work="$build/fuzz"
seeds="$work/seeds/loader"
corpus="$work/corpus/loader"
artifacts="$work/artifacts"
mkdir -p "$seeds" "$corpus" "$artifacts"

# Seeds: small generated models, past crashers, and a few conformance models when libonnx-testdata
# is installed.
if /usr/bin/python3 -c "import onnx" 2>/dev/null; then
  /usr/bin/python3 "$root/fuzz/make_seeds.py" "$seeds"
else
  echo "fuzz.sh: python3-onnx not found; seeding from conformance models only" >&2
fi
# Inputs that once broke the loader stay in the seeds.
cp "$root"/fuzz/regressions/*.onnx "$seeds"/ 2>/dev/null || true
testdata=/usr/share/libonnx-testdata/data/node
for t in abs add conv_with_strides_padding gemm_default_no_bias relu; do
  if [[ -f "$testdata/test_$t/model.onnx" ]]; then cp "$testdata/test_$t/model.onnx" "$seeds/test_$t.onnx"; fi
done

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# New inputs go to the first folder (the growing corpus); the seeds folder is read only.
"$work/loader_fuzz" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$corpus" "$seeds"
