// The CUDA backend: preparation (lower, CUDA C, NVRTC, caches, module load), launches, and the
// Backend that runs calls on host or device tensors through it.
#include "runtime/CudaBackend.h"

#include "runtime/Backend.h"
#include "runtime/Caches.h"
#include "runtime/CallLayout.h"
#include "runtime/CompileCache.h"
#include "runtime/DiskCache.h"
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

using ModuleCache = CompileCache<cuda::Module>;

struct CudaEngine {
  ModuleCache modules{"cubin"}; // memory keys: the disk key + the device
  double lastCompileMs = 0;     // under modules.lock()
};

CudaEngine& engine() {
  static CudaEngine* e = new CudaEngine; // never destroyed, like the driver
  return *e;
}

// Every offset and loop bound of the call fits comfortably in 32 bits, and so does each
// statement's whole iteration space. The last condition is stricter than the kernels need,
// but the contraction tiles ran 10-30% slower with 32-bit indices (address arithmetic then
// widens every offset), so large statements keep 64-bit indices (bench/RESULTS.md, "Measurements
// moved out of codegen comments").
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
  int arch = codegen::Target::gpuDefaultArch; // without a GPU
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
  std::vector<ModuleCache::Value> dropped; // unloaded after the lock
  auto lock = e.modules.lock();
  const std::string moduleKey = key + "\ndevice " + std::to_string(device);
  auto t0 = std::chrono::steady_clock::now();
  prep->target = "sm_" + std::to_string(arch);
  if (auto* hit = e.modules.hit(moduleKey)) {
    prep->module = *hit;
    prep->origin = "memory cache";
    return prep;
  }
  auto build = [&] {
    nvrtc::Compiled c =
        nvrtc::compile(prep->program.cuda.source, arch, prep->program.cuda.archSpecific);
    prep->target = c.target;
    return std::move(c.image);
  };
  ModuleCache::Origin origin;
  std::string image = e.modules.readOrBuild(key, build, origin);
  prep->module =
      e.modules.loadOrRebuild(key, std::move(image), origin, build, [&](const std::string& img) {
        return std::make_shared<cuda::Module>(device, img, names);
      });
  prep->origin = origin == ModuleCache::Origin::compiled ? "compiled" : "disk cache";
  prep->compileMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  e.lastCompileMs = prep->compileMs;
  e.modules.store(moduleKey, prep->module, origin, dropped);
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
  CudaEngine& e = engine();
  const ModuleCache::Counts c = e.modules.counts();
  CudaStats s;
  s.compiled = c.compiled;
  s.memoryHits = c.memoryHits;
  s.diskHits = c.diskHits;
  s.memoryEntries = c.entries;
  {
    auto lock = e.modules.lock();
    s.lastCompileMs = e.lastCompileMs;
  }
  s.diskRejected = DiskCache::instance().stats(false).rejected;
  return s;
}

void cudaClearMemoryCache() { engine().modules.clear(); }

void cudaTrimMemoryCache() { engine().modules.trim(); }

namespace {

// Which tensors reach the kernels through 16-byte aligned pointers (CudaBackend::runGpu): a
// host argument is copied to fresh device memory at its offset from the lowest byte it spans;
// a device one is used in place or copied the same way; the program's own tensors are fresh
// allocations.
codegen::Aligned16 alignedOnDevice(const dsl::Program& p, const std::vector<Tensor>& tensors) {
  codegen::Aligned16 a(p.tensors.size(), true);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.numel() == 0) continue;
    const auto lo = reinterpret_cast<std::uintptr_t>(t.byteExtent().first);
    const auto at = reinterpret_cast<std::uintptr_t>(t.data());
    bool ok = (at - lo) % 16 == 0;
    if (t.device() == DeviceKind::cuda) ok = ok && at % 16 == 0;
    a[static_cast<std::size_t>(p.arguments[i])] = ok;
  }
  return a;
}

