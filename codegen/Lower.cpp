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

} // namespace

auto Lowerer::run() -> LoweredProgram {
  const ProgramPlan program = cpuschedule::planProgram(p_, b_, ctx_.buffers.strides, target_);
  const RowPlan& rows = program.rows;
  const FusionPlan& fusion = program.fusion;
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
      // Its note, then (an element-wise statement) its group's; a packed GEMM's epilogue
      // writes the note of each statement it takes.
      const std::size_t note = out_.notes.size();
      const std::size_t last = statement(k, cpuschedule::epilogueOf(program, p_, b_, k, target_));
      if (!fusion.notes[k].empty()) out_.notes[note] += "; " + fusion.notes[k];
      k = last;
    }
    // (A row run that yielded to an epilogue says nothing.)
    if (!rows.notes[k].empty() && rows.runOf[k] < 0) out_.notes.back() += "; " + rows.notes[k];
    debugLower("statement " + std::to_string(k + 1) + " (" + out_.notes.back() + ")", out_.funcs,
               before);
  }
  out_.checked = checked_;
  return std::move(out_);
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
