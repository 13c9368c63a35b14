// The forward ranges as constraints, and Fourier-Motzkin elimination of the free indices (G4):
// innermost first, each lower bound cdiv(-rest, a) and upper bound fdiv(rest, m) exact for its
// index; every lower combined with every upper gives the rational shadow that bounds the outer
// indices (loose at most: empty trips only).
#include "grad/SolveSteps.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>

namespace einjit::grad::solve {

using namespace einjit::dsl;

namespace {

// Past these the solve stops and the site's gradient is a masked gather instead (correct, with
// every forward index a loop): constraints left after an elimination, and pairs of a lower and
// an upper bound of one index. Fourier-Motzkin can multiply the constraints at every step.
constexpr std::size_t kMaxConstraints = 256, kMaxPairs = 4096;

// The constraints over the outer slots after an elimination: the rational shadow pairs every
// lower bound of the eliminated index with every upper bound, so each elimination can
// multiply their number, and the dependent ranges of a gradient program (maxima and minima of
// several pieces) make many. A constraint is dropped where another one in the set implies it:
// the same direction (slot coefficients equal up to a positive factor) and, scaled to the same
// factor, a constant at least as large. An original constraint (a range of the statement) is
// never dropped for a shadow: originals become the element conditions.
class ConstraintSet {
public:
  explicit ConstraintSet(std::vector<Constraint> initial) {
    for (Constraint& c : initial) add(std::move(c));
  }
  void add(Constraint c) {
    std::int64_t g = 0;
    for (std::int64_t x : c.f.c) g = std::gcd(g, x < 0 ? -x : x);
    if (g == 0) { // no slot: a constant condition, kept as is
      list_.push_back(std::move(c));
      return;
    }
    std::string key;
    for (std::int64_t x : c.f.c) key += std::to_string(x / g) + ",";
    std::vector<std::size_t>& same = byDirection_[key];
    for (std::size_t i : same) {
      Constraint& e = list_[i];
      std::int64_t ge = 0, d = 0;
      for (std::int64_t x : e.f.c) ge = std::gcd(ge, x < 0 ? -x : x);
      try { // e.k / ge - c.k / g, times g * ge
        if (!symIsConst(symSub(symScale(e.f.k, g), symScale(c.f.k, ge)), &d)) continue;
      } catch (const SymOverflow&) {
        continue;
      }
      if (d <= 0 && (e.original || !c.original)) return; // e implies c
      if (d >= 0 && !e.original) {                        // c implies e
        e = std::move(c);
        return;
      }
    }
    same.push_back(list_.size());
    list_.push_back(std::move(c));
  }
  std::size_t size() const { return list_.size(); }
  std::vector<Constraint> take() { return std::move(list_); }

private:
  std::vector<Constraint> list_;
  std::unordered_map<std::string, std::vector<std::size_t>> byDirection_;
};

// A dependent range bound as the max (lower) or min (upper) of pieces ceil/floor(num / d),
// with the forward indices replaced by their forms; nullopt for other shapes (a max in an
// upper bound, a negated max, a division of a division).
std::optional<std::vector<BoundTerm>> boundPieces(const IndexBound& b, bool lower,
                                                  const std::vector<Aff>& varAff, std::size_t R) {
  using K = IndexBound::Kind;
  std::size_t slots = varAff.empty() ? R : varAff[0].c.size();
  switch (b.kind) {
  case K::Affine: {
    Aff a = Aff::zero(slots);
    a.k = b.constant;
    for (std::size_t v = 0; v < b.coef.size(); ++v)
      if (b.coef[v] != 0) a = affAdd(a, affScale(varAff[v], b.coef[v]));
    return std::vector<BoundTerm>{{a, 1}};
  }
  case K::Max:
  case K::Min: {
    // A max/min of sizes and constants alone is a constant of the bound.
    std::vector<Sym> consts;
    for (const IndexBound& a : b.args) {
      auto p = boundPieces(a, lower, varAff, R);
      if (p && p->size() == 1 && (*p)[0].divisor == 1 && !(*p)[0].num.hasSlots())
        consts.push_back((*p)[0].num.k);
    }
    if (consts.size() == b.args.size()) {
      Aff a = Aff::zero(slots);
      a.k = b.kind == K::Max ? symMax(consts) : symMin(consts);
      return std::vector<BoundTerm>{{a, 1}};
    }
    if ((b.kind == K::Max) != lower) return std::nullopt;
    std::vector<BoundTerm> out;
    for (const IndexBound& a : b.args) {
      auto p = boundPieces(a, lower, varAff, R);
      if (!p) return std::nullopt;
      out.insert(out.end(), p->begin(), p->end());
    }
    return out;
  }
  case K::CDiv:
  case K::FDiv: {
    auto p = boundPieces(b.args[0], lower, varAff, R);
    if (!p) return std::nullopt;
    // A division of sizes and constants alone is a constant of the bound.
    if (p->size() == 1 && (*p)[0].divisor == 1 && !(*p)[0].num.hasSlots()) {
      Aff& a = (*p)[0].num;
      a.k = b.kind == K::FDiv ? symFloorDiv(a.k, b.divisor) : symCeilDiv(a.k, b.divisor);
      return p;
    }
    if ((b.kind == K::CDiv) != lower) return std::nullopt;
    for (BoundTerm& t : *p) {
      if (t.divisor != 1) return std::nullopt;
      t.divisor = b.divisor;
    }
    return p;
  }
  case K::Sum: {
    // One piecewise argument with a positive scale, the rest affine: c*cdiv(n, d) + a is
    // cdiv(n + d*a, d) when c = 1.
    std::optional<std::vector<BoundTerm>> piecewise;
    Aff affinePart = Aff::zero(slots);
    for (std::size_t i = 0; i < b.args.size(); ++i) {
      auto p = boundPieces(b.args[i], b.scale[i] > 0 ? lower : !lower, varAff, R);
      if (!p) return std::nullopt;
      if (p->size() == 1 && (*p)[0].divisor == 1) {
        affinePart = affAdd(affinePart, affScale((*p)[0].num, b.scale[i]));
        continue;
      }
      if (piecewise || b.scale[i] != 1) return std::nullopt;
      piecewise = p;
    }
    if (!piecewise) return std::vector<BoundTerm>{{affinePart, 1}};
    for (BoundTerm& t : *piecewise) t.num = affAdd(t.num, affScale(affinePart, t.divisor));
    return piecewise;
  }
  }
  return std::nullopt;
}

} // namespace

bool rangeConstraints(SolveState& s, const std::vector<std::pair<Sym, Sym>>& ranges,
                      std::vector<Constraint>& cons) {
  SiteSolution& sol = s.sol;
  const std::size_t R = s.R;
  // Clamp edges: phi <= 0 at the low edge, phi >= max(E-1, 1) at the high one (so that a
  // tensor of extent 1 counts each phi once).
  for (std::size_t r = 0; r < R; ++r) {
    if (sol.edge[r] == -1) cons.push_back({affScale(s.rows[r], -1), true});
    if (sol.edge[r] == 1) {
      Aff f = s.rows[r];
      f.k = symSub(f.k, symMax({symAddConst(s.extents[r][0], -1), symConst(1)}));
      cons.push_back({f, true});
    }
  }
  // lo_v <= v <= hi_v - 1 over the slots, as forms >= 0.
  for (std::size_t v = 0; v < s.n; ++v) {
    const Aff& x = sol.varAff[v];
    if (s.st.vars[v].dependent) {
      // lo = max of cdiv(num, d): d*x - num >= 0 each; hi = min of fdiv(num, d): x < hi is
      // d*(x+1) <= num each.
      auto lo = boundPieces(s.st.vars[v].loBound, true, sol.varAff, R);
      auto hi = boundPieces(s.st.vars[v].hiBound, false, sol.varAff, R);
      if (!lo || !hi) {
        sol.why = "the range of '" + s.st.vars[v].name + "' has a form the solver does not take";
        sol.solved = false;
        return false;
      }
      for (const BoundTerm& t : *lo)
        cons.push_back({affAdd(affScale(x, t.divisor), affScale(t.num, -1)), true});
      for (const BoundTerm& t : *hi) {
        Aff f = affAdd(t.num, affScale(x, -t.divisor));
        f.k = symAddConst(f.k, -t.divisor);
        cons.push_back({f, true});
      }
      continue;
    }
    Aff lo = Aff::zero(sol.slots), hi = Aff::zero(sol.slots);
    lo.k = ranges[v].first;
    hi.k = symAddConst(ranges[v].second, -1);
    cons.push_back({affAdd(x, affScale(lo, -1)), true});
    cons.push_back({affAdd(hi, affScale(x, -1)), true});
  }
  return true;
}

bool fourierMotzkin(SolveState& s, std::vector<Constraint>& cons) {
  SiteSolution& sol = s.sol;
  std::vector<std::size_t> freeVars;
  for (std::size_t v = 0; v < s.n; ++v)
    if (!sol.eliminated[v]) freeVars.push_back(v);
  for (std::size_t i = freeVars.size(); i-- > 0;) {
    std::size_t slot = s.R + freeVars[i];
    FreeBound b;
    b.var = static_cast<int>(freeVars[i]);
    std::vector<Constraint> lowers, uppers, rest;
    for (const Constraint& c : cons) {
      std::int64_t a = c.f.c[slot];
      if (a > 0)
        lowers.push_back(c);
      else if (a < 0)
        uppers.push_back(c);
      else
        rest.push_back(c);
    }
    if (lowers.empty() || uppers.empty()) {
      sol.why = "an index is unbounded after solving";
      return false;
    }
    for (const Constraint& c : lowers) { // a z + R >= 0  =>  z >= cdiv(-R, a)
      Aff r = c.f;
      std::int64_t a = r.c[slot];
      r.c[slot] = 0;
      b.lo.push_back({affScale(r, -1), a});
    }
    for (const Constraint& c : uppers) { // -m z + R >= 0  =>  z <= fdiv(R, m)
      Aff r = c.f;
      std::int64_t m = -r.c[slot];
      r.c[slot] = 0;
      b.hi.push_back({r, m});
    }
    if (lowers.size() * uppers.size() > kMaxPairs) {
      sol.why = "its index ranges make more than " + std::to_string(kMaxPairs) +
                " pairs of bounds for the solver";
      return false;
    }
    // The rational shadow: outer bounds may be loose, which only adds empty trips.
    ConstraintSet next(std::move(rest));
    for (const Constraint& l : lowers)
      for (const Constraint& u : uppers) {
        std::int64_t a = l.f.c[slot], m = -u.f.c[slot];
        Aff f = affAdd(affScale(l.f, m), affScale(u.f, a));
        f.c[slot] = 0;
        if (f.hasSlots()) next.add({f, false});
      }
    if (next.size() > kMaxConstraints) {
      sol.why = "its index ranges make more than " + std::to_string(kMaxConstraints) +
                " constraints for the solver";
      return false;
    }
    cons = next.take();
    sol.bounds.insert(sol.bounds.begin(), b);
  }
  return true;
}

void elementConditions(SolveState& s, const std::vector<Constraint>& cons) {
  // Original constraints must hold (a mask); shadows are implied by the exact inner bounds.
  for (const Constraint& c : cons)
    if (c.original && !impliedByBox(c.f, s.R, s.boxes)) s.sol.conditions.push_back(c.f);
}

} // namespace einjit::grad::solve