// Device memory for one tensor of a call, freed with it.
struct DeviceSpan {
  int device = 0;
  cuda::DevicePtr base = 0;
  DeviceSpan() = default;
  DeviceSpan(int d, std::size_t bytes) : device(d), base(cuda::allocate(d, bytes)) {}
  DeviceSpan(const DeviceSpan&) = delete;
  DeviceSpan& operator=(const DeviceSpan&) = delete;
  ~DeviceSpan() {
    try {
      cuda::release(device, base);
    } catch (...) {
    }
  }
};

std::size_t spanBytes(const Tensor& t) {
  const auto [lo, hi] = t.byteExtent();
  return static_cast<std::size_t>(hi - lo);
}

// The interpreter's run of a device call whose checked access failed: on host copies with the
// same strides; results (when it does not throw) copied back into the device tensors.
void interpretOnHost(const dsl::Program& p, const dsl::BoundProgram& bound,
                     std::vector<Tensor>& all, int dev) {
  std::vector<Tensor> host(all.size());
  std::vector<std::shared_ptr<std::byte[]>> bufs(all.size());
  for (std::size_t id = 0; id < all.size(); ++id) {
    const Tensor& t = all[id];
    const auto [lo, hi] = t.byteExtent();
    const std::size_t bytes = static_cast<std::size_t>(hi - lo);
    bufs[id] = std::shared_ptr<std::byte[]>(new std::byte[std::max<std::size_t>(bytes, 1)]);
    cuda::copyToHost(dev, bufs[id].get(), reinterpret_cast<cuda::DevicePtr>(lo), bytes);
    const auto offset = static_cast<const std::byte*>(t.data()) - lo;
    host[id] = Tensor::view(bufs[id].get() + offset, t.dtype(), t.shape(), t.strides(), bufs[id]);
  }
  codegen::interpret(p, bound, hostBuffers(host));
  for (std::size_t id = 0; id < all.size(); ++id) {
    if (p.tensors[id].writtenBy.empty()) continue;
    const auto [lo, hi] = all[id].byteExtent();
    cuda::copyToDevice(dev, reinterpret_cast<cuda::DevicePtr>(lo), bufs[id].get(),
                       static_cast<std::size_t>(hi - lo));
  }
}

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const Device& device) : device_(device) {}

  void prepare(const BoundCall& call) const override { prepared(call); }

  void run(const BoundCall& call, std::vector<Tensor>& all) const override {
    if (runGpu(call, all)) return;
    // A checked access failed: the interpreter throws the error with its caret, or computes
    // the result when the failure came from a branch it does not evaluate.
    const bool onDevice = !call.arguments.empty() && call.arguments[0].device() == DeviceKind::cuda;
    if (onDevice)
      interpretOnHost(call.program, call.bound, all, device_.index);
    else
      codegen::interpret(call.program, call.bound, hostBuffers(all));
  }

  std::string explain(const BoundCall& call, bool llvmIR) const override {
    const dsl::Program& p = call.program;
    CudaProgram cp = generateCuda(p, call.bound, stridesOf(call),
                                  alignedOnDevice(p, call.arguments), codeArch(device_.index));
    std::string out = "# target: CUDA (" + device_.name() + ")\n";
    for (std::size_t k = 0; k < p.stmts.size(); ++k)
      out += "# statement " + std::to_string(k + 1) + ": " + cp.lowered.notes[k] + "\n";
    for (int id : cp.lowered.zeroFill)
      out += "# zero-filled first: " + p.tensors[static_cast<std::size_t>(id)].name + "\n";
    out += checkNote(cp.lowered);
    for (const auto& k : cp.cuda.kernels)
      out += "# launch " + k.name + ": " + std::to_string(k.grid) + " block(s) of " +
             std::to_string(k.block) + " thread(s)\n";
    if (llvmIR)
      for (const auto& f : cp.lowered.funcs) out += codegen::ir::print(f);
    return out + "\n" + cp.cuda.source;
  }

  std::size_t cachedVariants() const override { return memo_.size(); }
  void limitVariants(std::size_t n) override { memo_.setCapacity(n); }

