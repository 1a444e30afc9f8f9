#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs the dependencies, builds Release and runs
# every test, then builds with ASan+UBSan (build type Sanitize) and runs the C unit tests,
# the PyTorch reference and the end-to-end sweep tests again.
# Usage: scripts/run-tests.sh [extra ctest args]
# Each pass configures its build dir with BUILD_TESTING=ON itself (scripts/quickstart.sh
# leaves build/ with BUILD_TESTING=OFF, and a reused cache would register no test), and
# every ctest call fails when it runs no test (--no-tests=error): a pass that tested
# nothing is a failure, not a green line.
#   ABLATE_BUILD_DIR=DIR      the Release build dir (build)
#   ABLATE_TESTS_LIST_ONLY=1  configure the Release build dir, list its tests (ctest -N,
#                             same filters, same --no-tests=error) and stop: no install,
#                             no build, no test run (the check tests/e2e/test_scripts.py makes)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc)
build=${ABLATE_BUILD_DIR:-build}

if [ "${ABLATE_TESTS_LIST_ONLY:-0}" = 1 ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON -DABLATE_ARCH=native -DABLATE_WERROR=ON >/dev/null
  # ctest -N ignores --no-tests=error: the same refusal of an empty pass, by hand
  listing=$(cd "$build" && ctest -N "$@")
  echo "$listing"
  if ! grep -Eq '^Total Tests: [1-9]' <<<"$listing"; then
    echo "run-tests: no test registered in $build (BUILD_TESTING off, or the filter matches none)" >&2
    exit 8
  fi
  exit 0
fi

bash scripts/install-deps.sh

# CI builds for this machine's CPU (the bit-exact goldens, tests/golden/train_bits.txt, were
# recorded with -march=native builds) and treats warnings as errors; an install's default is
# the portable x86-64-v3 and no -Werror (docs/site.md)
ci_opts=(-DABLATE_ARCH=native -DABLATE_WERROR=ON)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON "${ci_opts[@]}"
cmake --build "$build" -j"$jobs"
# Each pass runs as many tests at a time as the machine has cores: every test waits for the
# states it needs (a line in a log, a checkpoint on disk), never for a time, so a loaded core
# slows a test down without changing what it checks.
(cd "$build" && ctest --output-on-failure --no-tests=error --timeout 900 -j"$jobs" "$@")

cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Sanitize -DBUILD_TESTING=ON "${ci_opts[@]}"
cmake --build build-sanitize -j"$jobs"
# Leaks are checked in the unit tests, which do not start MPI; Open MPI's own allocations at
# exit are not ours to police, so the PyTorch reference's C side and every sweep test (MPI
# ranks, kill -9 and resume, checkpoints, SIGTERM, CLI errors, failed runs, the HDF5 view)
# run with ASan+UBSan but without the leak checker. allocator_may_return_null: the
# failed-run test asks for a model no machine can allocate and expects ablate's own error,
# not ASan's abort.
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure --no-tests=error --timeout 900 -j"$jobs" -L unit "$@")
# e2e_slurm is left to the Release pass: what it adds over the other sweep tests is the
# batch scripts' logic, which the sanitizers do not see.
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
   UBSAN_OPTIONS=print_stacktrace=1 OMPI_MCA_orte_base_help_aggregate=0 \
   ctest --output-on-failure --no-tests=error --timeout 900 -j"$jobs" -R '^(reference_torch|e2e_.*)$' -E '^e2e_slurm$' "$@")
