#!/usr/bin/env bash
# Configures and builds einjit: scripts/build.sh BUILD_DIR [extra CMake arguments...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$1"; shift
cmake -S "$root" -B "$dir" -G Ninja "$@"
cmake --build "$dir" --parallel "$(nproc)"
