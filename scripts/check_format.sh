#!/usr/bin/env bash
# Checks that the C++ lines changed since BASE follow .clang-format (clang-format 14, Debian's
# clang-format package): prints the diff clang-format wants and exits 1, else exits 0. Only
# changed lines are checked, as `git clang-format` formats them (older code is reformatted when
# it is next touched).
#   scripts/check_format.sh [BASE]   BASE: a commit (default $LF_FORMAT_BASE, else HEAD~1)
# Fix what it reports with: git clang-format BASE
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
base="${1:-${LF_FORMAT_BASE:-HEAD~1}}"
if ! git rev-parse --verify --quiet "$base^{commit}" > /dev/null; then
  echo "check_format: $base is not a commit of this clone (a shallow clone?); pass BASE" >&2
  exit 2
fi
# git-clang-format 14 exits 0 even when it prints a diff: decide from its output.
out="$(git clang-format --binary clang-format-14 --diff "$base" -- '*.cpp' '*.h' '*.cc')"
case "$out" in
  "clang-format did not modify any files" | "no modified files to format") exit 0 ;;
esac
printf '%s\n' "$out"
echo "check_format: the lines above, changed since $base, are not clang-formatted;" \
     "run: git clang-format $base" >&2
exit 1
