#pragma once
// Index solving for gradients in gather form (docs/GRADIENTS.md, G2 and G4).
//
// A site X[phi(v)] of a forward statement contributes dY[o(v)] * P(v) to dX[phi(v)]. To write
// each element u of dX once, solve phi(v) = u for as many forward indices v as possible
// (unit pivots, the largest-extent index first), and turn the forward ranges of all indices
// into exact loop bounds for the indices left free (Fourier-Motzkin, innermost first).
#include "dsl/Program.h"

#include <optional>

namespace einjit::grad {

// An affine form over slots (the gradient's indices u_0..u_{R-1}, then the forward
// statement's indices v_0..v_{n-1}) plus a symbolic constant.
struct Aff {
  std::vector<std::int64_t> c;
  dsl::Sym k;
  static Aff zero(std::size_t slots);
  static Aff unit(std::size_t slots, std::size_t slot);
  bool dependsOn(std::size_t slot) const { return slot < c.size() && c[slot] != 0; }
  bool hasSlots() const;
};
Aff affAdd(const Aff& a, const Aff& b);
Aff affScale(const Aff& a, std::int64_t s);

// One side of a loop bound: max (lo) or min (hi, inclusive) over terms Aff / divisor.
struct BoundTerm {
  Aff num;
  std::int64_t divisor = 1;
};

struct FreeBound {
  int var;                   // forward index left free: a reduction loop of the gradient
  std::vector<BoundTerm> lo; // var >= max cdiv(num, divisor)
  std::vector<BoundTerm> hi; // var <= min fdiv(num, divisor)   (inclusive)
};

// A dimension of the gradient split into residue phases: u = stride*q + offset.
// For a clamp() read, also which part of the dimension: clamp(phi) = u means phi = u inside,
// phi <= 0 at u = 0 and phi >= E-1 at u = E-1 (index-set splitting).
struct Split {
  std::int64_t stride = 1;
  std::int64_t offset = 0;
  int edge = 0; // 0: a plain read; clamp(): -1 low edge, +1 high edge, 2 interior (1 <= u < E-1)
};

struct SiteSolution {
  bool solved = false;
  bool impossible = false; // solved, and no element of this phase is reached
  // Not solved because these dimensions must first be split modulo splitModulus (jointly):
  // solve again once per combination of residues.
  std::int64_t splitModulus = 0;
  std::vector<std::size_t> splitDims;
  std::vector<std::int64_t> splitModuli; // per split dimension: split its slot modulo this
  std::string why;                       // when not solved
  std::size_t slots = 0;                 // R + n
  std::vector<int> rowPivot;             // per dimension of X: the index it eliminated, or -1
  // Per dimension of X: u_r = phaseStride*q_r + phaseOffset, and slot r is q_r (stride 1 and
  // offset 0: no phases). Elements of the other phases receive nothing.
  std::vector<std::int64_t> phaseStride, phaseOffset;
  std::vector<int> edge; // per dimension: as in Split (clamp reads)
  // Per dimension: fixed when a sub-lattice equality determines it from the other indices
  // (G2d); lhsAff is then its value, written on the left-hand side. Unfixed: the slot itself.
  std::vector<bool> fixed;
  std::vector<Aff> lhsAff;
  std::vector<bool> eliminated; // per forward index
  // Per forward index: its slot now holds a new index from a Euclid step (G2c), which needs a
  // name of its own.
  std::vector<bool> renamed;
  std::vector<Aff> varAff;       // per forward index: its value in terms of the slots
  std::vector<FreeBound> bounds; // free indices, outermost first
  std::vector<Aff> conditions;   // element conditions: each >= 0
  std::vector<Aff> equalities;   // sub-lattice conditions: each == 0
};

// extents: per dimension of the site's tensor, its symbolic extent first, then any extent known
// to be equal to it (the other bare uses of the same index, which Binding checks agree).
// ranges: per forward index, its [lo, hi) (the statement's own, or equal ones in other terms).
// split: per dimension of X, the residue phase being solved (empty: none).
SiteSolution solveSite(const dsl::Statement& st, const dsl::CExpr& site,
                       const std::vector<std::vector<dsl::Sym>>& extents,
                       const std::vector<std::pair<dsl::Sym, dsl::Sym>>& ranges,
                       const std::vector<Split>& split = {});

// The subscript's affine part with the forward indices replaced by their forms, over `slots`
// slots (by default those of the forms; a statement without indices has no form to count them).
Aff composeSubscript(const dsl::Subscript& s, const std::vector<Aff>& varAff,
                     std::optional<std::size_t> slots = std::nullopt);

} // namespace einjit::grad
