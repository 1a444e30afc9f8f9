#!/usr/bin/env bash
# Installs the dependencies, builds ablate, runs the quickstart sweep under mpirun into
# quickstart.h5, lists its runs and writes its report into quickstart-report/.
# Usage: scripts/quickstart.sh [RANKS]
#   ABLATE_BUILD_DIR=DIR          the build dir (build)
#   ABLATE_CONFIGURE_ONLY=1       configure the build dir and stop: no install, no build
#                                 (tests/e2e/test_scripts.py runs run-tests.sh after it)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ranks=${1:-3}
build=${ABLATE_BUILD_DIR:-build}

if [ "${ABLATE_CONFIGURE_ONLY:-0}" = 1 ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
  exit
fi
bash scripts/install-deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF
cmake --build "$build" -j"$(nproc)"

ABLATE_DATA=$(bash scripts/get-corpus.sh)
export ABLATE_DATA
echo "quickstart: corpus $ABLATE_DATA" >&2

# Open MPI refuses to start as root unless told otherwise. As root, the quickstart sets
# Open MPI's run-as-root variables for its own mpirun command only (not in your shell), and
# says so; ablate itself never sets them.
mpi_env=()
if [ "$(id -u)" -eq 0 ]; then
  echo "quickstart: running as root: setting OMPI_ALLOW_RUN_AS_ROOT=1" \
       "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 for this mpirun only" >&2
  mpi_env=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
fi
"${mpi_env[@]}" mpirun -n "$ranks" --oversubscribe "$build"/ablate run sweeps/quickstart.yaml \
  -o quickstart.h5 --force
"$build"/ablate inspect quickstart.h5

# The report: statistics over the seeds, figures and tables (docs/analysis.md).
/usr/bin/python3 analysis/ablate-report quickstart.h5 -o quickstart-report
echo "quickstart: results in $root/quickstart.h5 (docs/hdf5-schema.md)" >&2
echo "quickstart: report in $root/quickstart-report/report.md (docs/analysis.md)" >&2
