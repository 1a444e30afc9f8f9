#!/usr/bin/env bash
# Speed and memory of ablate's engine against an idiomatic PyTorch GPT of the same
# architecture, both on one thread of the same OpenBLAS kernels. See docs/benchmarks.md.
#
#   bench/engine_vs_torch.sh [options]
#
# For the micro preset (batch 32 x context 16, Tiny Shakespeare) and the book preset (batch
# 8 x context 128, random tokens) it prints ablate's and PyTorch's training tokens/s (median
# of interleaved runs: ablate, torch, ablate, torch, ...) and their ratio; for book also the
# sgemm-bound limit (single-core sgemm GFLOP/s / ablate's FLOPs per token) with ablate's
# fraction of it, and ablate's peak RSS against the theoretical memory. Targets are printed
# PASS/FAIL; the script exits 0 either way, non-zero only if something crashed.
#
# Options (defaults in brackets):
#   --reps N               repetitions of each side for both presets [5]
#   --micro-reps N         ... for micro only;  --book-reps N  ... for book only
#   --micro-steps N        steps per micro run, both sides [2000]
#   --micro-warmup N       untimed first micro steps, both sides [100]
#   --book-steps N         steps per ablate book run [30]
#   --book-warmup N        untimed first ablate book steps [5]
#   --torch-book-steps N   steps per torch book run [10] (a torch step takes several seconds)
#   --torch-book-warmup N  untimed first torch book steps [2]
#   --only micro|book      run one preset
#   --torch-tuned          also time torch with glibc malloc keeping freed memory (see docs)
#   --sgemm-reps N         timed sgemm calls per size [5]
#   --ablate PATH          use this binary instead of building build-bench/ablate
#   --corpus PATH          Tiny Shakespeare [$ABLATE_CORPUS, data/, ../shared/data/]
#   --out DIR              keep the raw outputs in DIR (default: a temp dir, removed)
#   --json FILE            write the figures as JSON
#
# Environment: OPENBLAS_CORETYPE is never overridden when set. When unset, ablate picks its
# core itself and the script exports that core to PyTorch and sgemm_peak so that all three
# use the same kernels. OPENBLAS_NUM_THREADS/OMP_NUM_THREADS are removed for ablate (its
# default is then 1 BLAS thread); torch gets OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 and
# torch.set_num_threads(1).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="$REPO/bench"
PY=/usr/bin/python3 # Debian's python: torch 1.13 + numpy

MICRO_REPS=5 BOOK_REPS=5
MICRO_STEPS=2000 MICRO_WARMUP=100
BOOK_STEPS=30 BOOK_WARMUP=5
TORCH_BOOK_STEPS=10 TORCH_BOOK_WARMUP=2
ONLY="" TORCH_TUNED=0 SGEMM_REPS=5
ABLATE="" CORPUS="${ABLATE_CORPUS:-}" OUT="" JSON_OUT=""
TUNED_ENV="MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=4294967296 MALLOC_TOP_PAD_=268435456"
# targets
T_MICRO=5 T_BOOK=2.5 T_SGEMM_PCT=65 T_RSS=1.5

die() { echo "engine_vs_torch: $*" >&2; exit 1; }
need_int() { [[ "$2" =~ ^[0-9]+$ ]] || die "$1 needs a non-negative integer (got '$2')"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) need_int "$1" "${2:-}"; MICRO_REPS=$2; BOOK_REPS=$2; shift 2 ;;
    --micro-reps) need_int "$1" "${2:-}"; MICRO_REPS=$2; shift 2 ;;
    --book-reps) need_int "$1" "${2:-}"; BOOK_REPS=$2; shift 2 ;;
    --micro-steps) need_int "$1" "${2:-}"; MICRO_STEPS=$2; shift 2 ;;
    --micro-warmup) need_int "$1" "${2:-}"; MICRO_WARMUP=$2; shift 2 ;;
    --book-steps) need_int "$1" "${2:-}"; BOOK_STEPS=$2; shift 2 ;;
    --book-warmup) need_int "$1" "${2:-}"; BOOK_WARMUP=$2; shift 2 ;;
    --torch-book-steps) need_int "$1" "${2:-}"; TORCH_BOOK_STEPS=$2; shift 2 ;;
    --torch-book-warmup) need_int "$1" "${2:-}"; TORCH_BOOK_WARMUP=$2; shift 2 ;;
    --only) [[ "${2:-}" =~ ^(micro|book)$ ]] || die "--only takes micro or book"; ONLY=$2; shift 2 ;;
    --torch-tuned) TORCH_TUNED=1; shift ;;
    --sgemm-reps) need_int "$1" "${2:-}"; SGEMM_REPS=$2; shift 2 ;;
    --ablate) ABLATE=${2:?}; shift 2 ;;
    --corpus) CORPUS=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    --json) JSON_OUT=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for pair in "$MICRO_WARMUP:$MICRO_STEPS" "$BOOK_WARMUP:$BOOK_STEPS" "$TORCH_BOOK_WARMUP:$TORCH_BOOK_STEPS"; do
  [ "${pair%%:*}" -lt "${pair##*:}" ] || die "each warm-up must be smaller than its step count ($pair)"
