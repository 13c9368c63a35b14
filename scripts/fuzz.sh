#!/usr/bin/env bash
# The libFuzzer target over the whole pipeline (tests/fuzz/, docs/RELIABILITY.md), two ways:
#   scripts/fuzz.sh SECONDS [libFuzzer arguments...]     exploratory: a time budget
#   scripts/fuzz.sh --ci [libFuzzer arguments...]        reproducible: CI's fixed run
# Both build build-fuzz/ with clang-19, ASan and UBSan (EINJIT_FUZZ=ON; CUDA, tests and
# benchmarks off) and start from the seed corpus (the test tables' programs) and every kept
# regression input, with the language's dictionary.
#
# Exploratory (SECONDS): a random seed; new interesting inputs collect in build-fuzz/corpus
# (kept between runs, so each run goes further than the last).
#
# --ci: the same executions on every run, so that CI fails only on what a submission changed,
# never on what a random start happened to reach: libFuzzer's -seed fixed (EINJIT_FUZZ_SEED,
# default 1), a fixed number of executions (EINJIT_FUZZ_RUNS, default sized to about 2 minutes
# on a 2-core CI machine), only the seeds and the regressions as the starting corpus (new
# inputs go to an empty temporary directory, not build-fuzz/corpus), address-space
# randomization off (setarch -R: hash tables keyed by addresses otherwise change the coverage
# an input reaches, and with it the fuzzer's later choices) and one CPU (taskset: oneTBB
# follows the affinity, so the kernels' parallel loops run on one thread and no interleaving
# changes the coverage counts), and no re-reading of the corpus directory (-reload=0: it
# happens once a second of wall time, and runs inputs again).
#
# A finding (crash, sanitizer report, an exception other than einjit::Error, the interpreter
# and the JIT disagreeing, an input slower than 60 s) is written to build-fuzz/findings/ and
# the script fails. Keep a finding, once fixed, in tests/fuzz/regressions/: ctest replays that
# directory in every build, and the next --ci run starts from it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
usage="usage: scripts/fuzz.sh SECONDS|--ci [libFuzzer arguments...]"
mode="${1:?$usage}"; shift
dir="${EINJIT_FUZZ_BUILD:-$root/build-fuzz}"
cc="${EINJIT_FUZZ_CC:-clang-19}"; cxx="${EINJIT_FUZZ_CXX:-clang++-19}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
CC="$cc" CXX="$cxx" cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DEINJIT_FUZZ=ON -DEINJIT_WITH_CUDA=OFF -DEINJIT_BUILD_TESTS=OFF -DEINJIT_BUILD_BENCH=OFF \
  "${launcher[@]}" >/dev/null
cmake --build "$dir" --target fuzz_pipeline --parallel "${EINJIT_FUZZ_JOBS:-$(nproc)}"
mkdir -p "$dir/findings"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
common=(-timeout=60 -rss_limit_mb=4096 -max_len=512 -dict="$root/tests/fuzz/einjit.dict"
        -artifact_prefix="$dir/findings/" -print_final_stats=1)
seeds=("$root/tests/fuzz/seeds" "$root/tests/fuzz/regressions")
if [ "$mode" = "--ci" ]; then
  seed="${EINJIT_FUZZ_SEED:-1}"; runs="${EINJIT_FUZZ_RUNS:-80000}"
  fresh="$(mktemp -d)"
  trap 'rm -rf "$fresh"' EXIT
  cpu="$(taskset -pc $$ | sed -E 's/.*: *//; s/[-,].*//')" # the first CPU this may use
  fixed=(taskset -c "$cpu" setarch "$(uname -m)" -R)
  if ! "${fixed[@]}" true 2>/dev/null; then
    echo "note: taskset or setarch -R is not permitted here: runs may differ"
    fixed=()
  fi
  echo "=== fuzzing: ${runs} executions from seed ${seed} (seeds, regressions) ==="
  "${fixed[@]}" "$dir/tests/fuzz/fuzz_pipeline" -seed="$seed" -runs="$runs" -reload=0 "${common[@]}" \
    "$@" "$fresh" "${seeds[@]}"
  echo "=== fuzzing: no finding in ${runs} executions from seed ${seed} ==="
else
  case "$mode" in '' | *[!0-9]*) echo "$usage" >&2; exit 2 ;; esac
  mkdir -p "$dir/corpus"
  echo "=== fuzzing for ${mode} s (seeds: tests/fuzz/seeds, tests/fuzz/regressions) ==="
  "$dir/tests/fuzz/fuzz_pipeline" -max_total_time="$mode" "${common[@]}" "$@" \
    "$dir/corpus" "${seeds[@]}"
  echo "=== fuzzing: no finding in ${mode} s ==="
fi
