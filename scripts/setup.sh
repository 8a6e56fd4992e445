#!/usr/bin/env bash
# Installs what streamline needs (Debian packages, a Python venv for the tests and benchmarks)
# and builds it. Idempotent and quiet when everything is already there.
#
#   scripts/setup.sh            # Release build in build/
#   BUILD_DIR=build-asan CMAKE_ARGS="-DSL_SANITIZE=ON" scripts/setup.sh
#
# The default build also makes the Python package (build/python/streamline: the extension and
# links to python/streamline/*.py), and a .pth file puts it on .venv's path, so
# `.venv/bin/python -c "import streamline"` imports this checkout's package.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
CMAKE_ARGS=${CMAKE_ARGS:-}

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang libclang-rt-14-dev clang-format git
  libdnnl-dev ocl-icd-opencl-dev libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev rapidjson-dev
  libboost-dev libgrpc++-dev protobuf-compiler-grpc libjpeg-dev libpng-dev zlib1g-dev libre2-dev
  python3 python3-venv python3-dev python3-numpy python3-onnx python3-torch python3-torchvision pybind11-dev
  prometheus wrk curl chromium chromium-driver
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python: Debian's interpreter (it sees Debian's torch), plus pinned PyPI packages in .venv.
if [ ! -x .venv/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
stamp=.venv/.requirements-installed
if [ ! -f "$stamp" ] || ! cmp -s scripts/requirements.txt "$stamp"; then
  echo "setup: installing Python packages (scripts/requirements.txt)"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements.txt
  cp scripts/requirements.txt "$stamp"
fi
qstamp=.venv/.requirements-quant-installed
if [ ! -f "$qstamp" ] || ! cmp -s scripts/requirements-quant.txt "$qstamp"; then
  echo "setup: installing the quantizer's ONNX package (scripts/requirements-quant.txt)"
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --upgrade \
    --target .venv/quant-packages -r scripts/requirements-quant.txt
  cp scripts/requirements-quant.txt "$qstamp"
fi

export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths relative to the checkout, so a fresh clone elsewhere hits the same cache entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release $CMAKE_ARGS >/dev/null
fi
if ! cmake --build "$BUILD_DIR" -- -j"$(nproc)" > "$BUILD_DIR/build.log" 2>&1; then
  grep -E 'error|Error' -A3 "$BUILD_DIR/build.log" | head -60 >&2
  echo "setup: build failed (full log: $BUILD_DIR/build.log)" >&2
  exit 1
fi

# The Python package of the default build goes on .venv's path (rebuilt above with everything else:
# with nothing changed, ninja has nothing to do).
if [ "$BUILD_DIR" = build ] && ls build/python/streamline/_streamline*.so >/dev/null 2>&1; then
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$PWD/build/python" > "$site/streamline.pth"
fi
