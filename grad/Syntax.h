#pragma once
// Einjit syntax built from the gradient's symbolic pieces: numbers and names, symbolic
// integers (SymExpr) as expressions, affine forms over named slots, and solved loop bounds.
// The gradient builder and the (max)/(min) selection emit their statements through these.
#include "dsl/Ast.h"
#include "grad/IndexSolver.h"

#include <functional>
#include <string>
#include <vector>

namespace einjit::grad::syntax {

dsl::ExprPtr num(std::int64_t v);
dsl::ExprPtr ident(const std::string& n);
dsl::ExprPtr add(dsl::ExprPtr a, dsl::ExprPtr b);
dsl::ExprPtr mul(dsl::ExprPtr a, dsl::ExprPtr b);
dsl::ExprPtr fn(const std::string& name, std::vector<dsl::ExprPtr> args);
// c*e added to an expression being built as a sum (sign folded into the operator); acc may be
// null.
dsl::ExprPtr addTerm(dsl::ExprPtr acc, std::int64_t c, dsl::ExprPtr e);
dsl::ExprPtr plusConst(dsl::ExprPtr acc, std::int64_t k);
// A symbolic integer, and one of its non-linear atoms (size, parameter, max/min, fdiv/cdiv).
dsl::ExprPtr symExpr(const dsl::Sym& s);
dsl::ExprPtr symAtom(const dsl::Sym& s);

// Affine forms and loop bounds as syntax, with a name per slot.
struct Emit {
  std::vector<std::string> names;
  std::function<dsl::Sym(const dsl::Sym&)> resolve; // extents of intermediates in terms of inputs
  // Under an element mask, reads outside the forward domain may leave their tensors: they are
  // padded (and their values discarded by the mask).
  bool padReads = false;

  dsl::ExprPtr subscript(dsl::ExprPtr e) const;
  dsl::ExprPtr aff(const Aff& in) const;
  // lo: max over cdiv(num, d); hi (exclusive): min over fdiv(num, d) + 1.
  dsl::ExprPtr bound(const std::vector<BoundTerm>& terms, bool hi) const;
};

} // namespace einjit::grad::syntax
