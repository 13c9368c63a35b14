#!/usr/bin/env bash
# On the GPU machine (device tool, third_party/ carried): builds bench_cuda and profiles the
# einjit kernels of chosen benchmark cases with Nsight Compute (/usr/local/cuda/bin/ncu is on
# that machine): speed of light, occupancy, launch, warp-state, scheduler, memory and compute
# sections, three launches per case, one text file per case in $OUT.
#   bash tools/probe/ncu-cases.sh 'BM_Case/10/1' 'BM_Matmul_einjit/0/4096/1' ...
# (session 10: the bf16 1x1 forward showed L1 67% / L2 57% busy, DRAM 9%, and 4x the output's
# sectors written to L2: the fragment-layout stores that tileEpilogue replaced).
set -uo pipefail
out="${OUT:-build-gpu/out}"
mkdir -p "$out"
export EINJIT_CACHE_DIR=$PWD/build-gpu/kc
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DEINJIT_WITH_LLVM=OFF \
  -DEINJIT_WITH_TBB=OFF -DEINJIT_WITH_EIGEN=OFF >"$out/cfg.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target bench_cuda >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log"; exit 1; }
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats"
S="$S --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis"
for f in "$@"; do
  n=$(echo "$f" | tr '/' '_')
  # shellcheck disable=SC2086
  timeout 100 ncu $S -k regex:ej_ -c 3 build-gpu/bench/bench_cuda --benchmark_filter="$f/" \
    >"$out/ncu_$n.txt" 2>&1
  echo "$f rc=$? -> $out/ncu_$n.txt"
done