private:
  std::shared_ptr<const PreparedCuda> prepared(const BoundCall& call) const {
    const dsl::Program& p = call.program;
    codegen::Strides strides = stridesOf(call);
    codegen::Aligned16 aligned = alignedOnDevice(p, call.arguments);
    std::string key = bindingSignature(p, call.bound, strides) + "aligned:";
    for (bool b : aligned) key += b ? '1' : '0';
    return memo_.get(key,
                     [&] { return prepareCuda(p, call.bound, strides, aligned, device_.index); });
  }

  // Runs on the GPU. Host tensors are copied to the device (each argument's whole byte span, so
  // views keep their strides) and written ones back; device tensors are used in place, through
  // scratch copies when a checked program writes arguments (unless its checks run first:
  // LoweredProgram::prechecked). False when a checked access failed: the caller's tensors are
  // as before and the interpreter must report it.
  bool runGpu(const BoundCall& call, std::vector<Tensor>& all) const {
    const dsl::Program& p = call.program;
    const int dev = device_.index;
    cuda::setDevice(dev);
    auto prep = prepared(call);
    // Written arguments go through copies when a failed check could leave them half written.
    const bool checked = prep->program.lowered.lateChecks();
    const std::size_t n = all.size();
    std::vector<cuda::DevicePtr> ptrs(n, 0);
    std::vector<std::unique_ptr<DeviceSpan>> staged(n);
    auto isWrittenArg = [&](std::size_t id) {
      return p.tensors[id].isArgument && !p.tensors[id].writtenBy.empty();
    };
    for (std::size_t id = 0; id < n; ++id) {
      const Tensor& t = all[id];
      const auto [lo, hi] = t.byteExtent();
      const auto offset = static_cast<std::size_t>(static_cast<const std::byte*>(t.data()) - lo);
      if (t.device() == DeviceKind::cuda && !(checked && isWrittenArg(id))) {
        ptrs[id] = reinterpret_cast<cuda::DevicePtr>(t.data());
        continue;
      }
      staged[id] = std::make_unique<DeviceSpan>(dev, std::max<std::size_t>(spanBytes(t), 1));
      ptrs[id] = staged[id]->base + offset;
      if (!p.tensors[id].isArgument) continue;
      if (t.device() == DeviceKind::cuda)
        cuda::copyOnDevice(dev, staged[id]->base, reinterpret_cast<cuda::DevicePtr>(lo),
                           spanBytes(t));
      else
        cuda::copyToDevice(dev, staged[id]->base, lo, spanBytes(t));
    }
    // EINJIT_POISON=1: fresh outputs start as NaN (all bits set), so an element no kernel
    // writes shows up in a test.
    static const bool poison = std::getenv("EINJIT_POISON") && *std::getenv("EINJIT_POISON") == '1';
    if (poison)
      for (std::size_t id = 0; id < n; ++id)
        if (!p.tensors[id].isArgument) cuda::fill(dev, ptrs[id], spanBytes(all[id]), 0xff);
    std::vector<std::int64_t> zero(n, 0);
    for (int id : prep->program.lowered.zeroFill) {
      const Tensor& t = all[static_cast<std::size_t>(id)];
      zero[static_cast<std::size_t>(id)] =
          t.numel() * static_cast<std::int64_t>(dtypeSize(t.dtype()));
    }
    if (executeCuda(*prep, dev, ptrs, call.bound.params, zero) != 0) return false;
    for (std::size_t id = 0; id < n; ++id) {
      if (!staged[id] || p.tensors[id].writtenBy.empty()) continue;
      const Tensor& t = all[id];
      const auto [lo, hi] = t.byteExtent();
      (void)hi;
      if (t.device() == DeviceKind::cuda)
        cuda::copyOnDevice(dev, reinterpret_cast<cuda::DevicePtr>(lo), staged[id]->base,
                           spanBytes(t));
      else
        cuda::copyToHost(dev, const_cast<std::byte*>(lo), staged[id]->base, spanBytes(t));
    }
    return true;
  }

  Device device_;
  mutable PreparedCudaCache memo_;
};

} // namespace

std::unique_ptr<Backend> makeCudaBackend(const Device& device) {
  return std::make_unique<CudaBackend>(device);
}

} // namespace einjit::runtime
