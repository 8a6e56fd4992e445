#!/usr/bin/env bash
# Fails when a C++ file changed since BASE differs from what clang-format makes of it with the
# checked-in .clang-format, listing those files with a short diff of each. The tree predates the
# check and is not formatted as a whole (formatting it all would rebuild everything), so only the
# files a change touches have to be formatted; CI (.ci/run) passes the commit that added this check.
#
# "Changed since BASE" means touched by a commit that descends from BASE (written when the check
# existed; merges aside), or modified, staged or new in the work tree. Work merged in from a branch
# that forked before BASE is not held to a rule it could not see; its files are checked once a
# later commit touches them.
#
#   scripts/check_format.sh BASE          # from anywhere inside the checkout
#   clang-format -i FILE...               # the fix
#
# clang-format is Debian's (package clang-format, installed by scripts/setup.sh); other versions
# format some constructs differently.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 BASE   (a commit; files changed since it must be formatted)" >&2
  exit 2
fi
base=$1
command -v clang-format >/dev/null || { echo "check_format: clang-format is missing (scripts/setup.sh installs it)" >&2; exit 2; }
root=$(git rev-parse --show-toplevel)
cd "$root"
git rev-parse --verify --quiet "$base^{commit}" >/dev/null \
  || { echo "check_format: '$base' is not a commit of this checkout (a shallow clone needs more history)" >&2; exit 2; }
[ -f .clang-format ] || { echo "check_format: no .clang-format at $root" >&2; exit 2; }

# Touched by the commits after BASE, or in the work tree (modified, staged, new); C and C++ only.
mapfile -t files < <({
  git log --ancestry-path --no-merges --format= --name-only "$base..HEAD" --
  git diff --name-only HEAD --
  git ls-files --others --exclude-standard
} | grep -E '\.(h|hh|hpp|c|cc|cpp|cu|cuh)$' | sort -u)

bad=()
diffs=""
checked=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue  # deleted since
  checked=$((checked + 1))
  if ! d=$(clang-format --style=file "$f" | diff -u --label "$f" --label "$f (formatted)" "$f" -); then
    bad+=("$f")
    # The first lines of each diff: enough to see what is wrong without flooding the log.
    diffs+="$(printf '%s\n' "$d" | head -n 20)"$'\n'
  fi
done

if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} of $checked C++ files changed since ${base:0:12} are not formatted:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  printf '%s' "$diffs" >&2
  echo "fix: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "check_format: $checked C++ files changed since ${base:0:12}, all formatted"
