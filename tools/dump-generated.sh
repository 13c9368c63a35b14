#!/usr/bin/env bash
# Shows that a change leaves generated code alone: dumps every test-table and benchmark
# program's schedule notes, lowered IR (two fixed CPU targets) and CUDA C (sm_90, sm_80) at
# two commits and diffs them. Each commit is built (only its dump tool) in a temporary
# worktree. The tool's own cases come from the newer commit's tables when both have them.
#   tools/dump-generated.sh BASE [HEAD]   (HEAD defaults to the working tree)
# Exit status 0 when the dumps are identical, 1 when they differ (the diff is printed).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
base="$1"; head="${2:-}"
work="$(mktemp -d)"
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true;
      git -C "$root" worktree remove --force "$work/head" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
dump() { # SOURCE_DIR OUT_DIR
  cmake -S "$1" -B "$1/build-dump" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEINJIT_BUILD_BENCH=OFF \
    "${launcher[@]}" >/dev/null
  cmake --build "$1/build-dump" --target dump_generated --parallel "$(nproc)" >/dev/null
  "$1/build-dump/tests/dump_generated" "$2"
}
git -C "$root" worktree add --detach "$work/base" "$base" >/dev/null 2>&1
dump "$work/base" "$work/out-base"
if [ -n "$head" ]; then
  git -C "$root" worktree add --detach "$work/head" "$head" >/dev/null 2>&1
  dump "$work/head" "$work/out-head"
else
  dump "$root" "$work/out-head"
fi
if diff -r "$work/out-base" "$work/out-head"; then
  echo "generated code identical: $(ls "$work/out-head" | wc -l) cases"
else
  exit 1
fi
