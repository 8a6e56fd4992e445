#!/usr/bin/env bash
# Installs a build into a scratch prefix and builds a small program against the installed tree
# twice, through the CMake package (find_package(streamline)) and through pkg-config, then runs
# both (each writes a one-node model of its own and runs it, then a one-stage pipeline). Fails when
# a public header needs a header that is not installed, when the library misses a symbol, or when
# the program's result is wrong.
#
#   tests/install/check_install.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: check_install.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix

cmake --install "$build" --prefix "$prefix" > "$scratch/install.log"
test -f "$prefix/include/streamline/streamline.h"
test -f "$prefix/lib/cmake/streamline/streamline-config.cmake"
test -f "$prefix/lib/pkgconfig/streamline.pc"

# 1. CMake package.
cmake -S "$here/consumer" -B "$scratch/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  > "$scratch/configure.log"
cmake --build "$scratch/cmake" > "$scratch/build.log" || { cat "$scratch/build.log"; exit 1; }
"$scratch/cmake/consumer" "$scratch/relu_cmake.onnx"

# 2. pkg-config.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
c++ -o "$scratch/consumer_pc" "$here/consumer/main.cc" $(pkg-config --cflags --libs streamline)
LD_LIBRARY_PATH=$prefix/lib "$scratch/consumer_pc" "$scratch/relu_pc.onnx"
echo "install check: ok"
