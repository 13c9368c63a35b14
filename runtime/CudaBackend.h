#pragma once
// The CUDA backend: one call's binding -> lowered loop nests for a GPU target (codegen/Lower.h)
// -> CUDA C (codegen/CodeGenCUDA.h) -> NVRTC (cubin, cached in memory — at most
// CacheLimits::memoryModules — and on disk (DiskCache.h), keyed by the source, the target
// architecture and NVRTC's version) -> a module loaded on the device
// -> launches on the default stream. Buffers are device pointers with the call's strides;
// floating-point scalar parameters are kernel arguments, so changing one does not recompile.
#include "codegen/CodeGenCUDA.h"
#include "codegen/Lower.h"
#include "dsl/Binding.h"
#include "runtime/CudaDriver.h"
#include "runtime/Memo.h"

#include <memory>

namespace einjit::runtime {

// The architecture whose code a device gets (compute capability x 10): the device's, or 90
// (H100) without a GPU, or EINJIT_CUDA_ARCH when that names an older one. 90 selects the
// warpgroup tensor-core tiles (wgmma, sm_90a); others the mma.sync tiles.
int codeArch(int device);
codegen::Target cudaTarget(int arch);

// Lowered program and its CUDA source; no GPU or NVRTC needed.
struct CudaProgram {
  codegen::LoweredProgram lowered;
  codegen::CudaSource cuda;
};
CudaProgram generateCuda(const dsl::Program& p, const dsl::BoundProgram& b,
                         const codegen::Strides& strides, const codegen::Aligned16& aligned,
                         int arch);

struct PreparedCuda {
  CudaProgram program;
  std::shared_ptr<const cuda::Module> module;
  std::string origin; // "compiled", "memory cache", "disk cache"
  std::string target; // "sm_90"
  double compileMs = 0;
};

std::shared_ptr<const PreparedCuda> prepareCuda(const dsl::Program& p, const dsl::BoundProgram& b,
                                                const codegen::Strides& strides,
                                                const codegen::Aligned16& aligned, int device);

// Launches every kernel in order on the default stream, with device scratch buffers of its own
// (split reductions' partials, freed in stream order): the hoisted checks (Lower.h), waiting
// for them and returning nonzero, with nothing written, when one fails; then the zero fills and
// the rest. A checked program whose checks are not all hoisted waits and returns the status:
// 0, or nonzero when a checked access went out of bounds. Otherwise it returns 0 at once (the
// work is queued).
int executeCuda(const PreparedCuda& prep, int device, const std::vector<cuda::DevicePtr>& buffers,
                const std::vector<double>& params, const std::vector<std::int64_t>& zeroBytes);

struct CudaStats {
  std::int64_t compiled = 0, memoryHits = 0, diskHits = 0;
  std::int64_t diskRejected = 0; // the process's disk cache, both backends
  std::int64_t memoryEntries = 0;
  double lastCompileMs = 0;
};
CudaStats cudaStats();
void cudaClearMemoryCache();
// Applies a lowered CacheLimits::memoryModules.
void cudaTrimMemoryCache();

using PreparedCudaCache = Memo<PreparedCuda>;

} // namespace einjit::runtime
