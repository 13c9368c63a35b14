#include "runtime/CudaDriver.h"

#include "einjit/Error.h"

#include <cuda.h>
#include <dlfcn.h>

#include <memory>
#include <mutex>

namespace einjit::runtime::cuda {

namespace {

// The entry points einjit uses, resolved by their versioned symbol names.
#define EINJIT_CUDA_FUNCTIONS(X)                                                                   \
  X(cuInit, "cuInit")                                                                              \
  X(cuDriverGetVersion, "cuDriverGetVersion")                                                      \
  X(cuGetErrorName, "cuGetErrorName")                                                              \
  X(cuGetErrorString, "cuGetErrorString")                                                          \
  X(cuDeviceGetCount, "cuDeviceGetCount")                                                          \
  X(cuDeviceGet, "cuDeviceGet")                                                                    \
  X(cuDeviceGetName, "cuDeviceGetName")                                                            \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute")                                                  \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")                                          \
  X(cuCtxSetCurrent, "cuCtxSetCurrent")                                                            \
  X(cuCtxSynchronize, "cuCtxSynchronize")                                                          \
  X(cuMemAllocAsync, "cuMemAllocAsync")                                                            \
  X(cuMemFreeAsync, "cuMemFreeAsync")                                                              \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2")                                                               \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2")                                                               \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")                                                     \
  X(cuMemsetD8Async, "cuMemsetD8Async")                                                            \
  X(cuModuleLoadData, "cuModuleLoadData")                                                          \
  X(cuModuleGetFunction, "cuModuleGetFunction")                                                    \
  X(cuModuleUnload, "cuModuleUnload")                                                              \
  X(cuFuncSetAttribute, "cuFuncSetAttribute")                                                      \
  X(cuLaunchKernel, "cuLaunchKernel")                                                              \
  X(cuEventCreate, "cuEventCreate")                                                                \
  X(cuEventDestroy, "cuEventDestroy_v2")                                                           \
  X(cuEventRecord, "cuEventRecord")                                                                \
  X(cuEventSynchronize, "cuEventSynchronize")                                                      \
  X(cuEventElapsedTime, "cuEventElapsedTime_v2")

struct Api {
#define X(fn, sym) decltype(&::fn) fn = nullptr;
  EINJIT_CUDA_FUNCTIONS(X)
#undef X
  std::string missing; // why the driver cannot be used; empty when it can
  int devices = 0;
  std::vector<CUcontext> contexts;
  std::vector<DeviceInfo> info;
  std::unique_ptr<std::once_flag[]> made; // per device: context retained, info read

  Api() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      missing = "no NVIDIA driver (libcuda.so.1 could not be loaded)";
      return;
    }
#define X(fn, sym)                                                                                 \
  fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib, sym));                                         \
  if (!fn) {                                                                                       \
    missing = "the NVIDIA driver is too old (no " sym ")";                                         \
    return;                                                                                        \
  }
    EINJIT_CUDA_FUNCTIONS(X)
#undef X
    if (CUresult r = cuInit(0); r != CUDA_SUCCESS) {
      missing = "cuInit failed: " + errorText(r);
      return;
    }
    if (CUresult r = cuDeviceGetCount(&devices); r != CUDA_SUCCESS || devices == 0) {
      missing = "no CUDA device is present";
      devices = 0;
      return;
    }
    contexts.assign(static_cast<std::size_t>(devices), nullptr);
    made = std::make_unique<std::once_flag[]>(static_cast<std::size_t>(devices));
    info.resize(static_cast<std::size_t>(devices));
  }

  std::string errorText(CUresult r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (cuGetErrorName) cuGetErrorName(r, &name);
    if (cuGetErrorString) cuGetErrorString(r, &text);
    return std::string(name ? name : "CUDA error " + std::to_string(static_cast<int>(r))) +
           (text ? std::string(" (") + text + ")" : "");
  }
};

Api& api() {
  static Api* a = new Api; // never destroyed: device memory may be freed during exit
  return *a;
}

void check(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS)
    throw Error(std::string("CUDA driver: ") + call + " failed: " + api().errorText(r));
}

Api& ready() {
  Api& a = api();
  if (!a.missing.empty()) throw Error("CUDA is not available: " + a.missing);
  return a;
}

} // namespace

bool available(std::string* why) {
  Api& a = api();
  if (why) *why = a.missing;
  return a.missing.empty();
}

int deviceCount() { return available() ? api().devices : 0; }

