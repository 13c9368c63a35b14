#!/usr/bin/env bash
# ThreadSanitizer over the concurrency tests (docs/RELIABILITY.md): builds build-tsan/
# (RelWithDebInfo, -DEINJIT_TSAN=ON; CUDA and benchmarks off) and runs the tests that use
# threads: 8 threads compiling and calling shared and private kernels under eviction, two
# processes on one disk cache, and the split reductions under 1, 2 and 8 oneTBB threads.
# Suppressions (tests/tsan.supp) cover only the uninstrumented oneTBB and LLVM libraries.
#   scripts/tsan.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/build-tsan}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEINJIT_TSAN=ON \
  -DEINJIT_WERROR=ON -DEINJIT_WITH_CUDA=OFF -DEINJIT_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build "$dir" --parallel "$(nproc)" --target test_cache_limits test_reduce einjit
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/tsan.supp"
export EINJIT_CACHE_DIR="$dir/kernel-cache"
"$dir/tests/test_cache_limits" -tc='*threads*,*two processes*'
if [ -x "$dir/tests/test_reduce" ]; then "$dir/tests/test_reduce" -tc='*oneTBB threads*'; fi
echo "=== ThreadSanitizer: no report ==="
