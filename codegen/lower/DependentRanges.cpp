// Ranges that depend on other indices: their bounds, masks and divisors.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

std::vector<std::size_t> Lowerer::boundReads(const Statement& st, std::size_t v) {
  std::vector<bool> reads(st.vars.size(), false);
  st.vars[v].loBound.collectVars(reads);
  st.vars[v].hiBound.collectVars(reads);
  std::vector<std::size_t> read;
  for (std::size_t u = 0; u < reads.size(); ++u)
    if (reads[u]) read.push_back(u);
  return read;
}

double Lowerer::meanShare(const BoundStatement& bs, const Ranges& r, std::size_t v,
                          const std::vector<std::size_t>& read) const {
  double points = 1;
  for (std::size_t u : read) points *= static_cast<double>(r[u].second - r[u].first);
  const std::int64_t hull = r[v].second - r[v].first;
  if (points > 1e6 || points < 1 || hull <= 0) return 0;
  std::vector<std::int64_t> vals(r.size(), 0);
  double sum = 0;
  std::function<void(std::size_t)> walk = [&](std::size_t q) {
    if (q == read.size()) {
      auto [lo, hi] = depRange(bs, v, vals);
      lo = std::max(lo, r[v].first);
      hi = std::min(hi, r[v].second);
      sum += static_cast<double>(std::max<std::int64_t>(hi - lo, 0));
      return;
    }
    for (std::int64_t x = r[read[q]].first; x < r[read[q]].second; ++x) {
      vals[read[q]] = x;
      walk(q + 1);
    }
  };
  walk(0);
  return sum / (points * static_cast<double>(hull));
}

auto Lowerer::depRange(const BoundStatement& bs, std::size_t v,
                       const std::vector<std::int64_t>& vals) const
    -> std::pair<std::int64_t, std::int64_t> {
  const PhaseSub* ph = nullptr;
  for (const PhaseSub& x : ctx_.phase)
    if (x.red == v) ph = &x;
  std::vector<std::int64_t> orig = vals;
  for (const PhaseSub& x : ctx_.phase) orig[x.out] = x.g * vals[x.out] + x.rho;
  std::int64_t lo = bs.loBound[v].eval(orig), hi = bs.hiBound[v].eval(orig);
  if (!ph) return {lo, hi};
  lo = std::max(lo, ph->hullLo);
  hi = std::min(hi, ph->hullHi);
  const std::int64_t shift = ph->a * vals[ph->out];
  return {lo - shift, hi - shift};
}

Expr Lowerer::maskCondition(std::size_t v) {
  const BoundStatement& bs = *ctx_.maskBounds;
  std::vector<Expr> saved = varExpr_;
  Expr h = varExpr_[v], extra;
  for (const PhaseSub& x : ctx_.phase) {
    varExpr_[x.out] = ir::add(ir::mul(ir::intImm(x.g), saved[x.out]), ir::intImm(x.rho));
    if (x.red == v) {
      h = ir::add(ir::mul(ir::intImm(x.a), saved[x.out]), saved[v]);
      extra = ir::binary(BinOp::And, ir::binary(BinOp::Ge, h, ir::intImm(x.hullLo)),
                         ir::binary(BinOp::Lt, h, ir::intImm(x.hullHi)));
    }
  }
  Expr c = ir::binary(BinOp::And, ir::binary(BinOp::Ge, h, boundExpr(bs.loBound[v])),
                      ir::binary(BinOp::Lt, h, boundExpr(bs.hiBound[v])));
  varExpr_ = saved;
  return extra ? ir::binary(BinOp::And, extra, c) : c;
}

std::vector<PhaseSub> Lowerer::residuePhases(const Statement& st, const BoundStatement& bs,
                                             const Ranges& ranges) {
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
  if (st.lhsVars.empty()) return {};
  std::vector<PhaseSub> subs;
  for (std::size_t v = 0; v < n; ++v) {
    if (!bs.dependent[v]) continue;
    if (v < nOut) return {};
    const std::vector<std::size_t> read = boundReads(st, v);
    if (read.size() != 1 || read[0] >= nOut) return {};
    const std::size_t u = read[0];
    for (const PhaseSub& x : subs)
      if (x.out == u) return {};
    const std::int64_t g = std::max(divisorOf(bs.loBound[v]), divisorOf(bs.hiBound[v]));
    if (g < 2 || ranges[u].second - ranges[u].first < 4 * g) return {};
    PhaseSub ph;
    ph.out = u;
    ph.red = v;
    ph.g = g;
    ph.hullLo = ranges[v].first;
    ph.hullHi = ranges[v].second;
    // a: how far h's range moves per step of q, read off the middle of u's range.
    std::vector<std::int64_t> vals(n, 0);
    const std::int64_t mid = (ranges[u].first + ranges[u].second) / 2 / g * g;
    vals[u] = mid;
    const std::int64_t lo0 = bs.loBound[v].eval(vals);
    vals[u] = mid + g;
    ph.a = bs.loBound[v].eval(vals) - lo0;
    subs.push_back(ph);
  }
  return subs;
}

std::int64_t Lowerer::divisorOf(const ConcreteBound& b) {
  std::int64_t d =
      b.kind == IndexBound::Kind::FDiv || b.kind == IndexBound::Kind::CDiv ? b.divisor : 1;
  for (const ConcreteBound& a : b.args) d = std::max(d, divisorOf(a));
  return d;
}

} // namespace einjit::codegen::lowering
