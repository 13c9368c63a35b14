#!/usr/bin/env bash
# ThreadSanitizer over the tests that use threads (docs/RELIABILITY.md, "ThreadSanitizer").
# Builds build-tsan/ (-DEINJIT_TSAN=ON; CUDA, benchmarks and examples off) at -O1 with line
# tables only (-g1: enough for TSan's stacks, cheaper to compile than -O2 -g), only the library
# and the four test binaries, and runs:
#   - 8 threads compiling and calling shared and private kernels while the caches evict, with a
#     disk cache (cache_limits);
#   - 8 threads compiling and calling different and identical kernels, and a convolution and
#     its gradient called twice through oneTBB's parallel loops (jit);
#   - split reductions under 1, 2 and 8 oneTBB threads (reduce);
#   - a program's independent statements run as concurrent oneTBB tasks (stages).
# Not the two-process disk-cache test: TSan sees inside one process only (the Release and
# sanitizer passes run it). Suppressions (tests/tsan.supp) cover only the uninstrumented oneTBB
# and LLVM libraries; any report fails the script (halt_on_error).
#   scripts/tsan.sh [--build-only] [BUILD_DIR]   (--build-only: build, run nothing)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build_only=0
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
dir="${1:-$root/build-tsan}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DEINJIT_TSAN=ON -DEINJIT_WERROR=ON \
  -DEINJIT_WITH_CUDA=OFF -DEINJIT_BUILD_BENCH=OFF -DEINJIT_BUILD_EXAMPLES=OFF \
  "${launcher[@]}" >/dev/null
cmake --build "$dir" --parallel "$(nproc)" --target test_cache_limits test_jit test_reduce test_stages
if [ "$build_only" = 1 ]; then exit 0; fi
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/tsan.supp"
export EINJIT_CACHE_DIR="$dir/kernel-cache"
run() { echo "--- $*"; "$@"; }
run "$dir/tests/test_cache_limits" -tc='*8 threads*'
run "$dir/tests/test_jit" -tc='*8 threads*,*called twice*'
if [ -x "$dir/tests/test_reduce" ]; then run "$dir/tests/test_reduce" -tc='*oneTBB threads*'; fi
# A program's independent statements as concurrent oneTBB tasks (runtime/CpuStages).
run "$dir/tests/test_stages"
echo "=== ThreadSanitizer: no report ==="
