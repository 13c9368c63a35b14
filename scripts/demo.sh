#!/usr/bin/env bash
# The main job on a fresh machine: install the dependencies, build, run the demo.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build" -DCMAKE_BUILD_TYPE=Release
"$root/build/cli/einjit" demo
