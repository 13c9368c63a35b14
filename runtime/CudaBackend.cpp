#include "runtime/CudaBackend.h"

#include "runtime/Caches.h"
#include "runtime/DiskCache.h"
#include "runtime/Lru.h"
#include "runtime/Nvrtc.h"

#include "einjit/Error.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

namespace einjit::runtime {

namespace {

// Bump when the generated CUDA changes meaning for the same source (part of every key).
constexpr const char* kCudaCodegenVersion = "einjit-cuda-3";

struct CudaEngine {
  std::mutex mu;
  LruMap<std::shared_ptr<const cuda::Module>> modules{
      currentLimits().memoryModules}; // key + device
  CudaStats stats;
};

CudaEngine& engine() {
  static CudaEngine* e = new CudaEngine; // never destroyed, like the driver
  return *e;
}

// Every offset and loop bound of the call fits comfortably in 32 bits, and so does each
// statement's whole iteration space. The last condition is stricter than the kernels need,
// but on the H100 the contraction tiles ran 10-30% slower with 32-bit indices (address
// arithmetic then widens every offset), so large statements keep 64-bit indices (measured
// session 5: f32 NN 4096 3.37 vs 3.72 ms, conv 128ch stride 2 0.270 vs 0.357 ms).
bool fitsIndex32(const dsl::Program& p, const dsl::BoundProgram& b, const codegen::Strides& s) {
  constexpr std::int64_t limit = std::int64_t{1} << 28;
  for (std::size_t t = 0; t < p.tensors.size(); ++t)
    if (codegen::spanElements(b.tensors[t].shape, s[t]) >= limit) return false;
  for (const auto& st : b.stmts) {
    std::int64_t total = 1;
    for (std::size_t v = 0; v < st.lo.size(); ++v) {
      if (std::abs(st.lo[v]) >= limit || std::abs(st.hi[v]) >= limit) return false;
      total *= std::max<std::int64_t>(st.hi[v] - st.lo[v], 1);
      if (total >= limit) return false;
    }
  }
  return true;
}

} // namespace

int codeArch(int device) {
  int arch = 90; // without a GPU: the H100's
  if (cuda::available()) {
    const cuda::DeviceInfo& info = cuda::deviceInfo(device);
    arch = info.major * 10 + info.minor;
  }
  // EINJIT_CUDA_ARCH=80 (or sm_80): the code an older architecture would get, on a newer GPU
  // (tests run the mma.sync tiles on an H100 that way).
  if (const char* env = std::getenv("EINJIT_CUDA_ARCH")) {
    std::string s = env;
    if (s.rfind("sm_", 0) == 0) s = s.substr(3);
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (end && *end == '\0' && v >= 50 && v <= arch) arch = static_cast<int>(v);
  }
  return arch;
}

codegen::Target cudaTarget(int arch) {
  codegen::Target t;
  t.gpu = true;
  t.gpuArch = arch;
  t.tile = false;
  t.threads = 1;
  t.vectorBytes = 4;
  // Split reductions: up to 4096 output elements, chunks of at least 16 iterations per
  // thread, at most 512 chunks per element and 4096 blocks; a single chunk (a block per
  // element, its tree writing the output) is worth it too.
  t.split.maxOutputs = 4096;
  t.split.minChunk = 16 * t.gpuBlock;
  t.split.maxChunks = 512;
  t.split.maxPartials = 4096;
  t.split.minChunks = 1;
  return t;
}

CudaProgram generateCuda(const dsl::Program& p, const dsl::BoundProgram& b,
                         const codegen::Strides& strides, const codegen::Aligned16& aligned,
                         int arch) {
  CudaProgram out;
  out.lowered = codegen::lower(p, b, strides, cudaTarget(arch), aligned);
  codegen::CudaOptions opt;
  opt.index32 = fitsIndex32(p, b, strides);
  opt.params = static_cast<int>(p.params.size());
  out.cuda = codegen::emitCUDA(out.lowered.funcs, "ej_", opt);
  return out;
}

std::shared_ptr<const PreparedCuda> prepareCuda(const dsl::Program& p, const dsl::BoundProgram& b,
                                                const codegen::Strides& strides,
                                                const codegen::Aligned16& aligned, int device) {
  auto prep = std::make_shared<PreparedCuda>();
  prep->program = generateCuda(p, b, strides, aligned, codeArch(device));
  const cuda::DeviceInfo& info = cuda::deviceInfo(device);
  const int arch = info.major * 10 + info.minor;
  const std::string key = std::string(kCudaCodegenVersion) + " nvrtc " + nvrtc::version() +
                          " arch " + std::to_string(arch) + "\n" + prep->program.cuda.source;
  std::vector<std::string> names;
  for (const auto& k : prep->program.cuda.kernels) names.push_back(k.name);
  CudaEngine& e = engine();
  std::vector<std::shared_ptr<const cuda::Module>> dropped; // unloaded after the lock
  std::lock_guard<std::mutex> lock(e.mu);
  const std::string moduleKey = key + "\ndevice " + std::to_string(device);
  auto t0 = std::chrono::steady_clock::now();
  prep->target = "sm_" + std::to_string(arch);
  if (auto* hit = e.modules.find(moduleKey)) {
    ++e.stats.memoryHits;
    prep->module = *hit;
    prep->origin = "memory cache";
    return prep;
  }
  DiskCache& disk = DiskCache::instance();
  auto build = [&] {
    nvrtc::Compiled c =
        nvrtc::compile(prep->program.cuda.source, arch, prep->program.cuda.archSpecific);
    prep->target = c.target;
    prep->origin = "compiled";
    disk.write("cubin", key, c.image);
    return std::move(c.image);
  };
  std::string image = disk.read("cubin", key);
  prep->origin = "disk cache";
  if (image.empty()) image = build();
  try {
    prep->module = std::make_shared<cuda::Module>(device, image, names);
  } catch (const Error&) {
    // An authenticated entry the driver does not load: rebuilt and replaced, not a kernel
    // that fails for good.
    if (prep->origin != "disk cache") throw;
    image = build();
    prep->module = std::make_shared<cuda::Module>(device, image, names);
  }
  if (prep->origin == "compiled")
    ++e.stats.compiled;
  else
    ++e.stats.diskHits;
  prep->compileMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  e.stats.lastCompileMs = prep->compileMs;
  e.modules.setCapacity(currentLimits().memoryModules, dropped);
  e.modules.put(moduleKey, prep->module, dropped);
  return prep;
}

int executeCuda(const PreparedCuda& prep, int device, const std::vector<cuda::DevicePtr>& buffers,
                const std::vector<double>& params, const std::vector<std::int64_t>& zeroBytes) {
  // The call's own device memory, freed in stream order after the launches: scratch buffers
  // (split reductions' partials, re-laid-out copies; after the tensors) and the status word.
  struct Owned {
    int device;
    std::vector<cuda::DevicePtr> ptrs;
    ~Owned() {
      for (cuda::DevicePtr p : ptrs) try {
          cuda::release(device, p);
        } catch (...) {
        }
    }
  } owned{device, {}};
  const codegen::LoweredProgram& low = prep.program.lowered;
  for (const codegen::ScratchBuffer& s : low.scratch)
    owned.ptrs.push_back(cuda::allocate(device, std::max<std::size_t>(s.bytes(), 1)));
  // Arguments: every buffer, each parameter (by value), the status pointer.
  std::vector<cuda::DevicePtr> ptrs = buffers;
  ptrs.insert(ptrs.end(), owned.ptrs.begin(), owned.ptrs.end());
  cuda::DevicePtr status = 0;
  if (low.checked) {
    status = cuda::allocate(device, sizeof(int));
    owned.ptrs.push_back(status);
    cuda::zero(device, status, sizeof(int));
  }
  std::vector<double> prm = params;
  std::vector<void*> args;
  for (auto& b : ptrs) args.push_back(&b);
  for (auto& v : prm) args.push_back(&v);
  args.push_back(&status);
  auto launch = [&](std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
      const auto& k = prep.program.cuda.kernels[i];
      prep.module->launch(i, k.grid, k.block, args.data(), static_cast<std::size_t>(k.sharedBytes));
    }
  };
  auto read = [&] { // waits for the launches so far
    int result = 0;
    cuda::copyToHost(device, &result, status, sizeof(int));
    return result;
  };
  // The hoisted checks first (Lower.h): nothing is written when they fail, and the rest
  // cannot fail when they pass, so the call returns with its work queued.
  if (low.checks > 0) {
    launch(0, low.checks);
    if (read() != 0) return 1;
  }
  for (std::size_t t = 0; t < zeroBytes.size(); ++t)
    if (zeroBytes[t] > 0) cuda::zero(device, buffers[t], static_cast<std::size_t>(zeroBytes[t]));
  launch(low.checks, prep.program.cuda.kernels.size());
  return low.lateChecks() ? read() : 0;
}

CudaStats cudaStats() {
  CudaStats s;
  {
    CudaEngine& e = engine();
    std::lock_guard<std::mutex> lock(e.mu);
    s = e.stats;
    s.memoryEntries = static_cast<std::int64_t>(e.modules.size());
  }
  s.diskRejected = DiskCache::instance().stats(false).rejected;
  return s;
}

void cudaClearMemoryCache() {
  CudaEngine& e = engine();
  std::vector<std::shared_ptr<const cuda::Module>> dropped;
  std::lock_guard<std::mutex> lock(e.mu);
  e.modules.clear(dropped);
}

void cudaTrimMemoryCache() {
  CudaEngine& e = engine();
  std::vector<std::shared_ptr<const cuda::Module>> dropped;
  std::lock_guard<std::mutex> lock(e.mu);
  e.modules.setCapacity(currentLimits().memoryModules, dropped);
}

} // namespace einjit::runtime
