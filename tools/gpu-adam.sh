#!/usr/bin/env bash
# On the GPU machine (device tool, third_party/ carried): builds bench_adam without LLVM and
# oneTBB (the machine has neither; only the CUDA path is timed) and runs one Adam step on 10^7
# f32 parameters, einjit (examples/Optimizers.h's kAdam through `bench_adam --cuda`: a cold NVRTC
# compile with an empty cache, the step checked on the host against the hand-written loop) and
# PyTorch's fused and foreach Adam (bench/gpu_adam_torch.py), alternated ROUNDS times.
#   tools/gpu-adam.sh [BUILD_DIR] [ROUNDS] [N]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build-gpu}" rounds="${2:-2}" n="${3:-10000000}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
if [ ! -x "$build/bench/bench_adam" ]; then
  t0=$(date +%s)
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEINJIT_WITH_LLVM=OFF \
    -DEINJIT_WITH_TBB=OFF -DEINJIT_WITH_EIGEN=OFF -DEINJIT_WERROR=ON >"$build.configure.log" 2>&1 ||
    { tail -30 "$build.configure.log"; exit 1; }
  cmake --build "$build" --target bench_adam -j "$(nproc)" >"$build.build.log" 2>&1 ||
    { tail -40 "$build.build.log"; exit 1; }
  echo "bench_adam built in $(($(date +%s) - t0)) s"
fi
for round in $(seq 1 "$rounds"); do
  echo "--- round $round"
  rm -rf "$build/adam-cache"
  EINJIT_CACHE_DIR="$build/adam-cache" "$build/bench/bench_adam" "$n" 50 --cuda
  python3 "$root/bench/gpu_adam_torch.py" --n "$n"
done
