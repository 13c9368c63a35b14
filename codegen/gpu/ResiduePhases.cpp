// Residue phases of strided gradients as separate GPU tile statements.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

bool Lowerer::planPhases(const Statement& st, const BoundStatement& bs, const Ranges& ranges,
                         const std::string& base, GpuStatementPlan& plan) {
  const std::size_t n = st.vars.size();
  std::vector<PhaseSub> subs = residuePhases(st, bs, ranges);
  if (subs.empty()) return false;
  // Worth tiles: the multiply-adds the ranges hold, as tileGroups asks of a whole statement.
  double work = 1;
  for (std::size_t v = 0; v < n; ++v)
    if (!bs.dependent[v]) work *= static_cast<double>(ranges[v].second - ranges[v].first);
  for (const PhaseSub& x : subs)
    work *= meanShare(bs, ranges, x.red, {x.out}) *
            static_cast<double>(ranges[x.red].second - ranges[x.red].first);
  if (work < gpuschedule::kMinTileWork) return false;
  std::int64_t combos = 1;
  for (const PhaseSub& x : subs) combos *= x.g;
  if (combos > gpuschedule::kMaxPhases) return false;
  auto cdiv = [](std::int64_t a, std::int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); };
  // Every phase is decided before any is emitted: all tile, or none is.
  std::vector<GpuTilePart> phases;
  for (std::int64_t c = 0; c < combos; ++c) {
    std::int64_t rest = c;
    Ranges r = ranges;
    bool empty = false;
    for (PhaseSub& x : subs) {
      x.rho = rest % x.g;
      rest /= x.g;
      r[x.out] = {cdiv(ranges[x.out].first - x.rho, x.g), cdiv(ranges[x.out].second - x.rho, x.g)};
      empty = empty || r[x.out].second <= r[x.out].first;
    }
    if (empty) continue;
    const Scoped<std::vector<PhaseSub>> inPhase(ctx_.phase, subs);
    // m's hull over the phase.
    for (const PhaseSub& x : subs) {
      std::int64_t lo = 0, hi = 0;
      bool any = false;
      std::vector<std::int64_t> vals(n, 0);
      for (std::int64_t q = r[x.out].first; q < r[x.out].second; ++q) {
        vals[x.out] = q;
        auto [a, b] = depRange(bs, x.red, vals);
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
    Statement ps = phaseStatement(st, subs);
    std::string name = base + "_phase";
    for (const PhaseSub& x : subs) name += std::to_string(x.rho);
    std::optional<TileGroups> groups = tileGroups(ps, pb, r);
    if (!groups) return false;
    phases.push_back(
        {std::move(ps), std::move(pb), r, std::move(name), std::move(*groups), subs, {}});
    GpuTilePart& part = phases.back();
    part.tile = tileSchedule(part.st, part.bs, part.r, part.groups);
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

GpuTileSchedule Lowerer::emitPhases(const GpuStatementPlan& plan) {
  const std::size_t funcs = out_.funcs.size();
  GpuTileSchedule s;
  bool split = false;
  for (const GpuTilePart& phase : plan.tiles) {
    s.tile = emitTilePart(phase); // the last phase's is shown
    split = split || s.tile.splits > 1;
  }
  s.phases = plan.phases;
  // The phases' launches may share one grid (passes::mergeLaunches) unless a phase is split
  // along its reduction: its partials are added by a launch that must follow its tile's, and
  // the blocks of one grid run in no order.
  s.phases->firstLaunch = funcs;
  s.phases->endLaunch = split ? funcs : out_.funcs.size();
  return s;
}

std::vector<passes::LaunchGroup> Lowerer::launchGroups() {
  std::vector<passes::LaunchGroup> groups;
  for (const PhaseLaunches& l : phaseLaunches_)
    groups.push_back(
        {l.schedule.phases->firstLaunch, l.schedule.phases->endLaunch, newFunc(l.name)});
  return groups;
}

void Lowerer::noteMerged(std::vector<std::string>& notes, const std::vector<bool>& merged) const {
  for (std::size_t g = 0; g < phaseLaunches_.size(); ++g) {
    if (!merged[g]) continue;
    const PhaseLaunches& l = phaseLaunches_[g];
    // The note starts with the schedule's own part; what follows it (fusion, rows) stays.
    const std::string before = describe(l.schedule);
    std::string& note = notes[l.note];
    if (note.compare(0, before.size(), before) != 0)
      throw InternalError("lower: a residue phases' note that does not start with its schedule");
    GpuTileSchedule after = l.schedule;
    after.phases->merged = true;
    note = describe(after) + note.substr(before.size());
  }
}

auto Lowerer::phaseStatement(const Statement& st, const std::vector<PhaseSub>& subs) -> Statement {
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

} // namespace einjit::codegen::lowering
