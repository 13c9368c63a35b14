// The columns kernel (CpuGemmColumns.h). The last B sliver's few columns (N = 17 with NR = 16:
// one) with A's MR lanes as the vector, the lanes past MR masked off A's loads: each term one
// FMA of a sliver's A lanes by a broadcast B element per column, G slivers of the MC block at
// a time, their chains interleaved (one sliver alone would wait on the FMA latency). The
// half-width tile it replaces spent MR FMAs per term on one column, on MR chains that waited
// on that latency. Each element's sum runs over the same terms in the same order.
#include "codegen/lower/CpuGemmColumns.h"

#include "codegen/IROperator.h"
#include "codegen/schedule/GemmPlan.h"

#include <algorithm>

namespace einjit::codegen::lowering {

using ir::Expr;
using ir::ForKind;
using ir::Stmt;

std::int64_t columnsTail(const GemmPlan& g, std::int64_t nExtent, bool tileReads) {
  const std::int64_t cols = nExtent % g.nr;
  return cols <= 2 && g.mr <= g.width && g.product && g.kSets == 1 && !tileReads && !g.bInPlace
             ? cols
             : 0;
}

Stmt columnsKernel(const ColumnsKernel& c) {
  using namespace ir;
  const std::string cg = "gemm.cg", cu = "gemm.cu", acc = "cacc", copy = "cedge";
  const std::int64_t G =
      std::max<std::int64_t>(1, std::min<std::int64_t>(c.blockSlivers, 8 / c.columns));
  const std::int64_t lanes = c.width;
  auto let = [](const std::string& v, const Expr& value, Stmt body) {
    return forLoop(v, value, value + 1, ForKind::Serial, std::move(body));
  };
  const Expr first = var(c.ic) + var(cg) * G;
  const Expr end = min(var(c.ic) + c.blockSlivers, var(c.as1));
  const Expr cell = (var(cu) * c.columns + var(c.jj)) * lanes + var(c.ii);
  // The group's cells: slot cu's sliver (past the block's end: its last, computed again and not
  // stored), its columns, A's lanes as one vector.
  auto cells = [&](Stmt body) {
    body = forLoop(c.ii, intImm(0), intImm(lanes), ForKind::Vectorized, body, c.width);
    body = forLoop(c.jj, intImm(0), intImm(c.columns), ForKind::Unrolled, body);
    body = let(c.sv, min(first + var(cu), end - 1), body);
    return forLoop(cu, intImm(0), intImm(G), ForKind::Unrolled, body);
  };
  const Expr aLanes = maskLoads(c.a, lt(var(c.ii), intImm(c.mr)));
  Stmt zero = cells(store(acc, cell, floatImm(c.type, 0)));
  Stmt sum = forLoop(c.pv, intImm(0), c.kcLen, ForKind::Serial,
                     cells(store(acc, cell, load(c.type, acc, cell) + aLanes * c.b)));
  // Stored from a copy (the accumulators stay in registers): the group's slivers inside the
  // block, their rows inside M.
  Stmt stored = c.finish(
      [&](Stmt body) {
        body = forLoop(c.jj, intImm(0), intImm(c.columns), ForKind::Unrolled, body);
        body = forLoop(c.ii, intImm(0), min(intImm(c.mr), intImm(c.m) - var(c.sv) * c.mr),
                       ForKind::Rolled, body);
        body = let(c.sv, first + var(cu), body);
        return forLoop(cu, intImm(0), min(intImm(G), end - first), ForKind::Rolled, body);
      },
      load(c.type, copy, cell));
  Stmt out = allocate(copy, c.type, G * c.columns * lanes,
                      block({cells(store(copy, cell, load(c.type, acc, cell))), stored}));
  Stmt body = allocate(acc, c.type, G * c.columns * lanes, block({zero, sum, out}));
  return forLoop(cg, intImm(0), (end - var(c.ic) + (G - 1)) / G, ForKind::Serial, body);
}

} // namespace einjit::codegen::lowering
