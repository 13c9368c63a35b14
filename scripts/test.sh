#!/usr/bin/env bash
# The test suite on a fresh machine: install the dependencies, build in Release with warnings
# as errors and run every test (the differential tester's 1,000 random programs included), then
# the Python module's tests (scripts/test-python.sh); build again without CUDA, and without
# LLVM or CUDA (Release, no benchmarks), and run every test; then build in Debug with
# AddressSanitizer + UBSan and run every test again, and fuzz the pipeline for 3 minutes
# (scripts/fuzz.sh); with EINJIT_CI_TSAN=1, also run the concurrency tests under
# ThreadSanitizer (scripts/tsan.sh).
# scripts/test.sh --fast skips the sanitizer, fuzzing and ThreadSanitizer passes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"

"$root/scripts/build.sh" "$root/build" -DCMAKE_BUILD_TYPE=Release -DEINJIT_WERROR=ON
(cd "$root/build" && ctest --output-on-failure --parallel "$(nproc)")
# The Python module and the PyTorch layer, against this build installed as a package.
echo "=== Python module (pip install ./python, pytest) ==="
"$root/scripts/test-python.sh" "$root/build"

# Every optional package is optional: the CPU JIT without the CUDA toolkit (a user's usual
# machine) builds and passes too. Lean: Release, no benchmarks.
echo "=== Release build without CUDA ==="
"$root/scripts/build.sh" "$root/build-nocuda" -DCMAKE_BUILD_TYPE=Release -DEINJIT_WERROR=ON \
  -DEINJIT_WITH_CUDA=OFF -DEINJIT_BUILD_BENCH=OFF
# (The differential tester's full count ran in the first build: 100 programs here.)
(cd "$root/build-nocuda" && EINJIT_DIFF_PROGRAMS=25 ctest --output-on-failure --parallel "$(nproc)")

# Without LLVM the CPU device is the interpreter (the GPU machine's CUDA-only configuration,
# here without CUDA too): it must build and pass as well.
echo "=== Release build without LLVM and CUDA ==="
"$root/scripts/build.sh" "$root/build-nollvm" -DCMAKE_BUILD_TYPE=Release -DEINJIT_WERROR=ON \
  -DEINJIT_WITH_LLVM=OFF -DEINJIT_WITH_CUDA=OFF -DEINJIT_BUILD_BENCH=OFF
(cd "$root/build-nollvm" && EINJIT_DIFF_PROGRAMS=25 ctest --output-on-failure --parallel "$(nproc)")

if [ "${1:-}" != "--fast" ]; then
  echo "=== Debug build with AddressSanitizer and UndefinedBehaviorSanitizer ==="
  "$root/scripts/build.sh" "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DEINJIT_SANITIZE=ON \
    -DEINJIT_WERROR=ON -DEINJIT_BUILD_BENCH=OFF
  (cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure --parallel "$(nproc)")
  # A fixed budget; any finding fails (docs/RELIABILITY.md).
  "$root/scripts/fuzz.sh" "${EINJIT_FUZZ_SECONDS:-180}"
  # A fourth full build: only on request until its cost in CI is measured (docs/RELIABILITY.md).
  if [ "${EINJIT_CI_TSAN:-0}" = "1" ]; then "$root/scripts/tsan.sh"; fi
fi
