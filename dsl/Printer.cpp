#include "dsl/Printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace einjit::dsl {

std::string formatNumber(double v, bool isInteger) {
  char buf[64];
  if (isInteger) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  // Shortest decimal that reads back to the same double.
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0"; // stays a float literal
  return s;
}

namespace {

constexpr int kPrimary = 100;

int precedenceOf(const Expr& e) {
  switch (e.kind) {
  case ExprKind::Binary: return binOpPrecedence(e.binop);
  case ExprKind::Unary: return kUnaryPrecedence;
  case ExprKind::Ternary: return 0;
  case ExprKind::Number: return e.number < 0 ? kUnaryPrecedence : kPrimary;
  default: return kPrimary;
  }
}

void print(std::string& out, const Expr& e);

void printChild(std::string& out, const Expr& e, bool parens) {
  if (parens) out += '(';
  print(out, e);
  if (parens) out += ')';
}

void printList(std::string& out, const std::vector<ExprPtr>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i) out += ", ";
    print(out, *args[i]);
  }
}

// "2h": an integer literal times a plain name (not one that would lex as an exponent).
bool juxtaposable(const Expr& e) {
  if (e.kind != ExprKind::Binary || e.binop != BinOp::Mul) return false;
  const Expr &a = *e.args[0], &b = *e.args[1];
  return a.kind == ExprKind::Number && a.isInteger && a.number >= 0 && b.kind == ExprKind::Ident &&
         b.name[0] != 'e' && b.name[0] != 'E';
}

void print(std::string& out, const Expr& e) {
  switch (e.kind) {
  case ExprKind::Number:
    // Negative literals only come from generated trees; parenthesised they reparse as -(x).
    if (e.number < 0) {
      out += '-';
      out += formatNumber(-e.number, e.isInteger);
    } else {
      out += formatNumber(e.number, e.isInteger);
    }
    return;
  case ExprKind::Ident: out += e.name; return;
  case ExprKind::Access:
    out += e.name;
    out += '[';
    printList(out, e.args);
    out += ']';
    return;
  case ExprKind::Call:
    out += e.name;
    out += '(';
    printList(out, e.args);
    out += ')';
    return;
  case ExprKind::Unary: {
    out += e.unop == UnOp::Neg ? '-' : '!';
    const Expr& a = *e.args[0];
    bool parens = precedenceOf(a) <= kUnaryPrecedence && a.kind != ExprKind::Unary;
    printChild(out, a, parens);
    return;
  }
  case ExprKind::Binary: {
    if (juxtaposable(e)) {
      out += formatNumber(e.args[0]->number, true);
      out += e.args[1]->name;
      return;
    }
    int p = binOpPrecedence(e.binop);
    bool right = binOpRightAssoc(e.binop);
    const Expr &a = *e.args[0], &b = *e.args[1];
    int pa = precedenceOf(a), pb = precedenceOf(b);
    printChild(out, a, pa < p || (pa == p && right));
    if (e.binop == BinOp::Pow) {
      out += '^';
    } else {
      out += ' ';
      out += binOpSpelling(e.binop);
      out += ' ';
    }
    printChild(out, b, pb < p || (pb == p && !right));
    return;
  }
  case ExprKind::Ternary:
    printChild(out, *e.args[0], precedenceOf(*e.args[0]) < 1);
    out += " ? ";
    print(out, *e.args[1]);
    out += " : ";
    print(out, *e.args[2]);
    return;
  }
}

} // namespace

std::string printExpr(const Expr& e) {
  std::string out;
  print(out, e);
  return out;
}

std::string printStmt(const Stmt& s) {
  std::string out;
  if (s.reduce != Reduce::Add) {
    out += '(';
    out += reduceSpelling(s.reduce);
    out += ") ";
  }
  out += s.output;
  if (s.outputBracketed) {
    out += '[';
    printList(out, s.lhs);
    out += ']';
  }
  out += ' ';
  out += assignSpelling(s.assign);
  out += ' ';
  print(out, *s.rhs);
  for (std::size_t i = 0; i < s.where.size(); ++i) {
    out += i ? ", " : " where ";
    out += s.where[i].index;
    out += " in ";
    out += printExpr(*s.where[i].lo);
    out += ':';
    out += printExpr(*s.where[i].hi);
  }
  return out;
}

std::string printProgram(const ProgramAst& p) {
  std::string out;
  for (std::size_t i = 0; i < p.stmts.size(); ++i) {
    if (i) out += '\n';
    out += printStmt(p.stmts[i]);
  }
  return out;
}

} // namespace einjit::dsl
