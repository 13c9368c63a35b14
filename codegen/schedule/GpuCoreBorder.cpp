#include "codegen/schedule/GpuCoreBorder.h"

#include "codegen/schedule/GpuTileGroups.h"

namespace einjit::codegen::gpuschedule {

bool planCoreSplit(const GpuTileContext& c, const Target& t, const GpuStatementInput& in,
                   GpuStatementPlan& plan) {
  if (!in.core) return false;
  const dsl::Statement& st = in.program->stmts[in.stmt];
  const dsl::BoundStatement& bs = in.binding->stmts[in.stmt];
  std::optional<GpuTilePart> tile =
      planTilePart(c, t, st, coreBox(bs, *in.core), *in.core, in.base + "_core");
  if (!tile) return false;
  plan.family = GpuStatementPlan::Family::CoreBorder;
  plan.tiles = {std::move(*tile)};
  return true;
}

} // namespace einjit::codegen::gpuschedule
