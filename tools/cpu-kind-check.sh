#!/usr/bin/env bash
# On the GPU machine (device tool, carry: [".cpuk"] made by tools/cpu-bundle.sh): runs einjit's
# CPU tests and the CPU benchmark rows beside their peers on that machine's CPU, a second CPU
# kind. Everything runs through the bundled loader and libraries. Logs go to $OUT.
#   tools/cpu-kind-check.sh [--no-tests] [BENCH_FILTER]
# The environment passes through: OPENBLAS_CORETYPE=SkylakeX picks OpenBLAS's AVX-512 kernel
# for the peer; EINJIT_CPU_VECTOR_BYTES=32 runs einjit's AVX2 schedules on that CPU.
set -uo pipefail
tests=1
if [ "${1:-}" = --no-tests ]; then tests=0; shift; fi
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-/tmp/cpuk-out}"
mkdir -p "$out" /tmp/cpuk-run
for a in "$root"/.cpuk/*.tar.xz; do tar -C /tmp/cpuk-run -xJf "$a"; done
cd /tmp/cpuk-run/cpuk
run() { ./lib/ld-linux-x86-64.so.2 --library-path ./lib "$@"; }
lscpu | tee "$out/lscpu.txt" | grep -E "Model name|^CPU\(s\)|Thread|L1d|L2|L3"
grep -o -E 'avx512[a-z_0-9]*|avx2|fma' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
export EINJIT_CACHE_DIR=/tmp/cpuk-cache
# bench_cpu sets these itself by starting again through /proc/self/exe, which under the bundled
# loader is the loader (it then rejects bench_cpu's options): set here, it does not.
export OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=passive
for t in test_schedule test_jit test_gemm; do
  [ $tests = 1 ] || break
  run ./$t >"$out/$t.log" 2>&1
  echo "$t: rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$out/$t.log" | tr '\n' ' ')"
  grep -B2 -A12 "ERROR:" "$out/$t.log" | head -40
done
filter="${1:-FmaPeak|BM_Gemm/[0-3]/(1024|2048)/0/2|BM_GemmLinear|BM_Conv_}"
for cpus in 0,1 0; do
  echo "== taskset -c $cpus: $filter"
  OPENBLAS_NUM_THREADS=$(( ${#cpus} > 1 ? 2 : 1 )) taskset -c $cpus ./lib/ld-linux-x86-64.so.2 \
    --library-path ./lib ./bench_cpu --benchmark_filter="$filter" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_enable_random_interleaving=true \
    --benchmark_out="$out/bench-$cpus.json" --benchmark_out_format=json 2>&1 |
    grep -E "median|^BM_FmaPeak" | tee -a "$out/bench.txt"
done
