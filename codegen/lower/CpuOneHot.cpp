// One-hot sums on the CPU (schedule/OneHot.h): the statement evaluated at the one value of its
// one-hot index where the summand may be non-zero, found once per point of the other indices.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

void Lowerer::emitOneHot(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                         const Ranges& r, const std::string& name) {
  setRanges(st, r);
  ir::Func f = newFunc(name);
  const auto j = static_cast<std::size_t>(s.oneHot->var);
  // The element body at j = g: the full loop's operations at that element. Its accesses are
  // proven over j's whole range, which the guard below keeps j inside.
  Stmt body = elementBody(st, bs, r, false);
  if (!body) return;
  const Expr g = value(*s.oneHot->at);
  const Expr at = ir::cast(Type::i64, g);
  body = ir::forLoop(st.vars[j].name, at, ir::add(at, ir::intImm(1)), ForKind::Serial, body);
  // An integer inside j's range (NaN fails every test): the one j that compares equal to it
  // (OneHot.h: every j of the range is exact in the compute type).
  const Expr inside = ir::binary(
      BinOp::And,
      ir::binary(BinOp::And, ir::binary(BinOp::Ge, g, num(static_cast<double>(r[j].first))),
                 ir::binary(BinOp::Lt, g, num(static_cast<double>(r[j].second)))),
      ir::binary(BinOp::Eq, ir::call(Fn::Floor, {g}), g));
  body = ir::ifThen(inside, body);
  for (std::size_t idx = s.outerOrder.size(); idx-- > 0;) {
    const auto v = static_cast<std::size_t>(s.outerOrder[idx]);
    if (v == j) continue;
    // One element per point: the work of each iteration is the body's, about 1.
    const ForKind kind = outerKind(s, static_cast<int>(v), r[v].first, r[v].second, 1.0, f);
    body = loopOver(bs, st, v, r, kind, body);
  }
  f.body = body;
  out_.funcs.push_back(std::move(f));
}

} // namespace einjit::codegen::lowering
