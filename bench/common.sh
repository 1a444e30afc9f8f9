# Sourced by the bench scripts after their options are parsed (REPO set, CORPUS possibly set).
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
