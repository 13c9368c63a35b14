// Hoists run-time access checks into functions that run before the program (Lower.h says when).
#include "codegen/passes/HoistChecks.h"

namespace einjit::codegen::passes {

namespace {

// The indices a subscript reads (through its gathers too), and the tensors its gathers read.
void subscriptUses(const dsl::Subscript& s, std::vector<bool>& vars, std::vector<int>& reads) {
  for (std::size_t v = 0; v < s.coef.size(); ++v)
    if (s.coef[v] != 0) vars[v] = true;
  if (!s.gather) return;
  reads.push_back(s.gather->tensor);
  for (const dsl::Subscript& g : s.gather->subs) subscriptUses(g, vars, reads);
}

} // namespace

LoweredProgram hoistChecks(LoweredProgram lowered, const AccessChecks& checks,
                           const dsl::Program& p, const dsl::BoundProgram& b,
                           const CheckFunction& checkFunction) {
  if (!lowered.checked || !checks.hoistable) return lowered;
  std::vector<std::vector<std::size_t>> boxes;
  for (const CheckedSubscript& c : checks.subscripts) {
    const dsl::Statement& st = p.stmts[c.stmt];
    std::vector<bool> vars(st.vars.size(), false);
    std::vector<int> reads;
    subscriptUses(c.access->subs[c.dim], vars, reads);
    for (int t : reads)
      if (!p.tensors[static_cast<std::size_t>(t)].writtenBy.empty()) return lowered;
    std::vector<std::size_t> box;
    for (std::size_t v = 0; v < vars.size(); ++v) {
      if (!vars[v]) continue;
      if (b.stmts[c.stmt].dependent[v]) return lowered;
      box.push_back(v);
    }
    boxes.push_back(std::move(box));
  }
  std::vector<ir::Func> funcs;
  for (std::size_t i = 0; i < checks.subscripts.size(); ++i) {
    const CheckedSubscript& c = checks.subscripts[i];
    const dsl::BoundStatement& bs = b.stmts[c.stmt];
    std::int64_t points = 1;
    for (std::size_t v : boxes[i]) points *= bs.hi[v] - bs.lo[v];
    if (points <= 0) continue; // never reached
    funcs.push_back(
        checkFunction(c, boxes[i], "s" + std::to_string(c.stmt) + "_check" + std::to_string(i)));
  }
  lowered.checks = funcs.size();
  lowered.prechecked = true;
  lowered.funcs.insert(lowered.funcs.begin(), std::make_move_iterator(funcs.begin()),
                       std::make_move_iterator(funcs.end()));
  return lowered;
}

} // namespace einjit::codegen::passes
