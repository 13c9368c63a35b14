#!/usr/bin/env bash
# The Python part of the test suite: scripts/test-python.sh [--deps] BUILD_DIR
# (--deps: only the virtual environment and its PyPI packages; scripts/test.sh runs that in
# the background while it builds, since it is mostly download time)
# Installs the einjit build BUILD_DIR into BUILD_DIR/prefix (cmake --install), creates a
# virtual environment BUILD_DIR/python-venv with the build and test packages from PyPI
# (nanobind, scikit-build-core, NumPy, pytest, PyTorch, scikit-learn), builds
# and installs the module with `pip install ./python` against that prefix, and runs pytest.
# Without the prefix (a plain `pip install ./python`) the module builds einjit from source.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
deps_only=0
if [ "${1:-}" = "--deps" ]; then deps_only=1; shift; fi
build="$(cd "$1" && pwd)"
venv="$build/python-venv"

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" nanobind scikit-build-core numpy pytest torch scikit-learn
if [ "$deps_only" = 1 ]; then exit 0; fi
cmake --install "$build" --prefix "$build/prefix" >/dev/null
config="$(dirname "$(find "$build/prefix" -name einjitConfig.cmake | head -n 1)")"
"${pip[@]}" --no-build-isolation \
  -C cmake.define.EINJIT_PYTHON_USE_INSTALLED=ON -C cmake.define.einjit_DIR="$config" \
  -C build-dir="$build/python-build" "$root/python"
cd "$root/python/tests"
EINJIT_CACHE_DIR="$build/kernel-cache" "$venv/bin/python" -m pytest -q .
