#!/usr/bin/env bash
# The test suite on a fresh machine (CI runs it through .ci/run on 2 cores without a GPU; it
# must stay under 30 minutes there). Each phase proves something the others do not:
#   1. install the dependencies (scripts/install-deps.sh);
#   2. Release build with warnings as errors, every package it finds, and every test (the
#      differential tester's 1,000 random programs included);
#   3. the Python module and the PyTorch layer against that build (scripts/test-python.sh);
#   4. Release build without LLVM or CUDA (the CPU device is then the interpreter) and every
#      test it has;
#   5. Debug build with AddressSanitizer + UBSan, configured without CUDA: it is also the
#      build that proves the CPU JIT builds and passes without the CUDA toolkit (a user's usual
#      machine), so there is no separate no-CUDA build. Its tests skip the few listed below;
#   6. the libFuzzer target over the whole pipeline for EINJIT_FUZZ_SECONDS (scripts/fuzz.sh);
#   7. with EINJIT_CI_TSAN=1, ThreadSanitizer over the concurrency tests (scripts/tsan.sh): about
#      5 minutes of 2 cores, which CI's 30 minutes do not have room for yet.
# At the end (also after a failure) it prints each phase's wall time and CPU time, so the CI log
# shows where the time went. docs/RELIABILITY.md ("CI") explains the choices.
#   scripts/test.sh [--fast]   (--fast: phases 1-4 only)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
fast=0
if [ "${1:-}" = "--fast" ]; then fast=1; fi
jobs="$(nproc)"

# --- phase timing -------------------------------------------------------------------------------
names=(); walls=(); cpus=(); current=""; current_t0=0; current_c0=0
times_file="$(mktemp)"
# CPU seconds (user + system) of the finished child processes so far. `times` runs in this
# shell (a command substitution would be a fork with its own, empty, counters).
cpu_now() {
  times >"$times_file"
  awk 'NR == 2 { t = 0; for (f = 1; f <= 2; ++f) { split($f, a, "m"); t += a[1] * 60 + a[2] }
                 printf "%.0f", t }' "$times_file"
}
begin() {
  current="$1"; current_t0=$SECONDS; current_c0="$(cpu_now)"
  echo "=== $1 ==="
}
end() {
  names+=("$current"); walls+=($((SECONDS - current_t0))); cpus+=($(($(cpu_now) - current_c0)))
  current=""
}
report() {
  local rc=$?
  if [ -n "$current" ]; then current="$current (FAILED)"; end; fi
  rm -f "$times_file"
  local total=0
  echo
  echo "=== phase times (wall and CPU seconds, $jobs cores) ==="
  printf '%-52s %7s %7s\n' phase wall cpu
  for i in "${!names[@]}"; do
    printf '%-52s %7d %7d\n' "${names[$i]}" "${walls[$i]}" "${cpus[$i]}"
    total=$((total + walls[i]))
  done
  printf '%-52s %7d\n' total "$total"
  exit "$rc"
}
trap report EXIT

# --- the phases ---------------------------------------------------------------------------------
begin "install-deps"
"$root/scripts/install-deps.sh"
end

begin "Release build (every package found)"
"$root/scripts/build.sh" "$root/build" -DCMAKE_BUILD_TYPE=Release -DEINJIT_WERROR=ON
end
begin "Release ctest (every test)"
(cd "$root/build" && ctest --output-on-failure --parallel "$jobs")
end

begin "Python module (pip install ./python, pytest)"
"$root/scripts/test-python.sh" "$root/build"
end

# Without LLVM the CPU device is the interpreter (the GPU machine's CUDA-only configuration,
# here without CUDA too): it must build and pass as well. It has no JIT tests, so its ctest is
# short; the differential tester's programs ran in full above (25 per case here).
begin "Release build without LLVM and CUDA"
"$root/scripts/build.sh" "$root/build-nollvm" -DCMAKE_BUILD_TYPE=Release -DEINJIT_WERROR=ON \
  -DEINJIT_WITH_LLVM=OFF -DEINJIT_WITH_CUDA=OFF -DEINJIT_BUILD_BENCH=OFF
end
begin "ctest without LLVM and CUDA"
(cd "$root/build-nollvm" && EINJIT_DIFF_PROGRAMS=25 ctest --output-on-failure --parallel "$jobs")
end

if [ "$fast" = 1 ]; then exit 0; fi

# The sanitizer build has no CUDA (see above). Left out of its ctest, each covered elsewhere:
# - three tests whose cost is the reference interpreter on large shapes, run to compare the
#   JIT's generated code with it (GEMM forms at packed-path sizes, sizes up to 257 for tiles and
#   parallel loops, every table program with forced split reductions). JIT-compiled code is not
#   instrumented, so under the sanitizers they would mostly re-run the interpreter; they run
#   in full in the Release pass, and the host code they reach runs here through the smaller
#   tests of the same files (the Linear layer through the packed path, split reductions of
#   sizes 1 to 10^6+3, every table program at table sizes); the convolution table of
#   test_gemm (3 minutes of the interpreter under ASan; it passed ASan+UBSan when it was
#   written) likewise;
# - the differential tester runs 50 programs per case under the sanitizers (1,000 above).
asan_skip='four transpositions, batched, odd sizes|jit: sizes 1, 7, 33 and 257'
asan_skip+='|forced split reductions on every interpreter-table|convolutions forward and every gradient'
begin "Debug ASan+UBSan build without CUDA"
"$root/scripts/build.sh" "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DEINJIT_SANITIZE=ON \
  -DEINJIT_WERROR=ON -DEINJIT_WITH_CUDA=OFF -DEINJIT_BUILD_BENCH=OFF
end
begin "ASan+UBSan ctest"
(cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure --parallel "$jobs" -E "$asan_skip")
end

# A fixed budget; any finding fails (docs/RELIABILITY.md). Includes the clang build.
begin "fuzzer (clang build, ${EINJIT_FUZZ_SECONDS:-120} s of fuzzing)"
"$root/scripts/fuzz.sh" "${EINJIT_FUZZ_SECONDS:-120}"
end

if [ "${EINJIT_CI_TSAN:-0}" = "1" ]; then
  begin "ThreadSanitizer (build, concurrency tests)"
  "$root/scripts/tsan.sh"
  end
fi
