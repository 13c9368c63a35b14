#include "codegen/schedule/GemmSummand.h"

#include <memory>

namespace einjit::codegen {

using namespace einjit::dsl;

namespace {

bool isBinary(const CExpr& e, BinOp op) { return e.kind == CKind::Binary && e.binop == op; }

bool reads(const CExpr& e, const CExpr& a) {
  if (e.kind == CKind::Read && sameExpr(e, a)) return true;
  for (const CExprPtr& c : e.args)
    if (reads(*c, a)) return true;
  return false;
}

// e rewritten (a - x as x - a), `negated` toggled per flip that changes e's sign; only through
// products, squares and negations, where the sign is carried exactly.
CExprPtr flip(const CExprPtr& e, const CExpr& a, bool& negated) {
  if (isBinary(*e, BinOp::Sub) && e->args[0]->kind == CKind::Read && sameExpr(*e->args[0], a) &&
      !reads(*e->args[1], a)) {
    auto s = std::make_shared<CExpr>(*e);
    s->args = {e->args[1], e->args[0]};
    negated = !negated;
    return s;
  }
  const bool square = isBinary(*e, BinOp::Pow) && e->args[1]->kind == CKind::Const && e->args[1]->value == 2;
  const bool neg = e->kind == CKind::Unary && e->unop == UnOp::Neg;
  if (!square && !neg && !isBinary(*e, BinOp::Mul)) return e;
  std::vector<CExprPtr> args = e->args;
  bool changed = false;
  const std::size_t n = square ? 1 : args.size();
  for (std::size_t i = 0; i < n; ++i) {
    bool inner = false;
    args[i] = flip(e->args[i], a, inner);
    changed = changed || args[i] != e->args[i];
    if (inner && !square) negated = !negated;
  }
  if (!changed) return e;
  auto r = std::make_shared<CExpr>(*e);
  r->args = std::move(args);
  return r;
}

// Every read of a in e is the subtrahend of a subtraction (of an operand that does not read a).
bool onlySubtrahend(const CExpr& e, const CExpr& a) {
  if (e.kind == CKind::Read) return !sameExpr(e, a);
  if (isBinary(e, BinOp::Sub) && e.args[1]->kind == CKind::Read && sameExpr(*e.args[1], a))
    return !reads(*e.args[0], a);
  for (const CExprPtr& c : e.args)
    if (!onlySubtrahend(*c, a)) return false;
  return true;
}

} // namespace

CExprPtr broadcastAsSubtrahend(const CExprPtr& summand, const CExpr& a, double& scale) {
  bool negated = false;
  CExprPtr r = flip(summand, a, negated);
  if (negated) scale = -scale;
  return r;
}

bool broadcastFolds(const CExprPtr& summand, const CExpr& a) {
  double scale = 1;
  return reads(*summand, a) && onlySubtrahend(*broadcastAsSubtrahend(summand, a, scale), a);
}

} // namespace einjit::codegen
