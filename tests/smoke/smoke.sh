#!/usr/bin/env bash
# ablate's quick packager test: everything an install needs to do, from the prefix alone,
# in a few seconds, without root, torch, SLURM or a network.
#   bash P/share/ablate/tests/smoke.sh      (installed: the prefix is found from this file)
#   ABLATE_PREFIX=P bash tests/smoke/smoke.sh
#   ctest -L smoke                          (from a build directory: installs it into a
#                                            temporary prefix first, or tests ABLATE_PREFIX)
# Checks: each command's --version says the same version; `ablate plan` on the installed
# quickstart spec; a 2-run sweep of the micro preset trained in-process (no mpirun: a
# recipe's build sandbox may have no MPI slots), inspected and rebuilt from its journal; GPT-2 tokenization when the
# vocabulary is installed; `ablate-report` (report.md, and report.html when uPlot is
# installed) when the Python packages it needs are there, else it says which is missing;
# `ablate-submit --dry-run` (no SLURM needed). The corpus is the installed docs.
# Exit 0 when all ran; the first failure stops it with a line saying which step.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prefix=${ABLATE_PREFIX:-$(cd "$here/../../.." && pwd)}
bin=$prefix/bin
share=$prefix/share/ablate
[ -x "$bin/ablate" ] || { echo "smoke: no $bin/ablate (set ABLATE_PREFIX to the install prefix)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ablate-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
# only the prefix: nothing from a source tree, a test environment or another module
unset ABLATE_BIN ABLATE_SOURCE_DIR ABLATE_SLURM_DIR ABLATE_GPT2_VOCAB ABLATE_UPLOT ABLATE_REPORT PYTHONPATH
export PATH="$bin:$PATH"
step() { echo "smoke: $*"; }
fail() { echo "smoke: FAILED: $*" >&2; exit 1; }

step "versions"
v=$(ablate --version) || fail "ablate --version"
version=$(awk '{ print $2 }' <<<"$v")
for tool in ablate-submit ablate-report; do
    out=$("$bin/$tool" --version) || fail "$tool --version"
    [[ $out == *" $version" ]] || fail "$tool --version says '$out', ablate --version '$v'"
done
step "  ablate $version"

step "plan the installed quickstart spec"
cat "$share"/docs/*.md "$share/README.md" > corpus.txt
export ABLATE_DATA=$work/corpus.txt
ablate plan "$share/sweeps/quickstart.yaml" > plan.txt || fail "ablate plan"
grep -q '/seed' plan.txt || fail "ablate plan lists no run"

step "a 2-run sweep (the installed micro preset, 6 steps), in-process"
cat > s.yaml <<SPEC
description: smoke test
data: {path: "$work/corpus.txt", tokenizer: char, val_fraction: 0.1}
base:
  preset: micro
  train: {steps: 6, batch_size: 4, eval_every: 3, eval_tokens: 256}
  sample: {prompt: "The", tokens: 4}
variants:
  baseline: {}
  gelu: {model.activation: gelu}
seeds: 1
SPEC
ablate run s.yaml -o s.h5 > run.txt 2>&1 || { cat run.txt >&2; fail "ablate run"; }
ablate inspect s.h5 | grep -q 'sweep complete' || fail "ablate inspect: the sweep is not complete"
ablate view s.h5 > /dev/null || fail "ablate view"

if [ -f "$share/gpt2/encoder.json" ]; then
    step "GPT-2 tokenization with the installed vocabulary"
    printf 'To be, or not to be: that is the question.\n' > t.txt
    ablate tokenize t.txt -o t.bin > /dev/null && ablate tokenize --decode t.bin > back.txt &&
        cmp -s t.txt back.txt || fail "GPT-2 tokenize and decode"
else
    step "no GPT-2 vocabulary in $share/gpt2: tokenization not tested"
fi

step "report"
if "$bin/ablate-report" s.h5 -o report > report.txt 2>&1; then
    [ -s report/report.md ] || fail "ablate-report wrote no report.md"
    if [ -f "$share/uplot/uPlot.iife.min.js" ]; then
        [ -s report/report.html ] || { cat report.txt >&2; fail "ablate-report wrote no report.html"; }
    fi
elif grep -q 'cannot import' report.txt; then
    step "  skipped: $(cat report.txt)"
else
    cat report.txt >&2
    fail "ablate-report"
fi

step "ablate-submit --dry-run"
mkdir sub
ablate-submit s.yaml -o sub/s.h5 --dry-run > submit.txt 2>&1 ||
    { cat submit.txt >&2; fail "ablate-submit --dry-run"; }
grep -q "ablate-sweep.sbatch" submit.txt ||
    fail "ablate-submit --dry-run shows no sweep job"
echo "smoke: all ran ($prefix)"
