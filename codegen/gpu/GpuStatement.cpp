// A GPU statement (not a split reduction) by the family order of docs/ARCHITECTURE.md, planned
// before anything is emitted (schedule/GpuStatementPlan.h), then carried out: for independent
// outputs the first tile family that applies, else one thread per element; in place; atomic
// adds for scatters; else one thread.
#include "codegen/lower/Lowerer.h"

#include "dsl/InPlace.h"

namespace einjit::codegen::lowering {

GpuStatementPlan Lowerer::planGpu(std::size_t k) {
  stmt_ = k;
  const StatementSchedule sched = scheduleStatement(p_, b_, k, ctx_.buffers.strides, target_);
  GpuStatementPlan plan;
  if (sched.splitChunks > 0) {
    plan.family = GpuStatementPlan::Family::Split;
    return plan;
  }
  return planGpuStatement(k, sched, statementRanges(b_.stmts[k]), "s" + std::to_string(k));
}

GpuStatementPlan Lowerer::planGpuStatement(std::size_t k, const StatementSchedule& sched,
                                           const Ranges& ranges, const std::string& base) {
  using Family = GpuStatementPlan::Family;
  const Statement& st = p_.stmts[k];
  const BoundStatement& bs = b_.stmts[k];
  GpuStatementPlan plan;
  auto tile = [&] {
    std::optional<GpuTilePart> part = planTile(st, bs, ranges, base);
    if (!part) return false;
    plan.family = Family::Tile;
    plan.tiles = {std::move(*part)};
    return true;
  };
  auto phases = [&] { return planPhases(st, bs, ranges, base, plan); };
  if (independentOutputs(st)) {
    // A tile over copies in other layouts, a plain one, the same for residue phases; else a
    // tile of the core of a core/border split; else a thread per element.
    if (!(plan.relayout = planOverCopies(st, bs, sched, base, tile)) && !tile() &&
        !(plan.relayout = planOverCopies(st, bs, sched, base, phases)) && !phases() &&
        !planCoreSplit(st, bs, ranges, base, plan))
      plan.family = Family::Threads;
  } else if (dsl::runsInPlace(p_, k)) {
    // In place: each thread's loads of the element it writes precede its store, and no
    // thread touches another's element (dsl/InPlace.h).
    plan.family = Family::InPlace;
    plan.threads = GpuThreadsPlan{GpuThreadsPlan::Kind::InPlace};
  } else if (atomicScatter(st)) {
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
  const GpuStatementPlan plan = planGpuStatement(k, sched, ranges, base);
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
