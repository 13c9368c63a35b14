#!/usr/bin/env bash
# The Python part of the test suite: scripts/test-python.sh [--deps] BUILD_DIR
# (--deps: only the virtual environment and its PyPI packages; scripts/test.sh runs that in
# the background while it builds, since it is mostly download time)
# Does what a user does on a fresh machine (README "Install", "From Python"): a virtual
# environment BUILD_DIR/python-venv with the test packages from PyPI (NumPy, pytest, PyTorch,
# scikit-learn, and JAX for the CPU: jax + jaxlib, about 90 MB of wheels), then, from the
# repository root, literally `pip install ./python` — pip fetches nanobind and
# scikit-build-core into its isolated build environment and the module compiles einjit from
# this source tree into itself (python/build/ keeps that build between runs) — and pytest
# over python/tests against the installed module. BUILD_DIR holds only the virtual
# environment and the kernel cache; the module links nothing from it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
deps_only=0
if [ "${1:-}" = "--deps" ]; then deps_only=1; shift; fi
build="$(mkdir -p "$1" && cd "$1" && pwd)"
venv="$build/python-venv"

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check numpy pytest torch scikit-learn \
  jax jaxlib
if [ "$deps_only" = 1 ]; then exit 0; fi
# The venv's pip, so that the module lands in the venv; the command itself is the README's.
export PATH="$venv/bin:$PATH"
t0=$SECONDS
(cd "$root" && pip install ./python)
echo "pip install ./python: $((SECONDS - t0)) s"
cd "$root/python/tests"
# JAX is installed above: its tests must run here, not skip (python/tests/test_jax.py).
export EINJIT_REQUIRE_JAX=1
EINJIT_CACHE_DIR="$build/kernel-cache" python -m pytest -q -rs .
