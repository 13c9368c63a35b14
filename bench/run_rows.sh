#!/usr/bin/env bash
# Softmax and layernorm, einjit (bench_rows) and PyTorch's CPU autograd (rows_torch.py),
# alternated round by round so that both see the same load on this shared machine; then the
# table of medians and ratios for bench/RESULTS.md (summarize_rows.py).
#   bench/run_rows.sh [BUILD_DIR] [ROUNDS] [PYTHON]   (PYTHON: one with torch installed)
#   environment: ROWS_FILTER (a Google Benchmark filter, default every case),
#                ROWS_DTYPES (default f32,f64), ROWS_THREADS (default 1,2),
#                ROWS_BASE (another bench_rows, e.g. the branch point's: run in each round too,
#                its medians in a column of their own),
#                ROWS_CPU_TIME=1 (CPU time on both sides instead of wall time: one thread only,
#                e.g. under `taskset -c 0` on a loaded machine)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
rounds="${2:-5}"
python="${3:-python3}"
out="$build/bench-results/rows"
rm -rf "$out" && mkdir -p "$out"
for ((r = 0; r < rounds; ++r)); do
  "$build/bench/bench_rows" --benchmark_filter="${ROWS_FILTER:-BM_Rows}" \
    --benchmark_min_time=0.3 --benchmark_out="$out/einjit-$r.json" \
    --benchmark_out_format=json >/dev/null 2>"$out/einjit-$r.log"
  if [ -n "${ROWS_BASE:-}" ]; then
    "$ROWS_BASE" --benchmark_filter="${ROWS_FILTER:-BM_Rows}" \
      --benchmark_min_time=0.3 --benchmark_out="$out/base-$r.json" \
      --benchmark_out_format=json >/dev/null 2>"$out/base-$r.log"
  fi
  "$python" "$root/bench/rows_torch.py" --reps 10 --dtypes "${ROWS_DTYPES:-f32,f64}" \
    --threads "${ROWS_THREADS:-1,2}" $([ "${ROWS_CPU_TIME:-0}" = 1 ] && echo --cpu-time) >"$out/torch-$r.jsonl"
done
python3 "$root/bench/summarize_rows.py" "$out"
