// CPU loop nests: the generic schedule, register tiles and dot-product tiles.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

void Lowerer::emitBox(const Statement& st, const BoundStatement& bs, const StatementSchedule& sched,
                      const Ranges& ranges, const std::string& name) {
  if (sched.tileJ < 0 && sched.dotVar < 0) {
    emitGeneric(st, bs, sched, ranges, name);
    return;
  }
  const int i = sched.tileI, j = sched.tileJ;
  auto fullEnd = [&](int v, int size) {
    const auto [lo, hi] = ranges[static_cast<std::size_t>(v)];
    return lo + (hi - lo) / size * size;
  };
  if (sched.dotVar >= 0)
    emitDot(st, bs, sched, ranges, name);
  else
    emitTiled(st, bs, sched, ranges, name);
  StatementSchedule generic = sched;
  generic.tileI = generic.tileJ = generic.dotVar = -1;
  if (j >= 0 && fullEnd(j, sched.nr) < ranges[static_cast<std::size_t>(j)].second) {
    Ranges r = ranges;
    r[static_cast<std::size_t>(j)].first = fullEnd(j, sched.nr);
    const std::int64_t rest =
        r[static_cast<std::size_t>(j)].second - r[static_cast<std::size_t>(j)].first;
    StatementSchedule narrow = sched;
    const std::string edge = name + "_" + st.vars[static_cast<std::size_t>(j)].name;
    if (sched.dotVar >= 0) {
      narrow.nr = static_cast<int>(rest);
      emitBox(st, bs, narrow, r, edge);
    } else if (rest >= sched.width && sched.nr > sched.width) {
      narrow.nr = sched.width;
      emitBox(st, bs, narrow, r, edge);
    } else {
      emitGeneric(st, bs, generic, r, edge);
    }
  }
  if (i >= 0 && fullEnd(i, sched.mr) < ranges[static_cast<std::size_t>(i)].second) {
    Ranges r = ranges;
    r[static_cast<std::size_t>(i)].first = fullEnd(i, sched.mr);
    if (j >= 0) r[static_cast<std::size_t>(j)].second = fullEnd(j, sched.nr);
    StatementSchedule narrow = sched;
    narrow.mr = static_cast<int>(r[static_cast<std::size_t>(i)].second -
                                 r[static_cast<std::size_t>(i)].first);
    if (j < 0 || r[static_cast<std::size_t>(j)].second > r[static_cast<std::size_t>(j)].first)
      emitBox(st, bs, narrow, r, name + "_" + st.vars[static_cast<std::size_t>(i)].name);
  }
}

auto Lowerer::outerKind(const StatementSchedule& s, int v, std::int64_t lo, std::int64_t hi,
                        double innerWork, ir::Func& f) -> ForKind {
  if (v != s.parallelVar || hi - lo < 2) return ForKind::Serial;
  f.parallel = true;
  f.parallelLo = lo;
  f.parallelHi = hi;
  f.grain = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::ceil(target_.minParallelWork / std::max(innerWork, 1.0))));
  return ForKind::Parallel;
}

void Lowerer::emitGeneric(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                          const Ranges& r, const std::string& name) {
  setRanges(st, r);
  ir::Func f = newFunc(name);
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
  const std::size_t n = st.vars.size();
  Stmt body = elementBodies(st, bs, r, s.vectorizeInner && !target_.gpu);
  if (!body) return;
  double inside = workOf(r, nOut);
  for (std::size_t idx = s.outerOrder.size(); idx-- > 0;) {
    auto v = static_cast<std::size_t>(s.outerOrder[idx]);
    bool innermost = idx + 1 == s.outerOrder.size() && n == nOut;
    ForKind kind = innermost && s.vectorizeInner ? ForKind::Vectorized : ForKind::Serial;
    if (static_cast<int>(v) == s.parallelVar && !bs.dependent[v])
      kind = outerKind(s, static_cast<int>(v), r[v].first, r[v].second, inside, f);
    body = loopOver(bs, st, v, r, kind, body, kind == ForKind::Vectorized ? vectorWidth() : 1);
    inside *= static_cast<double>(std::max<std::int64_t>(r[v].second - r[v].first, 1));
  }
  f.body = body;
  out_.funcs.push_back(std::move(f));
}

