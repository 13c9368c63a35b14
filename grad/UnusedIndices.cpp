#include "grad/UnusedIndices.h"

#include <algorithm>

namespace einjit::grad {

using namespace dsl;

namespace {

bool mentions(const Expr& e, const std::string& name) {
  if (e.kind == ExprKind::Ident && e.name == name) return true;
  return std::any_of(e.args.begin(), e.args.end(),
                     [&](const ExprPtr& a) { return mentions(*a, name); });
}

bool isZero(const Expr& e) { return e.kind == ExprKind::Number && e.number == 0; }

ExprPtr count(const RangeDecl& r) {
  if (r.lo->kind == ExprKind::Number && r.hi->kind == ExprKind::Number && r.lo->isInteger &&
      r.hi->isInteger)
    return Expr::makeNumber(std::max(r.hi->number - r.lo->number, 0.0), true);
  // An extent is never negative.
  if (isZero(*r.lo) && r.hi->kind == ExprKind::Call && r.hi->name == "size") return r.hi;
  ExprPtr len = isZero(*r.lo) ? r.hi : Expr::makeBinary(BinOp::Sub, r.hi, r.lo);
  return Expr::makeCall("max", {len, Expr::makeNumber(0, true)});
}

} // namespace

void foldUnusedIndices(Stmt& s) {
  for (std::size_t w = s.where.size(); w-- > 0;) {
    const RangeDecl r = s.where[w];
    bool used = mentions(*s.rhs, r.index);
    for (const ExprPtr& l : s.lhs) used = used || mentions(*l, r.index);
    for (std::size_t o = 0; o < s.where.size(); ++o)
      if (o != w)
        used = used || mentions(*s.where[o].lo, r.index) || mentions(*s.where[o].hi, r.index);
    if (used) continue;
    ExprPtr n = count(r);
    switch (s.reduce) {
    case Reduce::Add: s.rhs = Expr::makeBinary(BinOp::Mul, s.rhs, n); break;
    case Reduce::Mul: s.rhs = Expr::makeBinary(BinOp::Pow, s.rhs, n); break;
    case Reduce::Max:
    case Reduce::Min: continue; // repeating changes nothing but an empty range: left as it is
    }
    s.where.erase(s.where.begin() + static_cast<std::ptrdiff_t>(w));
  }
}

} // namespace einjit::grad
