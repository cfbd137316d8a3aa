#!/usr/bin/env bash
# benchmarks/gpu.sh: pddkit on one GPU with random-init models of real shapes, bf16
# (Llama-3.2-1B: 16 x 2048, 32/8 heads, vocabulary 128,256, tied head; Llama-3.1-8B:
# 32 x 4096, 32/8 heads, 128,256), nothing downloaded (configs in benchmarks/stats_pass.py,
# texts random token ids):
#   stats-SHAPE  : the statistics pass against a bare forward (logits) on the same batches,
#                  tokens/s and peak GPU memory of each (benchmarks/stats_pass.py)
#   prefix-SHAPE : recall / conrecall's shared-prefix key/value path against the plain pass
#                  over prefix + text, time, peak memory, largest score difference
#   infill-SHAPE : infill's per-text key/value path against every variant run whole
#                  (both: benchmarks/kv_paths.py, with a float32 reference on a few texts)
# Each variant runs in its own process (its peak memory its own), each step under its own
# time limit (the sum 320 s, so one call of 10 minutes holds it with room for a rerun in a
# 15-minute device budget; not yet run on a card); the 1B steps run first. A failed step is
# named and the rest go on. The sizes, from docs/performance.md's H200 figures (statistics
# pass: pythia-1.4b 97k tok/s, llama-7b 31k): taking 1B at >= 50k tok/s and 8B at >= 20k
# tok/s (the larger vocabulary and MLP), the 8B statistics step runs 2 x 131k tokens
# (~13 s), its prefix step ~165k + 33k tokens, its infill step ~143k tokens whole and ~15k
# in windows, each process ~15-20 s of start-up, import and random init.
#
#   OUT=/some/folder bash benchmarks/gpu.sh      # on a GPU machine; OUT: a new temp folder if unset
#   OUT=/some/folder bash benchmarks/gpu.sh --smoke   # (or GPU_SMOKE=1) the same code paths on
#                                                     # the CPU, tiny shapes, well under a minute
# Writes three files to OUT (a device machine sends back at most 8): gpu.json (every step's
# figures, command, exit status and time), gpu.md (the tables: card, torch and transformers
# versions, date) and gpu-logs.txt (every step's output). The steps' own files go to a
# temporary folder. PYTHON: the interpreter (python3, the one holding PyTorch there).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
SMOKE=${GPU_SMOKE:-0}
case "${1:-}" in
  "") ;;
  --smoke) SMOKE=1 ;;
  *) echo "usage: OUT=folder bash benchmarks/gpu.sh [--smoke]  (not: $*)" >&2; exit 2 ;;
esac
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/pddkit-gpu.XXXXXX")}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pddkit-gpu-steps.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT" "$WORK/logs"
: > "$WORK/steps.tsv"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PDDKIT_PROGRESS=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # nothing is downloaded: configs only
cd "$ROOT" || exit 1

if [ "$SMOKE" = 1 ]; then
  SHAPES="tiny-llama"
  RUN=(--device cpu --dtype float32 --threads 1)
  STATS=(--texts 32 --batch-size 8 --min-tokens 24 --max-tokens 40)
  PREFIX=(--texts 16 --prefix-tokens 64 --min-tokens 24 --max-tokens 40 --batch-size 8
          --reference-texts 2)
  INFILL=(--texts 4 --min-tokens 16 --max-tokens 24 --batch-size 8 --reference-texts 2)
  limit() { echo 120; }
else
  if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"; then
    echo "benchmarks/gpu.sh: $PY has no torch, or torch sees no CUDA device here; run it on a GPU machine (PYTHON: an interpreter with torch), or with --smoke on a CPU" >&2
    exit 2
  fi
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$WORK/logs/nvidia-smi.log" 2>&1
  SHAPES="llama-3.2-1b llama-3.1-8b"
  RUN=(--device cuda --dtype bfloat16 --threads 4)
  STATS_1B=(--texts 512 --batch-size 32 --min-tokens 480 --max-tokens 544)   # ~262,000 tokens
  STATS_8B=(--texts 256 --batch-size 32 --min-tokens 480 --max-tokens 544)   # ~131,000 tokens
  # 128 texts of ~256 tokens after a 1,024-token prefix (7 shots of ~146 tokens)
  PREFIX=(--texts 128 --prefix-tokens 1024 --min-tokens 224 --max-tokens 288 --batch-size 32
          --reference-texts 4)
  # 16 paragraphs of ~128 tokens: ~2,000 variants, ~143,000 tokens run whole
  # (float32 reference: one text, its ~130 variants whole, ~9,000 tokens)
  INFILL=(--texts 16 --min-tokens 112 --max-tokens 144 --batch-size 32 --reference-texts 1)
  limit() {  # seconds for step $1 on shape $2 (sum 320 with the summary's 15): the device
    # budget of 15 minutes also pays the machine's start and must leave room for a rerun
    case "$1-$2" in
      stats-llama-3.2-1b) echo 45 ;; stats-*) echo 65 ;;
      *-llama-3.2-1b) echo 40 ;; prefix-*) echo 55 ;; *) echo 60 ;;
    esac
  }
fi

step() {  # step NAME LIMIT ARGS...: runs ARGS under the limit, records exit status and wall time
  local name=$1 lim=$2; shift 2
  local t0=$SECONDS
  echo "== $name (limit ${lim} s): $*"
  timeout -k 10 "$lim" "$@" > "$WORK/logs/$name.log" 2>&1
  local rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" "$*" >> "$WORK/steps.tsv"
  if [ "$rc" = 0 ]; then cat "$WORK/logs/$name.log"; else
    echo "!! $name failed (exit $rc$([ "$rc" = 124 ] && echo ': over its time limit')); last lines:"
    tail -n 15 "$WORK/logs/$name.log"
  fi
}

for shape in $SHAPES; do
  if [ "$SMOKE" = 1 ]; then S=("${STATS[@]}"); elif [ "$shape" = llama-3.2-1b ]; then
    S=("${STATS_1B[@]}"); else S=("${STATS_8B[@]}"); fi
  step "stats-$shape" "$(limit stats "$shape")" "$PY" benchmarks/stats_pass.py --shape "$shape" \
    "${RUN[@]}" "${S[@]}" --naive-texts 0 --repeats 1 --json "$WORK/stats-$shape.json"
  step "prefix-$shape" "$(limit prefix "$shape")" "$PY" benchmarks/kv_paths.py --path prefix \
    --shape "$shape" "${RUN[@]}" "${PREFIX[@]}" --json "$WORK/prefix-$shape.json"
  step "infill-$shape" "$(limit infill "$shape")" "$PY" benchmarks/kv_paths.py --path infill \
    --shape "$shape" "${RUN[@]}" "${INFILL[@]}" --json "$WORK/infill-$shape.json"
done

summary=()
[ "$SMOKE" = 1 ] && summary=(--smoke)
for log in "$WORK"/logs/*.log; do echo "===== $(basename "$log" .log)"; cat "$log"; done \
  > "$OUT/gpu-logs.txt"
timeout 15 "$PY" benchmarks/gpu_summary.py --steps "$WORK" --out "$OUT" ${summary[@]+"${summary[@]}"}
echo "figures: $OUT/gpu.json, $OUT/gpu.md, logs: $OUT/gpu-logs.txt (total ${SECONDS} s)"
# exit status: 0 when every step gave its figures
awk -F'\t' '$2 != 0 {bad = 1} END {exit bad}' "$WORK/steps.tsv"
