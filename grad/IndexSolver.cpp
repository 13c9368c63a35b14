// Index solving for one site (IndexSolver.h): the affine forms, the rows of the site's index
// equations, and solveSite as a straight line over its steps (SolveSteps.h).
#include "grad/IndexSolver.h"

#include "grad/SolveSteps.h"

#include <algorithm>
#include <optional>

namespace einjit::grad {

using namespace einjit::dsl;

Aff Aff::zero(std::size_t slots) { return {std::vector<std::int64_t>(slots, 0), symConst(0)}; }

Aff Aff::unit(std::size_t slots, std::size_t slot) {
  Aff a = zero(slots);
  a.c[slot] = 1;
  return a;
}

bool Aff::hasSlots() const {
  return std::any_of(c.begin(), c.end(), [](std::int64_t x) { return x != 0; });
}

Aff affAdd(const Aff& a, const Aff& b) {
  Aff r = a;
  for (std::size_t i = 0; i < r.c.size(); ++i) r.c[i] = checkedAdd(r.c[i], b.c[i]);
  r.k = symAdd(a.k, b.k);
  return r;
}

Aff affScale(const Aff& a, std::int64_t s) {
  Aff r = a;
  for (auto& x : r.c) x = checkedMul(x, s);
  r.k = symScale(a.k, s);
  return r;
}

Aff composeSubscript(const Subscript& s, const std::vector<Aff>& varAff,
                     std::optional<std::size_t> slots) {
  Aff r = Aff::zero(slots ? *slots : varAff.empty() ? 0 : varAff[0].c.size());
  r.k = s.constant;
  for (std::size_t v = 0; v < s.coef.size(); ++v)
    if (s.coef[v] != 0) r = affAdd(r, affScale(varAff[v], s.coef[v]));
  return r;
}

namespace solve {

bool impliedByBox(const Aff& a, std::size_t R, const std::vector<std::vector<Sym>>& extents) {
  int which = -1;
  for (std::size_t i = 0; i < a.c.size(); ++i) {
    if (a.c[i] == 0) continue;
    if (i >= R || which >= 0 || (a.c[i] != 1 && a.c[i] != -1)) return false;
    which = static_cast<int>(i);
  }
  std::int64_t v;
  if (which < 0) return symIsConst(a.k, &v) && v >= 0;
  if (a.c[static_cast<std::size_t>(which)] == 1) // u + k >= 0 holds when k >= 0
    return symIsConst(a.k, &v) && v >= 0;
  // k - u >= 0 holds for u <= extent - 1 when k - (extent - 1) >= 0.
  for (const Sym& e : extents[static_cast<std::size_t>(which)])
    if (symIsConst(symSub(a.k, symAddConst(e, -1)), &v) && v >= 0) return true;
  return false;
}

} // namespace solve

namespace {

// The rows phi_r(v) - u_r = 0, with u_r = stride*q_r + offset where dimension r is split into
// residue phases (slot r then holds q_r), and the range of each slot.
void phaseRows(solve::SolveState& s, const CExpr& site, const std::vector<Split>& split) {
  SiteSolution& sol = s.sol;
  const std::size_t R = s.R;
  sol.phaseStride.assign(R, 1);
  sol.phaseOffset.assign(R, 0);
  s.boxes = s.extents;
  sol.edge.assign(R, 0);
  for (std::size_t r = 0; r < R; ++r) {
    std::int64_t g = r < split.size() ? split[r].stride : 1;
    std::int64_t rho = r < split.size() ? split[r].offset : 0;
    int edge = r < split.size() ? split[r].edge : 0;
    sol.phaseStride[r] = g;
    sol.phaseOffset[r] = rho;
    sol.edge[r] = edge;
    Aff row = composeSubscript(site.subs[r], sol.varAff, sol.slots);
    // At a clamp edge the row is no equation but an inequality on phi (added with the ranges).
    row.c[r] = edge == -1 || edge == 1 ? 0 : -g;
    row.k = symAddConst(row.k, edge == -1 || edge == 1 ? 0 : -rho);
    s.rows.push_back(row);
    std::int64_t top = edge == 2 ? -2 : -1; // largest u: E-1, or E-2 inside a clamp
    if (g != 1 || edge == 2)
      for (Sym& e : s.boxes[r]) e = symAddConst(symFloorDiv(symAddConst(e, top - rho), g), 1);
  }
}

} // namespace

SiteSolution solveSite(const Statement& st, const CExpr& site,
                       const std::vector<std::vector<Sym>>& extents,
                       const std::vector<std::pair<Sym, Sym>>& ranges,
                       const std::vector<Split>& split) {
  SiteSolution sol;
  const std::size_t R = site.subs.size(), n = st.vars.size();
  sol.slots = R + n;
  sol.rowPivot.assign(R, -1);
  sol.eliminated.assign(n, false);
  sol.renamed.assign(n, false);
  for (std::size_t v = 0; v < n; ++v) sol.varAff.push_back(Aff::unit(sol.slots, R + v));
  for (const Subscript& s : site.subs)
    if (s.gather) {
      sol.why = "a gather's gradient is a scatter";
      return sol;
    }
  solve::SolveState s{st, extents, sol, R, n};
  phaseRows(s, site, split);
  if (!solve::eliminateRows(s)) return sol;
  solve::parametriseSubLattice(s);
  std::vector<solve::Constraint> cons;
  if (!solve::rangeConstraints(s, ranges, cons)) return sol;
  if (!solve::fourierMotzkin(s, cons)) return sol;
  // What is left constrains u alone.
  solve::elementConditions(s, cons);
  sol.solved = true;
  return sol;
}

} // namespace einjit::grad