done
run_micro=1 run_book=1
[ "$ONLY" = book ] && run_micro=0
[ "$ONLY" = micro ] && run_book=0
[ "$MICRO_REPS" -ge 1 ] || run_micro=0
[ "$BOOK_REPS" -ge 1 ] || run_book=0

[ -x "$PY" ] || die "$PY not found (Debian's python3 with torch and numpy)"
"$PY" -c 'import torch, numpy' 2>/dev/null || die "$PY cannot import torch and numpy"
T0=$SECONDS
say() { printf '[%4ds] %s\n' $((SECONDS - T0)) "$*"; }
note_load() { cut -d' ' -f1 /proc/loadavg >>"$RUN/load.txt"; }

# ---------------------------------------------------------------- ablate binary
if [ -z "$ABLATE" ]; then
  ABLATE="$REPO/build-bench/ablate"
  say "building $ABLATE"
  log=$(mktemp)
  if ! { cmake -S "$REPO" -B "$REPO/build-bench" -DBUILD_TESTING=OFF >"$log" 2>&1 &&
         cmake --build "$REPO/build-bench" -j2 --target ablate >>"$log" 2>&1; }; then
    tail -20 "$log" >&2
    rm -f "$log"
    [ -x "$ABLATE" ] || die "build failed"
    say "WARNING: the build failed (someone's work in progress?); timing the existing $ABLATE"
  fi
  rm -f "$log"
fi
[ -x "$ABLATE" ] || die "no ablate binary at $ABLATE"

# ---------------------------------------------------------------- data, run directory
if [ -z "$CORPUS" ]; then
  for c in "$REPO/data/tinyshakespeare.txt" "$REPO/../shared/data/tinyshakespeare.txt"; do
    if [ -s "$c" ]; then CORPUS=$c; break; fi
  done
fi
if [ "$run_micro" = 1 ]; then
  if [ -z "$CORPUS" ] || [ ! -s "$CORPUS" ]; then die "no Tiny Shakespeare found; pass --corpus PATH"; fi
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/engine_vs_torch.XXXXXX")
cleanup() { rm -rf "$TMP"; }
trap cleanup EXIT
if [ -n "$OUT" ]; then
  mkdir -p "$OUT"
  RUN="$(cd "$OUT" && pwd)"
  # results of an earlier run there would be counted with these
  rm -f "$RUN"/micro.ablate.* "$RUN"/micro.torch.* "$RUN"/book.ablate.* "$RUN"/book.torch.* \
        "$RUN"/book.torchtuned.* "$RUN"/sgemm.*.json "$RUN/meta.json" "$RUN/load.txt"
else
  RUN="$TMP/run"
  mkdir -p "$RUN"
fi

BOOK_BIN="$TMP/book.bin"
if [ "$run_book" = 1 ]; then
  # llm.c .bin: 256 int32 header (magic 20240520, version 1, n_tokens), then uint16 tokens
  "$PY" - "$BOOK_BIN" <<'EOF'
import sys, numpy as np
n = 1 << 20
h = np.zeros(256, np.int32); h[:3] = (20240520, 1, n)
t = np.random.default_rng(20240520).integers(0, 50257, n, dtype=np.uint16)
with open(sys.argv[1], "wb") as f:
    h.tofile(f); t.tofile(f)
EOF
fi

# ---------------------------------------------------------------- BLAS core and threads
ablate_env=(env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS)
torch_env=(env -u OPENBLAS_NUM_THREADS OMP_NUM_THREADS=1 MKL_NUM_THREADS=1)
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  CORE_NOTE="$OPENBLAS_CORETYPE (set in the environment; left as is for all sides)"
else
  probe="$TMP/probe.jsonl"
  spec="$BENCH/specs/micro.yaml" data="$CORPUS"
  if [ "$run_micro" = 0 ]; then spec="$BENCH/specs/book.yaml" data="$BOOK_BIN"; fi
  "${ablate_env[@]}" "$ABLATE" train "$spec" --set "data.path=$data" --set train.steps=1 --json >"$probe" ||
    die "ablate probe run failed"
  core=$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["blas_core"])' "$probe")
  export OPENBLAS_CORETYPE="$core"
  CORE_NOTE="$core (unset in the environment; ablate picked $core, exported to torch and sgemm_peak)"
