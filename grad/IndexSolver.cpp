#include "grad/IndexSolver.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>

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

namespace {

bool sameAff(const Aff& a, const Aff& b) { return a.c == b.c && symPrint(a.k) == symPrint(b.k); }

// A constraint a >= 0 that the box 0 <= u_r < extent of the gradient's own indices implies.
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

  // Rows phi_r(v) - u_r = 0, with u_r = stride*q_r + offset where dimension r is split into
  // residue phases (slot r then holds q_r); eliminated one at a time with unit pivots.
  sol.phaseStride.assign(R, 1);
  sol.phaseOffset.assign(R, 0);
  std::vector<std::vector<Sym>> boxes = extents; // the range of each slot (u_r or q_r)
  std::vector<Aff> rows;
  sol.edge.assign(R, 0);
  for (std::size_t r = 0; r < R; ++r) {
    std::int64_t g = r < split.size() ? split[r].stride : 1;
    std::int64_t rho = r < split.size() ? split[r].offset : 0;
    int edge = r < split.size() ? split[r].edge : 0;
    sol.phaseStride[r] = g;
    sol.phaseOffset[r] = rho;
    sol.edge[r] = edge;
    Aff row = composeSubscript(site.subs[r], sol.varAff, sol.slots);
    // At a clamp edge the row is no equation but an inequality on phi (added below).
    row.c[r] = edge == -1 || edge == 1 ? 0 : -g;
    row.k = symAddConst(row.k, edge == -1 || edge == 1 ? 0 : -rho);
    rows.push_back(row);
    std::int64_t top = edge == 2 ? -2 : -1; // largest u: E-1, or E-2 inside a clamp
    if (g != 1 || edge == 2)
      for (Sym& e : boxes[r]) e = symAddConst(symFloorDiv(symAddConst(e, top - rho), g), 1);
  }
  auto isEdge = [&](std::size_t r) { return sol.edge[r] == -1 || sol.edge[r] == 1; };
  auto findPivot = [&](const Aff& row) {
    // Output indices first (they usually have the largest extent), then in order.
    for (int pass = 0; pass < 2; ++pass)
      for (std::size_t v = 0; v < n; ++v) {
        std::int64_t a = row.c[R + v];
        if ((a == 1 || a == -1) && st.vars[v].isOutput == (pass == 0)) return static_cast<int>(v);
      }
    return -1;
  };
  for (std::size_t r = 0; r < R; ++r) {
    if (isEdge(r)) continue;
    Aff& row = rows[r];
    int pivot = findPivot(row);
    bool anyVar = false;
    std::int64_t g = 0;
    for (std::size_t v = 0; v < n; ++v) {
      anyVar |= row.c[R + v] != 0;
      g = std::gcd(g, row.c[R + v]);
    }
    // G2b/G3: every index coefficient shares g > 1, so the row holds only where the slots
    // and the constant are 0 modulo g. Slots whose coefficients g does not divide must be
    // split into residue phases first (the caller re-solves per phase, jointly when several
    // dimensions are coupled); then either the phase is impossible (nothing reaches it) or
    // the row divides by g.
    if (pivot < 0 && anyVar && g > 1) {
      std::int64_t k;
      if (!symIsConst(row.k, &k)) {
        sol.why = "dimension " + std::to_string(r) + ": a stride with a symbolic offset";
        return sol;
      }
      // Slot q with coefficient c is determined modulo g by its residue modulo g/gcd(c, g).
      for (std::size_t q = 0; q < R; ++q)
        if (row.c[q] % g != 0) {
          sol.splitDims.push_back(q);
          sol.splitModuli.push_back(g / std::gcd(row.c[q], g));
        }
      if (!sol.splitDims.empty()) {
        sol.splitModulus = g;
        sol.why = "dimension " + std::to_string(r) + " needs residue phases";
        return sol;
      }
      if (k % g != 0) {
        sol.impossible = true;
        sol.solved = true;
        return sol;
      }
      for (auto& c : row.c) c /= g;
      row.k = symConst(k / g);
      pivot = findPivot(row);
    }
    // G2c: the coefficients have gcd 1 but none is +-1 (stride 2, dilation 3). A unimodular
    // change of two indices a, b (a = x a' - (cb/g) b', b = y a' + (ca/g) b' with
    // x ca + y cb = g) leaves coefficient g on a' and 0 on b'; repeat until one is +-1.
    for (int step = 0; pivot < 0 && anyVar && step < 64; ++step) {
      std::size_t a = n, b = n;
      std::int64_t best = 0;
      for (std::size_t v = 0; v < n; ++v)
        for (std::size_t w = v + 1; w < n; ++w) {
          std::int64_t cv = row.c[R + v], cw = row.c[R + w];
          if (cv == 0 || cw == 0) continue;
          std::int64_t gg = std::gcd(cv, cw);
          if (a == n || gg < best) a = v, b = w, best = gg;
        }
      if (a == n) break;
      std::int64_t ca = row.c[R + a], cb = row.c[R + b];
      // Extended Euclid: x ca + y cb = g.
      std::int64_t r0 = ca, r1 = cb, x0 = 1, x1 = 0, y0 = 0, y1 = 1;
      while (r1 != 0) {
        std::int64_t q = r0 / r1;
        std::tie(r0, r1) = std::pair{r1, r0 - q * r1};
        std::tie(x0, x1) = std::pair{x1, x0 - q * x1};
        std::tie(y0, y1) = std::pair{y1, y0 - q * y1};
      }
      if (r0 < 0) r0 = -r0, x0 = -x0, y0 = -y0;
      const std::int64_t gg = r0, x = x0, y = y0;
      auto transform = [&](Aff& f) {
        std::int64_t fa = f.c[R + a], fb = f.c[R + b];
        f.c[R + a] = checkedAdd(checkedMul(fa, x), checkedMul(fb, y));
        f.c[R + b] = checkedAdd(checkedMul(-fa, cb / gg), checkedMul(fb, ca / gg));
      };
      for (std::size_t q = 0; q < R; ++q)
        if (q >= r || isEdge(q)) transform(rows[q]);
      for (std::size_t v = 0; v < n; ++v) transform(sol.varAff[v]);
      sol.renamed[a] = sol.renamed[b] = true;
      pivot = findPivot(row);
    }
    if (pivot < 0) {
      if (anyVar) {
        sol.why = "dimension " + std::to_string(r) + ": no unit pivot after Euclid steps";
        return sol;
      }
      std::int64_t k;
      if (!row.hasSlots() && symIsConst(row.k, &k)) {
        if (k != 0) { // a constant that cannot be 0: this phase receives nothing
          sol.impossible = true;
          sol.solved = true;
          return sol;
        }
        continue;
      }
      sol.equalities.push_back(row); // u alone: a sub-lattice such as A[i,i]
      continue;
    }
    auto pv = static_cast<std::size_t>(pivot);
    std::int64_t a = row.c[R + pv];
    // a*v + rest = 0  =>  v = -a * rest  (a = +-1)
    Aff rest = row;
    rest.c[R + pv] = 0;
    Aff value = affScale(rest, -a);
    sol.eliminated[pv] = true;
    sol.rowPivot[r] = pivot;
    // Substitute v everywhere.
    auto substitute = [&](Aff& f) {
      std::int64_t c = f.c[R + pv];
      if (c == 0) return;
      f.c[R + pv] = 0;
      f = affAdd(f, affScale(value, c));
    };
    for (std::size_t q = 0; q < R; ++q)
      if (q > r || isEdge(q)) substitute(rows[q]);
    // (varAff[pv] becomes `value` too: it is the slot itself unless a Euclid step changed it.)
    for (std::size_t v = 0; v < n; ++v) substitute(sol.varAff[v]);
  }

