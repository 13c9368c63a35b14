#pragma once
// The steps of solveSite (IndexSolver.h), internal to grad/, in the order it runs them
// (docs/GRADIENTS.md, section 4 and 5):
//   IndexSolver.cpp     the rows phi_r(v) - u_r = 0 of a site and its residue phase
//   UnitPivots.cpp      each row in turn: a unit pivot eliminated everywhere (G2a), after
//                       dividing out a common factor (G2b/G3) or Euclid steps (G2c) when needed
//   EuclidStep.cpp      one unimodular change of two indices (G2c)
//   SubLattice.cpp      equalities over the gradient's own indices parametrised (G2d)
//   FourierMotzkin.cpp  the forward ranges as constraints, the free indices' bounds (G4) and
//                       the element conditions left over
#include "grad/IndexSolver.h"

#include <cstddef>
#include <vector>

namespace einjit::grad::solve {

// One site's solve in progress. Slots are the gradient's indices u_0..u_{R-1} (q_r in a
// residue phase), then the forward indices v_0..v_{n-1}.
struct SolveState {
  const dsl::Statement& st;
  const std::vector<std::vector<dsl::Sym>>& extents; // per dimension of X (solveSite's)
  SiteSolution& sol;
  std::size_t R = 0, n = 0;
  std::vector<Aff> rows = {}; // per dimension: phi_r(v) - (g*q_r + rho), or phi at an edge
  std::vector<std::vector<dsl::Sym>> boxes = {}; // the range of each slot u_r or q_r
  // A clamp edge: the row is no equation but an inequality on phi.
  bool isEdge(std::size_t r) const { return sol.edge[r] == -1 || sol.edge[r] == 1; }
};

// A constraint f >= 0 over the slots; original ones come from ranges, the others are
// Fourier-Motzkin shadows (implied by the exact inner bounds).
struct Constraint {
  Aff f;
  bool original;
};

// A constraint a >= 0 that the box 0 <= u_r < extent of the gradient's own indices implies.
bool impliedByBox(const Aff& a, std::size_t R, const std::vector<std::vector<dsl::Sym>>& extents);

// Eliminates one forward index per row where it can, substituting it into the later rows and
// every index's form. False when the solve ends here: sol.why says why, or sol.impossible that
// no element of this phase is reached, or sol.splitModulus that residue phases are needed.
bool eliminateRows(SolveState& s);
// The forward index to pivot on in a row: coefficient +-1, output indices first, then in order;
// -1 when there is none.
int unitPivot(const SolveState& s, const Aff& row);
// G2c: one unimodular change of the two indices of row r with the smallest pairwise gcd, in the
// later rows and every index's form. False when the row has no such pair.
bool euclidStep(SolveState& s, std::size_t r);

// G2d: moves each equality among the gradient's own indices into a fixed left-hand dimension
// (sol.fixed, sol.lhsAff) where the written element surely exists; the rest stay masks
// (sol.equalities).
void parametriseSubLattice(SolveState& s);

// The forward indices' ranges (box, or dependent bounds as pieces) and the clamp edges as
// constraints. False (sol.why set) when a dependent range has a form the solver does not take.
bool rangeConstraints(SolveState& s, const std::vector<std::pair<dsl::Sym, dsl::Sym>>& ranges,
                      std::vector<Constraint>& cons);
// G4: eliminates the free indices innermost first into sol.bounds; cons keeps the constraints
// over the gradient's indices alone. False (sol.why set) when an index is unbounded.
bool fourierMotzkin(SolveState& s, std::vector<Constraint>& cons);
// The original constraints left over that dX's box does not imply become sol.conditions.
void elementConditions(SolveState& s, const std::vector<Constraint>& cons);

} // namespace einjit::grad::solve