fi
say "OPENBLAS_CORETYPE: $CORE_NOTE"

# ---------------------------------------------------------------- sgemm_peak
SGEMM="$TMP/sgemm_peak"
cflags=$(pkg-config --cflags openblas 2>/dev/null || echo "-I/usr/include/x86_64-linux-gnu/openblas-pthread")
libs=$(pkg-config --libs openblas 2>/dev/null || echo "-lopenblas")
# shellcheck disable=SC2086
cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -I"$REPO/src" -o "$SGEMM" "$BENCH/sgemm_peak.c" "$BENCH/gemm_timing.c" \
  "$REPO/src/model/gemm.c" "$REPO/src/model/gemm_small.c" "$REPO/src/model/par.c" $cflags $libs -pthread -lm \
  || die "cannot compile bench/sgemm_peak.c"
sgemm() { env -u OPENBLAS_NUM_THREADS "$SGEMM" --reps "$SGEMM_REPS" "$@"; }
# gemm_alone ABLATE_JSONL OUT [sgemm_peak args]: ablate's GEMM calls of one step (from the
# run's start event), timed alone by sgemm_peak into OUT
gemm_alone() {
  "$PY" "$BENCH/bench_report.py" --shapes "$1" >"$TMP/shapes.txt"
  sgemm "${@:3}" --shapes "$TMP/shapes.txt" >"$2" || die "sgemm_peak failed"
  cat "$2"
}
if [ "$run_book" = 1 ]; then
  say "sgemm peak (single thread)"
  sgemm >"$RUN/sgemm.1.json" || die "sgemm_peak failed"
  cat "$RUN/sgemm.1.json"
fi

# ---------------------------------------------------------------- meta
if [ -x /usr/bin/time ]; then RSS_METHOD="/usr/bin/time -f %M"; else RSS_METHOD="VmHWM polled from /proc"; fi
write_meta() {
  EVT_DATE="$(date -u +%Y-%m-%dT%H:%MZ)" EVT_VERSION="$("$ABLATE" --version 2>&1 | head -1)" \
  EVT_CORE="$CORE_NOTE" EVT_RSS="$RSS_METHOD" EVT_TUNED="$TUNED_ENV" EVT_CMD="$0 $*" \
  "$PY" - "$RUN/meta.json" <<EOF
import json, os, platform, sys, torch
e = os.environ
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
meta = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else {}
meta.update({
    "date": meta.get("date") or e["EVT_DATE"],
    "cpu": cpu, "nproc": os.cpu_count(), "kernel": platform.release(),
    "ablate_version": e["EVT_VERSION"], "torch_version": torch.__version__,
    "coretype_env": e["EVT_CORE"],
    "targets": {"micro_ratio": $T_MICRO, "book_ratio": $T_BOOK, "book_sgemm_pct": $T_SGEMM_PCT, "rss_ratio": $T_RSS},
    "micro": {"ablate_warmup": $MICRO_WARMUP, "ablate_steps": $MICRO_STEPS, "torch_warmup": $MICRO_WARMUP, "torch_steps": $MICRO_STEPS},
    "book": {"ablate_warmup": $BOOK_WARMUP, "ablate_steps": $BOOK_STEPS, "torch_warmup": $TORCH_BOOK_WARMUP, "torch_steps": $TORCH_BOOK_STEPS},
    "rss_method": e["EVT_RSS"], "tuned_env": e["EVT_TUNED"], "command": e["EVT_CMD"],
})
meta.setdefault("load_before", open("/proc/loadavg").read().split()[0])
meta["load_after"] = open("/proc/loadavg").read().split()[0]
json.dump(meta, open(sys.argv[1], "w"), indent=1)
EOF
}
write_meta "$@"

# ---------------------------------------------------------------- runs
fail_run() { echo "---- $1 failed; last lines of its stderr:" >&2; tail -20 "$2" >&2; exit 1; }

