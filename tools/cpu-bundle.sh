#!/usr/bin/env bash
# Packs a Release build's CPU test and bench binaries with every shared library they load
# (LLVM, oneTBB, oneDNN, OpenBLAS, Google Benchmark, and glibc's loader and libc, so the
# bundle runs on any x86-64 Linux) into .cpuk/, which the device tool carries
# (`run` with carry: [".cpuk"]) to the GPU machine: its CPU is another CPU kind than the
# development machine's, and it has no LLVM or oneTBB of its own. tools/cpu-kind-check.sh runs
# the bundle there.
#   tools/cpu-bundle.sh [BUILD_DIR [BASE_BENCH]]      (default: build)
# BASE_BENCH: another build's bench_cpu (the plans before a change), bundled as bench_cpu.base
# for tools/xeon-conv.sh to run beside this one (the same libraries: einjit links statically).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
bins=("$build/bench/bench_cpu" "$build/tests/test_gemm" "$build/tests/test_jit"
      "$build/tests/test_schedule")
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/cpuk/lib"
cp "${bins[@]}" "$tmp/cpuk/"
if [ -n "${2:-}" ]; then cp "$2" "$tmp/cpuk/bench_cpu.base"; bins+=("$2"); fi
for lib in $(ldd "${bins[@]}" | awk '/=>/ {print $3}' | sort -u); do cp -L "$lib" "$tmp/cpuk/lib/"; done
cp -L /lib64/ld-linux-x86-64.so.2 "$tmp/cpuk/lib/"
mkdir -p "$root/.cpuk"
grep -qx '/.cpuk/' "$root/.git/info/exclude" 2>/dev/null ||
  echo '/.cpuk/' >>"$(git -C "$root" rev-parse --git-common-dir)/info/exclude"
# xz in two threads: the libraries are ~260 MB, the bundle must stay under the carry limit.
tar -C "$tmp" -cf - cpuk | xz -T2 -6 >"$root/.cpuk/cpuk.tar.xz"
ls -l "$root/.cpuk/cpuk.tar.xz"
