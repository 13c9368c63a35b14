// A GPU statement (not a split reduction) by the family order of docs/ARCHITECTURE.md, planned
// before anything is emitted (schedule/GpuStatementPlan.h) over its facts, gathered once
// (gpuschedule::gpuStatementInput), by the families' planners of schedule/; then carried out:
// for independent outputs the first tile family that applies, else one thread per element; in
// place; atomic adds for scatters; else one thread.
#include "codegen/lower/Lowerer.h"

#include "codegen/schedule/GpuCoreBorder.h"
#include "codegen/schedule/GpuPhases.h"
#include "codegen/schedule/GpuStatementPlan.h"
#include "codegen/schedule/GpuTileGroups.h"

namespace einjit::codegen::lowering {

GpuStatementPlan Lowerer::planGpu(std::size_t k) {
  stmt_ = k;
  const StatementSchedule sched = scheduleStatement(p_, b_, k, ctx_.buffers.strides, target_);
  return planGpuStatement(
      gpuschedule::gpuStatementInput(p_, b_, k, sched, statementRanges(b_.stmts[k]),
                                     {ctx_.buffers.strides, ctx_.buffers.aligned}));
}

GpuStatementPlan Lowerer::planGpuStatement(const GpuStatementInput& in) {
  using Family = GpuStatementPlan::Family;
  const Statement& st = p_.stmts[in.stmt];
  GpuStatementPlan plan;
  if (in.split) {
    plan.family = Family::Split;
    return plan;
  }
  if (in.independent) {
    const gpuschedule::GpuTileContext call{in.program, in.binding, in.buffers, -1, {}};
    auto tile = [&](const gpuschedule::GpuTileContext& c) {
      std::optional<GpuTilePart> part =
          gpuschedule::planTilePart(c, target_, st, b_.stmts[in.stmt], in.ranges, in.base);
      if (!part) return false;
      plan.family = Family::Tile;
      plan.tiles = {std::move(*part)};
      return true;
    };
    // The copies are part of the plan only where the family planned over them applies.
    auto overCopiesOf = [&](const auto& family) {
      if (in.relayout && family(gpuschedule::overCopies(call, *in.relayout)))
        plan.relayout = in.relayout;
      return plan.relayout.has_value();
    };
    auto phases = [&](const gpuschedule::GpuTileContext& c) {
      return gpuschedule::planPhases(c, target_, in, plan);
    };
    if (!overCopiesOf(tile) && !tile(call) && !overCopiesOf(phases) && !phases(call) &&
        !gpuschedule::planCoreSplit(call, target_, in, plan))
      plan.family = Family::Threads;
  } else if (in.inPlace) {
    // In place: each thread's loads of the element it writes precede its store, and no
    // thread touches another's element (dsl/InPlace.h).
    plan.family = Family::InPlace;
    plan.threads = GpuThreadsPlan{GpuThreadsPlan::Kind::InPlace};
  } else if (in.atomic) {
    plan.family = Family::Atomic;
    plan.threads = GpuThreadsPlan{GpuThreadsPlan::Kind::Atomic, varNames(st, outputIndices(st)),
                                  p_.tensors[static_cast<std::size_t>(st.output)].name,
                                  elemType(st.output) == Type::bf16};
  } else {
    plan.family = Family::OneThread;
    plan.threads = GpuThreadsPlan{GpuThreadsPlan::Kind::OneThread};
    plan.threads.scatter = st.scatter;
  }
  return plan;
}

void Lowerer::gpuStatement(std::size_t k, StatementSchedule& sched, const Ranges& ranges,
                           const std::string& base) {
  using Family = GpuStatementPlan::Family;
  const Statement& st = p_.stmts[k];
  const BoundStatement& bs = b_.stmts[k];
  const GpuStatementPlan plan = planGpuStatement(gpuschedule::gpuStatementInput(
      p_, b_, k, sched, ranges, {ctx_.buffers.strides, ctx_.buffers.aligned}));
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
