#include "codegen/schedule/GemmBinding.h"

#include "codegen/schedule/AccessBounds.h"

#include <functional>

namespace einjit::codegen {

using namespace einjit::dsl;

namespace {

// Every access of a statement: its output and each read of its right-hand side (gathers'
// index reads too); false where an index's value is read (a merged index has no value).
bool accesses(const Statement& st, std::vector<const CExpr*>& out,
              const std::vector<bool>& merged) {
  out.push_back(st.lhs.get());
  bool ok = true;
  std::function<void(const CExpr&)> walk = [&](const CExpr& e) {
    if (e.kind == CKind::Index && merged[static_cast<std::size_t>(e.var)]) ok = false;
    if (e.kind == CKind::Read) {
      out.push_back(&e);
      for (const Subscript& s : e.subs)
        if (s.gather) walk(*s.gather);
    }
    for (const CExprPtr& a : e.args) walk(*a);
  };
  walk(*st.rhs);
  return ok;
}

std::int64_t strideAlong(const CExpr& acc, std::size_t v, const Strides& strides) {
  const auto& st = strides[static_cast<std::size_t>(acc.tensor)];
  std::int64_t c = 0;
  for (std::size_t d = 0; d < acc.subs.size(); ++d) c += acc.subs[d].coef[v] * st[d];
  return c;
}

bool reads(const ConcreteBound& c, std::size_t v, std::size_t n) {
  std::vector<bool> vars(n, false);
  boundVars(c, vars);
  return vars[v];
}

// A dependent range that is its whole hull wherever it is evaluated (over the box of every
// index's range): no term is outside it, so it bounds nothing.
bool wholeHull(const BoundStatement& bs, std::size_t u) {
  std::vector<std::int64_t> lo = bs.lo, hiIncl = bs.hi;
  for (std::int64_t& h : hiIncl) --h;
  return bs.loBound[u].interval(lo, hiIncl).second <= bs.lo[u] &&
         bs.hiBound[u].interval(lo, hiIncl).first >= bs.hi[u];
}

// Whether index v may be merged at all in statement st: no dependent range of its own or
// reading it (but whole hulls), each subscript that reads it plain and proven inside over the
// statement's ranges.
bool mergeable(const Program& p, const BoundProgram& b, const BoundStatement& bs,
               const std::vector<const CExpr*>& accs, std::size_t v) {
  if (bs.dependent[v] || bs.hi[v] - bs.lo[v] < 2) return false;
  for (std::size_t u = 0; u < bs.dependent.size(); ++u)
    if (bs.dependent[u] &&
        (reads(bs.loBound[u], v, bs.lo.size()) || reads(bs.hiBound[u], v, bs.lo.size())) &&
        !wholeHull(bs, u))
      return false;
  Box box;
  for (std::size_t u = 0; u < bs.lo.size(); ++u) box.push_back({bs.lo[u], bs.hi[u]});
  const std::vector<IndexInterval> vars = boxIntervals(box);
  for (const CExpr* a : accs)
    for (std::size_t d = 0; d < a->subs.size(); ++d) {
      const Subscript& s = a->subs[d];
      if (s.coef[v] == 0) continue;
      if (s.mode != IndexMode::Plain || s.gather || !subscriptInside(p, b, vars, *a, d))
        return false;
    }
  return true;
}

// Whether every access reads (outer, inner) as one run, inner's extent `inner`.
bool oneRun(const std::vector<const CExpr*>& accs, std::size_t outer, std::size_t inner,
            std::int64_t innerExtent, const Strides& strides) {
  for (const CExpr* a : accs)
    if (strideAlong(*a, outer, strides) != innerExtent * strideAlong(*a, inner, strides))
      return false;
  return true;
}

void apply(BoundStatement& bs, const GemmMerge& m) {
  const auto o = static_cast<std::size_t>(m.outer), i = static_cast<std::size_t>(m.inner);
  bs.hi[i] = bs.lo[i] + (bs.hi[o] - bs.lo[o]) * (bs.hi[i] - bs.lo[i]);
  bs.hi[o] = bs.lo[o] + 1;
}

} // namespace

std::vector<GemmMerge> planMerges(const Program& p, const BoundProgram& b, std::size_t k,
                                  const Strides& strides) {
  const Statement& st = p.stmts[k];
  const BoundStatement& bs = b.stmts[k];
  std::vector<GemmMerge> merges;
  if (bs.empty || st.scatter) return merges;
  const std::size_t n = st.vars.size(), nOut = static_cast<std::size_t>(st.numOutputVars());
  std::vector<bool> can(n, false);
  std::vector<const CExpr*> accs;
  std::vector<bool> valueRead(n, false);
  for (std::size_t v = 0; v < n; ++v) {
    std::vector<bool> one(n, false);
    one[v] = true;
    std::vector<const CExpr*> ignored;
    valueRead[v] = !accesses(st, ignored, one);
  }
  accesses(st, accs, std::vector<bool>(n, false));
  for (std::size_t v = 0; v < n; ++v) can[v] = !valueRead[v] && mergeable(p, b, bs, accs, v);
  BoundStatement cur = bs;
  for (bool found = true; found;) {
    found = false;
    for (std::size_t o = 0; o < n && !found; ++o)
      for (std::size_t i = 0; i < n && !found; ++i) {
        if (o == i || !can[o] || !can[i] || o >= nOut || i >= nOut) continue;
        if (cur.hi[o] - cur.lo[o] < 2 || cur.hi[i] - cur.lo[i] < 2) continue;
        bool read = false;
        for (const CExpr* a : accs) read = read || strideAlong(*a, i, strides) != 0;
        if (!read || !oneRun(accs, o, i, cur.hi[i] - cur.lo[i], strides)) continue;
        const GemmMerge m{static_cast<int>(o), static_cast<int>(i)};
        merges.push_back(m);
        apply(cur, m);
        found = true;
      }
  }
  return merges;
}

BoundStatement mergedBinding(const BoundStatement& bs, const std::vector<GemmMerge>& merges) {
  BoundStatement r = bs;
  for (std::size_t u = 0; u < bs.dependent.size(); ++u) {
    if (!bs.dependent[u]) continue;
    bool readsMerged = false;
    for (const GemmMerge& m : merges)
      for (int v : {m.outer, m.inner}) {
        const auto x = static_cast<std::size_t>(v);
        readsMerged = readsMerged || reads(bs.loBound[u], x, bs.lo.size()) ||
                      reads(bs.hiBound[u], x, bs.lo.size());
      }
    if (readsMerged && wholeHull(bs, u)) r.dependent[u] = false;
  }
  for (const GemmMerge& m : merges) apply(r, m);
  return r;
}

bool mergesHold(const Program& p, const BoundProgram& b, std::size_t j, const Strides& strides,
                const std::vector<GemmMerge>& merges) {
  const Statement& st = p.stmts[j];
  BoundStatement cur = b.stmts[j];
  const std::size_t n = st.vars.size();
  std::vector<bool> merged(n, false);
  for (const GemmMerge& m : merges)
    for (int v : {m.outer, m.inner})
      if (static_cast<std::size_t>(v) < n) merged[static_cast<std::size_t>(v)] = true;
  std::vector<const CExpr*> accs;
  if (!accesses(st, accs, merged)) return false;
  for (std::size_t v = 0; v < n; ++v)
    if (merged[v] && !mergeable(p, b, cur, accs, v)) return false;
  for (const GemmMerge& m : merges) {
    const auto o = static_cast<std::size_t>(m.outer), i = static_cast<std::size_t>(m.inner);
    if (o >= n || i >= n) return false;
    if (!oneRun(accs, o, i, cur.hi[i] - cur.lo[i], strides)) return false;
    apply(cur, m);
  }
  return true;
}

} // namespace einjit::codegen
