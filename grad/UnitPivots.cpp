// Row by row elimination of forward indices (G2a), with the common-factor division (G2b/G3)
// and Euclid steps (G2c) that make a unit pivot appear. The rows are processed jointly: a pivot
// found in one row is substituted into the later rows, so A[i,i] is never solved one dimension
// at a time.
#include "grad/SolveSteps.h"

#include <numeric>

namespace einjit::grad::solve {

using namespace einjit::dsl;

int unitPivot(const SolveState& s, const Aff& row) {
  // Output indices first (they usually have the largest extent), then in order.
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t v = 0; v < s.n; ++v) {
      std::int64_t a = row.c[s.R + v];
      if ((a == 1 || a == -1) && s.st.vars[v].isOutput == (pass == 0)) return static_cast<int>(v);
    }
  return -1;
}

namespace {

// G2b/G3: every index coefficient shares g > 1, so the row holds only where the slots and the
// constant are 0 modulo g. Slots whose coefficients g does not divide must be split into
// residue phases first (the caller re-solves per phase, jointly when several dimensions are
// coupled); then either the phase is impossible (nothing reaches it) or the row divides by g.
// False when the solve ends here.
bool divideCommonFactor(SolveState& s, std::size_t r, std::int64_t g) {
  SiteSolution& sol = s.sol;
  Aff& row = s.rows[r];
  std::int64_t k;
  if (!symIsConst(row.k, &k)) {
    sol.why = "dimension " + std::to_string(r) + ": a stride with a symbolic offset";
    return false;
  }
  // Slot q with coefficient c is determined modulo g by its residue modulo g/gcd(c, g).
  for (std::size_t q = 0; q < s.R; ++q)
    if (row.c[q] % g != 0) {
      sol.splitDims.push_back(q);
      sol.splitModuli.push_back(g / std::gcd(row.c[q], g));
    }
  if (!sol.splitDims.empty()) {
    sol.splitModulus = g;
    sol.why = "dimension " + std::to_string(r) + " needs residue phases";
    return false;
  }
  if (k % g != 0) {
    sol.impossible = true;
    sol.solved = true;
    return false;
  }
  for (auto& c : row.c) c /= g;
  row.k = symConst(k / g);
  return true;
}

// a*v + rest = 0 in row r  =>  v = -a * rest (a = +-1), substituted into the later rows, the
// clamp edges' rows and every index's form.
void eliminate(SolveState& s, std::size_t r, std::size_t pv) {
  SiteSolution& sol = s.sol;
  const std::size_t R = s.R;
  const Aff& row = s.rows[r];
  std::int64_t a = row.c[R + pv];
  Aff rest = row;
  rest.c[R + pv] = 0;
  Aff value = affScale(rest, -a);
  sol.eliminated[pv] = true;
  sol.rowPivot[r] = static_cast<int>(pv);
  auto substitute = [&](Aff& f) {
    std::int64_t c = f.c[R + pv];
    if (c == 0) return;
    f.c[R + pv] = 0;
    f = affAdd(f, affScale(value, c));
  };
  for (std::size_t q = 0; q < R; ++q)
    if (q > r || s.isEdge(q)) substitute(s.rows[q]);
  // (varAff[pv] becomes `value` too: it is the slot itself unless a Euclid step changed it.)
  for (std::size_t v = 0; v < s.n; ++v) substitute(sol.varAff[v]);
}

} // namespace

bool eliminateRows(SolveState& s) {
  SiteSolution& sol = s.sol;
  for (std::size_t r = 0; r < s.R; ++r) {
    if (s.isEdge(r)) continue;
    const Aff& row = s.rows[r];
    int pivot = unitPivot(s, row);
    bool anyVar = false;
    std::int64_t g = 0;
    for (std::size_t v = 0; v < s.n; ++v) {
      anyVar |= row.c[s.R + v] != 0;
      g = std::gcd(g, row.c[s.R + v]);
    }
    if (pivot < 0 && anyVar && g > 1) {
      if (!divideCommonFactor(s, r, g)) return false;
      pivot = unitPivot(s, row);
    }
    for (int step = 0; pivot < 0 && anyVar && step < 64; ++step) {
      if (!euclidStep(s, r)) break;
      pivot = unitPivot(s, row);
    }
    if (pivot < 0) {
      if (anyVar) {
        sol.why = "dimension " + std::to_string(r) + ": no unit pivot after Euclid steps";
        return false;
      }
      std::int64_t k;
      if (!row.hasSlots() && symIsConst(row.k, &k)) {
        if (k != 0) { // a constant that cannot be 0: this phase receives nothing
          sol.impossible = true;
          sol.solved = true;
          return false;
        }
        continue;
      }
      sol.equalities.push_back(row); // u alone: a sub-lattice such as A[i,i]
      continue;
    }
    eliminate(s, r, static_cast<std::size_t>(pivot));
  }
  return true;
}

} // namespace einjit::grad::solve
