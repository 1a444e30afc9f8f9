#!/usr/bin/env bash
# Dispatch efficiency of `ablate run`: a sweep of many short runs on W workers should finish
# within 5% of (sum of run times) / W (issue "the sweep"). See docs/benchmarks.md, "Sweep
# benchmarks", and bench/sweep_dispatch.py for the method.
#
#   bench/sweep_dispatch.sh [options]
#
# Runs an unmodified `ablate run` of many short micro runs (Tiny Shakespeare) with
# mpirun -n W+1 --oversubscribe for each W, with bench/sweep_timeshim.c preloaded to
# timestamp every ASSIGN and END. Prints, per W: runs, sum of run times, ideal = sum / W,
# actual wall (mpirun launch -> exit), efficiency = ideal / actual, PASS if actual <= 1.05 x
# ideal, and where the rest went (startup, gaps between runs, tail, rank 0's CPU).
# Exits 0 whether the target passes or fails; non-zero only if something crashed.
#
# Options (defaults in brackets):
#   --workers LIST       worker counts W, comma-separated [1,2] (2 cores: 2 is the max)
#   --runs N             runs in the sweep (seeds: N) [40]
#   --steps N            micro training steps per run (batch 32 x context 16) [500]
#   --eval-tokens N      tokens of the final evaluation [4096]
#   --sample-tokens N    tokens of each of the 2 final samples [32]
#   --reps N             repetitions of the whole set [1]
#   --view-interval S    passed to ablate run (default: ablate's own, 30 s)
#   --ablate PATH        use this ablate binary (default: build build-sbench/ablate)
#   --build DIR          ablate build dir [build-sbench]
#   --corpus PATH        Tiny Shakespeare [$ABLATE_CORPUS, data/, ../shared/data/]
#   --out DIR            keep the sweeps' outputs and logs in DIR (default: temp, removed)
#   --join K             instead: the same sweep as one MPI job of K workers (mpirun -n K+1)
#                        and as K joined in-process `ablate run --join` processes started
#                        together, --reps times each, alternating which goes first; prints
#                        both efficiencies, their medians and the ratio joined / MPI
#                        (bench/join_timeshim.c timestamps the joined processes' claims)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$REPO/build-sbench" ABLATE="" CORPUS="" PYARGS=()
. "$REPO/bench/common.sh" # run-as-root variables, bench_opt, bench_corpus
while [ $# -gt 0 ]; do
    case "$1" in
    --workers|--runs|--steps|--eval-tokens|--sample-tokens|--reps|--view-interval|--out|--join)
        PYARGS+=("$1" "$2"); shift 2 ;;
    --ablate) ABLATE="$(realpath "$2")"; shift 2 ;;
    *) bench_opt "$@"; shift "$BENCH_SHIFT" ;;
    esac
done

bench_corpus
TMP_CORPUS=""
if [ -z "$CORPUS" ] || [ ! -f "$CORPUS" ]; then
    # no Tiny Shakespeare: ~1 MB of generated play-like text (char tokenizer, similar vocab)
    TMP_CORPUS="$(mktemp /tmp/sweep_corpus.XXXXXX.txt)"
    CORPUS="$TMP_CORPUS"
    python3 - "$CORPUS" <<'EOF'
import random, sys
r = random.Random(1)
words = "the king and my lord to of a that is in you it not with be his your this but have thou thy".split()
with open(sys.argv[1], "w") as f:
    for i in range(25000):
        who = r.choice(["ROMEO", "JULIET", "KING", "QUEEN", "DUKE"])
        line = " ".join(r.choice(words) for _ in range(r.randint(4, 12)))
        f.write(f"{who}:\n{line.capitalize()}{r.choice('.,;!?')}\n\n")
EOF
fi
trap '[ -z "$TMP_CORPUS" ] || rm -f "$TMP_CORPUS"' EXIT

if [ -z "$ABLATE" ]; then
    ok=0
    for i in 1 2 3; do
        if { [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$REPO" -B "$BUILD" -DBUILD_TESTING=OFF >/dev/null; } &&
            cmake --build "$BUILD" -j2 --target ablate >/dev/null; then ok=1; break; fi
        echo "sweep_dispatch.sh: build failed (attempt $i; someone may be mid-edit), retrying in 20 s" >&2
        sleep 20
    done
    [ "$ok" = 1 ] || exit 1
    ABLATE="$BUILD/ablate"
fi
mkdir -p "$BUILD/bench-sweep"
SHIM="$BUILD/bench-sweep/libsweep_timeshim.so"
mpicc -std=c11 -O2 -Wall -Wextra -shared -fPIC -I"$REPO/src" -o "$SHIM" "$REPO/bench/sweep_timeshim.c"
JOIN_SHIM="$BUILD/bench-sweep/libjoin_timeshim.so"
cc -std=c11 -O2 -Wall -Wextra -shared -fPIC -o "$JOIN_SHIM" "$REPO/bench/join_timeshim.c" -ldl

PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3 # Debian's python has h5py (for train_seconds)
"$PY" "$REPO/bench/sweep_dispatch.py" --ablate "$ABLATE" --shim "$SHIM" --join-shim "$JOIN_SHIM" \
    --corpus "$CORPUS" "${PYARGS[@]}"
