#include "grad/Syntax.h"

namespace einjit::grad::syntax {

using namespace einjit::dsl;

ExprPtr num(std::int64_t v) {
  ExprPtr n = Expr::makeNumber(static_cast<double>(v < 0 ? -v : v), true);
  return v < 0 ? Expr::makeUnary(UnOp::Neg, n) : n;
}
ExprPtr ident(const std::string& n) { return Expr::makeIdent(n); }
ExprPtr add(ExprPtr a, ExprPtr b) { return Expr::makeBinary(BinOp::Add, a, b); }
ExprPtr mul(ExprPtr a, ExprPtr b) { return Expr::makeBinary(BinOp::Mul, a, b); }
ExprPtr fn(const std::string& name, std::vector<ExprPtr> args) {
  return Expr::makeCall(name, std::move(args));
}

// c*e added to an expression being built as a sum (sign folded into the operator).
ExprPtr addTerm(ExprPtr acc, std::int64_t c, ExprPtr e) {
  if (c == 0) return acc;
  std::int64_t mag = c < 0 ? -c : c;
  ExprPtr term = mag == 1 ? e : mul(num(mag), e);
  if (!acc) return c < 0 ? Expr::makeUnary(UnOp::Neg, term) : term;
  return Expr::makeBinary(c < 0 ? BinOp::Sub : BinOp::Add, acc, term);
}

ExprPtr plusConst(ExprPtr acc, std::int64_t k) {
  if (k == 0) return acc;
  return Expr::makeBinary(k < 0 ? BinOp::Sub : BinOp::Add, acc, num(k < 0 ? -k : k));
}

ExprPtr symAtom(const Sym& s) {
  switch (s->kind) {
  case SymKind::Size: return fn("size", {ident(s->tensor), num(s->dim)});
  case SymKind::Param: return ident(s->tensor);
  case SymKind::Max:
  case SymKind::Min: {
    ExprPtr acc = symExpr(s->args[0]);
    for (std::size_t i = 1; i < s->args.size(); ++i)
      acc = fn(s->kind == SymKind::Max ? "max" : "min", {acc, symExpr(s->args[i])});
    return acc;
  }
  case SymKind::FDiv:
  case SymKind::CDiv:
    return fn(s->kind == SymKind::FDiv ? "fdiv" : "cdiv", {symExpr(s->args[0]), num(s->divisor)});
  case SymKind::Lin: return symExpr(s);
  }
  return num(0);
}

ExprPtr symExpr(const Sym& s) {
  if (s->kind != SymKind::Lin) return symAtom(s);
  ExprPtr acc;
  for (const auto& [t, c] : s->terms) acc = addTerm(acc, c, symAtom(t));
  if (!acc) return num(s->constant);
  return plusConst(acc, s->constant);
}

ExprPtr Emit::subscript(ExprPtr e) const { return padReads ? fn("pad", {e}) : e; }

ExprPtr Emit::aff(const Aff& in) const {
  Aff a = in;
  if (resolve) a.k = resolve(a.k);
  ExprPtr acc;
  for (std::size_t i = 0; i < a.c.size(); ++i) acc = addTerm(acc, a.c[i], ident(names[i]));
  std::int64_t k;
  if (symIsConst(a.k, &k)) {
    if (!acc) return num(k);
    return k == 0 ? acc : plusConst(acc, k);
  }
  if (!acc) return symExpr(a.k);
  // Fold the symbolic constant in term by term so signs read naturally.
  ExprPtr out = acc;
  const Sym& s = a.k;
  if (s->kind == SymKind::Lin) {
    for (const auto& [t, c] : s->terms) out = addTerm(out, c, symAtom(t));
    return s->constant != 0 ? plusConst(out, s->constant) : out;
  }
  return add(out, symAtom(s));
}

ExprPtr Emit::bound(const std::vector<BoundTerm>& terms, bool hi) const {
  ExprPtr acc;
  for (const BoundTerm& t : terms) {
    ExprPtr e;
    if (t.divisor == 1) {
      Aff a = t.num;
      if (hi) a.k = symAddConst(a.k, 1);
      e = aff(a);
    } else {
      e = fn(hi ? "fdiv" : "cdiv", {aff(t.num), num(t.divisor)});
      if (hi) e = add(e, num(1));
    }
    acc = acc ? fn(hi ? "min" : "max", {acc, e}) : e;
  }
  return acc;
}

} // namespace einjit::grad::syntax