void Lowerer::emitTiled(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                        const Ranges& r, const std::string& name) {
  const int i = s.tileI, j = s.tileJ;
  setRanges(st, r);
  ir::Func f = newFunc(name);
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
  const std::size_t n = st.vars.size();
  const std::string ji = st.vars[static_cast<std::size_t>(j)].name + ".i";
  const std::string ii = i >= 0 ? st.vars[static_cast<std::size_t>(i)].name + ".i" : "";
  tileVar(st, r, j, s.nr);
  if (i >= 0) tileVar(st, r, i, s.mr);
  // acc[ii * nr + ji]: one register tile.
  const std::string acc = "acc";
  Expr slot = ir::var(ji);
  if (i >= 0) slot = ir::add(ir::mul(ir::var(ii), ir::intImm(s.nr)), slot);
  auto tile = [&](Stmt body) {
    body = ir::forLoop(ji, ir::intImm(0), ir::intImm(s.nr), ForKind::Vectorized, body, s.width);
    if (i >= 0) body = ir::forLoop(ii, ir::intImm(0), ir::intImm(s.mr), ForKind::Unrolled, body);
    return body;
  };
  Expr a = ir::load(vt_, acc, slot);
  Stmt update = tile(ir::store(acc, slot, combine(st.reduce, a, value(*st.rhs))));
  for (std::size_t v = n; v-- > nOut;) update = loopOver(bs, st, v, r, ForKind::Serial, update);
  Stmt out = storeOutput(st, a);
  if (!out) return;
  Stmt body =
      ir::allocate(acc, vt_, static_cast<std::int64_t>(s.mr) * s.nr,
                   ir::block({tile(ir::store(acc, slot, identity(st.reduce))), update, tile(out)}));
  f.body = tileLoops(st, bs, s, r, body, workOf(r, nOut) * s.mr * s.nr, f);
  out_.funcs.push_back(std::move(f));
}

void Lowerer::tileVar(const Statement& st, const Ranges& r, int v, int size) {
  const auto u = static_cast<std::size_t>(v);
  const std::string& vn = st.vars[u].name;
  varExpr_[u] =
      ir::add(ir::add(ir::intImm(r[u].first), ir::mul(ir::var(vn + ".o"), ir::intImm(size))),
              ir::var(vn + ".i"));
}

Stmt Lowerer::tileLoops(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                        const Ranges& r, Stmt body, double inside, ir::Func& f) {
  for (std::size_t idx = s.outerOrder.size(); idx-- > 0;) {
    const int v = s.outerOrder[idx];
    const auto u = static_cast<std::size_t>(v);
    std::int64_t count = 0;
    if (v == s.tileI || v == s.tileJ) {
      count = (r[u].second - r[u].first) / (v == s.tileI ? s.mr : s.nr);
      ForKind kind = outerKind(s, v, 0, count, inside, f);
      body = ir::forLoop(st.vars[u].name + ".o", ir::intImm(0), ir::intImm(count), kind, body);
    } else {
      count = r[u].second - r[u].first;
      ForKind kind = outerKind(s, v, r[u].first, r[u].second, inside, f);
      body = loopOver(bs, st, u, r, kind, body);
    }
    inside *= static_cast<double>(std::max<std::int64_t>(count, 1));
  }
  return body;
}

