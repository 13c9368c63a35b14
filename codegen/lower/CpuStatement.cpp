// A statement carried out by its plan. On the CPU the facts are gathered once
// (cpuschedule::cpuStatementInput), the family order decides the whole plan before anything is
// emitted (cpuschedule::planCpuStatement, schedule/CpuStatementPlan.h), then the family's emitter
// runs it, deciding nothing; a GPU statement goes to its own plan (gpu/GpuStatement.cpp).
// codegen::planCpuStatement (Lower.h) gives the CPU plan without lowering.
#include "codegen/lower/Lowerer.h"

#include "codegen/schedule/CpuStatementPlan.h"
#include "codegen/schedule/GemmBinding.h"

namespace einjit::codegen::lowering {

std::size_t Lowerer::programStatement(const ProgramPlan& program, std::size_t k) {
  const RowPlan& rows = program.rows;
  const FusionPlan& fusion = program.fusion;
  if (rows.runOf[k] >= 0) {
    const auto run = static_cast<std::size_t>(rows.runOf[k]);
    rowBlocks(rows, run, fusion);
    return rows.runs[run].last;
  }
  std::size_t last = k;
  if (fusion.fused(k)) {
    fusedStatements(k, fusion.last[k], fusion.notes[k]);
    for (std::size_t j = k + 1; j <= fusion.last[k]; ++j) out_.notes.push_back(fusion.notes[j]);
    last = fusion.last[k];
  } else {
    // Its note, then (an element-wise statement) its group's; a packed GEMM's epilogue
    // writes the note of each statement it takes.
    const std::size_t note = out_.notes.size();
    last = statement(k, cpuschedule::epilogueOf(program, p_, b_, k, target_));
    if (!fusion.notes[k].empty()) out_.notes[note] += "; " + fusion.notes[k];
  }
  // (A row run that yielded to an epilogue says nothing.)
  if (!rows.notes[last].empty() && rows.runOf[last] < 0)
    out_.notes.back() += "; " + rows.notes[last];
  return last;
}

std::size_t Lowerer::statement(std::size_t k, const EpiloguePlan& epilogue) {
  const Ranges ranges = statementRanges(b_.stmts[k]);
  if (!target_.gpu)
    return lowerStatement(cpuschedule::planCpuStatement(
        cpuschedule::cpuStatementInput(p_, b_, k, ranges, ctx_.rows.var, ctx_.buffers.strides,
                                       epilogue, target_),
        target_));
  const Statement& st = p_.stmts[k];
  const BoundStatement& bs = b_.stmts[k];
  StatementSchedule sched = scheduleStatement(p_, b_, k, ctx_.buffers.strides, target_);
  out_.notes.push_back(sched.why);
  zeroFillUncovered(k, sched);
  if (!sched.run) return k;
  const std::string base = "s" + std::to_string(k);
  if (sched.splitChunks > 0)
    emitSplit(st, bs, sched, ranges, base);
  else
    gpuStatement(k, sched, ranges, base);
  return k;
}

std::size_t Lowerer::lowerStatement(const CpuStatementPlan& plan) {
  using Family = CpuStatementPlan::Family;
  const std::size_t k = plan.stmt;
  const Statement& st = p_.stmts[k];
  const BoundStatement& bs = b_.stmts[k];
  const StatementSchedule& sched = plan.sched;
  out_.notes.push_back(describe(plan));
  zeroFillUncovered(k, sched);
  const Ranges ranges = statementRanges(bs);
  const std::string base = "s" + std::to_string(k);
  switch (plan.family) {
  case Family::Empty:
  case Family::Rows:
  case Family::Fused: break; // (Rows and Fused: Lower.cpp's run lowers the run or the group)
  case Family::Split: emitSplit(st, bs, sched, ranges, base); break;
  case Family::Gemm: {
    const std::size_t last = plan.last();
    for (std::size_t j = k + 1; j <= last; ++j) zeroFillUncovered(j, sched);
    {
      const Scoped<std::size_t> tail(ctx_.epilogueThrough, last);
      // Merged indices (GemmPlan::merged): the product runs the merged binding; subscripts
      // are proven over the statement's own ranges, which address the same elements.
      const std::vector<GemmMerge>& merged = sched.gemm->merged;
      const BoundStatement mbs = mergedBinding(bs, merged);
      const Scoped<Ranges> proven(ctx_.provenRanges, merged.empty() ? Ranges{} : ranges);
      emitGemm(st, mbs, sched, statementRanges(mbs), base);
    }
    for (std::size_t j = k + 1; j <= last; ++j) out_.notes.push_back(plan.epilogue.memberNote);
    return last;
  }
  case Family::Phases: emitGemmPhases(plan.phases, base); break;
  case Family::OneHot: emitOneHot(st, bs, sched, ranges, base); break;
  case Family::CoreBorder: coreSplit(st, bs, *plan.core, ranges, base); break;
  case Family::Loops: emitBox(st, bs, sched, ranges, base); break;
  }
  return k;
}

void Lowerer::zeroFillUncovered(std::size_t k, const StatementSchedule& s) {
  const Statement& st = p_.stmts[k];
  if (st.assign == Assign::Define && !coversOutput(b_, st, b_.stmts[k], s) &&
      std::find(out_.zeroFill.begin(), out_.zeroFill.end(), st.output) == out_.zeroFill.end())
    out_.zeroFill.push_back(st.output);
}

void Lowerer::fusedStatements(std::size_t first, std::size_t last, const std::string& note) {
  const Statement& st = p_.stmts[first];
  const BoundStatement& bs = b_.stmts[first];
  // The first statement's loop order, vector loop and threads serve the group.
  const CpuStatementPlan plan =
      cpuschedule::planFused(p_, b_, first, last, ctx_.buffers.strides, target_, note);
  const StatementSchedule& sched = plan.sched;
  out_.notes.push_back(describe(plan));
  for (std::size_t k = first; k <= last; ++k) zeroFillUncovered(k, sched);
  const Scoped<std::size_t> fused(ctx_.fusedThrough, last);
  const Ranges ranges = statementRanges(bs);
  const std::string base = "s" + std::to_string(first);
  if (target_.gpu)
    emitGpuGeneric(st, bs, ranges, base);
  else
    emitGeneric(st, bs, sched, ranges, base);
}

} // namespace einjit::codegen::lowering

