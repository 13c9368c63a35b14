#!/usr/bin/env bash
# The libFuzzer target over the whole pipeline (tests/fuzz/, docs/RELIABILITY.md):
#   scripts/fuzz.sh SECONDS [libFuzzer arguments...]
# Builds build-fuzz/ with clang-19, ASan and UBSan (EINJIT_FUZZ=ON; CUDA, tests and benchmarks
# off), then fuzzes for SECONDS from the seed corpus (the test tables' programs) and every kept
# regression input, with the language's dictionary. New interesting inputs go to
# build-fuzz/corpus; a finding (crash, sanitizer report, an exception other than einjit::Error,
# the interpreter and the JIT disagreeing, an input slower than 60 s) is written to
# build-fuzz/findings/ and the script fails. Keep a finding, once fixed, in
# tests/fuzz/regressions/: ctest replays that directory in every build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:?usage: scripts/fuzz.sh SECONDS [libFuzzer arguments...]}"; shift
dir="${EINJIT_FUZZ_BUILD:-$root/build-fuzz}"
cc="${EINJIT_FUZZ_CC:-clang-19}"; cxx="${EINJIT_FUZZ_CXX:-clang++-19}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
CC="$cc" CXX="$cxx" cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEINJIT_FUZZ=ON -DEINJIT_WITH_CUDA=OFF -DEINJIT_BUILD_TESTS=OFF -DEINJIT_BUILD_BENCH=OFF \
  "${launcher[@]}" >/dev/null
cmake --build "$dir" --target fuzz_pipeline --parallel "${EINJIT_FUZZ_JOBS:-$(nproc)}"
mkdir -p "$dir/corpus" "$dir/findings"
echo "=== fuzzing for ${seconds} s (seeds: tests/fuzz/seeds, tests/fuzz/regressions) ==="
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
"$dir/tests/fuzz/fuzz_pipeline" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
  -max_len=512 -dict="$root/tests/fuzz/einjit.dict" -artifact_prefix="$dir/findings/" \
  -print_final_stats=1 "$@" "$dir/corpus" "$root/tests/fuzz/seeds" "$root/tests/fuzz/regressions"
echo "=== fuzzing: no finding in ${seconds} s ==="
