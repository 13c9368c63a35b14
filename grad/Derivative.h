#pragma once
// Symbolic derivatives of checked expressions, and the simplifier that keeps them small.
//
// derivative(e, site) is d e / d (the value read by `site`), where `site` is one Read node
// of e: every other read, even of the same tensor, is a constant. Rules cover every operator
// and function of the language; comparisons, logic, floor/ceil and integer casts have
// derivative 0; min/max send it to the argument the interpreter returns (the first on ties).
#include "dsl/Program.h"

#include <unordered_map>
#include <vector>

namespace einjit::grad {

dsl::CExprPtr derivative(const dsl::CExprPtr& e, const dsl::CExpr* site);

// Constant folding and 0/1 elimination: 0*x -> 0, 1*x -> x, x+0 -> x, -(-x) -> x, c ? 0 : 0 ->
// 0, x^1 -> x, x^0 -> 1, literal arithmetic; equal terms combined: a + a -> 2*a,
// c1*(c2*a) -> (c1*c2)*a.
dsl::CExprPtr simplify(const dsl::CExprPtr& e);

// simplify() and derivative() with one memo of simplified nodes, so that each node is simplified
// once however often it is reached: derivative() simplifies every level of the expression
// over the (already simplified) levels below it, which without the memo made the gradient of
// an n-factor product cost n^2 per read (n^3 for the statement). A node's address identifies
// it: the memo keeps every node it has seen alive, so an address is never reused while the
// Simplifier lives; keep one only as long as the expressions it simplifies.
class Simplifier {
public:
  // `shared`: a simplifier whose memo is consulted too (read only), e.g. one that simplified a
  // whole statement, so that each site's simplifier, discarded after the site, finds the
  // statement's subexpressions done.
  explicit Simplifier(const Simplifier* shared = nullptr) : shared_(shared) {}
  dsl::CExprPtr operator()(const dsl::CExprPtr& e);
  dsl::CExprPtr derivative(const dsl::CExprPtr& e, const dsl::CExpr* site);
  // `node` (a call) has the value `value` (a read of the tensor the forward statement stored it
  // in): the rules of exp, tanh, sigmoid, sqrt and cbrt, whose derivatives are functions of
  // their own value, read it instead of computing the call again. Consulted through `shared`.
  void holds(const dsl::CExpr* node, dsl::CExprPtr value);

private:
  dsl::CExprPtr compute(const dsl::CExprPtr& e);
  const Simplifier* shared_;
  std::unordered_map<const dsl::CExpr*, dsl::CExprPtr> memo_;
  std::vector<dsl::CExprPtr> pinned_;
  std::unordered_map<const dsl::CExpr*, dsl::CExprPtr> held_;
  dsl::CExprPtr heldValue(const dsl::CExpr* node) const;
  dsl::CExprPtr zero_; // the derivative of what does not contain the site
};

// simplify(a + b) for a and b already simplified, without walking them again (equal terms
// combined, constants folded).
dsl::CExprPtr sumOfSimplified(const dsl::CExprPtr& a, const dsl::CExprPtr& b);

// The number of nodes of e written out as text (a subexpression shared by several parents
// counts once for each), or `cap` when that is more: derivatives share the forward
// subexpressions they copy, so their size in memory says nothing of the program they print.
std::size_t printedSize(const dsl::CExprPtr& e, std::size_t cap);

using dsl::sameExpr;

// Helpers that build checked expression nodes.
dsl::CExprPtr constant(double v);
dsl::CExprPtr binary(dsl::BinOp op, dsl::CExprPtr a, dsl::CExprPtr b);
dsl::CExprPtr unary(dsl::UnOp op, dsl::CExprPtr a);
dsl::CExprPtr call(dsl::Fn f, std::vector<dsl::CExprPtr> args);
dsl::CExprPtr ternary(dsl::CExprPtr c, dsl::CExprPtr a, dsl::CExprPtr b);
bool isConstant(const dsl::CExpr& e, double v);

} // namespace einjit::grad
