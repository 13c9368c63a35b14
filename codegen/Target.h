#pragma once
// The machine a program is generated for: every device figure the schedules and the lowering
// read (vector width, threads, a gather's cost on the CPU; block size, SMs, shared-memory budgets,
// architecture features and the split-K model's rates on the GPU). Nothing else in codegen/
// writes one out: a figure that depends on the device belongs here, with its reason.
#include <cstdint>

namespace einjit::codegen {

// When to split a reduction, and into how many chunks: chunks = min(maxChunks, reduction
// iterations / minChunk, maxPartials / output elements); a statement with at most maxOutputs
// output elements and at least minChunks such chunks is split.
struct SplitPolicy {
  std::int64_t maxOutputs = 32;
  std::int64_t minChunk = 16384; // reduction iterations per chunk, at least
  std::int64_t maxChunks = 64;   // chunks per output element, at most
  std::int64_t maxPartials = 2048;
  std::int64_t minChunks = 2; // GPU: 1 (one block per output element, no partials)
};

struct Target {
  // --- CPU -----------------------------------------------------------------------------------
  int vectorBytes = 32; // widest vector register (64 for AVX-512)
  // Vector registers the micro-kernels' accumulators and operands share: 16 ymm registers
  // under AVX2, 32 zmm under AVX-512 (x86-64 ties the count to the width).
  int vectorRegisters() const { return vectorBytes >= 64 ? 32 : 16; }
  // Independent FMA chains that keep the FMA pipes busy: latency x pipes (4 x 2 on AMD Zen 3
  // and 4 and on Intel cores since Skylake).
  int fmaChains = 8;
  // 512-bit operations run as two 256-bit halves (AMD Zen 4): a 256-bit FMA takes half the
  // issue of a 512-bit one, so a tile's last columns may be padded to half a vector, not a
  // whole one (schedule/GemmPlan.cpp). Intel's AVX-512 cores run 512 bits at once.
  bool halvedVectors = false;
  int threads = 1;      // worker threads available
  // A vector gather's cost in contiguous vector loads. Gathers whose lanes are a power-of-two
  // stride apart fall in one L1 set; on AMD Zen 4 such a 16-lane gather costs about 13 loads,
  // on Intel cores with AVX-512 a few.
  double gatherCost = 8;
  // Below this many innermost iterations a statement runs on one thread; a parallel task
  // gets at least this many.
  double minParallelWork = 32768;
  bool tile = true; // register tiles for contractions (off: the generic schedule only)
  // Row blocks (schedule/RowBlocks.h) may keep a run's intermediates in per-task scratch
  // instead of full tensors (off: Options::keepIntermediates, every tensor written in full).
  bool rowScratch = true;
  // Data cache sizes per core (L3: shared), for the packed GEMM's blocks (GemmPlan.h).
  std::int64_t l1Bytes = 32 << 10, l2Bytes = 512 << 10, l3Bytes = 8 << 20;

  // --- GPU -----------------------------------------------------------------------------------
  // A CUDA GPU: statements whose output elements are independent get one thread per output
  // element (GpuBlock x GpuThread loops over the flattened output box, the fastest-varying
  // index the one with unit stride in the output, for coalesced stores) or, with few output
  // elements and a long reduction, a split reduction; the others run in one thread.
  bool gpu = false;
  int gpuArch = 0; // compute capability x 10 of the code
  // Threads per block of the GPU functions other than the contraction tiles: a thread per
  // point, the split reductions' trees, the layout copies.
  int gpuBlock = 256;
  // Streaming multiprocessors of the default GPU (132). Split-K aims at two blocks per SM
  // (gpuBlocksWanted) for the tensor-core tiles, and the f32 tiles' split-K model spreads blocks
  // over these SMs.
  std::int64_t gpuSms = 132;
  // Shared memory the asynchronous pipeline of a tile may keep in flight (its slices, up to 4)
  // while two blocks still share an SM.
  std::int64_t gpuPipelineShared = 96 * 1024;
  // Shared memory for a register-staged operand's reduction index tables (one 32-bit entry per
  // index and position of the whole reduction), filled once per block.
  std::int64_t gpuTableShared = 32 * 1024;
  // The f32 tiles' split-K model (measured figures of the default GPU): one SM's rate through a
  // tile's products (flop/s: the f32 Linear forward's rate in bench/RESULTS.md over its 132 SMs)
  // and the memory bandwidth of the pass that adds the partial sums (bytes/s).
  double gpuSmFlops = 2.9e11, gpuBandwidth = 2.5e12;
  // In that model, an SM given a single block takes this much longer for the same slices than
  // one given two (measured on the C=64 and 1x1 weight gradients).
  double gpuLoneBlock = 1.1;
  SplitPolicy split;

  // Blocks that fill the GPU: two per SM.
  std::int64_t gpuBlocksWanted() const { return 2 * gpuSms; }
  // The warpgroup tensor-core instructions (wgmma, sm_90a): exactly compute capability 9.0.
  bool gpuWarpgroupMma() const { return gpuArch == 90; }
  // Threads per block of the contraction tiles: their shapes are laid out for it (16 x 16
  // threads of the f32 tile, 8 warps of the tensor-core tiles), so it is no free figure.
  static constexpr int gpuTileBlock = 256;
  // Threads of a warp and of a warpgroup (four warps: the unit of wgmma), fixed by CUDA: the
  // tensor-core fragments' lane layouts and the layout copies' coalesced rows are in these units.
  static constexpr int gpuWarp = 32, gpuWarpgroup = 128;
  // Static shared memory a CUDA function may declare; past it the buffers go to dynamic shared
  // memory (launched with its size).
  static constexpr std::int64_t gpuStaticShared = 48 * 1024;
  // The architecture code is generated for where no GPU is there to ask (NVRTC still compiles
  // it: CI and the compile-only tests): compute capability 9.0, the newest the schedules know.
  static constexpr int gpuDefaultArch = 90;
};

// Tests: every schedule made from now on uses this split policy instead of its target's (null
// restores the targets' own). Kernels memoise their compiled code per binding, so a change
// reaches kernels compiled after it.
void overrideSplitPolicy(const SplitPolicy* policy);

// The split policy schedules use for target t: the override, else t's own.
SplitPolicy splitPolicy(const Target& t);

} // namespace einjit::codegen
