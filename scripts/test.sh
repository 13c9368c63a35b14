#!/usr/bin/env bash
# The test suite on a fresh machine (CI runs it through .ci/run on 2 cores without a GPU; it
# must stay under 30 minutes there). Each phase proves something the others do not:
#   1. install the dependencies (scripts/install-deps.sh); the Python test packages start
#      installing in the background (mostly download time, overlapped with the builds);
#   2. Release build with warnings as errors, every package it finds, the benchmarks and tools
#      included, and every test (the differential tester's 1,000 random programs included);
#   3. the Python module and the PyTorch layer (scripts/test-python.sh): a literal
#      `pip install ./python`, which compiles einjit's library again inside the module's build;
#      with ccache (installed by phase 1) those 79 compilations are the Release build's, same
#      compiler and flags, so they are cache hits (docs/RELIABILITY.md, "CI");
#   4. Debug build without LLVM or CUDA (the CPU device is then the interpreter): the
#      library, the CLI, the examples and the tests whose results depend on the configuration
#      (not the lexer, parser, tensor, schedule and golden tests: the same code as in 2);
#   5. Debug build with AddressSanitizer + UBSan, configured without CUDA: it is also the
#      build that proves the CPU JIT builds and passes without the CUDA toolkit (a user's usual
#      machine), so there is no separate no-CUDA build. Its tests skip the few listed below;
#   6. the libFuzzer target over the whole pipeline, a fixed reproducible run
#      (scripts/fuzz.sh --ci: the same executions every time, so it fails only on what a change
#      did; `scripts/fuzz.sh SECONDS` is the exploratory run);
#   7. ThreadSanitizer over the tests that use threads (scripts/tsan.sh; its build runs
#      alongside the fuzzer, which uses one CPU).
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
  # Background jobs of a phase that failed.
  for pid in ${python_deps:-} ${tsan_build:-}; do kill "$pid" 2>/dev/null || true; done
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
# The Python phase's PyPI packages (PyTorch is about 3 GB): downloaded while the builds run.
mkdir -p "$root/build"
python_deps_log="$root/build/python-deps.log"
"$root/scripts/test-python.sh" --deps "$root/build" >"$python_deps_log" 2>&1 &
python_deps=$!

# ccache between the Release build and the Python module's build of einjit (phase 3): the same
# compiler (CXX) and flags (Release, -Werror: CMAKE_ARGS below), so each of the module's
# compilations of einjit's sources is the Release build's. Paths stay absolute in the hash
# (CCACHE_BASEDIR unset): the two build directories differ in depth, the sources are the same.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  unset CCACHE_BASEDIR
  export CXX="${CXX:-c++}"
  ccache --zero-stats >/dev/null
fi

# Without the CUDA toolkit (CI), NVRTC and the CUDA headers from PyPI: the CUDA backend then
# builds, and generated CUDA compiles through NVRTC in the tests (those that need a GPU skip).
cuda_args=()
if ! command -v nvcc >/dev/null && [ ! -e /usr/local/cuda ]; then
  begin "NVRTC and CUDA headers from PyPI (no CUDA toolkit here)"
  cuda_args=("-DCUDAToolkit_ROOT=$("$root/scripts/cuda-from-pypi.sh" "$root/build-cuda-pypi")")
  end
fi

begin "Release build (every package found)"
"$root/scripts/build.sh" "$root/build" -DCMAKE_BUILD_TYPE=Release -DEINJIT_WERROR=ON \
  ${launcher[@]+"${launcher[@]}"} ${cuda_args[@]+"${cuda_args[@]}"}
# Not in the default target (tools/dump-generated.sh builds it): it must still compile.
cmake --build "$root/build" --target dump_generated --parallel "$jobs"
end
# No single test may run longer than this: a test that hangs (or that times a large layer on
# the interpreter of a Debug build) then fails with its name instead of running CI out of time.
test_timeout=900
begin "Release ctest (every test)"
(cd "$root/build" && ctest --output-on-failure --parallel "$jobs" --timeout "$test_timeout")
# The differential tester's counts (ctest shows no output of passing tests).
grep -h "MESSAGE: differential" "$root/build/Testing/Temporary/LastTest.log" || true
end

begin "Python module (pip install ./python, pytest)"
wait_ok=1; wait "$python_deps" || wait_ok=0; python_deps=""
if [ "$wait_ok" = 0 ]; then
  cat "$python_deps_log"
  echo "installing the Python test packages failed" >&2
  exit 1
