#!/usr/bin/env bash
# The layer cases of bench_cpu (Linear, the distance layer, conv2d passes and layers, 3x3 and
# 1x1, f32 and f64, the permuted contraction in f32 and f64) against PyTorch's CPU kernels and
# autograd (layers_torch.py), 1 and 2 threads,
# alternated round by round so that both see the same load on this shared machine; then the
# table of medians and ratios for bench/RESULTS.md (summarize_layers.py). One thread: einjit
# under `taskset -c 0` (oneTBB follows the affinity), PyTorch with torch.set_num_threads(1).
#   bench/run_layers.sh [BUILD_DIR] [ROUNDS] [PYTHON]   (PYTHON: one with torch installed)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
rounds="${2:-3}"
python="${3:-python3}"
out="$build/bench-results/layers"
rm -rf "$out" && mkdir -p "$out"
filter='BM_(Linear|Distance|Conv|ConvPass|Permuted|F64Permuted)_einjit'
for ((r = 0; r < rounds; ++r)); do
  "$build/bench/bench_cpu" --benchmark_filter="$filter" --benchmark_min_time=0.3 \
    --benchmark_out="$out/einjit-2-$r.json" --benchmark_out_format=json >/dev/null 2>&1
  taskset -c 0 "$build/bench/bench_cpu" --benchmark_filter="$filter" --benchmark_min_time=0.3 \
    --benchmark_out="$out/einjit-1-$r.json" --benchmark_out_format=json >/dev/null 2>&1
  "$python" "$root/bench/layers_torch.py" --reps 5 --threads 1,2 >"$out/torch-$r.jsonl"
done
python3 "$root/bench/summarize_layers.py" "$out"
