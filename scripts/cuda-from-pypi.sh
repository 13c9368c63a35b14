#!/usr/bin/env bash
# For a machine without the CUDA toolkit (CI's): the two pieces einjit's CUDA backend builds
# against, NVRTC (nvrtc.h, libnvrtc) and the driver API's header (cuda.h), from NVIDIA's PyPI
# wheels, laid out as a toolkit root that CMake's FindCUDAToolkit accepts (include/, lib64/,
# version.txt; no nvcc, no cuBLAS: bench_cuda is then skipped). With it the CUDA backend builds
# and every test that compiles generated CUDA through NVRTC runs; the tests that need a GPU skip
# with a message. Prints the root's path (pass it as -DCUDAToolkit_ROOT=...).
#   scripts/cuda-from-pypi.sh DIR
set -euo pipefail
dir="$(mkdir -p "$1" && cd "$1" && pwd)"
if [ -f "$dir/version.txt" ]; then echo "$dir"; exit 0; fi
rm -rf "$dir/wheels" "$dir/x" "$dir/include" "$dir/lib64"
mkdir -p "$dir/wheels" "$dir/include" "$dir/lib64"
# pip download installs nothing, so Debian's externally-managed system Python allows it.
python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$dir/wheels" \
  "nvidia-cuda-nvrtc-cu12==12.9.*" "nvidia-cuda-runtime-cu12==12.9.*" >&2
for w in "$dir"/wheels/*.whl; do python3 -m zipfile -e "$w" "$dir/x"; done
ln -sf "$dir"/x/nvidia/cuda_nvrtc/include/* "$dir"/x/nvidia/cuda_runtime/include/* "$dir/include/"
ln -sf "$dir"/x/nvidia/cuda_nvrtc/lib/* "$dir"/x/nvidia/cuda_runtime/lib/* "$dir/lib64/"
ln -sf libnvrtc.so.12 "$dir/lib64/libnvrtc.so"
ln -sf libcudart.so.12 "$dir/lib64/libcudart.so"
version="$(basename "$dir"/wheels/nvidia_cuda_nvrtc_cu12-*.whl | cut -d- -f2)"
echo "CUDA Version $version" >"$dir/version.txt"
echo "$dir"
