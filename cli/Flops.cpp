#include "Flops.h"

#include <algorithm>
#include <functional>

namespace einjit::cli {

namespace {

int countOps(const dsl::CExpr& e) {
  int n = 0;
  switch (e.kind) {
  case dsl::CKind::Unary:
  case dsl::CKind::Binary:
  case dsl::CKind::Ternary:
  case dsl::CKind::Call: n = 1; break;
  default: break;
  }
  for (const auto& a : e.args) n += countOps(*a);
  return n;
}

void readVars(const dsl::ConcreteBound& b, std::vector<bool>& read) {
  for (auto [var, c] : b.terms)
    if (c != 0) read[static_cast<std::size_t>(var)] = true;
  for (const auto& a : b.args) readVars(a, read);
}

constexpr double kMaxPoints = 1e7;

// The iterations of one statement's loops.
FlopCount iterations(const dsl::BoundStatement& bs) {
  const std::size_t n = bs.lo.size();
  auto extent = [&](std::size_t v) {
    return static_cast<double>(std::max<std::int64_t>(0, bs.hi[v] - bs.lo[v]));
  };
  double hull = 1;
  for (std::size_t v = 0; v < n; ++v) hull *= extent(v);
  // The indices some dependent bound reads are enumerated (in loop order, so each bound's
  // indices are set before it is evaluated); a dependent index nothing reads contributes its
  // length at each point; every other index its extent.
  std::vector<bool> read(n, false);
  for (std::size_t v = 0; v < n; ++v)
    if (bs.dependent[v]) {
      readVars(bs.loBound[v], read);
      readVars(bs.hiBound[v], read);
    }
  double points = 1, free = 1;
  std::vector<std::size_t> walk, leaves;
  for (std::size_t v = 0; v < n; ++v) {
    if (read[v]) {
      walk.push_back(v);
      points *= extent(v);
    } else if (bs.dependent[v]) {
      leaves.push_back(v);
    } else {
      free *= extent(v);
    }
  }
  if (walk.empty() && leaves.empty()) return {hull, true};
  if (points > kMaxPoints || free == 0) return {free == 0 ? 0 : hull, free == 0};
  // A bound reading an index later in loop order than the walk has reached: count the hull.
  for (std::size_t v : walk)
    if (bs.dependent[v]) {
      std::vector<bool> r(n, false);
      readVars(bs.loBound[v], r);
      readVars(bs.hiBound[v], r);
      for (std::size_t u = v; u < n; ++u)
        if (r[u]) return {hull, false};
    }
  std::vector<std::int64_t> vars(n, 0);
  double total = 0;
  std::function<void(std::size_t)> step = [&](std::size_t at) {
    if (at == walk.size()) {
      double here = 1;
      for (std::size_t v : leaves)
        here *= static_cast<double>(
            std::max<std::int64_t>(0, bs.hiBound[v].eval(vars) - bs.loBound[v].eval(vars)));
      total += here;
      return;
    }
    const std::size_t v = walk[at];
    const std::int64_t lo = bs.dependent[v] ? bs.loBound[v].eval(vars) : bs.lo[v];
    const std::int64_t hi = bs.dependent[v] ? bs.hiBound[v].eval(vars) : bs.hi[v];
    for (std::int64_t i = lo; i < hi; ++i) {
      vars[v] = i;
      step(at + 1);
    }
  };
  step(0);
  return {total * free, true};
}

} // namespace

FlopCount flops(const dsl::Program& p, const dsl::BoundProgram& b) {
  FlopCount total;
  for (std::size_t k = 0; k < p.stmts.size(); ++k) {
    const auto& st = p.stmts[k];
    const auto& bs = b.stmts[k];
    if (bs.empty) continue;
    const auto nOut = static_cast<std::size_t>(st.numOutputVars());
    double elems = 1;
    for (std::size_t v = 0; v < nOut; ++v)
      elems *= static_cast<double>(std::max<std::int64_t>(0, bs.hi[v] - bs.lo[v]));
    const FlopCount iters = iterations(bs);
    total.flops += iters.flops * (countOps(*st.rhs) + (st.vars.size() > nOut ? 1 : 0));
    total.exact = total.exact && iters.exact;
    if (st.assign == dsl::Assign::Accumulate) total.flops += elems;
  }
  return total;
}

} // namespace einjit::cli