std::string driverVersion() {
  Api& a = ready();
  int v = 0;
  check(a.cuDriverGetVersion(&v), "cuDriverGetVersion");
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

void setDevice(int device) {
  Api& a = ready();
  if (device < 0 || device >= a.devices)
    throw Error("CUDA device " + std::to_string(device) + " does not exist (" +
                std::to_string(a.devices) + " present)");
  const auto d = static_cast<std::size_t>(device);
  // Every driver call of a kernel call comes here: the context is made once, then only made
  // current (no lock).
  std::call_once(a.made[d], [&] {
    CUcontext ctx = nullptr;
    CUdevice dev = 0;
    check(a.cuDeviceGet(&dev, device), "cuDeviceGet");
    check(a.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    DeviceInfo& in = a.info[d];
    char name[256] = {};
    check(a.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    in.name = name;
    int v = 0;
    check(a.cuDeviceGetAttribute(&in.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
          "cuDeviceGetAttribute");
    check(a.cuDeviceGetAttribute(&in.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
          "cuDeviceGetAttribute");
    check(
        a.cuDeviceGetAttribute(&in.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
        "cuDeviceGetAttribute");
    check(a.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
          "cuDeviceGetAttribute");
    in.sharedPerBlockOptin = v;
    a.contexts[d] = ctx;
  });
  check(a.cuCtxSetCurrent(a.contexts[d]), "cuCtxSetCurrent");
}

const DeviceInfo& deviceInfo(int device) {
  setDevice(device);
  return api().info[static_cast<std::size_t>(device)];
}

DevicePtr allocate(int device, std::size_t bytes) {
  if (bytes == 0) return 0;
  setDevice(device);
  CUdeviceptr p = 0;
  check(api().cuMemAllocAsync(&p, bytes, nullptr), "cuMemAllocAsync");
  return p;
}

void release(int device, DevicePtr p) {
  if (!p) return;
  setDevice(device);
  check(api().cuMemFreeAsync(p, nullptr), "cuMemFreeAsync");
}

void copyToDevice(int device, DevicePtr dst, const void* src, std::size_t bytes) {
  if (!bytes) return;
  setDevice(device);
  check(api().cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
}

void copyToHost(int device, void* dst, DevicePtr src, std::size_t bytes) {
  if (!bytes) return;
  setDevice(device);
  check(api().cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH");
}

void copyOnDevice(int device, DevicePtr dst, DevicePtr src, std::size_t bytes) {
  if (!bytes) return;
  setDevice(device);
  check(api().cuMemcpyDtoDAsync(dst, src, bytes, nullptr), "cuMemcpyDtoDAsync");
}

void zero(int device, DevicePtr p, std::size_t bytes) { fill(device, p, bytes, 0); }

void fill(int device, DevicePtr p, std::size_t bytes, unsigned char value) {
  if (!bytes) return;
  setDevice(device);
  check(api().cuMemsetD8Async(p, value, bytes, nullptr), "cuMemsetD8Async");
}

void synchronize(int device) {
  setDevice(device);
  check(api().cuCtxSynchronize(), "cuCtxSynchronize");
}

Module::Module(int device, const std::string& image, const std::vector<std::string>& kernels)
    : device_(device) {
  setDevice(device);
  Api& a = api();
  CUmodule m = nullptr;
  check(a.cuModuleLoadData(&m, image.data()), "cuModuleLoadData");
  module_ = m;
  for (const std::string& k : kernels) {
    CUfunction f = nullptr;
    CUresult r = a.cuModuleGetFunction(&f, m, k.c_str());
    if (r != CUDA_SUCCESS) {
      a.cuModuleUnload(m);
      check(r, ("cuModuleGetFunction(" + k + ")").c_str());
    }
    functions_.push_back(f);
  }
}

Module::~Module() {
  if (!module_) return;
  try {
    setDevice(device_);
    api().cuModuleUnload(static_cast<CUmodule>(module_));
  } catch (...) {
  }
}

void Module::launch(std::size_t kernel, std::int64_t grid, std::int64_t block, void** args,
                    std::size_t sharedBytes) const {
  if (grid <= 0) return;
  if (grid > 0x7fffffff)
    throw Error("CUDA launch: grid of " + std::to_string(grid) + " blocks is too large");
  setDevice(device_);
  auto f = static_cast<CUfunction>(functions_.at(kernel));
  if (sharedBytes > 48 * 1024)
    check(api().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   static_cast<int>(sharedBytes)),
          "cuFuncSetAttribute");
  check(api().cuLaunchKernel(f, static_cast<unsigned>(grid), 1, 1, static_cast<unsigned>(block), 1,
                             1, static_cast<unsigned>(sharedBytes), nullptr, args, nullptr),
        "cuLaunchKernel");
}

Timer::Timer(int device) : device_(device) {
  setDevice(device);
  CUevent b = nullptr, e = nullptr;
  check(api().cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
  check(api().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  begin_ = b;
  end_ = e;
}

Timer::~Timer() {
  api().cuEventDestroy(static_cast<CUevent>(begin_));
  api().cuEventDestroy(static_cast<CUevent>(end_));
}

void Timer::start() {
  setDevice(device_);
  check(api().cuEventRecord(static_cast<CUevent>(begin_), nullptr), "cuEventRecord");
}

double Timer::stop() {
  setDevice(device_);
  check(api().cuEventRecord(static_cast<CUevent>(end_), nullptr), "cuEventRecord");
  check(api().cuEventSynchronize(static_cast<CUevent>(end_)), "cuEventSynchronize");
  float ms = 0;
  check(api().cuEventElapsedTime(&ms, static_cast<CUevent>(begin_), static_cast<CUevent>(end_)),
        "cuEventElapsedTime");
  return ms;
}

} // namespace einjit::runtime::cuda
