#pragma once
// The lane-major panel of the CPU's packed GEMM path (lower/CpuGemm.cpp, docs/CPU_SCHEDULES.md,
// "Lanes far apart"): where Lowerer::laneMajorPanel holds, each lane of an A sliver packed per
// block is its run along the KC block, contiguous in the panel.
#include "codegen/IR.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace einjit::codegen::lowering {

// A loop over the KC block's positions: its variable and range.
struct PanelLoop {
  std::string var;
  ir::Expr lo, hi;
};

// Slivers [sLo, sHi) (loop variable `sliver`) packed lane-major: lanes [0, inside) of each
// (variable `lane`) the value `read` at each position of `loops` (outermost first, the last in
// vectors of `width` lanes), lanes [inside, w) `zero`; `put` stores a value at the current
// sliver, lane and position. One function of its own (outlined), as the other per-block
// packings.
ir::Stmt laneMajorPacking(const std::string& sliver, const ir::Expr& sLo, const ir::Expr& sHi,
                          const std::string& lane, const ir::Expr& inside, std::int64_t w,
                          const std::vector<PanelLoop>& loops, int width,
                          const std::function<ir::Stmt(ir::Expr)>& put, const ir::Expr& read,
                          const ir::Expr& zero, const ir::Stmt& ahead = nullptr);

} // namespace einjit::codegen::lowering
