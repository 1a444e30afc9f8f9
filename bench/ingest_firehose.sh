#!/usr/bin/env bash
# Rank 0's ingest rate and memory under a firehose: many oversubscribed ranks stream events
# as fast as they can; rank 0 runs the real sweep_rank0() (scheduler, journal, view
# rebuilds). Target (issue "the sweep"): rank 0 sustains >= 1,000,000 metric values/s into
# the file, and its memory stays bounded regardless of sweep length. See
# docs/benchmarks.md, "Sweep benchmarks", and bench/ingest_firehose.c for what is counted.
#
#   bench/ingest_firehose.sh [options]
#
# For every rank count and every sweep length it prints: metric values in the file, the
# end-to-end rate (values / wall of sweep_rank0, setup and final view build included; this
# is the figure held against the target), the streaming rate (first EVENTS -> last END
# received: journal ingest), the final view build, rank 0's CPU during streaming, and rank
# 0's peak RSS (VmHWM). Then, per rank count, the peak RSS of the longest sweep against the
# shortest (bounded = grows < 10% while the events grow by the length factor).
# Exits 0 whether targets pass or fail; non-zero only if something crashed.
#
# Options (defaults in brackets):
#   --ranks LIST       MPI rank counts, comma-separated (rank 0 + workers) [8,16]
#   --runs N           runs in the sweep (seeds: N) [64]
#   --steps N          step events per run of the 1x sweep [20000]
#   --lengths LIST     sweep length multipliers of --steps [1,10]
#   --stats-every N    act events (n_layer rows with n_head entropies) every N steps [100]
#   --view-interval S  sweep_rank0's view rebuild interval, as `ablate run` [30]
#   --batch-bytes B    bytes per EVENTS message, as run_exec.c [65536]
#   --reps N           repetitions of each configuration (all printed) [1]
#   --build DIR        ablate build dir with the static libraries [build-sbench]
#   --corpus PATH      text file for the spec's data [$ABLATE_CORPUS, data/, ../shared/data/]
#   --out DIR          keep the outputs in DIR (default: a temp dir, removed)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RANKS=8,16 RUNS=64 STEPS=20000 LENGTHS=1,10 STATS_EVERY=100 VIEW_INTERVAL=30
BATCH=65536 REPS=1 BUILD="$REPO/build-sbench" CORPUS="" OUT=""
. "$REPO/bench/common.sh" # run-as-root variables, bench_opt, bench_corpus
while [ $# -gt 0 ]; do
    case "$1" in
    --ranks) RANKS="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --lengths) LENGTHS="$2"; shift 2 ;;
    --stats-every) STATS_EVERY="$2"; shift 2 ;;
    --view-interval) VIEW_INTERVAL="$2"; shift 2 ;;
    --batch-bytes) BATCH="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) bench_opt "$@"; shift "$BENCH_SHIFT" ;;
    esac
done

bench_corpus
if [ -z "$CORPUS" ] || [ ! -f "$CORPUS" ]; then
    # any text will do: rank 0 only loads it for the plan's vocabulary
    CORPUS="$(mktemp /tmp/ingest_corpus.XXXXXX.txt)"
    python3 -c 'import random; r=random.Random(1); print("\n".join(" ".join(r.choice(["the","king","and","lord","to","of","a","my"]) for _ in range(12)) for _ in range(20000)))' > "$CORPUS"
fi

if [ -n "$OUT" ]; then mkdir -p "$OUT"; WORK="$(realpath "$OUT")"; else WORK="$(mktemp -d /tmp/ingest_firehose.XXXXXX)"; trap 'rm -rf "$WORK"' EXIT; fi

