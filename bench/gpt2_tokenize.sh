#!/usr/bin/env bash
# GPT-2 tokenization speed: ablate's BPE against the reference JavaScript encoder (the npm
# package gpt-3-encoder's Encoder.js under node) on the same text, in the same run.
# Target: Tiny Shakespeare (1.1 MB) in under 1 s on one core.
# Usage: bench/gpt2_tokenize.sh [TEXT] [--whole]
#   TEXT     default: scripts/get-corpus.sh's corpus
#   --whole  also time Encoder.js's exported encode() on the whole text (quadratic in the
#            token count through Array.concat: half an hour for Tiny Shakespeare)
# Prints the encode time of each (ablate: the encode alone, as `ablate tokenize` reports it,
# and the whole command with loading the vocabulary; node: the encode alone), median of 3.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
text=${1:-$(bash "$root/scripts/get-corpus.sh")}
whole=${2:-}
bin=${ABLATE_BIN:-$root/build/ablate}
vocab=${ABLATE_GPT2_VOCAB:-$root/data/gpt2}
export ABLATE_GPT2_VOCAB=$vocab
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
median() { sort -g | sed -n 2p; }
echo "text: $text ($(wc -c <"$text") bytes)"
for i in 1 2 3; do
  s=$(date +%s.%N)
  "$bin" tokenize "$text" -o "$out/a.bin" 2>"$out/a.err"
  e=$(date +%s.%N)
  sed -E 's/.* in ([0-9.]+) s .*/\1/' "$out/a.err" >>"$out/a.enc"
  echo "$e - $s" | bc >>"$out/a.cmd"
done
for i in 1 2 3; do
  node "$root/tests/gpt2/reference_encode.js" "$vocab/package" "$text" >"$out/n.ids" 2>"$out/n.err"
  sed -E 's/.* in ([0-9.]+) s$/\1/' "$out/n.err" >>"$out/n.enc"
done
printf "ablate encode:             %8.3f s (whole command: %.3f s)\n" "$(median <"$out/a.enc")" "$(median <"$out/a.cmd")"
printf "Encoder.js, in-place loop: %8.3f s\n" "$(median <"$out/n.enc")"
if [ "$whole" = --whole ]; then
  node "$root/tests/gpt2/reference_encode.js" "$vocab/package" --whole "$text" >/dev/null 2>"$out/w.err"
  printf "Encoder.js encode():       %8.3f s (one run)\n" "$(sed -E 's/.* in ([0-9.]+) s$/\1/' "$out/w.err")"
fi
