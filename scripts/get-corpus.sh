#!/usr/bin/env bash
# Prints on stdout the path of a text corpus for the quickstart; messages go to stderr.
# Order: $ABLATE_CORPUS; <repo>/data/tinyshakespeare.txt; <repo>/../shared/data/tinyshakespeare.txt;
# a download of Tiny Shakespeare into <repo>/data/ (git-ignored); else, offline, the Debian
# license texts concatenated into <repo>/data/common-licenses.txt.
# Usage: corpus=$(scripts/get-corpus.sh)
set -euo pipefail

URL="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
TIMEOUT=20

say() { echo "ablate: $*" >&2; }

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="$REPO/data"
TS="$DATA/tinyshakespeare.txt"

# (1) An explicit corpus.
if [ -n "${ABLATE_CORPUS:-}" ]; then
  if [ -r "$ABLATE_CORPUS" ] && [ -f "$ABLATE_CORPUS" ]; then
    say "corpus: $ABLATE_CORPUS (from \$ABLATE_CORPUS)"
    echo "$ABLATE_CORPUS"
    exit 0
  fi
  say "warning: \$ABLATE_CORPUS=$ABLATE_CORPUS is not a readable file; looking elsewhere"
fi

# (2) Already in the repository's data directory; (3) in the shared data directory.
for candidate in "$TS" "$REPO/../shared/data/tinyshakespeare.txt"; do
  if [ -r "$candidate" ] && [ -s "$candidate" ]; then
    path="$(cd "$(dirname "$candidate")" && pwd)/$(basename "$candidate")"
    say "corpus: $path"
    echo "$path"
    exit 0
  fi
done

# (4) Download Tiny Shakespeare (to a temporary name, moved into place only when complete).
mkdir -p "$DATA"
tmp="$TS.part.$$"
FALLBACK="$DATA/common-licenses.txt"
trap 'rm -f "$tmp" "$FALLBACK.part.$$"' EXIT
downloaded=0
if command -v curl >/dev/null 2>&1; then
  say "downloading Tiny Shakespeare with curl from $URL"
  if curl -fsSL --max-time "$TIMEOUT" --connect-timeout 10 -o "$tmp" "$URL"; then
    downloaded=1
  fi
elif command -v wget >/dev/null 2>&1; then
  say "downloading Tiny Shakespeare with wget from $URL"
  if wget -q --timeout="$TIMEOUT" --tries=1 -O "$tmp" "$URL"; then
    downloaded=1
  fi
else
  say "neither curl nor wget is installed; cannot download Tiny Shakespeare"
fi
if [ "$downloaded" = 1 ] && [ -s "$tmp" ]; then
  mv -f "$tmp" "$TS"
  size=$(wc -c <"$TS")
  if [ "$size" -ne 1115394 ]; then
    say "warning: $TS has $size bytes, not the expected 1115394; check its contents"
  fi
  say "corpus: $TS ($(wc -c <"$TS") bytes)"
  echo "$TS"
  exit 0
fi
rm -f "$tmp"

# (5) Offline fallback: the Debian license texts.
LICENSES=/usr/share/common-licenses
shopt -s nullglob
files=()
for f in "$LICENSES"/*; do
  [ -f "$f" ] && [ -r "$f" ] && files+=("$f")
done
if [ ${#files[@]} -eq 0 ]; then
  say "error: Tiny Shakespeare is not available (offline?) and $LICENSES holds no readable files;"
  say "set ABLATE_CORPUS to a text file, or put tinyshakespeare.txt in $DATA/"
  exit 1
fi
cat "${files[@]}" >"$FALLBACK.part.$$"
mv -f "$FALLBACK.part.$$" "$FALLBACK"
say "Tiny Shakespeare is not available (offline?); using the Debian license texts in $LICENSES as the corpus — results are not comparable with the reference studies"
say "corpus: $FALLBACK ($(wc -c <"$FALLBACK") bytes)"
echo "$FALLBACK"
