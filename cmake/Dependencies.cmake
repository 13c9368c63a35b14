# Every dependency is found through its own CMake package config file. Each one is optional so
# that the project builds where it is missing (the GPU machine has no LLVM and no oneTBB; some
# users have no CUDA); EINJIT_HAVE_<X> records what was found.
# Packages unpacked by scripts/gpu-deps.sh for machines without a package registry.
if(EXISTS ${PROJECT_SOURCE_DIR}/third_party/prefix/usr)
  list(APPEND CMAKE_PREFIX_PATH ${PROJECT_SOURCE_DIR}/third_party/prefix/usr)
endif()

set(EINJIT_HAVE_LLVM OFF)
if(EINJIT_WITH_LLVM)
  # LLVM's version file accepts only an exact major.minor, so check the major version here.
  find_package(LLVM CONFIG QUIET PATHS /usr/lib/llvm-19/lib/cmake/llvm NO_DEFAULT_PATH)
  if(LLVM_FOUND AND LLVM_VERSION_MAJOR EQUAL 19)
    set(EINJIT_HAVE_LLVM ON)
  endif()
endif()

set(EINJIT_HAVE_TBB OFF)
if(EINJIT_WITH_TBB)
  find_package(TBB CONFIG QUIET)
  if(TBB_FOUND)
    set(EINJIT_HAVE_TBB ON)
  endif()
endif()

set(EINJIT_HAVE_CUDA OFF)
if(EINJIT_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  # Headers only at build time: libcuda and libnvrtc are loaded at run time (dlopen), so the
  # binaries run on machines without a driver; CUDA::nvrtc gives the library's path.
  if(CUDAToolkit_FOUND AND TARGET CUDA::nvrtc)
    set(EINJIT_HAVE_CUDA ON)
    get_target_property(EINJIT_NVRTC_PATH CUDA::nvrtc IMPORTED_LOCATION)
    if(NOT EINJIT_NVRTC_PATH)
      set(EINJIT_NVRTC_PATH "${CUDAToolkit_LIBRARY_DIR}/libnvrtc.so")
    endif()
  endif()
endif()

set(EINJIT_HAVE_EIGEN OFF)
if(EINJIT_WITH_EIGEN)
  find_package(Eigen3 3.3 CONFIG QUIET)
  if(Eigen3_FOUND)
    set(EINJIT_HAVE_EIGEN ON)
  endif()
endif()

set(EINJIT_HAVE_DOCTEST OFF)
if(EINJIT_BUILD_TESTS)
  find_package(doctest CONFIG QUIET)
  if(doctest_FOUND)
    set(EINJIT_HAVE_DOCTEST ON)
  elseif(EXISTS ${PROJECT_SOURCE_DIR}/third_party/doctest/doctest.h)
    # The GPU machine has no package registry: a header unpacked from Debian's doctest-dev
    # travels in the ignored third_party/ folder (scripts/gpu-deps.sh).
    add_library(doctest::doctest INTERFACE IMPORTED)
    target_include_directories(doctest::doctest INTERFACE ${PROJECT_SOURCE_DIR}/third_party)
    set(EINJIT_HAVE_DOCTEST ON)
  else()
    message(FATAL_ERROR "doctest not found: run scripts/install-deps.sh or -DEINJIT_BUILD_TESTS=OFF")
  endif()
endif()

set(EINJIT_HAVE_BENCHMARK OFF)
if(EINJIT_BUILD_BENCH)
  find_package(benchmark CONFIG QUIET)
  if(benchmark_FOUND)
    set(EINJIT_HAVE_BENCHMARK ON)
  endif()
endif()

find_package(Threads REQUIRED)