# ---- build: ablate's static libraries, then the firehose program against them
build_ablate() {
    local i
    for i in 1 2 3; do
        if { [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$REPO" -B "$BUILD" -DBUILD_TESTING=OFF >/dev/null; } &&
            cmake --build "$BUILD" -j2 --target ablate_orch >/dev/null; then return 0; fi
        echo "ingest_firehose.sh: build failed (attempt $i; someone may be mid-edit), retrying in 20 s" >&2
        sleep 20
    done
    return 1
}
build_ablate
BIN="$BUILD/bench-sweep/ingest_firehose"
mkdir -p "$BUILD/bench-sweep"
# shellcheck disable=SC2046
mpicc -std=c11 -O2 -g -Wall -Wextra -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$REPO/src" \
    -o "$BIN" "$REPO/bench/ingest_firehose.c" \
    "$BUILD/libablate_orch.a" "$BUILD/libablate_worker.a" "$BUILD/libablate_model.a" \
    $(pkg-config --libs hdf5-serial yaml-0.1) -lopenblas -lm

field() { # field KEY LINE
    local kv
    for kv in $2; do [ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; return; }; done
    echo NaN
}

echo "ingest_firehose: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $RUNS runs x $STEPS steps x {$LENGTHS}, acts every $STATS_EVERY steps, ranks {$RANKS} (oversubscribed)"
printf '%5s %6s %11s %10s %9s %8s %9s %9s %9s %8s %9s  %s\n' ranks length values wall_s "Mval/s" stream_s "Mval/s" view_s cpu_strm vmhwm_MiB journal_MB target
declare -A HWM
ok=1
IFS=, read -r -a RANK_LIST <<<"$RANKS"
IFS=, read -r -a LEN_LIST <<<"$LENGTHS"
for np in "${RANK_LIST[@]}"; do
    for len in "${LEN_LIST[@]}"; do
        steps=$((STEPS * len))
        spec="$WORK/firehose_${len}x.yaml"
        cat >"$spec" <<EOF
# ingest_firehose.sh: rank 0 never trains; the synthetic workers emit one step event per
# step, n_layer act events every stats.every steps and at the end, and a final eval.
description: ingest firehose, ${RUNS} runs x ${steps} steps
data: {path: "$CORPUS", tokenizer: char, val_fraction: 0.1}
base:
  preset: micro
  train: {steps: $steps, eval_every: 0}
  stats: {every: $STATS_EVERY}
  sample: {tokens: 0}
seeds: $RUNS
EOF
        for ((rep = 1; rep <= REPS; rep++)); do
            out="$WORK/firehose_${np}_${len}x.h5"
            log="$WORK/firehose_${np}_${len}x_$rep.log"
            if ! mpirun --oversubscribe -n "$np" "$BIN" "$spec" "$out" --view-interval "$VIEW_INTERVAL" \
                --batch-bytes "$BATCH" >"$log" 2>"$log.err"; then
                echo "ingest_firehose.sh: mpirun failed (ranks $np, length ${len}x); see $log.err" >&2
                tail -5 "$log.err" >&2
                ok=0
                continue
            fi
            line="$(grep '^FIREHOSE' "$log" || true)"
            if [ -z "$line" ]; then
                echo "ingest_firehose.sh: no FIREHOSE line (ranks $np, length ${len}x); see $log" >&2
                ok=0
                continue
            fi
            rc=$(field rc "$line") values=$(field values "$line") sent=$(field sent_values "$line")
            wall=$(field wall "$line") stream=$(field stream "$line") tail_s=$(field tail "$line")
            scpu=$(field stream_cpu "$line") hwm=$(field vmhwm_kib "$line") jb=$(field journal_bytes "$line")
            rb=$(field rebuild_rc "$line")
            if [ "$rc" != 0 ] || [ "$rb" != 0 ] || [ "$values" != "$sent" ]; then
                echo "ingest_firehose.sh: sweep rc=$rc, rebuild rc=$rb, values in file $values != sent $sent" >&2
                ok=0
            fi
            rate=$(awk -v v="$values" -v w="$wall" 'BEGIN{printf "%.2f", v/w/1e6}')
            srate=$(awk -v v="$values" -v w="$stream" 'BEGIN{printf "%.2f", v/w/1e6}')
            verdict=$(awk -v r="$rate" 'BEGIN{print (r >= 1.0 ? "PASS" : "FAIL")}')
            printf '%5s %6s %11s %10.2f %9s %8.2f %9s %9.2f %9.2f %8.1f %9.0f  %s (>= 1 Mval/s end to end)\n' \
                "$np" "${len}x" "$values" "$wall" "$rate" "$stream" "$srate" "$tail_s" "$scpu" \
                "$(awk -v k="$hwm" 'BEGIN{print k/1024}')" "$(awk -v b="$jb" 'BEGIN{print b/1e6}')" "$verdict"
            prev="${HWM[$np,$len]:-0}"
            [ "$hwm" -gt "$prev" ] && HWM[$np,$len]=$hwm
            [ -n "$OUT" ] || rm -rf "$out" "$out.d"
        done
    done
done

echo
echo "rank 0 peak RSS (VmHWM) against sweep length (bounded: the longest sweep's peak < 1.10 x the shortest's):"
first="${LEN_LIST[0]}" last="${LEN_LIST[${#LEN_LIST[@]}-1]}"
for np in "${RANK_LIST[@]}"; do
    a="${HWM[$np,$first]:-}" b="${HWM[$np,$last]:-}"
    [ -n "$a" ] && [ -n "$b" ] || continue
    awk -v np="$np" -v a="$a" -v b="$b" -v f="$first" -v l="$last" 'BEGIN{
        r = b / a; printf "  %2d ranks: %.1f MiB at %sx, %.1f MiB at %sx: x%.3f  %s\n",
        np, a/1024, f, b/1024, l, r, (r < 1.10 ? "PASS" : "FAIL")}'
done
echo
echo "columns: values = metric values in the file (/steps 5 per row, /acts 7, /attn 1, /evals 2);"
echo "  wall_s = sweep_rank0() from call to return; stream_s = first EVENTS -> last END received;"
echo "  view_s = last END -> return (final journal sync + view build); cpu_strm = rank 0 CPU s during streaming"
[ "$ok" = 1 ]
