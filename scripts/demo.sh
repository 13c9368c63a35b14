#!/usr/bin/env bash
# The main job on a fresh machine: install the dependencies, build, run the demo.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build" -DCMAKE_BUILD_TYPE=Release
"$root/build/cli/einjit" demo
# The demo's layer beside oneDNN (each iteration times einjit's and oneDNN's forward and forward +
# backward back to back: medians of ms and of the ratios; fwd_speed and fwd_bwd_speed are
# oneDNN's time over einjit's, above 1 einjit faster), on 1 thread (pinned) and 2; then larger
# layers of the same kinds beside oneDNN and OpenBLAS in one process.
if [ -x "$root/build/bench/bench_cpu" ]; then
  echo
  echo "the demo's layer, einjit beside oneDNN (1 thread, then 2):"
  taskset -c 0 "$root/build/bench/bench_cpu" --benchmark_filter='BM_DemoLayer/1' \
    --benchmark_counters_tabular=true
  "$root/build/bench/bench_cpu" --benchmark_filter='BM_DemoLayer/2' --benchmark_counters_tabular=true
  echo
  echo "larger layers beside oneDNN and OpenBLAS (GFLOP/s; bench/run_cpu.sh runs the full table):"
  "$root/build/bench/bench_cpu" --benchmark_filter='Conv_(einjit|oneDNN)/(1|2)/|Linear' \
    --benchmark_min_time=0.2
fi
