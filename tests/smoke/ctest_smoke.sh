#!/usr/bin/env bash
# `ctest -L smoke`: tests/smoke/smoke.sh against an install. With ABLATE_PREFIX set, that
# prefix (a recipe's test phase after its install); else this build directory ($1),
# installed into a temporary prefix first.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${ABLATE_PREFIX:-}" ]; then
    exec bash "$ABLATE_PREFIX/share/ablate/tests/smoke.sh"
fi
prefix=$(mktemp -d "${TMPDIR:-/tmp}/ablate-smoke-prefix.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
cmake --install "$1" --prefix "$prefix" > "$prefix.install.log" 2>&1 ||
    { cat "$prefix.install.log" >&2; rm -f "$prefix.install.log"; echo "smoke: cmake --install failed" >&2; exit 1; }
rm -f "$prefix.install.log"
bash "$prefix/share/ablate/tests/smoke.sh"
