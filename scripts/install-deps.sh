#!/usr/bin/env bash
# Installs the Debian packages einjit's build, tests and benchmarks need. Idempotent: packages
# already installed are left as they are. Runs apt-get update first, as root or through sudo.
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config
  ccache               # scripts/test.sh: the Python module's build of einjit reuses the Release build's objects
  llvm-19-dev          # ORC LLJIT, new pass manager (CPU JIT backend)
  libtbb-dev           # oneTBB (parallel CPU loops)
  libeigen3-dev        # interop and a benchmark peer
  doctest-dev          # tests
  libbenchmark-dev     # Google Benchmark
  libopenblas-dev      # benchmark peer
  libdnnl-dev          # oneDNN, benchmark peer
  ocl-icd-opencl-dev   # dnnl-config.cmake finds OpenCL (a Recommends of libdnnl-dev)
  clang-format
  clang-19 libclang-rt-19-dev  # libFuzzer, ASan and UBSan runtimes for scripts/fuzz.sh
  python3-dev python3-venv python3-pip  # the Python module (scripts/test-python.sh)
)
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${packages[@]}"
