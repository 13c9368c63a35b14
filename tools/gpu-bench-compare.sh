#!/usr/bin/env bash
# Compares two builds of bench_cuda on one GPU, alternating them in the same minutes so that
# clock and thermal drift fall on both sides: tools/gpu-bench-compare.sh BASE_BUILD HEAD_BUILD
# [ROUNDS] [FILTER]. Each round runs BASE then HEAD once (every case); the summary gives each
# case's median over the rounds and HEAD / BASE, and flags rows more than 3% slower.
set -euo pipefail
base="$1" head="$2" rounds="${3:-3}" filter="${4:-.}"
out="${OUT:-/tmp}/bench-compare"
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for side in base head; do
    dir=$base; [ $side = head ] && dir=$head
    EINJIT_CACHE_DIR="$dir/kernel-cache" "$dir/bench/bench_cuda" --benchmark_filter="$filter" \
      --benchmark_out="$out/$side-$r.json" --benchmark_out_format=json >"$out/$side-$r.log" 2>&1 ||
      { tail -20 "$out/$side-$r.log"; exit 1; }
  done
done
python3 "$(dirname "$0")/bench_compare.py" "$out" "$rounds" | tee "$out/compare.md"
