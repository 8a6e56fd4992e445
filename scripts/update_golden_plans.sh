#!/usr/bin/env bash
# Rewrites the golden plan dumps (tests/plan/golden/*.json) from the current planner, checks them,
# then shows what changed. Run it after an intended planner change and commit the dumps with it.
#
#   scripts/update_golden_plans.sh [BUILD_DIR]      # default: build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target test_plan -- -j2
SL_UPDATE_GOLDEN=1 "$build/tests/test_plan" --gtest_filter='GoldenPlans.*' --gtest_brief=1
"$build/tests/test_plan" --gtest_filter='GoldenPlans.*' --gtest_brief=1
git -C "$root" status --short tests/plan/golden
git -C "$root" --no-pager diff --stat tests/plan/golden
