#include "codegen/schedule/DependentRanges.h"

#include <algorithm>
#include <functional>

namespace einjit::codegen {

using namespace einjit::dsl;

std::vector<std::size_t> boundReads(const Statement& st, std::size_t v) {
  std::vector<bool> reads(st.vars.size(), false);
  st.vars[v].loBound.collectVars(reads);
  st.vars[v].hiBound.collectVars(reads);
  std::vector<std::size_t> read;
  for (std::size_t u = 0; u < reads.size(); ++u)
    if (reads[u]) read.push_back(u);
  return read;
}

std::pair<std::int64_t, std::int64_t> dependentRange(const BoundStatement& bs, std::size_t v,
                                                     const std::vector<std::int64_t>& vals,
                                                     const std::vector<PhaseSub>& phase) {
  const PhaseSub* ph = nullptr;
  for (const PhaseSub& x : phase)
    if (x.red == v) ph = &x;
  std::vector<std::int64_t> orig = vals;
  for (const PhaseSub& x : phase) orig[x.out] = x.g * vals[x.out] + x.rho;
  std::int64_t lo = bs.loBound[v].eval(orig), hi = bs.hiBound[v].eval(orig);
  if (!ph) return {lo, hi};
  lo = std::max(lo, ph->hullLo);
  hi = std::min(hi, ph->hullHi);
  const std::int64_t shift = ph->a * vals[ph->out];
  return {lo - shift, hi - shift};
}

double meanShare(const BoundStatement& bs, const Box& r, std::size_t v,
                 const std::vector<std::size_t>& read, const std::vector<PhaseSub>& phase) {
  double points = 1;
  for (std::size_t u : read) points *= static_cast<double>(r[u].second - r[u].first);
  const std::int64_t hull = r[v].second - r[v].first;
  if (points > 1e6 || points < 1 || hull <= 0) return 0;
  std::vector<std::int64_t> vals(r.size(), 0);
  double sum = 0;
  std::function<void(std::size_t)> walk = [&](std::size_t q) {
    if (q == read.size()) {
      auto [lo, hi] = dependentRange(bs, v, vals, phase);
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

std::int64_t divisorOf(const ConcreteBound& b) {
  std::int64_t d =
      b.kind == IndexBound::Kind::FDiv || b.kind == IndexBound::Kind::CDiv ? b.divisor : 1;
  for (const ConcreteBound& a : b.args) d = std::max(d, divisorOf(a));
  return d;
}

std::vector<PhaseSub> residuePhases(const Statement& st, const BoundStatement& bs,
                                    const Box& ranges) {
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

namespace {

// The core of output index o when every bound that reads it is monotone in it: each bound takes
// its interior value (the hull's end) on a prefix or a suffix of o's range, found by bisection,
// and the core is where all of them do. False when some bound is not monotone.
bool monotoneCore(const BoundStatement& bs, std::pair<std::int64_t, std::int64_t> range,
                  std::size_t o, const std::vector<std::size_t>& readers, std::size_t n,
                  std::pair<std::int64_t, std::int64_t>& core) {
  struct Condition {
    const ConcreteBound* bound;
    std::int64_t interior;
    bool prefix; // holds on a prefix of the range (else on a suffix)
  };
  std::vector<Condition> conds;
  for (std::size_t r : readers) {
    const int lo = bs.loBound[r].direction(static_cast<int>(o));
    const int hi = bs.hiBound[r].direction(static_cast<int>(o));
    if (lo == 2 || hi == 2) return false;
    // The lower bound is at its least where it has not risen yet, the upper at its most.
    if (lo != 0) conds.push_back({&bs.loBound[r], bs.lo[r], lo > 0});
    if (hi != 0) conds.push_back({&bs.hiBound[r], bs.hi[r], hi < 0});
  }
  std::vector<std::int64_t> vals(n, 0);
  auto holds = [&](const Condition& c, std::int64_t x) {
    vals[o] = x;
    return c.bound->eval(vals) == c.interior;
  };
  core = range;
  for (const Condition& c : conds) {
    // First x in [first, second] where the condition flips (second: it never does).
    std::int64_t a = range.first, b = range.second;
    while (a < b) {
      const std::int64_t m = a + (b - a) / 2;
      if (holds(c, m) == c.prefix)
        a = m + 1;
      else
        b = m;
    }
    if (c.prefix)
      core.second = std::min(core.second, a);
    else
      core.first = std::max(core.first, a);
  }
  return true;
}

} // namespace

std::optional<Box> coreRanges(const Statement& st, const BoundStatement& bs, const Box& ranges) {
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
  std::vector<std::vector<std::size_t>> readers(nOut); // dependent vars whose bounds read o
  bool any = false;
  for (std::size_t v = 0; v < n; ++v) {
    if (!bs.dependent[v]) continue;
    if (v < nOut) return std::nullopt;
    const std::vector<std::size_t> read = boundReads(st, v);
    if (read.size() != 1 || read[0] >= nOut) return std::nullopt;
    readers[read[0]].push_back(v);
    any = true;
  }
  if (!any) return std::nullopt;
  Box core = ranges;
  for (std::size_t o = 0; o < nOut; ++o) {
    if (readers[o].empty()) continue;
    if (monotoneCore(bs, ranges[o], o, readers[o], n, core[o])) {
      if (core[o].second <= core[o].first) return std::nullopt;
      continue;
    }
    // Otherwise the longest run of points where every bound is interior.
    std::vector<std::int64_t> vals(n, 0);
    std::int64_t bestLo = 0, bestLen = 0, runLo = 0, runLen = 0;
    for (std::int64_t x = ranges[o].first; x < ranges[o].second; ++x) {
      vals[o] = x;
      bool inside = true;
      for (std::size_t r : readers[o])
        inside =
            inside && bs.loBound[r].eval(vals) == bs.lo[r] && bs.hiBound[r].eval(vals) == bs.hi[r];
      if (inside) {
        if (runLen == 0) runLo = x;
        if (++runLen > bestLen) {
          bestLen = runLen;
          bestLo = runLo;
        }
      } else {
        runLen = 0;
      }
    }
    if (bestLen == 0) return std::nullopt;
    core[o] = {bestLo, bestLo + bestLen};
  }
  return core;
}

BoundStatement coreBox(const BoundStatement& bs, const Box& core) {
  BoundStatement cs = bs;
  for (std::size_t v = 0; v < core.size(); ++v) {
    cs.lo[v] = core[v].first;
    cs.hi[v] = core[v].second;
    cs.dependent[v] = false;
  }
  return cs;
}

} // namespace einjit::codegen
