#!/usr/bin/env bash
# The main job: export ResNet-50 (torchvision, random weights, fixed seed) and benchmark it.
#
#   scripts/demo.sh                          # 10 s measured after 2 s warm-up
#   scripts/demo.sh --threads 1 --seconds 5  # extra arguments go to `streamline bench`
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
MODEL_DIR=${SL_MODEL_DIR:-$BUILD_DIR/models}
.venv/bin/python scripts/export_models.py --out "$MODEL_DIR" --models resnet50
"$BUILD_DIR/tools/streamline" --version
if [ $# -eq 0 ]; then set -- --seconds 10 --warmup 2; fi
"$BUILD_DIR/tools/streamline" bench "$MODEL_DIR/resnet50.onnx" "$@"