  // Constraints lo_v <= v <= hi_v - 1 over the slots, as forms >= 0.
  struct Constraint {
    Aff f;
    bool original;
  };
  std::vector<Constraint> cons;
  // G2d: an equality among the gradient's own indices (u1 = u0 for A[i,i]) is a sub-lattice:
  // parametrise it by solving for one index, which is then written through the left-hand
  // side (dA[u0, u0]) instead of masking every element.
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
    // Equalities kept as masks before this one, and a clamp edge's inequality (below), may
    // read slot r too: "a[l, 3l, l]", "a[l, l, clamp(2l-2)]".
    for (Aff& f : sol.equalities) substitute(f);
    for (std::size_t q = 0; q < R; ++q)
      if (isEdge(q)) substitute(rows[q]);
    sol.fixed[r] = true;
  }
  // Clamp edges: phi <= 0 at the low edge, phi >= max(E-1, 1) at the high one (so that a
  // tensor of extent 1 counts each phi once).
  for (std::size_t r = 0; r < R; ++r) {
    if (sol.edge[r] == -1) cons.push_back({affScale(rows[r], -1), true});
    if (sol.edge[r] == 1) {
      Aff f = rows[r];
      f.k = symSub(f.k, symMax({symAddConst(extents[r][0], -1), symConst(1)}));
      cons.push_back({f, true});
    }
  }
  for (std::size_t v = 0; v < n; ++v) {
    const Aff& x = sol.varAff[v];
    if (st.vars[v].dependent) {
      // lo = max of cdiv(num, d): d*x - num >= 0 each; hi = min of fdiv(num, d): x < hi is
      // d*(x+1) <= num each.
      auto lo = boundPieces(st.vars[v].loBound, true, sol.varAff, R);
      auto hi = boundPieces(st.vars[v].hiBound, false, sol.varAff, R);
      if (!lo || !hi) {
        sol.why = "the range of '" + st.vars[v].name + "' has a form the solver does not take";
        sol.solved = false;
        return sol;
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

  // Fourier-Motzkin, innermost free index first.
  std::vector<std::size_t> freeVars;
  for (std::size_t v = 0; v < n; ++v)
    if (!sol.eliminated[v]) freeVars.push_back(v);
  for (std::size_t i = freeVars.size(); i-- > 0;) {
    std::size_t slot = R + freeVars[i];
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
      return sol;
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
    // The rational shadow: outer bounds may be loose, which only adds empty trips.
    for (const Constraint& l : lowers)
      for (const Constraint& u : uppers) {
        std::int64_t a = l.f.c[slot], m = -u.f.c[slot];
        Aff f = affAdd(affScale(l.f, m), affScale(u.f, a));
        f.c[slot] = 0;
        bool dup = std::any_of(rest.begin(), rest.end(),
                               [&](const Constraint& c) { return sameAff(c.f, f); });
        if (!dup && f.hasSlots()) rest.push_back({f, false});
      }
    cons = std::move(rest);
    sol.bounds.insert(sol.bounds.begin(), b);
  }

  // What is left constrains u alone. Original constraints must hold (a mask); shadows are
  // implied by the exact inner bounds.
  for (const Constraint& c : cons)
    if (c.original && !impliedByBox(c.f, R, boxes)) sol.conditions.push_back(c.f);
  sol.solved = true;
  return sol;
}

} // namespace einjit::grad
