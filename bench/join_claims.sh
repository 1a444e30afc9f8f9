#!/usr/bin/env bash
# The cost of claiming runs when processes joined on one sweep (`ablate run --join`) compete
# for them (issue "Clusters", Bench): runs/s claimed and marked done by 16 processes on one
# directory against 1 process measured in the same run, fresh claims and takeovers of a
# dead process's runs, and a check that every run was claimed exactly once (exit 1 if not).
# See bench/join_claims.c for what is measured; results in docs/benchmarks.md.
#
#   bench/join_claims.sh [--dir DIR] [--runs N] [--procs P] [--reps R] [--dead-share S] [--build DIR]
#
#   --dir DIR         where the claims are written [a new directory under ${TMPDIR:-/tmp}];
#                     give a directory on the shared file system (e.g. an NFS mount) to
#                     measure it there; a temporary directory is made inside it and removed
#   --runs N          runs in the synthetic plan [20000]
#   --procs P         competing processes [16]
#   --reps R          repetitions of the four scenarios, interleaved [3]
#   --dead-share S    share of the runs held by a dead process in the takeover scenarios [0.5]
#   --build DIR       ablate's build directory [build]
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$REPO/build" PARENT="${TMPDIR:-/tmp}" ARGS=()
. "$REPO/bench/common.sh" # run-as-root variables, bench_opt, bench_corpus
while [ $# -gt 0 ]; do
    case "$1" in
    --dir) PARENT="$2"; shift 2 ;;
    --runs) ARGS+=(-n "$2"); shift 2 ;;
    --procs) ARGS+=(-p "$2"); shift 2 ;;
    --reps) ARGS+=(-r "$2"); shift 2 ;;
    --dead-share) ARGS+=(-t "$2"); shift 2 ;;
    *) bench_opt "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
WORK="$(mktemp -d "$PARENT/join_claims.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
BIN="$BUILD/bench-join/join_claims"
"$REPO/bench/build_c_bench.sh" "$BUILD" "$REPO/bench/join_claims.c" "$BIN"
echo "join_claims: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); claims in a" \
    "$(stat -f -c %T "$WORK") file system ($(df -P "$WORK" | awk 'NR==2 {print $1}'))"
"$BIN" "$WORK" "${ARGS[@]}"
