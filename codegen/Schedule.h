#pragma once
// Schedules: how each statement of a bound program becomes loops. Lowering (Lower.h) follows a
// schedule; it never decides one. A schedule fixes the loop order of the output indices, the
// loop run in parallel, the loop hinted for vectorization, and for contraction-like statements
// a register tile: MR values of one output index times NR (a multiple of the vector width)
// of the unit-stride output index, kept in registers across the whole reduction.
//
// A statement with few output elements and a long reduction gets a *split reduction* instead:
// its reduction runs in a fixed number of chunks (contiguous in iteration order) in parallel,
// each into a partial result, and the partials are combined in chunk order. The chunk count
// depends on the shapes only (never on threads or the machine), so results are bit-identical
// from run to run and for any thread count.
//
// Large products of two reads take the packed GEMM path instead (schedule/GemmPlan.h:
// packing buffers, a micro-kernel, cache blocking); backends need no change.
#include "codegen/schedule/GemmPlan.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <optional>

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
  int vectorBytes = 32; // widest vector register (64 for AVX-512)
  int threads = 1;      // worker threads available
  // A vector gather's cost in contiguous vector loads. Gathers whose lanes are a power-of-two
  // stride apart fall in one L1 set; on AMD Zen 4 such a 16-lane gather costs about 13 loads,
  // on Intel cores with AVX-512 a few.
  double gatherCost = 8;
  // Below this many innermost iterations a statement runs on one thread; a parallel task
  // gets at least this many.
  double minParallelWork = 32768;
  bool tile = true; // register tiles for contractions (off: the generic schedule only)
  // Data cache sizes per core (L3: shared), for the packed GEMM's blocks (GemmPlan.h).
  std::int64_t l1Bytes = 32 << 10, l2Bytes = 512 << 10, l3Bytes = 8 << 20;
  // A CUDA GPU: statements whose output elements are independent get one thread per output
  // element (GpuBlock x GpuThread loops over the flattened output box, the fastest-varying
  // index the one with unit stride in the output, for coalesced stores) or, with few output
  // elements and a long reduction, a split reduction; the others run in one thread. gpuBlock
  // threads per block.
  bool gpu = false;
  int gpuBlock = 256;
  int gpuArch = 0; // compute capability x 10 of the code (90: warpgroup tensor-core tiles)
  // Two per SM of the default GPU (132 SMs): the tensor-core tiles split their reduction (split-K)
  // until there are about a quarter of this many blocks; the f32 tiles' split-K model counts SMs as
  // half.
  std::int64_t gpuBlocksWanted = 264;
  // The f32 tiles' split-K model (measured figures of the default GPU): one SM's rate through a
  // tile's products (flop/s: the f32 Linear forward's rate in bench/RESULTS.md over its 132 SMs)
  // and the memory bandwidth of the pass that adds the partial sums (bytes/s).
  double gpuSmFlops = 2.9e11, gpuBandwidth = 2.5e12;
  SplitPolicy split;
};

// Tests: every schedule made from now on uses this split policy instead of its target's (null
// restores the targets' own). Kernels memoise their compiled code per binding, so a change
// reaches kernels compiled after it.
void overrideSplitPolicy(const SplitPolicy* policy);

struct StatementSchedule {
  bool run = true;             // false: no output element is covered
  std::vector<int> outerOrder; // output indices, outermost first
  int parallelVar = -1;        // an output index whose loop (or tile loop) is split among
                               // threads
  bool vectorizeInner = false; // hint the innermost loop to LLVM's vectorizer
  // Register tile (tileJ >= 0): tileJ has unit stride in the output, tileI is another output
  // index (or -1: a single row).
  int tileI = -1, tileJ = -1;
  int mr = 1, nr = 1, width = 1;
  // Dot-product tile (dotVar >= 0): no output index is contiguous in the reads, but a '+'
  // reduction index is. MR x NR outputs (tileI x tileJ, tileJ may be -1), each a vector of
  // `width` partial sums along dotVar, added up at the end.
  int dotVar = -1;
  // Split reduction (splitChunks > 0): the reduction indices from the first one to splitVar,
  // flattened (splitPrefix iterations, the last index fastest), run in splitChunks chunks of
  // splitChunk iterations (the last chunk may be shorter); the later reduction indices run
  // whole inside each iteration. Partials are combined in chunk order.
  int splitChunks = 0;
  int splitVar = -1;
  std::int64_t splitPrefix = 0, splitChunk = 0;
  // The packed GEMM path (schedule/GemmPlan.h): it replaces the tiles above.
  std::optional<GemmPlan> gemm;
  std::string why; // one line for `einjit explain`
};

// Strides (in elements) of every tensor of the call, by tensor id.
using Strides = std::vector<std::vector<std::int64_t>>;

// Elements from a tensor's first to one past its last (its largest offset + 1; 1 when empty).
std::int64_t spanElements(const std::vector<std::int64_t>& shape,
                          const std::vector<std::int64_t>& strides);

// Distinct output index tuples write distinct elements and no element is read by another
// iteration: the statement's output elements may be computed in parallel, in any order (no
// scatter, no read of its own output, an injective left-hand side).
bool independentOutputs(const dsl::Statement& st);

// The statement reads its own output (on the right, or in a left-hand gather).
bool readsOwnOutput(const dsl::Statement& st);

StatementSchedule scheduleStatement(const dsl::Program& p, const dsl::BoundProgram& b,
                                    std::size_t stmt, const Strides& strides, const Target& t);

} // namespace einjit::codegen
