#include "codegen/schedule/GpuPhases.h"

#include "codegen/schedule/GpuTileGroups.h"
#include "codegen/schedule/GpuTileSchedule.h"
#include "dsl/SymExpr.h"

#include <algorithm>
#include <functional>
#include <memory>

namespace einjit::codegen::gpuschedule {

using namespace einjit::dsl;

Statement phaseStatement(const Statement& st, const std::vector<PhaseSub>& subs) {
  std::function<CExprPtr(const CExpr&)> copy = [&](const CExpr& e) {
    auto c = std::make_shared<CExpr>(e);
    for (Subscript& sub : c->subs) {
      std::vector<std::int64_t> coef = sub.coef;
      for (const PhaseSub& x : subs) {
        if (x.out >= coef.size()) continue;
        const std::int64_t cu = sub.coef[x.out], ch = x.red < coef.size() ? sub.coef[x.red] : 0;
        coef[x.out] = cu * x.g + ch * x.a;
        sub.constant = symAddConst(sub.constant, cu * x.rho);
      }
      sub.coef = coef;
      if (sub.gather) sub.gather = copy(*sub.gather);
    }
    for (CExprPtr& a : c->args) a = copy(*a);
    return CExprPtr(c);
  };
  Statement ps = st;
  ps.rhs = copy(*st.rhs);
  ps.lhs = copy(*st.lhs);
  return ps;
}

bool planPhases(const GpuTileContext& c, const Target& t, const GpuStatementInput& in,
                GpuStatementPlan& plan) {
  const Statement& st = in.program->stmts[in.stmt];
  const BoundStatement& bs = in.binding->stmts[in.stmt];
  const Box& ranges = in.ranges;
  const std::size_t n = st.vars.size();
  std::vector<PhaseSub> subs = in.phases;
  if (subs.empty()) return false;
  // Worth tiles: the multiply-adds the ranges hold, as tileGroups asks of a whole statement.
  double work = 1;
  for (std::size_t v = 0; v < n; ++v)
    if (!bs.dependent[v]) work *= static_cast<double>(ranges[v].second - ranges[v].first);
  for (const PhaseSub& x : subs)
    work *= meanShare(bs, ranges, x.red, {x.out}, c.phase) *
            static_cast<double>(ranges[x.red].second - ranges[x.red].first);
  if (work < kMinTileWork) return false;
  std::int64_t combos = 1;
  for (const PhaseSub& x : subs) combos *= x.g;
  if (combos > kMaxPhases) return false;
  auto cdiv = [](std::int64_t a, std::int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); };
  // Every phase is decided before any is emitted: all tile, or none is.
  std::vector<GpuTilePart> phases;
  for (std::int64_t combo = 0; combo < combos; ++combo) {
    std::int64_t rest = combo;
    Box r = ranges;
    bool empty = false;
    for (PhaseSub& x : subs) {
      x.rho = rest % x.g;
      rest /= x.g;
      r[x.out] = {cdiv(ranges[x.out].first - x.rho, x.g), cdiv(ranges[x.out].second - x.rho, x.g)};
      empty = empty || r[x.out].second <= r[x.out].first;
    }
    if (empty) continue;
    GpuTileContext inPhase = c;
    inPhase.phase = subs;
    // m's hull over the phase.
    for (const PhaseSub& x : subs) {
      std::int64_t lo = 0, hi = 0;
      bool any = false;
      std::vector<std::int64_t> vals(n, 0);
      for (std::int64_t q = r[x.out].first; q < r[x.out].second; ++q) {
        vals[x.out] = q;
        auto [a, b] = dependentRange(bs, x.red, vals, inPhase.phase);
        if (b <= a) continue;
        lo = any ? std::min(lo, a) : a;
        hi = any ? std::max(hi, b) : b;
        any = true;
      }
      r[x.red] = {lo, any ? hi : lo + 1};
    }
    BoundStatement pb = bs;
    for (std::size_t v = 0; v < n; ++v) {
      pb.lo[v] = r[v].first;
      pb.hi[v] = r[v].second;
    }
    std::string name = in.base + "_phase";
    for (const PhaseSub& x : subs) name += std::to_string(x.rho);
    std::optional<GpuTilePart> part =
        planTilePart(inPhase, t, phaseStatement(st, subs), pb, r, name);
    if (!part) return false;
    part->subs = subs;
    phases.push_back(std::move(*part));
  }
  if (phases.empty()) return false;
  std::vector<GpuPhasesPlan::Split> what;
  for (const PhaseSub& x : subs)
    what.push_back({st.vars[x.out].name, st.vars[x.red].name, x.g, x.a});
  plan.family = GpuStatementPlan::Family::Phases;
  plan.tiles = std::move(phases);
  plan.phases = GpuPhasesPlan{combos, std::move(what), 0, 0, false};
  return true;
}

} // namespace einjit::codegen::gpuschedule
