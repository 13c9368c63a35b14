#include "runtime/Nvrtc.h"

#include "codegen/CodeGenCUDA.h"
#include "einjit/Error.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace einjit::runtime::nvrtc {

namespace {

#define EINJIT_NVRTC_FUNCTIONS(X)                                                                  \
  X(nvrtcVersion)                                                                                  \
  X(nvrtcGetErrorString)                                                                           \
  X(nvrtcGetNumSupportedArchs)                                                                     \
  X(nvrtcGetSupportedArchs)                                                                        \
  X(nvrtcCreateProgram)                                                                            \
  X(nvrtcDestroyProgram)                                                                           \
  X(nvrtcCompileProgram)                                                                           \
  X(nvrtcGetProgramLogSize)                                                                        \
  X(nvrtcGetProgramLog)                                                                            \
  X(nvrtcGetCUBINSize)                                                                             \
  X(nvrtcGetCUBIN)                                                                                 \
  X(nvrtcGetPTXSize)                                                                               \
  X(nvrtcGetPTX)

struct Api {
#define X(fn) decltype(&::fn) fn = nullptr;
  EINJIT_NVRTC_FUNCTIONS(X)
#undef X
  std::string missing;
  std::vector<int> archs;
  int major = 0, minor = 0;

  Api() {
    // The soname of the toolkit einjit was built with, then any, then the build's own path.
    const std::vector<std::string> names = {"libnvrtc.so." EINJIT_CUDA_MAJOR, "libnvrtc.so",
                                            EINJIT_NVRTC_PATH};
    void* lib = nullptr;
    for (const std::string& n : names)
      if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      missing = "NVRTC (libnvrtc.so." EINJIT_CUDA_MAJOR ") could not be loaded";
      return;
    }
#define X(fn)                                                                                      \
  fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib, #fn));                                         \
  if (!fn) {                                                                                       \
    missing = "NVRTC lacks " #fn;                                                                  \
    return;                                                                                        \
  }
    EINJIT_NVRTC_FUNCTIONS(X)
#undef X
    nvrtcVersion(&major, &minor);
    // NVRTC opens its builtins library for each compilation and closes it after; held open
    // here for the process's life, its thread-local block is never unmapped under a thread that
    // used it (LeakSanitizer's exit scan otherwise read a stale one and crashed).
    const std::string builtins =
        "libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor);
    dlopen(builtins.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    int n = 0;
    nvrtcGetNumSupportedArchs(&n);
    archs.resize(static_cast<std::size_t>(n));
    if (n) nvrtcGetSupportedArchs(archs.data());
  }
};

Api& api() {
  static Api* a = new Api;
  return *a;
}

Api& ready() {
  Api& a = api();
  if (!a.missing.empty()) throw Error("CUDA compilation is not available: " + a.missing);
  return a;
}

void check(nvrtcResult r, const char* call) {
  if (r != NVRTC_SUCCESS)
    throw Error(std::string("NVRTC: ") + call + " failed: " + api().nvrtcGetErrorString(r));
}

} // namespace

bool available(std::string* why) {
  if (why) *why = api().missing;
  return api().missing.empty();
}

std::string version() {
  Api& a = ready();
  return std::to_string(a.major) + "." + std::to_string(a.minor);
}

Compiled compile(const std::string& source, int arch, bool archSpecific, const std::string& name) {
  Api& a = ready();
  auto t0 = std::chrono::steady_clock::now();
  Compiled out;
  // A cubin when NVRTC knows the architecture; otherwise PTX for the newest one it knows.
  out.cubin = std::find(a.archs.begin(), a.archs.end(), arch) != a.archs.end();
  int target = arch;
  if (!out.cubin && archSpecific)
    throw Error("NVRTC " + version() + " cannot compile for compute capability " +
                std::to_string(arch / 10) + "." + std::to_string(arch % 10) +
                " (the generated code uses its own instructions)");
  if (!out.cubin) {
    target = 0;
    for (int x : a.archs)
      if (x <= arch) target = std::max(target, x);
    if (target == 0)
      throw Error("NVRTC " + version() + " cannot compile for compute capability " +
                  std::to_string(arch / 10) + "." + std::to_string(arch % 10));
  }
  out.target =
      (out.cubin ? "sm_" : "compute_") + std::to_string(target) + (archSpecific ? "a" : "");
  nvrtcProgram prog = nullptr;
  check(a.nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr),
        "nvrtcCreateProgram");
  struct Guard {
    Api& a;
    nvrtcProgram* p;
    ~Guard() { a.nvrtcDestroyProgram(p); }
  } guard{a, &prog};
  const std::string archOpt = "--gpu-architecture=" + out.target;
  const char* opts[] = {archOpt.c_str(), "--std=c++17", "-default-device"};
  nvrtcResult r = a.nvrtcCompileProgram(prog, 3, opts);
  std::size_t logSize = 0;
  a.nvrtcGetProgramLogSize(prog, &logSize);
  if (logSize > 1) {
    out.log.resize(logSize);
    a.nvrtcGetProgramLog(prog, out.log.data());
    out.log.resize(logSize - 1);
  }
  if (r != NVRTC_SUCCESS)
    throw Error("NVRTC could not compile the generated CUDA (" +
                std::string(a.nvrtcGetErrorString(r)) + "):\n" + out.log + "\n" +
                codegen::numberLines(source));
  std::size_t size = 0;
  if (out.cubin) {
    check(a.nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    out.image.resize(size);
    check(a.nvrtcGetCUBIN(prog, out.image.data()), "nvrtcGetCUBIN");
  } else {
    check(a.nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
    out.image.resize(size);
    check(a.nvrtcGetPTX(prog, out.image.data()), "nvrtcGetPTX");
  }
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

} // namespace einjit::runtime::nvrtc
