#pragma once
// CUDA C from the loop-nest IR. Each ir::Func becomes one `extern "C" __global__` kernel
// taking every buffer of the program (`T* __restrict__`, const where the function only reads
// it), the scalar parameters (doubles, by value) and the status word. A function whose body starts
// with a GpuBlock loop holding a GpuThread loop is launched with that many blocks of that many
// threads (the loops become blockIdx.x / threadIdx.x); any other function runs in one thread.
// Loops over constant extents marked Unrolled get `#pragma unroll`; local buffers (register
// accumulators) become local arrays; Check nodes set the status word and clamp the index.
// Helper functions (floor division, Euclidean modulo, checks) are emitted only when used.
#include "codegen/IR.h"

#include <cstdint>
#include <string>
#include <vector>

namespace einjit::codegen {

struct CudaLaunch {
  std::string name;       // the kernel's symbol
  std::int64_t grid = 1;  // blocks (x)
  std::int64_t block = 1; // threads per block (x)
  // Dynamic shared memory in bytes: a kernel whose shared buffers need more than the 48 KiB
  // that may be declared statically places them all in one dynamic allocation.
  std::int64_t sharedBytes = 0;
};

struct CudaSource {
  std::string source; // one translation unit
  std::vector<CudaLaunch> kernels;
  // Uses instructions of the architecture-specific feature set (wgmma: sm_90a), so it must be
  // compiled for exactly that architecture ("sm_90a").
  bool archSpecific = false;
};

struct CudaOptions {
  // Index variables and integer constants as 32-bit ints: the caller has checked that every
  // tensor offset and loop bound fits (much cheaper integer arithmetic on the GPU).
  bool index32 = false;
  int params = 0; // scalar parameters, passed by value as doubles
};

// Kernel names are `prefix` + the function's name.
CudaSource emitCUDA(const std::vector<ir::Func>& funcs, const std::string& prefix,
                    const CudaOptions& options = {});

// The source with numbered lines (compile errors quote it).
std::string numberLines(const std::string& source);

} // namespace einjit::codegen
