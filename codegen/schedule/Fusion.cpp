#include "codegen/schedule/Fusion.h"

#include "dsl/InPlace.h"

#include <algorithm>
#include <cstdint>
#include <functional>

namespace einjit::codegen {

namespace {

using dsl::CExpr;
using dsl::Statement;
using dsl::Subscript;
using dsl::eachRead;

// Why statement k cannot be a member of a fused group; empty when it can.
std::string notElementwise(const dsl::Program& p, const dsl::BoundProgram& b, std::size_t k) {
  const Statement& st = p.stmts[k];
  const dsl::BoundStatement& bs = b.stmts[k];
  if (st.vars.empty()) return "no index";
  if (st.numOutputVars() != static_cast<int>(st.vars.size())) return "a reduction";
  if (st.scatter) return "a scatter";
  if (!dsl::writesEachElementOnce(st)) return "writes an element more than once";
  for (std::size_t v = 0; v < st.vars.size(); ++v) {
    if (bs.dependent[v]) return "a range that depends on another index";
    if (bs.hi[v] <= bs.lo[v]) return "an empty range";
  }
  bool gathers = false;
  for (const Subscript& s : st.lhs->subs) gathers = gathers || s.gather || s.mode != dsl::IndexMode::Plain;
  eachRead(st, [&](const CExpr& r) {
    for (const Subscript& s : r.subs) gathers = gathers || s.gather;
  });
  if (gathers) return "a gathered subscript or a padded left-hand side";
  if (dsl::readsOwnOutput(p, k) && !dsl::runsInPlace(p, k)) return "reads its output elsewhere";
  return {};
}

// The two accesses reach the same element at every point of the shared iteration space (the
// indices the two statements share, position by position; an index only one of them has must
// not appear).
bool sameElement(const dsl::Program& p, const dsl::BoundProgram& b, const CExpr& x, const CExpr& y) {
  if (x.subs.size() != y.subs.size()) return false;
  auto sameCoef = [](const std::vector<std::int64_t>& u, const std::vector<std::int64_t>& v) {
    for (std::size_t i = 0; i < std::max(u.size(), v.size()); ++i)
      if ((i < u.size() ? u[i] : 0) != (i < v.size() ? v[i] : 0)) return false;
    return true;
  };
  for (std::size_t d = 0; d < x.subs.size(); ++d) {
    const Subscript &s = x.subs[d], &t = y.subs[d];
    if (s.gather || t.gather || s.mode != t.mode || !sameCoef(s.coef, t.coef) ||
        b.eval(p, s.constant) != b.eval(p, t.constant))
      return false;
  }
  return true;
}

// Empty when statement `w`'s write and statement `r`'s reads (and write) of w's output may run
// element by element together; otherwise why not.
std::string conflict(const dsl::Program& p, const dsl::BoundProgram& b, std::size_t r,
                     std::size_t w) {
  const Statement &sr = p.stmts[r], &sw = p.stmts[w];
  const std::string name = dsl::shownName(p, sw.output);
  if (sr.output == sw.output && !sameElement(p, b, *sr.lhs, *sw.lhs))
    return "statements " + std::to_string(r + 1) + " and " + std::to_string(w + 1) + " write '" +
           name + "' at different elements";
  std::string why;
  eachRead(sr, [&](const CExpr& e) {
    if (why.empty() && e.tensor == sw.output && !sameElement(p, b, e, *sw.lhs))
      why = "statement " + std::to_string(r + 1) + " reads '" + name +
            "' at another element than statement " + std::to_string(w + 1) + " writes";
  });
  return why;
}

bool sameSpace(const dsl::BoundProgram& b, std::size_t a, std::size_t c) {
  const dsl::BoundStatement &x = b.stmts[a], &y = b.stmts[c];
  return x.lo == y.lo && x.hi == y.hi;
}

} // namespace

FusionPlan planFusion(const dsl::Program& p, const dsl::BoundProgram& b) {
  const std::size_t n = p.stmts.size();
  FusionPlan plan;
  plan.notes.assign(n, {});
  for (std::size_t k = 0; k < n; ++k) {
    plan.first.push_back(k);
    plan.last.push_back(k);
  }
  std::size_t first = 0;
  bool open = false; // statement `first` starts a group that statement k may join
  for (std::size_t k = 0; k < n; ++k) {
    if (!notElementwise(p, b, k).empty()) {
      open = false;
      continue;
    }
    std::string why;
    if (open && !sameSpace(b, first, k)) why = "other indices or ranges";
    for (std::size_t j = first; open && why.empty() && j < k; ++j) {
      why = conflict(p, b, k, j);
      if (why.empty()) why = conflict(p, b, j, k);
    }
    if (open && why.empty()) {
      for (std::size_t j = first; j <= k; ++j) plan.last[j] = k;
      plan.first[k] = first;
      continue;
    }
    if (open) plan.notes[k] = "not fused with statement " + std::to_string(k) + ": " + why;
    first = k;
    open = true;
  }
  for (std::size_t k = 0; k < n; ++k) {
    if (!plan.fused(k)) continue;
    const std::size_t f = plan.first[k], l = plan.last[k];
    std::string note = k == f ? "fused with statement" + std::string(l > f + 1 ? "s " : " ") +
                                 std::to_string(f + 2) + (l > f + 1 ? "-" + std::to_string(l + 1) : "") +
                                 " (element-wise, one loop: each element's statements in order)"
                           : "fused into statement " + std::to_string(f + 1) + "'s loop";
    plan.notes[k] = plan.notes[k].empty() ? note : plan.notes[k] + "; " + note;
  }
  return plan;
}

EpiloguePlan planEpilogue(const dsl::Program& p, const dsl::BoundProgram& b, std::size_t k,
                          const FusionPlan& fusion) {
  const EpiloguePlan none{k, {}, {}};
  const std::size_t first = k + 1;
  if (first >= p.stmts.size() || fusion.first[first] != first) return none;
  const Statement& st = p.stmts[k];
  const dsl::BoundStatement& bs = b.stmts[k];
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
  if (st.assign != dsl::Assign::Define || st.scatter || nOut == 0 || st.vars.size() == nOut)
    return none;
  for (const Subscript& s : st.lhs->subs)
    if (s.gather || s.mode != dsl::IndexMode::Plain) return none;
  const std::size_t last = fusion.last[first];
  for (std::size_t j = first; j <= last; ++j) {
    const Statement& sj = p.stmts[j];
    const dsl::BoundStatement& bj = b.stmts[j];
    if (!notElementwise(p, b, j).empty() || sj.vars.size() != nOut) return none;
    for (std::size_t v = 0; v < nOut; ++v)
      if (bj.lo[v] != bs.lo[v] || bj.hi[v] != bs.hi[v] || bs.dependent[v]) return none;
    if (!conflict(p, b, j, k).empty()) return none;
    bool readsMember = sj.output == st.output && !sameElement(p, b, *sj.lhs, *st.lhs);
    eachRead(st, [&](const CExpr& e) { readsMember = readsMember || e.tensor == sj.output; });
    if (readsMember) return none;
  }
  EpiloguePlan e;
  e.last = last;
  e.note = "epilogue: statement" +
           (last > first ? "s " + std::to_string(first + 1) + "-" : std::string(" ")) +
           std::to_string(last + 1) + " in its tile stores";
  e.memberNote = "in statement " + std::to_string(k + 1) + "'s tile stores (an epilogue)";
  return e;
}

} // namespace einjit::codegen
