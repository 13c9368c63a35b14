// Core/border splits: a rectangular core where every dependent bound is interior, and strips around
// it.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

bool Lowerer::coreRanges(const Statement& st, const BoundStatement& bs, const Ranges& ranges,
                         Ranges& core) const {
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
  std::vector<std::vector<std::size_t>> readers(nOut); // dependent vars whose bounds read o
  bool any = false;
  for (std::size_t v = 0; v < n; ++v) {
    if (!bs.dependent[v]) continue;
    if (v < nOut) return false;
    const std::vector<std::size_t> read = boundReads(st, v);
    if (read.size() != 1 || read[0] >= nOut) return false;
    readers[read[0]].push_back(v);
    any = true;
  }
  if (!any) return false;
  core = ranges;
  for (std::size_t o = 0; o < nOut; ++o) {
    if (readers[o].empty()) continue;
    if (monotoneCore(bs, ranges[o], o, readers[o], n, core[o])) {
      if (core[o].second <= core[o].first) return false;
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
    if (bestLen == 0) return false;
    core[o] = {bestLo, bestLo + bestLen};
  }
  return true;
}

auto Lowerer::boxOf(const BoundStatement& bs, const Ranges& core) -> BoundStatement {
  BoundStatement cs = bs;
  for (std::size_t v = 0; v < core.size(); ++v) {
    cs.lo[v] = core[v].first;
    cs.hi[v] = core[v].second;
    cs.dependent[v] = false;
  }
  return cs;
}

bool Lowerer::coreSplit(std::size_t k, const Statement& st, const BoundStatement& bs,
                        const Ranges& ranges, const std::string& base) {
  Ranges core;
  if (!coreRanges(st, bs, ranges, core)) return false;
  dsl::BoundProgram b2 = b_;
  auto& cs = b2.stmts[k];
  cs = boxOf(bs, core);
  StatementSchedule coreSched = scheduleStatement(p_, b2, k, ctx_.buffers.strides, target_);
  if (coreSched.tileJ < 0 && coreSched.dotVar < 0) return false;
  out_.notes.back() = coreBorderNote(coreSched);
  emitBox(st, cs, coreSched, core, base + "_core");
  StatementSchedule generic = scheduleStatement(p_, b_, k, ctx_.buffers.strides, target_);
  generic.tileI = generic.tileJ = generic.dotVar = -1;
  forEachBorder(st, ranges, core, base, [&](const Ranges& part, const std::string& name) {
    emitGeneric(st, bs, generic, part, name);
  });
  return true;
}

bool Lowerer::planCoreSplit(const Statement& st, const BoundStatement& bs, const Ranges& ranges,
                            const std::string& base, GpuStatementPlan& plan) {
  Ranges core;
  if (!coreRanges(st, bs, ranges, core)) return false;
  std::optional<GpuTilePart> tile = planTile(st, boxOf(bs, core), core, base + "_core");
  if (!tile) return false;
  plan.family = GpuStatementPlan::Family::CoreBorder;
  plan.tiles = {std::move(*tile)};
  return true;
}

GpuTileSchedule Lowerer::emitCoreSplit(const Statement& st, const BoundStatement& bs,
                                       const Ranges& ranges, const std::string& base,
                                       const GpuStatementPlan& plan) {
  GpuTileSchedule s;
  s.tile = emitTilePart(plan.tiles[0]);
  forEachBorder(
      st, ranges, plan.tiles[0].r, base,
      [&](const Ranges& part, const std::string& name) { emitGpuGeneric(st, bs, part, name); });
  s.coreBorder = true;
  return s;
}

bool Lowerer::coversOutput(const Statement& st, const BoundStatement& bs,
                           const StatementSchedule& s) {
  if (!s.run || st.lhsVars.empty()) return false;
  for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
    auto v = static_cast<std::size_t>(st.lhsVars[d]);
    for (std::size_t e = 0; e < d; ++e)
      if (st.lhsVars[e] == st.lhsVars[d]) return false;
    if (bs.dependent[v] || bs.lo[v] != 0 || bs.hi[v] != extentOf(st.output, d)) return false;
  }
  return true;
}

bool Lowerer::monotoneCore(const BoundStatement& bs, std::pair<std::int64_t, std::int64_t> range,
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

} // namespace einjit::codegen::lowering
