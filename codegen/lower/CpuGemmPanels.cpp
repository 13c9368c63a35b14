// The layout of an operand's packed panel on the CPU's packed GEMM path (lower/CpuGemm.cpp,
// docs/CPU_SCHEDULES.md, "Lanes far apart").
#include "codegen/lower/CpuGemmPanels.h"

#include "codegen/IROperator.h"
#include "codegen/lower/CpuGemmLowering.h"
#include "codegen/lower/Lowerer.h"
#include "codegen/schedule/GemmKnobs.h"

namespace einjit::codegen::lowering {

// A packed per block with its lanes far apart (a weight gradient's channels) but contiguous or
// nearly along its innermost reduction index (x's columns, 1 or 2 elements apart), every
// subscript plain and proven inside over the current ranges: each lane's run along the KC
// block is contiguous in the panel (sliver, lane, position), so that the packing reads and
// writes whole vectors along that index. Position-major, each position's MR lanes came from
// MR cache lines far apart, a scalar load and store each (a quarter of the README demo's
// weight gradient). The micro-kernel's MR broadcasts per step then read MR runs instead of one.
// Not with the columns kernel (it loads A's lanes of a position as one vector).
bool Lowerer::laneMajorPanel(const GemmPlan& g, const CExpr& op, std::size_t lane,
                             std::size_t innermost, std::int64_t innermostExtent,
                             bool columnsKernel) const {
  if (g.whole[0] || columnsKernel || !g.product || g.bInPlace || !g.masks[0].empty()) return false;
  const auto& os = ctx_.buffers.strides[static_cast<std::size_t>(op.tensor)];
  std::int64_t apart = 0, along = 0;
  for (std::size_t d = 0; d < op.subs.size(); ++d) {
    const Subscript& sub = op.subs[d];
    if (sub.mode != IndexMode::Plain || sub.gather || !subscriptInBounds(op, d)) return false;
    apart += sub.coef[lane] * os[d];
    along += sub.coef[innermost] * os[d];
  }
  return (apart < 1 || apart > kNearLanes) && along >= 1 && along <= kNearLanes &&
         innermostExtent >= g.width;
}

// B packed with its lanes far apart (a weight gradient's x, a GEMM's B^T: the lanes a row or a
// channel apart) but contiguous or nearly along its innermost reduction index, every subscript
// plain and proven inside: the packing reads tw positions of each of tw lanes as one vector per
// lane and the codegen transposes them in registers into one vector per position (n log2 n
// shuffles for n x n elements, where a lane at a time costs a scalar load and store each).
// tw is the vector: 8 floats (AVX2), 16 (AVX-512).
int Lowerer::transposeWidth(const GemmLowering& gl, int x) const {
  const GemmPlan& g = gl.g;
  if (x != 1 || g.bInPlace || !g.masks[1].empty() || gl.K.empty()) return 0;
  const int knob = gemmKnobs().transpose;
  const int tw = knob >= 0 ? knob : g.width;
  if (tw < 2 || tw > g.width || (tw & (tw - 1)) != 0 || gl.W[1] % tw != 0) return 0;
  const CExpr& op = *gl.ops[1];
  const std::size_t lane = gl.sideVar[1], u = gl.K.back();
  const auto& os = ctx_.buffers.strides[static_cast<std::size_t>(op.tensor)];
  std::int64_t apart = 0, along = 0;
  for (std::size_t d = 0; d < op.subs.size(); ++d) {
    const Subscript& sub = op.subs[d];
    if (sub.mode != IndexMode::Plain || sub.gather || !subscriptInBounds(op, d)) return 0;
    apart += sub.coef[lane] * os[d];
    along += sub.coef[u] * os[d];
  }
  if ((apart >= 1 && apart <= kNearLanes) || along < 1 || along > kNearLanes) return 0;
  // A KC block's range of u is checked where it is packed; a whole range here.
  const bool chunked = !g.whole[1] && u == gl.kq;
  return chunked || gl.ext(u) >= tw ? tw : 0;
}

ir::Stmt laneMajorPacking(const std::string& sliver, const ir::Expr& sLo, const ir::Expr& sHi,
                          const std::string& lane, const ir::Expr& inside, std::int64_t w,
                          const std::vector<PanelLoop>& loops, int width,
                          const std::function<ir::Stmt(ir::Expr)>& put, const ir::Expr& read,
                          const ir::Expr& zero, const ir::Stmt& ahead) {
  using namespace ir;
  // The innermost loop in vectors of `width` lanes; where its extent is no multiple of that,
  // the last vector ends at its end and overlaps the one before (it stores the same values
  // again): a stride-2 convolution's 27 columns as 16 + 16, not 16 + 11 scalar copies.
  auto run = [&](const Expr& value) {
    Stmt b = put(value);
    for (std::size_t q = loops.size(); q-- > 0;) {
      const PanelLoop& l = loops[q];
      std::int64_t lo = 0, hi = 0;
      if (q + 1 != loops.size()) {
        // `ahead` (a lane's lines of the next KC block) beside the innermost loop.
        if (ahead && q + 2 == loops.size() && value.get() == read.get()) b = block({ahead, b});
        b = forLoop(l.var, l.lo, l.hi, ForKind::Rolled, b);
      }
      else if (isConst(l.lo, &lo) && isConst(l.hi, &hi) && (hi - lo) % width != 0 &&
               hi - lo > width)
        b = block({forLoop(l.var, l.lo, intImm(hi - (hi - lo) % width), ForKind::Vectorized, b, width),
                   forLoop(l.var, intImm(hi - width), l.hi, ForKind::Vectorized, b, width)});
      else
        b = forLoop(l.var, l.lo, l.hi, ForKind::Vectorized, b, width);
    }
    return b;
  };
  Stmt body = forLoop(lane, intImm(0), inside, ForKind::Rolled, run(read));
  std::int64_t all = 0;
  if (!isConst(inside, &all) || all != w)
    body = block({body, forLoop(lane, inside, intImm(w), ForKind::Rolled, run(zero))});
  return forLoop(sliver, sLo, sHi, ForKind::Outlined, body);
}

} // namespace einjit::codegen::lowering
