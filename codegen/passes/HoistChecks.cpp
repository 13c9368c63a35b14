// Hoists run-time access checks into functions that run before the program (Lower.h says when).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

void Lowerer::subscriptUses(const Subscript& s, std::vector<bool>& vars, std::vector<int>& reads) {
  for (std::size_t v = 0; v < s.coef.size(); ++v)
    if (s.coef[v] != 0) vars[v] = true;
  if (!s.gather) return;
  reads.push_back(s.gather->tensor);
  for (const Subscript& g : s.gather->subs) subscriptUses(g, vars, reads);
}

void Lowerer::hoistChecks() {
  if (!checked_ || unhoistable_) return;
  std::vector<std::vector<std::size_t>> boxes;
  for (const CheckedSub& c : checkedSubs_) {
    const Statement& st = p_.stmts[c.stmt];
    std::vector<bool> vars(st.vars.size(), false);
    std::vector<int> reads;
    subscriptUses(c.access->subs[c.dim], vars, reads);
    for (int t : reads)
      if (!p_.tensors[static_cast<std::size_t>(t)].writtenBy.empty()) return;
    std::vector<std::size_t> box;
    for (std::size_t v = 0; v < vars.size(); ++v) {
      if (!vars[v]) continue;
      if (b_.stmts[c.stmt].dependent[v]) return;
      box.push_back(v);
    }
    boxes.push_back(std::move(box));
  }
  std::vector<ir::Func> funcs;
  hoisting_ = true;
  for (std::size_t i = 0; i < checkedSubs_.size(); ++i) {
    const CheckedSub& c = checkedSubs_[i];
    const Statement& st = p_.stmts[c.stmt];
    const BoundStatement& bs = b_.stmts[c.stmt];
    const Ranges r = rangesOf(bs);
    if (extentOfGroup(boxes[i], r) <= 0) continue; // never reached
    setRanges(st, r);
    ir::Func f = newFunc("s" + std::to_string(c.stmt) + "_check" + std::to_string(i));
    auto check = [&] {
      const std::int64_t e = extentOf(c.access->tensor, c.dim);
      return ir::evaluate(e == 0 ? ir::check(ir::intImm(-1), 1)
                                 : ir::check(subscriptIndex(c.access->subs[c.dim]), e));
    };
    if (target_.gpu) {
      f.body = threadPerPoint(boxes[i], r, [&](Expr&) { return check(); });
    } else {
      Stmt body = check();
      for (std::size_t q = boxes[i].size(); q-- > 0;)
        body = loopOver(bs, st, boxes[i][q], r, ForKind::Serial, body);
      f.body = body;
    }
    funcs.push_back(std::move(f));
  }
  hoisting_ = false;
  out_.checks = funcs.size();
  out_.prechecked = true;
  out_.funcs.insert(out_.funcs.begin(), std::make_move_iterator(funcs.begin()),
                    std::make_move_iterator(funcs.end()));
}

} // namespace einjit::codegen::lowering
