#pragma once
// Boxes around a statement's iteration domain, for tensors indexed by the forward indices
// themselves (the (max)/(min) gradient stores each iteration's value in one).
//
// A dependent range (where k in max(0, j-N+1):min(K, j+1)) has no box of its own: its hull
// comes from interval arithmetic over the hulls of the indices its bounds read. The lower end
// of a max() and the upper end of a min() take a single argument when one is a constant (any
// argument bounds them), so a clipped window max(0, 1-2i):min(3, N+1-2i) gets the box 0:3.
#include "dsl/Program.h"
#include "grad/IndexSolver.h"
#include "grad/Syntax.h"

#include <utility>
#include <vector>

namespace einjit::grad {

// Per index of `st`: [lo, hi) containing every value it takes in the statement (exactly its
// range where it does not depend on other indices). Unresolved: extents of intermediates
// appear as size(t, d).
std::vector<std::pair<dsl::Sym, dsl::Sym>> indexHulls(const dsl::Statement& st);

// lo(v) <= v && v < hi(v) for a dependent index v, as syntax over the slots of varAff (each
// forward index's value).
dsl::ExprPtr inDependentRange(const dsl::Statement& st, std::size_t v,
                              const std::vector<Aff>& varAff, const syntax::Emit& emit);

} // namespace einjit::grad
