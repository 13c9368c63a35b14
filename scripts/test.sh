#!/usr/bin/env bash
# The test suite on a fresh machine: install the dependencies, build in Release with warnings
# as errors and run every test, then the Python module's tests (scripts/test-python.sh); build
# again without CUDA (Release, no benchmarks) and run every test; then build in Debug with
# AddressSanitizer + UBSan and run every test again.
# scripts/test.sh --fast skips the sanitizer pass.
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
(cd "$root/build-nocuda" && ctest --output-on-failure --parallel "$(nproc)")

if [ "${1:-}" != "--fast" ]; then
  echo "=== Debug build with AddressSanitizer and UndefinedBehaviorSanitizer ==="
  "$root/scripts/build.sh" "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DEINJIT_SANITIZE=ON \
    -DEINJIT_WERROR=ON -DEINJIT_BUILD_BENCH=OFF
  (cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure --parallel "$(nproc)")
fi
