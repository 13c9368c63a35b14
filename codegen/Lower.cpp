// Lowering, the straight line: each statement by its schedule, then the post-passes, then
// verification (the Lowerer's families live under lower/, gpu/ and passes/).
#include "codegen/Lower.h"

#include "codegen/lower/Lowerer.h"
#include "codegen/passes/HoistChecks.h"
#include "codegen/passes/MergeLaunches.h"

#include <cstdio>
#include <cstdlib>

namespace einjit::codegen {

namespace lowering {

namespace {

// EINJIT_DEBUG_LOWER=1: the IR after each step that changed it, on stderr.
void debugLower(const std::string& step, const std::vector<ir::Func>& funcs, std::size_t from) {
  static const bool on = [] {
    const char* e = std::getenv("EINJIT_DEBUG_LOWER");
    return e && std::string(e) == "1";
  }();
  if (!on || from == funcs.size()) return;
  std::string text = "=== after " + step + "\n";
  for (std::size_t f = from; f < funcs.size(); ++f) text += ir::print(funcs[f]);
  std::fputs(text.c_str(), stderr);
}

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

} // namespace

auto Lowerer::run() -> LoweredProgram {
  const RowPlan rows = planRows(p_, b_, ctx_.buffers.strides, target_);
  const FusionPlan fusion = withinRows(planFusion(p_, b_), rows);
  for (std::size_t k = 0; k < p_.stmts.size(); ++k) {
    stmt_ = k;
    const std::size_t before = out_.funcs.size();
    if (rows.runOf[k] >= 0) {
      const RowRun& run = rows.runs[static_cast<std::size_t>(rows.runOf[k])];
      rowBlocks(rows, static_cast<std::size_t>(rows.runOf[k]), fusion);
      debugLower("statements " + std::to_string(k + 1) + "-" + std::to_string(run.last + 1) +
                     " (" + out_.notes.back() + ")",
                 out_.funcs, before);
      k = run.last;
      continue;
    }
    if (fusion.fused(k)) {
      fusedStatements(k, fusion.last[k], fusion.notes[k]);
      for (std::size_t j = k + 1; j <= fusion.last[k]; ++j) out_.notes.push_back(fusion.notes[j]);
      k = fusion.last[k];
    } else {
      // An epilogue takes the statements after a packed GEMM before row blocks do, where the
      // row run is exactly its element-wise group and keeps nothing in scratch.
      bool alone = target_.gpu || k + 1 >= p_.stmts.size();
      if (!alone && rows.runOf[k + 1] >= 0) {
        const RowRun& run = rows.runs[static_cast<std::size_t>(rows.runOf[k + 1])];
        alone = run.first != k + 1 || run.last != fusion.last[k + 1] || !run.scratch.empty() ||
                !run.deferred.empty() || !run.sums.empty();
      }
      const EpiloguePlan epilogue =
          alone ? EpiloguePlan{k, {}, {}} : planEpilogue(p_, b_, k, fusion);
      const std::size_t last = statement(k, epilogue.last);
      if (!fusion.notes[k].empty()) out_.notes.back() += "; " + fusion.notes[k];
      if (last > k) {
        out_.notes.back() += "; " + epilogue.note;
        for (std::size_t j = k + 1; j <= last; ++j) out_.notes.push_back(epilogue.memberNote);
        k = last;
      }
    }
    // (A row run that yielded to an epilogue says nothing.)
    if (!rows.notes[k].empty() && rows.runOf[k] < 0) out_.notes.back() += "; " + rows.notes[k];
    debugLower("statement " + std::to_string(k + 1) + " (" + out_.notes.back() + ")", out_.funcs,
               before);
  }
  out_.checked = checked_;
  return std::move(out_);
}

std::size_t Lowerer::statement(std::size_t k, std::size_t epilogue) {
  const Statement& st = p_.stmts[k];
  const BoundStatement& bs = b_.stmts[k];
  StatementSchedule sched = scheduleStatement(p_, b_, k, ctx_.buffers.strides, target_);
  out_.notes.push_back(sched.why);
  zeroFillUncovered(k, sched);
  if (!sched.run) return k;
  const Ranges ranges = statementRanges(bs);
  const std::string base = "s" + std::to_string(k);
  if (sched.splitChunks > 0) {
    emitSplit(st, bs, sched, ranges, base);
    return k;
  }
  if (target_.gpu) {
    gpuStatement(k, sched, ranges, base);
    return k;
  }
  if (sched.gemm) {
    for (std::size_t j = k + 1; j <= epilogue; ++j) zeroFillUncovered(j, sched);
    const Scoped<std::size_t> tail(ctx_.epilogueThrough, std::max(epilogue, k));
    emitGemm(st, bs, sched, ranges, base);
    return std::max(epilogue, k);
  }
  if (sched.oneHot && sched.oneHot->var != ctx_.rows.var) {
    out_.notes.back() += "; " + sched.oneHot->why;
    emitOneHot(st, bs, sched, ranges, base);
    return k;
  }
  if (emitGemmPhases(st, bs, ranges, base)) return k;
  if (coreSplit(k, st, bs, ranges, base)) return k;
  emitBox(st, bs, sched, ranges, base);
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
  // Element-wise: no reduction, so no split, tile or GEMM; the first statement's loop order,
  // vector loop and threads serve the group.
  StatementSchedule sched = scheduleStatement(p_, b_, first, ctx_.buffers.strides, target_);
  sched.splitChunks = 0;
  sched.tileI = sched.tileJ = sched.dotVar = -1;
  sched.gemm.reset();
  sched.oneHot.reset(); // the group's loop passes over every element anyway
  out_.notes.push_back(sched.why + "; " + note);
  for (std::size_t k = first; k <= last; ++k) zeroFillUncovered(k, sched);
  const Scoped<std::size_t> fused(ctx_.fusedThrough, last);
  const Ranges ranges = statementRanges(bs);
  const std::string base = "s" + std::to_string(first);
  if (target_.gpu)
    emitGpuGeneric(st, bs, ranges, base);
  else
    emitGeneric(st, bs, sched, ranges, base);
}

} // namespace lowering

LoweredProgram lower(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
                     const Target& target, const Aligned16& aligned) {
  lowering::Lowerer lowerer(p, b, strides, target, aligned);
  LoweredProgram out = lowerer.run();
  const std::vector<bool> merged = passes::mergeLaunches(out.funcs, lowerer.launchGroups());
  lowerer.noteMerged(out.notes, merged);
  if (std::find(merged.begin(), merged.end(), true) != merged.end())
    lowering::debugLower("MergeLaunches", out.funcs, 0);
  out = passes::hoistChecks(
      std::move(out), lowerer.accessChecks(), p, b,
      [&](const passes::CheckedSubscript& c, const std::vector<std::size_t>& box,
          const std::string& name) { return lowerer.checkFunction(c, box, name); });
  if (out.checks > 0) lowering::debugLower("HoistChecks", out.funcs, 0);
  for (ir::Func& f : out.funcs) {
    for (const ScratchBuffer& buf : out.scratch) f.buffers.push_back({buf.name, buf.elem});
    ir::verify(f);
  }
  return out;
}

} // namespace einjit::codegen
