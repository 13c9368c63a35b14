// A GPU statement (not a split reduction) carried out by its plan: the facts are gathered once
// (gpuschedule::gpuStatementInput), the family order decides the whole plan before anything is
// emitted (gpuschedule::planGpuStatement, schedule/GpuStatementPlan.h), then the family's
// emitter runs it, deciding nothing: a tile (over layout copies, as residue phases, or as the
// core of a core/border split), one thread per element, in place, atomic adds, or one thread.
// codegen::planGpuStatement (Lower.h) gives the same plan without lowering.
#include "codegen/lower/Lowerer.h"

#include "codegen/schedule/GpuStatementPlan.h"

namespace einjit::codegen::lowering {

void Lowerer::gpuStatement(std::size_t k, StatementSchedule& sched, const Ranges& ranges,
                           const std::string& base) {
  using Family = GpuStatementPlan::Family;
  const Statement& st = p_.stmts[k];
  const BoundStatement& bs = b_.stmts[k];
  const GpuStatementPlan plan = gpuschedule::planGpuStatement(
      gpuschedule::gpuStatementInput(p_, b_, k, sched, ranges,
                                     {ctx_.buffers.strides, ctx_.buffers.aligned}),
      target_);
  switch (plan.family) {
  case Family::Tile:
  case Family::Phases:
  case Family::CoreBorder: {
    auto emit = [&] {
      if (plan.family == Family::Phases) return emitPhases(plan);
      return GpuTileSchedule{emitTilePart(plan.tiles[0]), std::nullopt, std::nullopt, false};
    };
    sched.gpuTile = plan.family == Family::CoreBorder
                        ? emitCoreSplit(st, bs, ranges, base, plan)
                        : (plan.relayout ? emitOverCopies(st, *plan.relayout, base, emit) : emit());
    out_.notes.back() = describe(*sched.gpuTile);
    if (sched.gpuTile->phases)
      phaseLaunches_.push_back({out_.notes.size() - 1, *sched.gpuTile, base + "_phases"});
    break;
  }
  case Family::Split:
  case Family::Threads: emitGpuGeneric(st, bs, ranges, base); break;
  case Family::InPlace:
    out_.notes.back() = describe(plan.threads);
    emitGpuGeneric(st, bs, ranges, base);
    break;
  case Family::Atomic: {
    out_.notes.back() = describe(plan.threads);
    const bool wide = plan.threads.wide;
    const Scoped<std::string> into(ctx_.wide,
                                   wide ? beginWideScatter(st, bs, ranges, base) : std::string());
    {
      const Scoped<bool> atomic(ctx_.atomic, true);
      emitGpuGeneric(st, bs, ranges, base);
    }
    if (wide) endWideScatter(st, bs, ranges, base);
    break;
  }
  case Family::OneThread:
    out_.notes.back() = describe(plan.threads);
    emitGeneric(st, bs, sched, ranges, base);
    break;
  }
}

} // namespace einjit::codegen::lowering

namespace einjit::codegen {

GpuStatementPlan planGpuStatement(const dsl::Program& p, const dsl::BoundProgram& b,
                                  const Strides& strides, const Target& target, std::size_t k,
                                  const Aligned16& aligned) {
  // As Lowerer::statement plans it: the statement's schedule and box (a GPU statement is never in
  // row blocks), the call's buffers.
  const StatementSchedule sched = scheduleStatement(p, b, k, strides, target);
  Box ranges;
  for (std::size_t v = 0; v < b.stmts[k].lo.size(); ++v)
    ranges.push_back({b.stmts[k].lo[v], b.stmts[k].hi[v]});
  return gpuschedule::planGpuStatement(
      gpuschedule::gpuStatementInput(p, b, k, sched, ranges, {strides, aligned}), target);
}

} // namespace einjit::codegen