void Lowerer::emitDot(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                      const Ranges& r, const std::string& name) {
  setRanges(st, r);
  ir::Func f = newFunc(name);
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
  const std::size_t n = st.vars.size();
  const auto rv = static_cast<std::size_t>(s.dotVar);
  const std::string& rn = st.vars[rv].name;
  const int W = s.width;
  tileVar(st, r, s.tileI, s.mr);
  const std::string ii = st.vars[static_cast<std::size_t>(s.tileI)].name + ".i";
  std::string jj;
  if (s.tileJ >= 0) {
    tileVar(st, r, s.tileJ, s.nr);
    jj = st.vars[static_cast<std::size_t>(s.tileJ)].name + ".i";
  }
  Expr cell =
      s.tileJ >= 0 ? ir::add(ir::mul(ir::var(ii), ir::intImm(s.nr)), ir::var(jj)) : ir::var(ii);
  Expr lane0 = ir::mul(cell, ir::intImm(W));
  auto cells = [&](Stmt body) {
    if (s.tileJ >= 0)
      body = ir::forLoop(jj, ir::intImm(0), ir::intImm(s.nr), ForKind::Unrolled, body);
    return ir::forLoop(ii, ir::intImm(0), ir::intImm(s.mr), ForKind::Unrolled, body);
  };
  const std::string acc = "acc", ro = rn + ".o", ri = rn + ".i", rt = rn + ".t";
  const auto [lr, hr] = r[rv];
  const std::int64_t vecs = (hr - lr) / W, rm = lr + vecs * W;
  Expr slot = ir::add(lane0, ir::var(ri));
  Expr a = ir::load(vt_, acc, slot);
  Stmt init = cells(ir::forLoop(ri, ir::intImm(0), ir::intImm(W), ForKind::Vectorized,
                                ir::store(acc, slot, identity(st.reduce)), W));
  // Whole vectors along dotVar, then the remaining elements into lane 0.
  varExpr_[rv] = ir::add(ir::add(ir::intImm(lr), ir::mul(ir::var(ro), ir::intImm(W))), ir::var(ri));
  Stmt vec = ir::forLoop(
      ro, ir::intImm(0), ir::intImm(vecs), ForKind::Serial,
      cells(ir::forLoop(ri, ir::intImm(0), ir::intImm(W), ForKind::Vectorized,
                        ir::store(acc, slot, combine(st.reduce, a, value(*st.rhs))), W)));
  Stmt tail;
  if (rm < hr) {
    varExpr_[rv] = ir::var(rt);
    Expr a0 = ir::load(vt_, acc, lane0);
    tail = ir::forLoop(rt, ir::intImm(rm), ir::intImm(hr), ForKind::Serial,
                       cells(ir::store(acc, lane0, combine(st.reduce, a0, value(*st.rhs)))));
  }
  Stmt update = ir::block({vec, tail});
  for (std::size_t v = n; v-- > nOut;)
    if (v != rv) update = loopOver(bs, st, v, r, ForKind::Serial, update);
  // The lanes combined: sums added pairwise; extremes folded into lane 0 in lane order by
  // statements (a comparison's select reads both operands twice, so an expression tree of
  // them would grow as 4^log2(W)).
  Stmt fold;
  Expr result;
  if (st.reduce == Reduce::Add) {
    std::vector<Expr> lanes;
    for (int l = 0; l < W; ++l) lanes.push_back(ir::load(vt_, acc, ir::add(lane0, ir::intImm(l))));
    result = combineTree(st.reduce, std::move(lanes));
  } else {
    const std::string fl = rn + ".l";
    Expr a0 = ir::load(vt_, acc, lane0);
    fold = cells(ir::forLoop(
        fl, ir::intImm(1), ir::intImm(W), ForKind::Unrolled,
        ir::store(acc, lane0,
                  combine(st.reduce, a0, ir::load(vt_, acc, ir::add(lane0, ir::var(fl)))))));
    result = a0;
  }
  Stmt out = storeOutput(st, result);
  if (!out) return;
  Stmt body = ir::allocate(acc, vt_, static_cast<std::int64_t>(s.mr) * s.nr * W,
                           ir::block({init, update, fold, cells(out)}));
  f.body = tileLoops(st, bs, s, r, body, workOf(r, nOut) * s.mr * s.nr, f);
  out_.funcs.push_back(std::move(f));
}

} // namespace einjit::codegen::lowering
