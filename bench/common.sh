# Sourced by the bench scripts before they parse their options (REPO set).
# Open MPI refuses to run as root without these; CI and the benchmark machines run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# bench_corpus: CORPUS becomes the first text that exists of --corpus, $ABLATE_CORPUS, the
# checkout's data/tinyshakespeare.txt (scripts/get-corpus.sh) and a shared copy beside the
# checkout; it stays as it was (empty or missing) when none does, for the script to decide.
bench_corpus() {
    local c
    for c in "$CORPUS" "${ABLATE_CORPUS:-}" "$REPO/data/tinyshakespeare.txt" \
        "$REPO/../shared/data/tinyshakespeare.txt"; do
        if [ -n "$c" ] && [ -f "$c" ]; then CORPUS="$(realpath "$c")"; return 0; fi
    done
    return 0
}

# bench_opt ARGS...: the options every bench script shares, for the `*)` arm of its own
# option loop: --build DIR, --corpus PATH, -h/--help (the script's header comment), and the
# one-line error for an unknown option. Sets BENCH_SHIFT to the arguments it used.
bench_opt() {
    case "$1" in
    --build) BUILD="$(realpath -m "$2")"; BENCH_SHIFT=2 ;;
    --corpus) CORPUS="$2"; BENCH_SHIFT=2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "$(basename "$0"): unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
}

# bench_ablate_setup: for the benches that run an unmodified `ablate run`: a corpus that
# exists (else a one-line error), and ablate built in BUILD (configured Release if new).
bench_ablate_setup() {
    bench_corpus
    [ -f "$CORPUS" ] || { echo "$(basename "$0"): no corpus (--corpus PATH)" >&2; exit 2; }
    [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" -j2 --target ablate >/dev/null
}

# bench_tiny_spec FILE N WHAT: a spec of N tiny runs (micro preset, 1 step, batch 1, a
# 16-token eval, no statistics or samples) on $CORPUS, for the benches of rank 0's cost per
# run (resume_time, rank0_memory, join_syscalls): training takes ~1 ms, so what is measured
# is the sweep around it.
bench_tiny_spec() {
    cat >"$1" <<YAML
description: $3 ($2 tiny runs)
data: {path: "$CORPUS", tokenizer: char, val_fraction: 0.1}
base:
  preset: micro
  train: {steps: 1, batch_size: 1, eval_tokens: 16, log_every: 1}
  stats: {every: 0}
  sample: {tokens: 0}
seeds: $2
YAML
}

# bench_c_program NAME ARGS...: builds bench/NAME.c against ablate's static libraries
# (bench/build_c_bench.sh, in $BUILD, build-bench by default), prints the date, CPU, load
# and commit, and runs it with ARGS.
bench_c_program() {
    local name="$1" build="${BUILD:-$REPO/build-bench}"
    shift
    "$REPO/bench/build_c_bench.sh" "$build" "$REPO/bench/$name.c" "$build/bench-engine/$name"
    echo "$name: $(date -u +%Y-%m-%dT%H:%MZ), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
    "$build/bench-engine/$name" "$@"
}