namespace einjit::codegen {

CpuStatementPlan planCpuStatement(const dsl::Program& p, const dsl::BoundProgram& b,
                                  const Strides& strides, const Target& target, std::size_t k) {
  // As Lowerer::run plans it: the program's row runs and element-wise groups first, then the
  // statement over its box with its epilogue.
  using Family = CpuStatementPlan::Family;
  const ProgramPlan program = cpuschedule::planProgram(p, b, strides, target);
  if (const int run = program.rows.runOf[k]; run >= 0) {
    CpuStatementPlan plan;
    plan.family = Family::Rows;
    plan.stmt = k;
    plan.rowRun = run;
    plan.groupNote = program.rows.notes[k];
    return plan;
  }
  if (const FusionPlan& fusion = program.fusion; fusion.fused(k)) {
    const std::size_t first = fusion.first[k];
    if (first == k)
      return cpuschedule::planFused(p, b, k, fusion.last[k], strides, target, fusion.notes[k]);
    CpuStatementPlan plan; // a later member: its note says which group it is in
    plan.family = Family::Fused;
    plan.stmt = k;
    plan.fusedFirst = first;
    plan.fusedLast = fusion.last[k];
    plan.groupNote = fusion.notes[k];
    return plan;
  }
  Box ranges;
  for (std::size_t v = 0; v < b.stmts[k].lo.size(); ++v)
    ranges.push_back({b.stmts[k].lo[v], b.stmts[k].hi[v]});
  return cpuschedule::planCpuStatement(
      cpuschedule::cpuStatementInput(p, b, k, ranges, -1, strides,
                                     cpuschedule::epilogueOf(program, p, b, k, target), target),
      target);
}

} // namespace einjit::codegen
