// wrap() reads: where a wrapped index runs over exactly one period, v -> wrap(phi) is a
// bijection for fixed other indices, and the statement is re-expressed over t = wrap(phi).
#include "grad/GradientBuilder.h"

namespace einjit::grad {

using namespace einjit::dsl;
using namespace einjit::grad::syntax;

namespace {

// Whether another index's dependent range reads index v.
bool boundsRead(const Statement& st, std::size_t v) {
  for (const IndexVar& w : st.vars) {
    if (!w.dependent) continue;
    std::vector<bool> reads(st.vars.size(), false);
    w.loBound.collectVars(reads);
    w.hiBound.collectVars(reads);
    if (reads[v]) return true;
  }
  return false;
}

// e with every read's subscripts passed through `rewrite`; ok turns false when one fails or
// index v is used as a value.
template <typename F>
CExprPtr rewriteReads(const CExprPtr& e, std::size_t v, F& rewrite, bool& ok) {
  CExpr c = *e;
  if (c.kind == CKind::Index && c.var == static_cast<int>(v)) ok = false;
  for (std::size_t r = 0; r < c.subs.size(); ++r) ok = ok && rewrite(c.tensor, r, c.subs[r]);
  for (auto& a : c.args) a = rewriteReads(a, v, rewrite, ok);
  return std::make_shared<const CExpr>(std::move(c));
}

} // namespace

bool GradientBuilder::sameExtent(const Sym& a, const Sym& b) const {
  std::int64_t k;
  return symIsConst(symSub(resolve(a), resolve(b)), &k) && k == 0;
}

// Rewrites st/site/partial over t = wrap(phi) in place of one index v per wrapped dimension.
// phi = s*v + c(w) with s = +-1 and v over exactly [0, E), E the wrapped extent: for fixed
// other indices w, v -> wrap(phi) is a bijection of [0, E), with inverse
// v = wrap(s*(t - c(w))). Every other use of v must be bare in a dimension of extent E (it
// becomes that wrap), or the same wrapped subscript (it becomes t). False, with the reason,
// when the statement does not have this shape.
bool GradientBuilder::unwrap(Statement& st, CExpr& site, CExprPtr& partial, std::string& why) {
  std::vector<bool> taken(st.vars.size(), false);
  for (std::size_t d = 0; d < site.subs.size(); ++d) {
    const Subscript e = site.subs[d];
    if (e.mode != IndexMode::Wrap) continue;
    Sym period = extentOf(site.tensor, static_cast<int>(d));
    int v = -1;
    for (std::size_t c = 0; c < e.coef.size() && v < 0; ++c)
      if ((e.coef[c] == 1 || e.coef[c] == -1) && !taken[c] && !st.vars[c].dependent &&
          sameExtent(st.vars[c].lo, symConst(0)) && sameExtent(st.vars[c].hi, period) &&
          !boundsRead(st, c))
        v = static_cast<int>(c);
    if (v < 0) {
      why = "dimension " + std::to_string(d) +
            " of a wrap() read: no index with coefficient +-1 runs over exactly one period";
      return false;
    }
    auto vi = static_cast<std::size_t>(v);
    taken[vi] = true;
    // v = wrap(s*(t - c(w) - k)), with t in v's slot.
    Subscript inverse = e;
    std::int64_t s = e.coef[vi];
    for (std::size_t c = 0; c < inverse.coef.size(); ++c)
      inverse.coef[c] = c == vi ? s : -s * e.coef[c];
    inverse.constant = symScale(e.constant, -s);
    Subscript t;
    t.coef.assign(e.coef.size(), 0);
    t.coef[vi] = 1;
    t.constant = symConst(0);
    t.range = e.range;
    auto rewrite = [&](int tensor, std::size_t dim, Subscript& sub) -> bool {
      if (sub.coef[vi] == 0 && !sub.gather) return true;
      if (sub.gather) return false; // v (or anything) inside a gathered subscript
      Sym ext = extentOf(tensor, static_cast<int>(dim));
      if (sub.mode == IndexMode::Wrap && sub.coef == e.coef &&
          sameExtent(sub.constant, e.constant) && sameExtent(ext, period)) {
        sub = t; // the wrapped read itself
        return true;
      }
      if (sub.mode == IndexMode::Plain && sub.bareVar() == v && sameExtent(ext, period)) {
        inverse.range = sub.range;
        sub = inverse;
        return true;
      }
      return false;
    };
    bool ok = true;
    CExpr lhs = *st.lhs;
    for (std::size_t r = 0; r < lhs.subs.size(); ++r)
      ok = ok && rewrite(lhs.tensor, r, lhs.subs[r]);
    st.lhs = std::make_shared<const CExpr>(std::move(lhs));
    for (std::size_t r = 0; r < site.subs.size(); ++r)
      ok = ok && (r == d ? (site.subs[r] = t, true) : rewrite(site.tensor, r, site.subs[r]));
    partial = rewriteReads(partial, vi, rewrite, ok);
    if (!ok) {
      why = "index '" + st.vars[vi].name + "' of a wrap() read is also used otherwise";
      return false;
    }
    st.vars[vi].isOutput = false; // t is not an output index
  }
  return true;
}

} // namespace einjit::grad
