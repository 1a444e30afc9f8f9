#!/usr/bin/env bash
# Installs the dependencies, builds ablate, runs the quickstart sweep (sweeps/quickstart.yaml:
# three one-knob changes to the micro GPT, replicated until each is better, worse or
# equivalent) under mpirun into quickstart.h5, writes its report into quickstart-report/ and
# ends with the sweep's verdicts and where the report's page is (docs/tutorial.md goes on).
# Usage: scripts/quickstart.sh [RANKS]
#   RANKS                         MPI ranks (default: one per core up to 8, plus rank 0,
#                                 which only orchestrates; more ranks than cores are allowed)
#   ABLATE_BUILD_DIR=DIR          the build dir (build)
#   ABLATE_CONFIGURE_ONLY=1       configure the build dir and stop: no install, no build
#                                 (tests/e2e/test_scripts.py runs run-tests.sh after it)
#   ABLATE_QUICKSTART_BIN=PATH    use this ablate binary: no install, no configure, no build
#   ABLATE_QUICKSTART_OUT=DIR     write quickstart.h5 and quickstart-report/ there (default:
#                                 the checkout; tests/e2e/test_quickstart.py uses both)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cores=$(nproc)
ranks=${1:-$(( (cores < 8 ? cores : 8) + 1 ))}
build=${ABLATE_BUILD_DIR:-build}
out=${ABLATE_QUICKSTART_OUT:-$root}
say() { echo "quickstart: $*" >&2; }

if [ "${ABLATE_CONFIGURE_ONLY:-0}" = 1 ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
  exit
fi
t0=$SECONDS
if [ -n "${ABLATE_QUICKSTART_BIN:-}" ]; then
  ablate=$ABLATE_QUICKSTART_BIN
else
  bash scripts/install-deps.sh
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF
  cmake --build "$build" -j"$cores"
  ablate=$build/ablate
fi
t_build=$SECONDS

ABLATE_DATA=$(bash scripts/get-corpus.sh)
export ABLATE_DATA
say "corpus $ABLATE_DATA"

# Open MPI refuses to start as root unless told otherwise. As root, the quickstart sets
# Open MPI's run-as-root variables for its own mpirun command only (not in your shell), and
# says so; ablate itself never sets them.
mpi_env=()
if [ "$(id -u)" -eq 0 ]; then
  say "running as root: setting OMPI_ALLOW_RUN_AS_ROOT=1" \
      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 for this mpirun only"
  mpi_env=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
fi
out=$(mkdir -p "$out" && cd "$out" && pwd)  # absolute: the page's file:// URL
# --oversubscribe: Open MPI counts cores, not ranks that mostly wait (rank 0 only
# orchestrates), and refuses more ranks than cores without it.
say "mpirun -n $ranks --oversubscribe $ablate run sweeps/quickstart.yaml -o $out/quickstart.h5 --force"
"${mpi_env[@]}" mpirun -n "$ranks" --oversubscribe "$ablate" run sweeps/quickstart.yaml \
  -o "$out/quickstart.h5" --force
t_sweep=$SECONDS

# The report: the sweep's own verdicts first, then statistics, figures, tables and the page
# (docs/analysis.md). It prints the verdicts.
say "the verdicts: each change against the baseline, seeds added until it was settled"
rm -f "$out/quickstart-report/report.html"  # a page from an earlier run is not this one
/usr/bin/python3 analysis/ablate-report "$out/quickstart.h5" -o "$out/quickstart-report"
case $ABLATE_DATA in
  */common-licenses.txt)
    say "note: trained on the Debian license texts (offline), not Tiny Shakespeare: these" \
        "verdicts differ from the README's (set ABLATE_CORPUS to Tiny Shakespeare, or get online)" ;;
esac
say "results: $out/quickstart.h5 ($ablate inspect lists its runs; docs/hdf5-schema.md)"
say "report:  $out/quickstart-report/report.md"
if [ -f "$out/quickstart-report/report.html" ]; then
  say "page:    file://$out/quickstart-report/report.html"
  say "open the page in any browser, it needs no network (xdg-open, or copy the directory" \
      "quickstart-report/ to a machine with a browser); next: docs/tutorial.md"
else  # ablate-report said why above: uPlot, which the page embeds, is not installed
  say "no page: report.html needs uPlot (scripts/install-deps.sh installs it); next:" \
      "docs/tutorial.md"
fi
say "done in $((SECONDS - t0)) s (install and build $((t_build - t0)) s," \
    "sweep $((t_sweep - t_build)) s, report $((SECONDS - t_sweep)) s)"
