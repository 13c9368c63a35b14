// G2d: an equality among the gradient's own indices (u1 = u0 for A[i,i]) is a sub-lattice:
// parametrise it by solving for one index, which is then written through the left-hand side
// (dA[u0, u0]) instead of masking every element.
#include "grad/SolveSteps.h"

#include <algorithm>

namespace einjit::grad::solve {

using namespace einjit::dsl;

void parametriseSubLattice(SolveState& s) {
  SiteSolution& sol = s.sol;
  const std::size_t R = s.R;
  const auto& extents = s.extents;
  const auto& boxes = s.boxes;
  sol.lhsAff.clear();
  for (std::size_t r = 0; r < R; ++r) sol.lhsAff.push_back(Aff::unit(sol.slots, r));
  sol.fixed.assign(R, false);
  std::vector<Aff> pending = std::move(sol.equalities);
  sol.equalities.clear();
  for (std::size_t e = 0; e < pending.size(); ++e) {
    Aff eq = pending[e];
    std::size_t r = R;
    for (std::size_t q = 0; q < R && r == R; ++q)
      if ((eq.c[q] == 1 || eq.c[q] == -1) && !sol.fixed[q] && sol.edge[q] == 0 &&
          sol.phaseStride[q] == 1)
        r = q;
    if (r == R) {
      sol.equalities.push_back(eq);
      continue;
    }
    std::int64_t c = eq.c[r];
    Aff rest = eq;
    rest.c[r] = 0;
    Aff value = affScale(rest, -c); // u_r = value
    // Only when the written element surely exists (0 <= value <= E_r - 1 follows from the
    // other indices' ranges); otherwise the equality stays a mask.
    Aff top = Aff::zero(sol.slots);
    top.k = symAddConst(extents[r][0], -1);
    Aff below = affAdd(top, affScale(value, -1));
    if (!impliedByBox(value, R, boxes) || !impliedByBox(below, R, boxes)) {
      bool other = false;
      for (std::size_t q = 0; q < R; ++q) other = other || (q != r && value.c[q] != 0);
      // value = u_q (bare): implied when u_q's extents include E_r.
      bool same = other && value.c[r] == 0;
      if (same) {
        std::size_t q = 0;
        while (q < R && value.c[q] == 0) ++q;
        std::int64_t k;
        same = value.c[q] == 1 && symIsConst(value.k, &k) && k == 0 &&
               std::any_of(boxes[q].begin(), boxes[q].end(), [&](const Sym& box) {
                 return std::any_of(extents[r].begin(), extents[r].end(),
                                    [&](const Sym& f) { return symPrint(box) == symPrint(f); });
               });
      }
      if (!same) {
        sol.equalities.push_back(eq);
        continue;
      }
    }
    auto substitute = [&](Aff& f) {
      std::int64_t k = f.c[r];
      if (k == 0) return;
      f.c[r] = 0;
      f = affAdd(f, affScale(value, k));
    };
    for (Aff& f : sol.varAff) substitute(f);
    for (Aff& f : sol.lhsAff) substitute(f);
    for (std::size_t q = e + 1; q < pending.size(); ++q) substitute(pending[q]);
    // Equalities kept as masks before this one, and a clamp edge's inequality, may read slot
    // r too: "a[l, 3l, l]", "a[l, l, clamp(2l-2)]".
    for (Aff& f : sol.equalities) substitute(f);
    for (std::size_t q = 0; q < R; ++q)
      if (s.isEdge(q)) substitute(s.rows[q]);
    sol.fixed[r] = true;
  }
}

} // namespace einjit::grad::solve
