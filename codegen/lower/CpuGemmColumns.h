#pragma once
// The columns kernel of the CPU's packed GEMM path (lower/CpuGemm.cpp, docs/CPU_SCHEDULES.md):
// the last B sliver, where it holds one or two columns, with A's MR lanes as the vector.
#include "codegen/IR.h"
#include "codegen/lower/LowerTypes.h"

#include <cstdint>
#include <functional>
#include <string>

namespace einjit::codegen {
struct GemmPlan;
}

namespace einjit::codegen::lowering {

// The columns of N's last sliver that the columns kernel runs (one or two), or 0: a product of
// plain slivers (no accumulator sets, no reads of output indices, B packed), MR within a
// vector. A stride-2 input gradient's phases of 17 or 33 columns, N = 257.
std::int64_t columnsTail(const GemmPlan& g, std::int64_t nExtent, bool tileReads);

// What the kernel reads and writes, in the names of the micro-kernel's loops (lower/CpuGemm).
struct ColumnsKernel {
  std::int64_t columns = 0, mr = 0, width = 0;
  std::int64_t blockSlivers = 0; // slivers in an MC block
  std::int64_t m = 0;            // M's extent
  ir::Type type;                 // of the accumulators
  // Loop variables: the sliver of A (sv), its lane (ii), the column (jj), the position in the
  // KC block (pv); the block's first sliver (ic) and the chunk's end (as1).
  std::string sv, ii, jj, pv, ic, as1;
  ir::Expr kcLen; // the KC block's length
  // A's element at (sv, pv, ii) and B's at (the last sliver, pv, jj), as loads.
  ir::Expr a, b;
  // The tile's cells into the output (lower/CpuGemm's finish): `cells` wraps the store of
  // `sum` in the loops that bind ii, jj and sv.
  std::function<ir::Stmt(const std::function<ir::Stmt(ir::Stmt)>& cells, const ir::Expr& sum)>
      finish;
  std::int64_t fmaChains = 8; // accumulator chains the FMA pipes keep in flight (Target)
};

// The packing of the columns kernel's sliver for one run, its first `columns` lanes copied
// (`copy`), zeroed (`zeros`) or each tested (`each`): copy where the run's terms (lanes
// [terms.lo, terms.hi) where terms.cond) and its lanes inside the tensor (safe) hold all of
// them, zeros where its terms hold none, else each; without solved lanes (null), each.
ir::Stmt columnsPacking(std::int64_t columns, const Lanes* terms, const Lanes* safe, ir::Stmt copy,
                        ir::Stmt zeros, ir::Stmt each);

// The loop over the MC block's slivers, G at a time.
ir::Stmt columnsKernel(const ColumnsKernel& c);

} // namespace einjit::codegen::lowering
