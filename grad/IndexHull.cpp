#include "grad/IndexHull.h"

#include "einjit/Error.h"

namespace einjit::grad {

using namespace einjit::dsl;
using namespace einjit::grad::syntax;

namespace {

struct Interval {
  Sym lo, hi; // inclusive
};

// A single constant argument among `ends` (the largest for a lower end, the smallest for an
// upper one), or null.
Sym constantEnd(const std::vector<Sym>& ends, bool largest) {
  Sym best;
  std::int64_t bv = 0;
  for (const Sym& e : ends) {
    std::int64_t k;
    if (!symIsConst(e, &k)) continue;
    if (!best || (largest ? k > bv : k < bv)) best = e, bv = k;
  }
  return best;
}

Interval interval(const IndexBound& b, const std::vector<Interval>& vars) {
  switch (b.kind) {
  case IndexBound::Kind::Affine: {
    Interval r{b.constant, b.constant};
    for (std::size_t v = 0; v < b.coef.size(); ++v) {
      std::int64_t c = b.coef[v];
      if (c == 0) continue;
      r.lo = symAdd(r.lo, symScale(c > 0 ? vars[v].lo : vars[v].hi, c));
      r.hi = symAdd(r.hi, symScale(c > 0 ? vars[v].hi : vars[v].lo, c));
    }
    return r;
  }
  case IndexBound::Kind::Max:
  case IndexBound::Kind::Min: {
    const bool isMax = b.kind == IndexBound::Kind::Max;
    std::vector<Sym> los, his;
    for (const IndexBound& a : b.args) {
      Interval r = interval(a, vars);
      los.push_back(r.lo);
      his.push_back(r.hi);
    }
    // max(a, b) >= a for any argument a, and min(a, b) <= a.
    Sym loEnd = isMax ? constantEnd(los, true) : nullptr;
    Sym hiEnd = isMax ? nullptr : constantEnd(his, false);
    return {loEnd ? loEnd : (isMax ? symMax(los) : symMin(los)),
            hiEnd ? hiEnd : (isMax ? symMax(his) : symMin(his))};
  }
  case IndexBound::Kind::FDiv:
  case IndexBound::Kind::CDiv: {
    Interval r = interval(b.args[0], vars);
    if (b.kind == IndexBound::Kind::FDiv)
      return {symFloorDiv(r.lo, b.divisor), symFloorDiv(r.hi, b.divisor)};
    return {symCeilDiv(r.lo, b.divisor), symCeilDiv(r.hi, b.divisor)};
  }
  case IndexBound::Kind::Sum: {
    Interval r{symConst(0), symConst(0)};
    for (std::size_t i = 0; i < b.args.size(); ++i) {
      Interval a = interval(b.args[i], vars);
      std::int64_t s = b.scale[i];
      r.lo = symAdd(r.lo, symScale(s >= 0 ? a.lo : a.hi, s));
      r.hi = symAdd(r.hi, symScale(s >= 0 ? a.hi : a.lo, s));
    }
    return r;
  }
  }
  throw InternalError("indexHulls: unknown bound kind");
}

ExprPtr boundSyntax(const IndexBound& b, const std::vector<Aff>& varAff, const Emit& emit) {
  switch (b.kind) {
  case IndexBound::Kind::Affine: {
    Aff a = Aff::zero(varAff.empty() ? 0 : varAff[0].c.size());
    a.k = b.constant;
    for (std::size_t v = 0; v < b.coef.size(); ++v)
      if (b.coef[v] != 0) a = affAdd(a, affScale(varAff[v], b.coef[v]));
    return emit.aff(a);
  }
  case IndexBound::Kind::Max:
  case IndexBound::Kind::Min: {
    ExprPtr acc;
    for (const IndexBound& a : b.args) {
      ExprPtr e = boundSyntax(a, varAff, emit);
      acc = acc ? fn(b.kind == IndexBound::Kind::Max ? "max" : "min", {acc, e}) : e;
    }
    return acc;
  }
  case IndexBound::Kind::FDiv:
  case IndexBound::Kind::CDiv:
    return fn(b.kind == IndexBound::Kind::FDiv ? "fdiv" : "cdiv",
              {boundSyntax(b.args[0], varAff, emit), num(b.divisor)});
  case IndexBound::Kind::Sum: {
    ExprPtr acc;
    for (std::size_t i = 0; i < b.args.size(); ++i)
      acc = addTerm(acc, b.scale[i], boundSyntax(b.args[i], varAff, emit));
    return acc ? acc : num(0);
  }
  }
  throw InternalError("inDependentRange: unknown bound kind");
}

} // namespace

std::vector<std::pair<Sym, Sym>> indexHulls(const Statement& st) {
  const std::size_t n = st.vars.size();
  std::vector<Interval> hull(n);
  std::vector<bool> done(n, false);
  // Dependent ranges read indices that come earlier in the iteration order, which need not be
  // the numbering order: resolve in passes until every index has its hull.
  for (std::size_t pass = 0; pass <= n; ++pass) {
    bool progress = false;
    for (std::size_t v = 0; v < n; ++v) {
      if (done[v]) continue;
      const IndexVar& iv = st.vars[v];
      if (!iv.dependent) {
        hull[v] = {iv.lo, symAddConst(iv.hi, -1)};
      } else {
        std::vector<bool> reads(n, false);
        iv.loBound.collectVars(reads);
        iv.hiBound.collectVars(reads);
        bool ready = true;
        for (std::size_t u = 0; u < n; ++u) ready = ready && (!reads[u] || done[u]);
        if (!ready) continue;
        hull[v] = {interval(iv.loBound, hull).lo,
                   symAddConst(interval(iv.hiBound, hull).hi, -1)};
      }
      done[v] = progress = true;
    }
    if (!progress) break;
  }
  std::vector<std::pair<Sym, Sym>> out;
  for (std::size_t v = 0; v < n; ++v) {
    if (!done[v]) throw InternalError("indexHulls: dependent ranges form a cycle");
    out.push_back({hull[v].lo, symAddConst(hull[v].hi, 1)});
  }
  return out;
}

ExprPtr inDependentRange(const Statement& st, std::size_t v, const std::vector<Aff>& varAff,
                         const Emit& emit) {
  const IndexVar& iv = st.vars[v];
  ExprPtr value = emit.aff(varAff[v]);
  return Expr::makeBinary(
      BinOp::And, Expr::makeBinary(BinOp::Le, boundSyntax(iv.loBound, varAff, emit), value),
      Expr::makeBinary(BinOp::Lt, value, boundSyntax(iv.hiBound, varAff, emit)));
}

} // namespace einjit::grad
