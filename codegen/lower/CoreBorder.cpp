// Core/border splits: a rectangular core where every dependent bound is interior
// (schedule/DependentRanges.h, coreRanges), and strips around it.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

bool Lowerer::coreSplit(std::size_t k, const Statement& st, const BoundStatement& bs,
                        const Ranges& ranges, const std::string& base) {
  Ranges core;
  if (!coreRanges(st, bs, ranges, core)) return false;
  dsl::BoundProgram b2 = b_;
  auto& cs = b2.stmts[k];
  cs = coreBox(bs, core);
  StatementSchedule coreSched = scheduleStatement(p_, b2, k, ctx_.buffers.strides, target_);
  if (coreSched.tileJ < 0 && coreSched.dotVar < 0) return false;
  out_.notes.back() = coreBorderNote(coreSched);
  emitBox(st, cs, coreSched, core, base + "_core");
  StatementSchedule generic = scheduleStatement(p_, b_, k, ctx_.buffers.strides, target_);
  generic.tileI = generic.tileJ = generic.dotVar = -1;
  forEachBorder(st, ranges, core, base, [&](const Ranges& part, const std::string& name) {
    emitGeneric(st, bs, generic, part, name);
  });
  return true;
}

GpuTileSchedule Lowerer::emitCoreSplit(const Statement& st, const BoundStatement& bs,
                                       const Ranges& ranges, const std::string& base,
                                       const GpuStatementPlan& plan) {
  GpuTileSchedule s;
  s.tile = emitTilePart(plan.tiles[0]);
  forEachBorder(
      st, ranges, plan.tiles[0].r, base,
      [&](const Ranges& part, const std::string& name) { emitGpuGeneric(st, bs, part, name); });
  s.coreBorder = true;
  return s;
}

} // namespace einjit::codegen::lowering
