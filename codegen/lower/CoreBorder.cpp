// Core/border splits: a rectangular core where every dependent bound is interior
// (schedule/DependentRanges.h, coreRanges), and strips around it, as the statement's plan says
// (the CPU's: schedule/CpuStatementPlan.h; the GPU's: schedule/GpuCoreBorder.h).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

void Lowerer::coreSplit(const Statement& st, const BoundStatement& bs,
                        const CpuCoreBorderPlan& plan, const Ranges& ranges,
                        const std::string& base) {
  emitBox(st, plan.bs, plan.schedule, plan.core, base + "_core");
  forEachBorder(st, ranges, plan.core, base, [&](const Ranges& part, const std::string& name) {
    emitGeneric(st, bs, plan.border, part, name);
  });
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
