#!/usr/bin/env bash
# The Python module on the GPU machine (device tool, third_party/ carried), which has CUDA,
# python3 with PyTorch and NumPy, cmake and ninja, but no LLVM, no oneTBB, no network, no
# nanobind, scikit-build-core, pytest or scikit-learn.
#   tools/gpu-python.sh --prepare   here, with network: the pure-Python wheels (nanobind,
#                                   pytest and its dependencies) and scikit-learn's digits
#                                   file into the ignored third_party/python/
#   tools/gpu-python.sh [--no-cuda] on the GPU machine: builds the module against the
#                                   CUDA-only configuration of einjit (-DEINJIT_WITH_LLVM=OFF
#                                   -DEINJIT_WITH_TBB=OFF; --no-cuda also without CUDA, to try
#                                   the build steps on a machine without a GPU), runs the CUDA
#                                   pytest subset (test_linkage.py, test_cuda.py, the digits
#                                   tests) and the digits model on the GPU beside plain PyTorch.
# The module is built the way pip would (python/CMakeLists.txt, the einjit subproject linked
# statically), by cmake directly: the machine has no scikit-build-core and no network.
# Logs go to $OUT (else build-gpu-python/out).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
carried="$root/third_party/python"
py="${PYTHON:-python3}"

if [ "${1:-}" = "--prepare" ]; then
  mkdir -p "$carried"
  rm -f "$carried"/*.whl
  "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 -d "$carried" nanobind pytest iniconfig pluggy packaging pygments
  digits="$("$py" -c 'import pathlib, sklearn.datasets as d; print(pathlib.Path(d.__file__).parent / "data" / "digits.csv.gz")')"
  cp "$digits" "$carried/digits.csv.gz"
  ls "$carried"
  exit 0
fi

cuda=ON
[ "${1:-}" = "--no-cuda" ] && cuda=OFF
build="$root/build-gpu-python"
out="${OUT:-$build/out}"
mkdir -p "$out" "$build"
[ -f "$carried/digits.csv.gz" ] || { echo "no $carried: run tools/gpu-python.sh --prepare first"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
"$py" -c 'import sys, torch, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "numpy", numpy.__version__)'

# The carried wheels, unpacked onto one path (pure Python: a wheel is a zip).
site="$build/site"
rm -rf "$site" && mkdir -p "$site"
for w in "$carried"/*.whl; do "$py" -m zipfile -e "$w" "$site"; done
# nanobind for the build; pytest and its dependencies only where the machine has no pytest (so
# that the machine's own packages stay in front).
tests_path=""
"$py" -c "import pytest" 2>/dev/null || tests_path=":$site"
export PYTHONPATH="$site"

t0=$(date +%s)
cmake -S "$root/python" -B "$build/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v "$py")" -DEINJIT_WITH_LLVM=OFF -DEINJIT_WITH_TBB=OFF \
  -DEINJIT_WITH_EIGEN=OFF -DEINJIT_WITH_CUDA=$cuda >"$out/configure.log" 2>&1 ||
  { tail -30 "$out/configure.log"; exit 1; }
grep "einjit:" "$out/configure.log" || true
cmake --build "$build/cmake" -j "${JOBS:-$(nproc)}" >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
# The package as pip lays it out: python/einjit/*.py beside the extension and its stubs.
rm -rf "$build/stage" && cmake --install "$build/cmake" --prefix "$build/stage" >/dev/null
cp "$root"/python/einjit/*.py "$root/python/einjit/py.typed" "$build/stage/einjit/"
echo "module built in $(($(date +%s) - t0)) s"
# How the C++ runtime is linked (this machine's /opt/gcc has only a static libstdc++) and what
# the extension exports (python/src/exports.map: its init function only; test_linkage.py).
so="$(ls "$build"/stage/einjit/_einjit*.so)"
ldd "$so" | grep -q 'libstdc++' && echo "C++ runtime: $(ldd "$so" | grep 'libstdc++' | xargs)" ||
  echo "C++ runtime: linked in statically (no libstdc++.so needed)"
export PYTHONPATH="$build/stage$tests_path"
export EINJIT_CACHE_DIR="$build/kernel-cache" EINJIT_DIGITS="$carried/digits.csv.gz"
"$py" -c 'import einjit; print("einjit", einjit.__version__, "from", einjit.__file__, "cuda_available", einjit._einjit.cuda_available())'

status=0
(cd "$root/python/tests" && "$py" -m pytest -q -rA -p no:cacheprovider test_linkage.py test_cuda.py \
  test_examples.py test_module.py test_torch.py 2>&1 | tee "$out/pytest.log") || status=1
grep -q -E "[0-9]+ passed" "$out/pytest.log" && ! grep -q -E "[0-9]+ (failed|error)" "$out/pytest.log" || status=1
if "$py" -c 'import sys, torch, einjit; sys.exit(not (einjit.cuda_available() and torch.cuda.is_available()))'; then
  (cd "$root" && "$py" examples/python/train_digits.py --device cuda --data "$carried/digits.csv.gz" 2>&1 |
    tee "$out/digits-cuda.log") || status=1
else
  echo "digits on the GPU: skipped, no CUDA GPU usable by einjit and PyTorch here"
fi
echo "gpu-python: status $status, $(($(date +%s) - t0)) s"
exit $status
