#!/usr/bin/env bash
# On the GPU machine (device tool): builds the CUDA path without the LLVM JIT and oneTBB (the
# machine has neither; doctest and Google Benchmark travel in third_party/, made here by
# scripts/gpu-deps.sh), runs the whole test suite (the CUDA tests for real; the three CUDA test
# binaries again with sm_80's code), the GPU benchmarks beside cuBLAS and PyTorch/cuDNN, and
# writes the table. Logs and JSON go to $OUT.
#   tools/gpu-check.sh [--tests] [--bench] [--quick]   (default: both)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-$root/build-gpu/out}"
mkdir -p "$out"
tests=0 bench=0 quick=0
for a in "$@"; do
  case "$a" in --tests) tests=1 ;; --bench) bench=1 ;; --quick) quick=1 ;; esac
done
if [ $tests = 0 ] && [ $bench = 0 ]; then tests=1 bench=1; fi
export EINJIT_CACHE_DIR="$root/build-gpu/kernel-cache"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
t0=$(date +%s)
cmake -S "$root" -B "$root/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEINJIT_WITH_LLVM=OFF \
  -DEINJIT_WITH_TBB=OFF -DEINJIT_WITH_EIGEN=OFF -DEINJIT_WERROR=ON >"$out/configure.log" 2>&1 ||
  { tail -30 "$out/configure.log"; exit 1; }
grep "einjit:" "$out/configure.log"
cmake --build "$root/build-gpu" -j "$(nproc)" >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "built in $(($(date +%s) - t0)) s"
status=0
if [ $tests = 1 ]; then
  (cd "$root/build-gpu" && ctest --output-on-failure --parallel 8 >"$out/tests.log" 2>&1)
  status=$?
  grep -E "MESSAGE|tests passed|tests failed|Total Test" "$out/tests.log" | sort | uniq -c | sort -rn | head -12
  grep -B2 -A20 "ERROR:" "$out/tests.log" | head -80
  # The CUDA tests (NVRTC, schedules, GPU runs) again with the code an sm_80 GPU gets
  # (mma.sync tiles instead of wgmma).
  for t in test_cuda_compile test_cuda_schedule test_cuda; do
    (cd "$root/build-gpu" && EINJIT_CUDA_ARCH=80 "./tests/$t" >"$out/$t-sm80.log" 2>&1)
    s80=$?
    echo "$t with EINJIT_CUDA_ARCH=80: $(grep -E '^\[doctest\] (test cases|Status)' "$out/$t-sm80.log" | tr '\n' ' ')"
    grep -B2 -A20 "ERROR:" "$out/$t-sm80.log" | head -40
    [ $s80 = 0 ] || status=1
  done
fi
if [ $bench = 1 ]; then
  reps=3
  [ $quick = 1 ] && reps=1
  "$root/build-gpu/bench/bench_cuda" --benchmark_repetitions=$reps --benchmark_out="$out/bench_cuda.json" \
    --benchmark_out_format=json >"$out/bench_cuda.log" 2>&1 || { tail -30 "$out/bench_cuda.log"; status=1; }
  peersArgs=()
  [ $quick = 1 ] && peersArgs=(--quick)
  PYTHONUNBUFFERED=1 python3 "$root/bench/gpu_peers.py" --out "$out/peers.json" "${peersArgs[@]}" \
    >"$out/peers.log" 2>&1 || tail -20 "$out/peers.log"
  python3 "$root/bench/gpu_summarize.py" "$out/bench_cuda.json" "$out/peers.json" | tee "$out/gpu-table.md"
fi
echo "gpu-check: status $status, $(($(date +%s) - t0)) s"
exit $status
