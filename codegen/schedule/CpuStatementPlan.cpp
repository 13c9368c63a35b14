#include "codegen/schedule/CpuStatementPlan.h"

#include "codegen/schedule/CpuPhases.h"
#include "codegen/schedule/GemmBinding.h"

namespace einjit::codegen {

using namespace einjit::dsl;

namespace {

// An element-wise group (schedule/Fusion.h) that row blocks would cut, that joins
// statements inside row blocks with others, or that holds a statement a run defers, is dissolved:
// each statement then runs alone, or in its row block.
FusionPlan withinRows(FusionPlan fusion, const RowPlan& rows) {
  for (std::size_t k = 0; k < fusion.first.size(); ++k) {
    const std::size_t f = fusion.first[k], l = fusion.last[k];
    bool split = false;
    for (std::size_t j = f; j <= l; ++j)
      split |= rows.runOf[j] != rows.runOf[f] || (f != l && rows.deferredBy[j] >= 0);
    if (!split) continue;
    for (std::size_t j = f; j <= l; ++j) {
      fusion.first[j] = fusion.last[j] = j;
      fusion.notes[j].clear();
    }
  }
  return fusion;
}

// The core/border family: the core's schedule over its box (coreBox) must take a tile; the
// borders run the statement's schedule without tiles.
std::optional<CpuCoreBorderPlan> planCoreBorder(const CpuStatementInput& in, const Target& t) {
  if (!in.core) return std::nullopt;
  const std::size_t k = in.stmt;
  BoundProgram b2 = *in.binding;
  b2.stmts[k] = coreBox(in.binding->stmts[k], *in.core);
  StatementSchedule coreSched = scheduleStatement(*in.program, b2, k, in.strides, t);
  if (coreSched.tileJ < 0 && coreSched.dotVar < 0) return std::nullopt;
  StatementSchedule generic = in.sched;
  generic.tileI = generic.tileJ = generic.dotVar = -1;
  return CpuCoreBorderPlan{*in.core, b2.stmts[k], std::move(coreSched), std::move(generic)};
}

} // namespace

std::string describe(const CpuStatementPlan& p) {
  using Family = CpuStatementPlan::Family;
  switch (p.family) {
  case Family::Rows: return p.groupNote;
  case Family::Fused:
    return p.stmt == p.fusedFirst ? p.sched.why + "; " + p.groupNote : p.groupNote;
  case Family::Gemm:
    return p.epilogue.last > p.stmt ? p.sched.why + "; " + p.epilogue.note : p.sched.why;
  case Family::Phases: return describePhases(p.phases.size(), p.phases.back().gemm);
  case Family::OneHot: return p.sched.why + "; " + p.sched.oneHot->why;
  case Family::CoreBorder: return coreBorderNote(p.core->schedule);
  case Family::Empty:
  case Family::Split:
  case Family::Loops: return p.sched.why;
  }
  return p.sched.why;
}

namespace cpuschedule {

ProgramPlan planProgram(const Program& p, const BoundProgram& b, const Strides& strides,
                        const Target& t) {
  ProgramPlan plan;
  plan.rows = planRows(p, b, strides, t);
  plan.fusion = withinRows(planFusion(p, b), plan.rows);
  return plan;
}

CpuStatementPlan planFused(const Program& p, const BoundProgram& b, std::size_t first,
                           std::size_t last, const Strides& strides, const Target& t,
                           const std::string& note) {
  CpuStatementPlan plan;
  plan.family = CpuStatementPlan::Family::Fused;
  plan.stmt = plan.fusedFirst = first;
  plan.fusedLast = last;
  plan.groupNote = note;
  StatementSchedule& sched = plan.sched;
  sched = scheduleStatement(p, b, first, strides, t);
  sched.splitChunks = 0;
  sched.tileI = sched.tileJ = sched.dotVar = -1;
  sched.gemm.reset();
  sched.oneHot.reset();
  return plan;
}

EpiloguePlan epilogueOf(const ProgramPlan& plan, const Program& p, const BoundProgram& b,
                        std::size_t k, const Target& t) {
  const RowPlan& rows = plan.rows;
  const FusionPlan& fusion = plan.fusion;
  bool alone = t.gpu || k + 1 >= p.stmts.size();
  if (!alone && rows.runOf[k + 1] >= 0) {
    const RowRun& run = rows.runs[static_cast<std::size_t>(rows.runOf[k + 1])];
    alone = run.first != k + 1 || run.last != fusion.last[k + 1] || !run.scratch.empty() ||
            !run.deferred.empty() || !run.sums.empty();
  }
  return alone ? EpiloguePlan{k, {}, {}} : planEpilogue(p, b, k, fusion);
}

CpuStatementInput cpuStatementInput(const Program& p, const BoundProgram& b, std::size_t k,
                                    const Box& ranges, int rowVar, const Strides& strides,
                                    const EpiloguePlan& epilogue, const Target& t) {
  CpuStatementInput in;
  in.program = &p;
  in.binding = &b;
  in.stmt = k;
  in.ranges = ranges;
  in.rowVar = rowVar;
  in.strides = strides;
  in.sched = scheduleStatement(p, b, k, strides, t);
  in.epilogue = epilogue;
  const StatementSchedule& s = in.sched;
  // An epilogue runs in the tile stores over the product's indices: merged ones only where
  // its statements read them as one run too (GemmBinding.h); otherwise no epilogue.
  if (s.gemm && !s.gemm->merged.empty())
    for (std::size_t j = k + 1; j <= epilogue.last; ++j)
      if (!mergesHold(p, b, j, strides, s.gemm->merged)) in.epilogue = EpiloguePlan{k, {}, {}};
  const bool oneHot = s.oneHot && s.oneHot->var != rowVar;
  if (s.run && s.splitChunks == 0 && !s.gemm && !oneHot) {
    const Statement& st = p.stmts[k];
    const BoundStatement& bs = b.stmts[k];
    in.phases = residuePhases(st, bs, ranges);
    in.core = coreRanges(st, bs, ranges);
  }
  return in;
}

CpuStatementPlan planCpuStatement(const CpuStatementInput& in, const Target& t) {
  using Family = CpuStatementPlan::Family;
  CpuStatementPlan plan;
  plan.stmt = in.stmt;
  plan.sched = in.sched;
  const StatementSchedule& s = in.sched;
  if (!s.run) {
    plan.family = Family::Empty;
  } else if (s.splitChunks > 0) {
    plan.family = Family::Split;
  } else if (s.gemm) {
    plan.family = Family::Gemm;
    plan.epilogue = in.epilogue;
  } else if (s.oneHot && s.oneHot->var != in.rowVar) {
    plan.family = Family::OneHot;
  } else if (std::vector<CpuGemmPhase> phases = planGemmPhases(in, t); !phases.empty()) {
    plan.family = Family::Phases;
    plan.phases = std::move(phases);
  } else if ((plan.core = planCoreBorder(in, t))) {
    plan.family = Family::CoreBorder;
  } else {
    plan.family = Family::Loops;
  }
  return plan;
}

} // namespace cpuschedule

} // namespace einjit::codegen
