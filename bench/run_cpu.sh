#!/usr/bin/env bash
# Runs the CPU benchmarks twice (OpenBLAS's default kernel, then OPENBLAS_CORETYPE=SkylakeX
# where the CPU has AVX-512)
# and prints the markdown tables for bench/RESULTS.md; then the packed-GEMM cases (einjit and
# OpenBLAS alternating in one process, bench/bench_gemm.cpp) with the FMA peak, and their table;
# then two threads against one (bench/bench_threads.cpp) and its table. The cases that alternate
# einjit and oneDNN per iteration (BM_ConvAlt, BM_ConvAlt1x1) run a second time on one CPU
# (`taskset -c 0`: oneTBB and oneDNN's OpenMP follow the affinity) for the table's one-thread
# column. With TORCH_PYTHON set (a Python with torch installed), the PyTorch columns too:
# bench/run_layers.sh (Linear, distance, conv passes and layers, permuted einsum; f32 and f64)
# and bench/run_rows.sh (softmax, layernorm), each alternating its two processes round by round.
#   [TORCH_PYTHON=python] bench/run_cpu.sh [BUILD_DIR] [extra Google Benchmark flags...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"; shift || true
out="$build/bench-results"
mkdir -p "$out"
"$build/bench/bench_cpu" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_filter='-BM_Gemm|BM_Threads|BM_ConvPass|BM_F64Permuted' \
  --benchmark_out="$out/default.json" --benchmark_out_format=json "$@" >/dev/null
# OpenBLAS's SkylakeX kernel needs AVX-512: on a CPU without it (Zen 3) the run would stop on
# an illegal instruction, so its column is left empty there.
skylakex=()
if grep -qw avx512f /proc/cpuinfo; then
  OPENBLAS_CORETYPE=SkylakeX "$build/bench/bench_cpu" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_filter='OpenBLAS|einjit' \
    --benchmark_out="$out/skylakex.json" --benchmark_out_format=json "$@" >/dev/null
  skylakex=("$out/skylakex.json")
fi
OPENBLAS_NUM_THREADS=1 taskset -c 0 "$build/bench/bench_cpu" --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_filter='BM_ConvAlt' \
  --benchmark_out="$out/onethread.json" --benchmark_out_format=json "$@" >/dev/null
python3 "$root/bench/summarize.py" "$out/default.json" "${skylakex[@]}" \
  --one-thread "$out/onethread.json"
"$build/bench/bench_cpu" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_filter='FmaPeak|BM_Gemm' \
  --benchmark_out="$out/gemm.json" --benchmark_out_format=json "$@" >/dev/null
python3 "$root/bench/summarize_gemm.py" "$out/gemm.json"
"$build/bench/bench_cpu" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_filter='BM_Threads' \
  --benchmark_out="$out/threads.json" --benchmark_out_format=json "$@" >/dev/null
python3 "$root/bench/summarize_threads.py" "$out/threads.json"
if [ -n "${TORCH_PYTHON:-}" ]; then
  "$root/bench/run_layers.sh" "$build" 3 "$TORCH_PYTHON"
  "$root/bench/run_rows.sh" "$build" 3 "$TORCH_PYTHON"
fi
