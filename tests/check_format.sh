#!/usr/bin/env bash
# Every tracked C file is formatted as the committed .clang-format says.
set -u
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "clang-format is not installed (scripts/install-deps.sh)"; exit 1; }
bad=0
for f in $(git ls-files '*.c' '*.h'); do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (run: clang-format -i $f)"
    bad=1
  fi
done
exit $bad
