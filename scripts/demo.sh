#!/usr/bin/env bash
# The main job on a fresh machine: install the dependencies, build, run the demo.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build" -DCMAKE_BUILD_TYPE=Release
"$root/build/cli/einjit" demo
# The same kinds of layers timed beside their peers (oneDNN, OpenBLAS) in one process.
if [ -x "$root/build/bench/bench_cpu" ]; then
  echo
  echo "einjit beside oneDNN and OpenBLAS (GFLOP/s; bench/run_cpu.sh runs the full table):"
  "$root/build/bench/bench_cpu" --benchmark_filter='Conv_(einjit|oneDNN)/(1|2)/|Linear' \
    --benchmark_min_time=0.2
fi
