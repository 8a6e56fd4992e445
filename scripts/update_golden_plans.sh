#!/usr/bin/env bash
# Rewrites the golden plan dumps (tests/plan/golden/*.json) from the current planner, checks them,
# then shows what changed. Run it after an intended planner change (or a PyTorch upgrade that
# renames the exported model's nodes) and commit the dumps with it.
#
#   scripts/update_golden_plans.sh [BUILD_DIR]      # default: build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target test_plan test_model_plans -- -j2
for t in "tests/test_plan --gtest_filter=GoldenPlans.*" "tests/models/test_model_plans --gtest_filter=GoldenModelPlans.*"; do
  # shellcheck disable=SC2086 # the binary and its filter
  SL_UPDATE_GOLDEN=1 $build/$t --gtest_brief=1
  # shellcheck disable=SC2086
  $build/$t --gtest_brief=1
done
git -C "$root" status --short tests/plan/golden
git -C "$root" --no-pager diff --stat tests/plan/golden
