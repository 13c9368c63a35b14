#pragma once
// Symbolic derivatives of checked expressions, and the simplifier that keeps them small.
//
// derivative(e, site) is d e / d (the value read by `site`), where `site` is one Read node
// of e: every other read, even of the same tensor, is a constant. Rules cover every operator
// and function of the language; comparisons, logic, floor/ceil and integer casts have
// derivative 0; min/max send it to the argument the interpreter returns (the first on ties).
#include "dsl/Program.h"

namespace einjit::grad {

dsl::CExprPtr derivative(const dsl::CExprPtr& e, const dsl::CExpr* site);

// Constant folding and 0/1 elimination: 0*x -> 0, 1*x -> x, x+0 -> x, -(-x) -> x, c ? 0 : 0 ->
// 0, x^1 -> x, x^0 -> 1, literal arithmetic; equal terms combined: a + a -> 2*a,
// c1*(c2*a) -> (c1*c2)*a.
dsl::CExprPtr simplify(const dsl::CExprPtr& e);

// Structural equality (the same operators, reads with the same subscripts, the same constants).
bool sameExpr(const dsl::CExpr& a, const dsl::CExpr& b);

// Helpers that build checked expression nodes.
dsl::CExprPtr constant(double v);
dsl::CExprPtr binary(dsl::BinOp op, dsl::CExprPtr a, dsl::CExprPtr b);
dsl::CExprPtr unary(dsl::UnOp op, dsl::CExprPtr a);
dsl::CExprPtr call(dsl::Fn f, std::vector<dsl::CExprPtr> args);
dsl::CExprPtr ternary(dsl::CExprPtr c, dsl::CExprPtr a, dsl::CExprPtr b);
bool isConstant(const dsl::CExpr& e, double v);

} // namespace einjit::grad
