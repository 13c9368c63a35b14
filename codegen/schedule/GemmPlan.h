#pragma once
// The packed GEMM plan of a statement (docs/ARCHITECTURE.md, "The packed CPU contraction
// path"): decided before lowering, a value that `einjit explain` prints and lower/CpuGemm.cpp
// follows. A '+' reduction of a product of two tensor reads whose output indices split into
// an M side (read by operand A only), an N side (operand B only) and batch indices (both),
// the reduction indices K read by either, and large enough that packing pays, runs as
// BLIS does: A packed into MR-wide slivers and B into NR-wide slivers (read through their own
// subscripts and strides), an MR x NR micro-kernel with its accumulators in vector registers
// across a KC-deep block of the reduction, and NC / KC / MC blocking sized from the caches.
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace einjit::codegen {

struct Target;

struct GemmPlan {
  int aFactor = 0;                     // which factor of the product is A (0: the left one)
  int m = -1, n = -1;                  // the M and N indices (output indices)
  std::vector<int> k;                  // reduction indices, the last fastest in the packed slivers
  std::vector<int> batch;              // output indices both operands read
  int mr = 0, nr = 0, width = 0;       // micro-kernel rows, columns (NR: vectors of `width` lanes)
  std::int64_t mc = 0, kc = 0, nc = 0; // cache blocks (elements along M, K, N)
  // Threads: the M slivers of each batch element split into mBlocks blocks of mBlock rows
  // (a multiple of MR, at most MC); one parallel loop runs over (batch element, M block).
  std::int64_t mBlock = 0, mBlocks = 0;
  bool parallel = false;
  std::string why; // one line for `einjit explain`
};

// The plan for statement `stmt`, or nothing when it does not take the packed path.
std::optional<GemmPlan> planGemm(const dsl::Program& p, const dsl::BoundProgram& b,
                                 std::size_t stmt,
                                 const std::vector<std::vector<std::int64_t>>& strides,
                                 const Target& t);

} // namespace einjit::codegen