# ablate_run PRESET DATA STEPS OUTFILE [RSSFILE]
ablate_run() {
  local preset=$1 data=$2 steps=$3 out=$4 rss=${5:-} err="$TMP/ablate.err"
  local cmd=("${ablate_env[@]}" "$ABLATE" train "$BENCH/specs/$preset.yaml" --set "data.path=$data"
             --set "train.steps=$steps" --json)
  if [ -z "$rss" ]; then
    "${cmd[@]}" >"$out" 2>"$err" || fail_run "ablate $preset" "$err"
  elif [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M -o "$rss" "${cmd[@]}" >"$out" 2>"$err" || fail_run "ablate $preset" "$err"
  else
    "${cmd[@]}" >"$out" 2>"$err" &
    local pid=$! hwm=0 v
    while kill -0 "$pid" 2>/dev/null; do
      v=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
      [ -n "$v" ] && hwm=$v
      sleep 0.2
    done
    wait "$pid" || fail_run "ablate $preset" "$err"
    echo "$hwm" >"$rss"
  fi
}

# torch_run PRESET DATA TOKENIZER BATCH STEPS WARMUP OUTFILE [tuned]
torch_run() {
  local err="$TMP/torch.err" envs=("${torch_env[@]}")
  # shellcheck disable=SC2206
  if [ "${8:-}" = tuned ]; then envs+=($TUNED_ENV); fi
  "${envs[@]}" "$PY" "$BENCH/torch_gpt_bench.py" --preset "$1" --data "$2" --tokenizer "$3" \
    --batch "$4" --steps "$5" --warmup "$6" >"$7" 2>"$err" || fail_run "torch $1" "$err"
}

tps_ablate() { "$PY" -c 'import json,sys
ev=[json.loads(l) for l in open(sys.argv[1])]
st={e["step"]:e for e in ev if e["event"]=="step"}; n=max(st); k=int(sys.argv[2])
t0,k0=(st[k]["time"],st[k]["tokens"]) if k in st else (0.0,0)
print(format((st[n]["tokens"]-k0)/(st[n]["time"]-t0), ",.0f"))' "$1" "$2" 2>/dev/null || echo "?"; }
tps_torch() { "$PY" -c 'import json,sys; print(format(json.load(open(sys.argv[1]))["tokens_per_s"], ",.0f"))' "$1"; }

if [ "$run_micro" = 1 ]; then
  for i in $(seq 1 "$MICRO_REPS"); do
    ablate_run micro "$CORPUS" "$MICRO_STEPS" "$RUN/micro.ablate.$i.jsonl"
    say "micro $i/$MICRO_REPS ablate $(tps_ablate "$RUN/micro.ablate.$i.jsonl" "$MICRO_WARMUP") tokens/s"
    torch_run micro "$CORPUS" char 32 "$MICRO_STEPS" "$MICRO_WARMUP" "$RUN/micro.torch.$i.json"
    say "micro $i/$MICRO_REPS torch  $(tps_torch "$RUN/micro.torch.$i.json") tokens/s"
    note_load
  done
  # ablate's GEMM calls of one micro step, timed alone in OpenBLAS (sgemm_peak; ablate runs
  # products this small in its own kernel: bench/engine_limit.sh times those)
  say "ablate's micro GEMM shapes, alone"
  gemm_alone "$RUN/micro.ablate.1.jsonl" "$RUN/micro_gemm.json" --sizes 256 --reps 200
fi

if [ "$run_book" = 1 ]; then
  for i in $(seq 1 "$BOOK_REPS"); do
    ablate_run book "$BOOK_BIN" "$BOOK_STEPS" "$RUN/book.ablate.$i.jsonl" "$RUN/book.ablate.$i.rss"
    say "book $i/$BOOK_REPS ablate $(tps_ablate "$RUN/book.ablate.$i.jsonl" "$BOOK_WARMUP") tokens/s, peak RSS $(tail -1 "$RUN/book.ablate.$i.rss") KiB"
    torch_run book "$BOOK_BIN" tokens 8 "$TORCH_BOOK_STEPS" "$TORCH_BOOK_WARMUP" "$RUN/book.torch.$i.json"
    say "book $i/$BOOK_REPS torch  $(tps_torch "$RUN/book.torch.$i.json") tokens/s"
    if [ "$TORCH_TUNED" = 1 ]; then
      torch_run book "$BOOK_BIN" tokens 8 "$TORCH_BOOK_STEPS" "$TORCH_BOOK_WARMUP" "$RUN/book.torchtuned.$i.json" tuned
      say "book $i/$BOOK_REPS torch* $(tps_torch "$RUN/book.torchtuned.$i.json") tokens/s (malloc tuned)"
    fi
    note_load
  done
  # again after the runs (the best of both counts), plus ablate's own GEMM calls of one step
  say "sgemm peak again, and ablate's GEMM shapes"
  gemm_alone "$RUN/book.ablate.1.jsonl" "$RUN/sgemm.2.json"
fi

write_meta "$@"
report_args=("$RUN")
[ -n "$JSON_OUT" ] && report_args+=(--json "$JSON_OUT")
"$PY" "$BENCH/bench_report.py" "${report_args[@]}" || die "report failed"
say "done"
