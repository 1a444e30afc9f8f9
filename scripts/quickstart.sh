#!/usr/bin/env bash
# Installs the dependencies, builds ablate and runs the quickstart sweep into
# quickstart.h5 (then lists its runs). Usage: scripts/quickstart.sh [RANKS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ranks=${1:-3}

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF
cmake --build build -j"$(nproc)"

ABLATE_DATA=$(bash scripts/get-corpus.sh)
export ABLATE_DATA
echo "quickstart: corpus $ABLATE_DATA" >&2

# Open MPI refuses to start as root unless told otherwise; ablate does not tell it so on
# your behalf. As root the quickstart trains in one process instead (same results).
if [ "$(id -u)" -eq 0 ]; then
  echo "quickstart: running as root, so without mpirun (one process); as another user it" \
       "would run: mpirun -n $ranks build/ablate run ..." >&2
  build/ablate run sweeps/quickstart.yaml -o quickstart.h5 --force
else
  mpirun -n "$ranks" --oversubscribe build/ablate run sweeps/quickstart.yaml -o quickstart.h5 --force
fi
build/ablate inspect quickstart.h5
echo "quickstart: results in $root/quickstart.h5 (see docs/hdf5-schema.md to read them)" >&2