fi
if [ ${#launcher[@]} -gt 0 ]; then ccache --zero-stats >/dev/null; fi
# scikit-build-core passes CMAKE_ARGS to CMake; the command itself stays the README's.
CMAKE_ARGS="${launcher[*]} -DEINJIT_WERROR=ON ${cuda_args[*]}" "$root/scripts/test-python.sh" "$root/build"
if [ ${#launcher[@]} -gt 0 ]; then
  echo "ccache during the Python module's build (its einjit objects are the Release build's):"
  ccache --show-stats | grep -E '^ *(Hits|Misses):' || true
fi
end

# Without LLVM the CPU device is the interpreter (the GPU machine's CUDA-only configuration,
# here without CUDA too): it must build and pass as well. It has no JIT tests, so its ctest is
# short; the differential tester's programs ran in full above (25 per case here). The tests
# that never run a program (lexer, parser, tensor, CPU and GPU schedules, golden IR) test the
# same code as the Release pass and are not built here.
# It is a Debug build (no optimization, assertions on): what it proves is that the
# configuration builds and passes, which does not need -O3, and it compiles several times faster;
# the Release build above compiled the same sources at -O3 with warnings as errors.
nollvm_tests=(test_ranges test_interpreter test_errors test_robustness test_kernel test_cli test_cli_npy test_cli_cpu_kind
              test_grad test_cache test_cache_limits test_fuzz_replay test_differential
              test_backends test_inplace test_bad_inputs)
begin "Debug build without LLVM and CUDA"
cmake -S "$root" -B "$root/build-nollvm" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DEINJIT_WERROR=ON \
  -DEINJIT_WITH_LLVM=OFF -DEINJIT_WITH_CUDA=OFF -DEINJIT_BUILD_BENCH=OFF >/dev/null
cmake --build "$root/build-nollvm" --parallel "$jobs" --target einjit einjit_library \
  example_optimizers example_sgd_step example_layernorm example_attention example_gelu_mlp \
  example_embedding_bag example_conv_layer "${nollvm_tests[@]}"
end
begin "ctest without LLVM and CUDA"
# The test binaries not built above register as '<binary>_NOT_BUILT' tests.
(cd "$root/build-nollvm" && EINJIT_DIFF_PROGRAMS=25 ctest --output-on-failure --parallel "$jobs" \
  --timeout "$test_timeout" \
  -E '_NOT_BUILT')
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
#   written) likewise, and test_gemm_conv's stride-1 tiles (4 minutes; passed when written);
# - three more of the same kind in test_jit: the bf16 table (the interpreter's bf16 arithmetic
#   over every table program), the gradient table at grown shapes, and 300 random programs
#   against the interpreter (the differential tester does that here, below);
# - the differential tester runs 50 programs per case under the sanitizers (1,000 above).
asan_skip='four transpositions, batched, odd sizes|jit: sizes 1, 7, 33 and 257'
asan_skip+='|forced split reductions on every interpreter-table|convolutions forward and every gradient'
asan_skip+='|jit: bf16 programs, forward and gradient|jit: every gradient-table program'
asan_skip+='|jit: 300 random programs|stride-1 convolutions in tiles whose rows divide M'
# - and two of test_row_blocks whose outputs must exceed 8 L2s (non-temporal stores) or L2
#   (inputs fetched ahead) on every machine, 8-16 MiB against the interpreter; their plans'
#   host code runs here through the explain-only cases beside them.
asan_skip+='|non-temporal stores, rows aligned or not|inputs fetched one block ahead, against the'
begin "Debug ASan+UBSan build without CUDA"
"$root/scripts/build.sh" "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DEINJIT_SANITIZE=ON \
  -DEINJIT_WERROR=ON -DEINJIT_WITH_CUDA=OFF -DEINJIT_BUILD_BENCH=OFF
end
begin "ASan+UBSan ctest"
(cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure --parallel "$jobs" --timeout "$test_timeout" -E "$asan_skip")
end

# A fixed, reproducible run (seed and number of executions); any finding fails
# (docs/RELIABILITY.md). Includes the clang build. The fuzzer runs on one CPU (for the same
# executions every time), so the ThreadSanitizer build goes on meanwhile.
begin "fuzzer (clang build, fixed run) and ThreadSanitizer build"
tsan_log="$root/build/tsan-build.log"
"$root/scripts/tsan.sh" --build-only >"$tsan_log" 2>&1 &
tsan_build=$!
"$root/scripts/fuzz.sh" --ci
wait_ok=1; wait "$tsan_build" || wait_ok=0; tsan_build=""
if [ "$wait_ok" = 0 ]; then
  cat "$tsan_log"
  echo "the ThreadSanitizer build failed" >&2
  exit 1
fi
end

begin "ThreadSanitizer tests"
"$root/scripts/tsan.sh"
end
