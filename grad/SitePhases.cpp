// A site in gather form: solved per residue phase (jointly for coupled dimensions) and per
// clamp() part, then emitted as one statement per reachable phase after a zero fill when the
// phases split dX.
#include "grad/GradientBuilder.h"

#include <algorithm>

namespace einjit::grad {

using namespace einjit::dsl;
using namespace einjit::grad::syntax;

// The contribution of a site without gathers or wraps, solved into gather form: one
// statement, or residue/clamp phases after a zero fill; a masked gather where it cannot be.
void GradientBuilder::gatherForm(const Statement& st, const CExpr& site, const CExprPtr& partial) {
  int x = site.tensor;
  std::vector<std::vector<Sym>> extents;
  for (int r = 0; r < static_cast<int>(site.subs.size()); ++r) {
    extents.push_back({extentOf(x, r)});
    if (auto v = site.subs[static_cast<std::size_t>(r)].bareVar())
      for (const BareUse& b : st.bareUses)
        if (b.var == *v) extents.back().push_back(extentOf(b.tensor, b.dim));
  }
  std::vector<std::pair<Sym, Sym>> ranges;
  for (const IndexVar& v : st.vars) ranges.push_back({resolve(v.lo), resolve(v.hi)});
  std::vector<SiteSolution> phases;
  std::string why;
  if (!solvePhases(st, site, extents, ranges, {}, phases, why, 0)) {
    maskedGather(st, site, partial, why);
    return;
  }
  // One statement, unless residue phases split dX: then it is zero-filled first and each
  // reachable phase adds its elements (each element still written once per phase).
  bool split =
      phases.size() != 1 ||
      std::any_of(phases[0].phaseStride.begin(), phases[0].phaseStride.end(),
                  [](std::int64_t g) { return g != 1; }) ||
      std::any_of(phases[0].edge.begin(), phases[0].edge.end(), [](int e) { return e != 0; }) ||
      std::any_of(phases[0].fixed.begin(), phases[0].fixed.end(), [](bool f) { return f; });
  if (split && !defined_.count(x)) zeroFill(x);
  for (const SiteSolution& sol : phases) emitSolution(st, site, partial, sol);
}

// Solves a site, splitting dimensions into residue phases as the solver asks (jointly when
// it names several); impossible phases are dropped. False when some phase has no solution.
bool GradientBuilder::solvePhases(const Statement& st, const CExpr& site,
                                  const std::vector<std::vector<Sym>>& extents,
                                  const std::vector<std::pair<Sym, Sym>>& ranges,
                                  std::vector<Split> split, std::vector<SiteSolution>& out,
                                  std::string& why, int depth) {
  split.resize(site.subs.size());
  // A clamp() dimension is solved in three parts: its low edge, its high edge, the inside.
  for (std::size_t d = 0; d < site.subs.size(); ++d)
    if (site.subs[d].mode == IndexMode::Clamp && split[d].edge == 0) {
      for (int edge : {-1, 1, 2}) {
        std::vector<Split> s2 = split;
        s2[d].edge = edge;
        if (!solvePhases(st, site, extents, ranges, s2, out, why, depth)) return false;
      }
      return true;
    }
  SiteSolution sol = solveSite(st, site, extents, ranges, split);
  if (sol.solved) {
    if (!sol.impossible) out.push_back(std::move(sol));
    return true;
  }
  why = sol.why;
  if (sol.splitModulus == 0 || depth > 6) return false;
  // Slot q_d of a dimension split as u = s*q + o splits further modulo m: u = s*m*q' +
  // (s*r + o) for each r < m (m = 1 never occurs).
  std::int64_t combos = 1;
  for (std::int64_t m : sol.splitModuli) {
    combos *= m;
    if (combos > 256) {
      why += " (too many joint phases)";
      return false;
    }
  }
  for (std::int64_t c = 0; c < combos; ++c) {
    std::vector<Split> s2 = split;
    std::int64_t rest = c;
    for (std::size_t i = 0; i < sol.splitDims.size(); ++i) {
      std::size_t d = sol.splitDims[i];
      std::int64_t m = sol.splitModuli[i];
      s2[d] = {checkedMul(split[d].stride, m), split[d].stride * (rest % m) + split[d].offset,
               split[d].edge};
      rest /= m;
    }
    if (!solvePhases(st, site, extents, ranges, s2, out, why, depth + 1)) return false;
  }
  return true;
}

} // namespace einjit::grad
