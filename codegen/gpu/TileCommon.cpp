// Pieces shared by the GPU tile families: a planned split-K's scratch, slices, split indices, the
// tile block and cell stores.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

Expr Lowerer::splitIndex(const TileSplit& t) const { return ir::var("gpu.block") % t.splits; }

Expr Lowerer::tileBlock(const TileSplit& t) const {
  return t.splits > 1 ? ir::var("gpu.block") / t.splits : ir::var("gpu.block");
}

void Lowerer::sliceBounds(const TileSplit& t, std::int64_t slices, Expr* lo, Expr* hi) const {
  if (t.splits == 1) {
    *lo = ir::intImm(0);
    *hi = ir::intImm(slices);
    return;
  }
  *lo = splitIndex(t) * t.perSplit;
  *hi = ir::min(*lo + t.perSplit, slices);
}

auto Lowerer::tileSplit(const Statement& st, const Ranges& r, const GpuTilePlan& plan,
                        const std::string& name) -> TileSplit {
  TileSplit t;
  t.elements = extentOfGroup(outputIndices(st), r);
  t.splits = plan.splits;
  t.perSplit = plan.perSplit;
  if (t.splits > 1) {
    t.partial = name + ".partial";
    out_.scratch.push_back({t.partial, vt_, t.elements * t.splits});
  }
  return t;
}

Stmt Lowerer::storeCell(const Statement& st, const Ranges& r, const TileSplit& t, const Expr& v) {
  if (t.splits == 1) return storeOutput(st, v);
  return ir::store(t.partial, splitIndex(t) * t.elements + flatOutput(st, r), v);
}

void Lowerer::finishSplit(const Statement& st, const BoundStatement& bs, const Ranges& r,
                          const TileSplit& t, const std::string& name) {
  if (t.splits == 1) return;
  StatementSchedule s;
  s.splitChunks = t.splits;
  emitCombine(st, bs, s, r, name + "_combine", t.partial, true);
}

} // namespace einjit::codegen::lowering
