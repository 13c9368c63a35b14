#include "dsl/Ast.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace einjit::dsl {

std::string_view binOpSpelling(BinOp op) {
  switch (op) {
#define BINOP(kind, spelling, prec, right)                                                         \
  case BinOp::kind:                                                                                \
    return spelling;
#include "dsl/Ops.def"
#undef BINOP
  }
  return "?";
}

int binOpPrecedence(BinOp op) {
  switch (op) {
#define BINOP(kind, spelling, prec, right)                                                         \
  case BinOp::kind:                                                                                \
    return prec;
#include "dsl/Ops.def"
#undef BINOP
  }
  return 0;
}

bool binOpRightAssoc(BinOp op) {
  switch (op) {
#define BINOP(kind, spelling, prec, right)                                                         \
  case BinOp::kind:                                                                                \
    return right;
#include "dsl/Ops.def"
#undef BINOP
  }
  return false;
}

std::string_view reduceSpelling(Reduce r) {
  switch (r) {
  case Reduce::Add: return "+";
  case Reduce::Mul: return "*";
  case Reduce::Max: return "max";
  case Reduce::Min: return "min";
  }
  return "?";
}

std::string_view assignSpelling(Assign a) {
  switch (a) {
  case Assign::Define: return ":=";
  case Assign::Overwrite: return "=";
  case Assign::Accumulate: return "+=";
  }
  return "?";
}

namespace {
ExprPtr make(Expr e) {
  for (const ExprPtr& a : e.args) e.height = std::max(e.height, a->height + 1);
  return std::make_shared<const Expr>(std::move(e));
}
} // namespace

ExprPtr Expr::makeNumber(double v, bool isInt, SourceRange r) {
  Expr e{ExprKind::Number, r};
  e.number = v;
  e.isInteger = isInt;
  return make(std::move(e));
}
ExprPtr Expr::makeIdent(std::string n, SourceRange r) {
  Expr e{ExprKind::Ident, r};
  e.name = std::move(n);
  e.nameRange = r;
  return make(std::move(e));
}
ExprPtr Expr::makeAccess(std::string n, std::vector<ExprPtr> idx, SourceRange r, SourceRange nr) {
  Expr e{ExprKind::Access, r};
  e.name = std::move(n);
  e.nameRange = nr;
  e.args = std::move(idx);
  return make(std::move(e));
}
ExprPtr Expr::makeCall(std::string n, std::vector<ExprPtr> a, SourceRange r, SourceRange nr) {
  Expr e{ExprKind::Call, r};
  e.name = std::move(n);
  e.nameRange = nr;
  e.args = std::move(a);
  return make(std::move(e));
}
ExprPtr Expr::makeUnary(UnOp op, ExprPtr a, SourceRange r) {
  Expr e{ExprKind::Unary, r};
  e.unop = op;
  e.args = {std::move(a)};
  return make(std::move(e));
}
ExprPtr Expr::makeBinary(BinOp op, ExprPtr a, ExprPtr b, SourceRange r) {
  Expr e{ExprKind::Binary, r};
  e.binop = op;
  e.args = {std::move(a), std::move(b)};
  return make(std::move(e));
}
ExprPtr Expr::makeTernary(ExprPtr c, ExprPtr t, ExprPtr f, SourceRange r) {
  Expr e{ExprKind::Ternary, r};
  e.args = {std::move(c), std::move(t), std::move(f)};
  return make(std::move(e));
}

bool sameExpr(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.args.size() != b.args.size()) return false;
  switch (a.kind) {
  case ExprKind::Number:
    if (a.number != b.number || a.isInteger != b.isInteger) return false;
    break;
  case ExprKind::Ident:
  case ExprKind::Access:
  case ExprKind::Call:
    if (a.name != b.name) return false;
    break;
  case ExprKind::Unary:
    if (a.unop != b.unop) return false;
    break;
  case ExprKind::Binary:
    if (a.binop != b.binop) return false;
    break;
  case ExprKind::Ternary: break;
  }
  for (std::size_t i = 0; i < a.args.size(); ++i)
    if (!sameExpr(*a.args[i], *b.args[i])) return false;
  return true;
}

bool sameStmt(const Stmt& a, const Stmt& b) {
  if (a.reduce != b.reduce || a.output != b.output || a.outputBracketed != b.outputBracketed ||
      a.assign != b.assign || a.lhs.size() != b.lhs.size() || a.where.size() != b.where.size())
    return false;
  for (std::size_t i = 0; i < a.lhs.size(); ++i)
    if (!sameExpr(*a.lhs[i], *b.lhs[i])) return false;
  if (!sameExpr(*a.rhs, *b.rhs)) return false;
  for (std::size_t i = 0; i < a.where.size(); ++i) {
    const RangeDecl &x = a.where[i], &y = b.where[i];
    if (x.index != y.index || !sameExpr(*x.lo, *y.lo) || !sameExpr(*x.hi, *y.hi)) return false;
  }
  return true;
}

bool sameProgram(const ProgramAst& a, const ProgramAst& b) {
  if (a.stmts.size() != b.stmts.size()) return false;
  for (std::size_t i = 0; i < a.stmts.size(); ++i)
    if (!sameStmt(a.stmts[i], b.stmts[i])) return false;
  return true;
}

namespace {

void dumpExpr(std::ostringstream& os, const Expr& e, int depth) {
  os << std::string(static_cast<std::size_t>(depth) * 2, ' ');
  switch (e.kind) {
  case ExprKind::Number: {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", e.number);
    os << (e.isInteger ? "Int " : "Float ") << buf;
    break;
  }
  case ExprKind::Ident: os << "Ident " << e.name; break;
  case ExprKind::Access: os << "Access " << e.name; break;
  case ExprKind::Call: os << "Call " << e.name; break;
  case ExprKind::Unary: os << "Unary " << (e.unop == UnOp::Neg ? "-" : "!"); break;
  case ExprKind::Binary: os << "Binary " << binOpSpelling(e.binop); break;
  case ExprKind::Ternary: os << "Ternary"; break;
  }
  os << '\n';
  for (const auto& a : e.args) dumpExpr(os, *a, depth + 1);
}

} // namespace

std::string dumpAst(const ProgramAst& p) {
  std::ostringstream os;
  for (const Stmt& s : p.stmts) {
    os << "Stmt (" << reduceSpelling(s.reduce) << ") " << s.output
       << (s.outputBracketed ? "[]" : "") << ' ' << assignSpelling(s.assign) << '\n';
    for (const auto& l : s.lhs) {
      os << "  lhs\n";
      dumpExpr(os, *l, 2);
    }
    os << "  rhs\n";
    dumpExpr(os, *s.rhs, 2);
    for (const RangeDecl& r : s.where) {
      os << "  where " << r.index << '\n';
      dumpExpr(os, *r.lo, 2);
      dumpExpr(os, *r.hi, 2);
    }
  }
  return os.str();
}

} // namespace einjit::dsl
