// Lowering, the straight line: the program's plans, then each statement by its plan
// (lower/CpuStatement.cpp: schedule/CpuStatementPlan.h on the CPU, schedule/GpuStatementPlan.h on
// the GPU), then the post-passes (passes/), then verification. The Lowerer's families live under
// lower/, gpu/ and passes/.
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
  // The program's row runs and element-wise groups, then each statement by its plan (a row run,
  // a group, a packed GEMM with its epilogue: the statements it lowered).
  const ProgramPlan program = cpuschedule::planProgram(p_, b_, ctx_.buffers.strides, target_);
  for (std::size_t k = 0; k < p_.stmts.size(); ++k) {
    stmt_ = k;
    const std::size_t before = out_.funcs.size();
    const std::size_t last = programStatement(program, k);
    for (std::size_t f = before; f < out_.funcs.size(); ++f)
      out_.funcs[f].statement = static_cast<int>(k);
    debugLower((program.rows.runOf[k] >= 0 ? "statements " + std::to_string(k + 1) + "-"
                                           : std::string("statement ")) +
                   std::to_string(last + 1) + " (" + out_.notes.back() + ")",
               out_.funcs, before);
    k = last;
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
