#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (libFuzzer + ASan + UBSan) in their own build folder,
# makes their seed corpora and runs each target in turn.
#
#   scripts/fuzz.sh                          # every target, 60 seconds each
#   scripts/fuzz.sh 600                      # ten minutes each
#   scripts/fuzz.sh 30 json_decode config    # some targets
#
# Targets: loader (ONNX models), http_request (HTTP requests as a connection reads them),
# json_decode (JSON tensors), binary_decode (the binary tensor extension), grpc_decode (gRPC
# inference requests from the wire bytes), config (config.pbtxt). Each starts from its generated
# seeds (fuzz/make_seeds.py, fuzz/make_serve_seeds.py), the inputs in fuzz/regressions/<target>/
# (past crashers, kept) and the corpus its earlier runs grew. Exits non-zero when any target
# finds a crash, a leak, a timeout or an out-of-memory; the reproducer is written to
# build-fuzz/fuzz/artifacts/<target>/, and each target's last lines (libFuzzer's final stats)
# are printed. Environment: SL_FUZZ_BUILD_DIR (default <repo>/build-fuzz), SL_FUZZ_JOBS (ninja -j,
# default 2), SL_FUZZ_TIMEOUT (seconds one input may take, default 10: raise it on a machine so
# loaded that a niced fuzzer waits seconds for a core, or libFuzzer reports the wait as a hang).
set -euo pipefail

seconds="${1:-60}"
shift || true
all_targets=(loader http_request json_decode binary_decode grpc_decode config)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SL_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${SL_FUZZ_JOBS:-2}"
unit_timeout="${SL_FUZZ_TIMEOUT:-10}"

for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (${all_targets[*]})" >&2; exit 2; }
done

CC=clang CXX=clang++ cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSL_BUILD_FUZZERS=ON -DSL_BUILD_TESTS=OFF -DSL_NATIVE=OFF -DSL_CUDA=OFF >/dev/null
ninja -C "$build" -j "$jobs" "${targets[@]/%/_fuzz}" >"$build/fuzz-build.log" 2>&1 \
  || { tail -50 "$build/fuzz-build.log"; exit 1; }

work="$build/fuzz"
mkdir -p "$work/seeds"
# Seeds: small generated inputs, and for the loader a few conformance models when
# libonnx-testdata is installed.
/usr/bin/python3 "$root/fuzz/make_serve_seeds.py" "$work/seeds"
if /usr/bin/python3 -c "import onnx" 2>/dev/null; then
  /usr/bin/python3 "$root/fuzz/make_seeds.py" "$work/seeds/loader"
else
  echo "fuzz.sh: python3-onnx not found; seeding the loader from conformance models only" >&2
  mkdir -p "$work/seeds/loader"
fi
testdata=/usr/share/libonnx-testdata/data/node
for t in abs add conv_with_strides_padding gemm_default_no_bias relu; do
  if [[ -f "$testdata/test_$t/model.onnx" ]]; then cp "$testdata/test_$t/model.onnx" "$work/seeds/loader/test_$t.onnx"; fi
done

# One dictionary per target (libFuzzer takes one): tokens of the formats it reads.
dicts="$work/dicts"
mkdir -p "$dicts"
cat "$root/fuzz/dicts/http.dict" "$root/fuzz/dicts/json.dict" >"$dicts/http_request.dict"
cp "$root/fuzz/dicts/json.dict" "$dicts/json_decode.dict"
cp "$root/fuzz/dicts/json.dict" "$dicts/binary_decode.dict"
cp "$root/fuzz/dicts/pbtxt.dict" "$dicts/config.dict"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=()
for t in "${targets[@]}"; do
  corpus="$work/corpus/$t"
  artifacts="$work/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  args=(-max_total_time="$seconds" -timeout="$unit_timeout" -print_final_stats=1 -artifact_prefix="$artifacts/")
  if [[ $t == loader ]]; then
    args+=(-rss_limit_mb=2048)
  else
    # A server parser's memory is a small multiple of its input: 256 MB for inputs of 16 KB is
    # already generous.
    args+=(-rss_limit_mb=1024 -malloc_limit_mb=256 -max_len=16384)
  fi
  [[ -f "$dicts/$t.dict" ]] && args+=(-dict="$dicts/$t.dict")
  dirs=("$corpus" "$work/seeds/$t")
  [[ -d "$root/fuzz/regressions/$t" ]] && dirs+=("$root/fuzz/regressions/$t")
  echo "== fuzz.sh: $t for $seconds s"
  log="$work/$t.log"
  # New inputs go to the first folder (the growing corpus); the others are read only.
  if "$work/${t}_fuzz" "${args[@]}" "${dirs[@]}" >"$log" 2>&1; then
    grep -E '^(#[0-9]+ +DONE|Done [0-9]+ runs|stat::)' "$log" || tail -5 "$log"
  else
    tail -60 "$log"
    echo "fuzz.sh: $t FAILED (log: $log, reproducer in $artifacts/)"
    failed+=("$t")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: failed: ${failed[*]}"
  exit 1
fi
echo "fuzz.sh: OK (${targets[*]}, $seconds s each)"
