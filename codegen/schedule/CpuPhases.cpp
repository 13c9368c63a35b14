// Residue phases of a strided gradient on the CPU's packed path, planned. The input gradient of
// a stride-g convolution, dx[u] := dy[h] * k[u - g h] with h's range a function of u, has taps
// that reach u only one in g of h's hull, so as one GEMM it would multiply mostly zeros
// (GemmPlan refuses it). Split u = g q + rho for each residue rho and h = a q + m, where a is
// how far h's range moves per step of q: each phase is a statement over (q, m) whose range of
// m is (nearly) constant, a stride-1 input gradient that the packed path takes, writing the
// output elements of its residue (dx[g q + rho], a strided store). The phases together write
// every output element once. lower/CpuGemmPhases.cpp emits them.
#include "codegen/schedule/CpuPhases.h"

#include <algorithm>
#include <cstdint>

namespace einjit::codegen::cpuschedule {

using namespace einjit::dsl;

namespace {

using Phase = PhaseSub;

void mergeTerms(ConcreteBound& c) {
  std::vector<std::pair<int, std::int64_t>> t;
  for (auto [v, k] : c.terms) {
    auto it = std::find_if(t.begin(), t.end(), [v](const auto& x) { return x.first == v; });
    if (it == t.end())
      t.push_back({v, k});
    else
      it->second += k;
  }
  std::erase_if(t, [](const auto& x) { return x.second == 0; });
  c.terms = std::move(t);
}

bool readsVar(const ConcreteBound& c, int v) {
  for (auto [x, k] : c.terms)
    if (x == v && k != 0) return true;
  for (const ConcreteBound& a : c.args)
    if (readsVar(a, v)) return true;
  return false;
}

// c with u = g q + rho and h = a q + m substituted (q in u's slot, m in h's).
ConcreteBound substitute(const ConcreteBound& c, const std::vector<Phase>& ph) {
  ConcreteBound r = c;
  if (r.kind == IndexBound::Kind::Affine) {
    std::vector<std::pair<int, std::int64_t>> extra;
    for (auto& [v, k] : r.terms)
      for (const Phase& x : ph) {
        if (static_cast<std::size_t>(v) == x.out) {
          r.constant += k * x.rho;
          k *= x.g;
        } else if (static_cast<std::size_t>(v) == x.red)
          extra.push_back({static_cast<int>(x.out), k * x.a});
      }
    r.terms.insert(r.terms.end(), extra.begin(), extra.end());
    mergeTerms(r);
  }
  for (ConcreteBound& a : r.args) a = substitute(a, ph);
  return r;
}

// c + delta * q, pushed inside maxima, minima and divisions (exactly: floor((x + d k) / d) =
// floor(x / d) + k) so that the bound stays visibly monotone in q.
ConcreteBound shift(const ConcreteBound& c, int q, std::int64_t delta) {
  ConcreteBound r = c;
  if (delta == 0) return r;
  switch (r.kind) {
  case IndexBound::Kind::Affine:
    r.terms.push_back({q, delta});
    mergeTerms(r);
    return r;
  case IndexBound::Kind::Max:
  case IndexBound::Kind::Min:
    for (ConcreteBound& a : r.args) a = shift(a, q, delta);
    return r;
  case IndexBound::Kind::FDiv:
  case IndexBound::Kind::CDiv: r.args[0] = shift(r.args[0], q, delta * r.divisor); return r;
  case IndexBound::Kind::Sum: {
    for (std::size_t i = 0; i < r.args.size(); ++i)
      if (r.scale[i] != 0 && delta % r.scale[i] == 0 && readsVar(r.args[i], q)) {
        r.args[i] = shift(r.args[i], q, delta / r.scale[i]);
        return r;
      }
    ConcreteBound t;
    t.terms.push_back({q, delta});
    r.args.push_back(t);
    r.scale.push_back(1);
    return r;
  }
  }
  return r;
}

std::int64_t cdivFloor(std::int64_t a, std::int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -(-a / b);
}

} // namespace

std::vector<CpuGemmPhase> planGemmPhases(const CpuStatementInput& in, const Target& t) {
  const Statement& st = in.program->stmts[in.stmt];
  const BoundStatement& bs = in.binding->stmts[in.stmt];
  const Box& ranges = in.ranges;
  const std::size_t n = st.vars.size();
  std::vector<Phase> subs = in.phases;
  if (subs.empty()) return {};
  std::int64_t combos = 1;
  for (const Phase& x : subs) combos *= x.g;
  if (combos > kMaxPhases) return {};

  // Each phase as a statement and its binding; all of them must take the packed path.
  std::vector<CpuGemmPhase> pieces;
  double flops = 0;
  for (std::int64_t c = 0; c < combos; ++c) {
    std::int64_t rest = c;
    for (Phase& x : subs) {
      x.rho = rest % x.g;
      rest /= x.g;
    }
    CpuGemmPhase pc{st, bs, {}};
    bool empty = false;
    for (const Phase& x : subs) {
      pc.bs.lo[x.out] = cdivFloor(ranges[x.out].first - x.rho, x.g);
      pc.bs.hi[x.out] = cdivFloor(ranges[x.out].second - x.rho, x.g);
      empty = empty || pc.bs.hi[x.out] <= pc.bs.lo[x.out];
    }
    if (empty) continue;
    // Subscripts: coef(u) u + coef(h) h = (coef(u) g + coef(h) a) q + coef(h) m + coef(u) rho.
    auto rewrite = [&](const CExpr& e, auto&& self) -> CExprPtr {
      auto r = std::make_shared<CExpr>(e);
      for (Subscript& s : r->subs) {
        std::int64_t shift0 = 0;
        std::vector<std::int64_t> coef = s.coef;
        for (const Phase& x : subs) {
          coef[x.out] = s.coef[x.out] * x.g + s.coef[x.red] * x.a;
          shift0 += s.coef[x.out] * x.rho;
        }
        s.coef = std::move(coef);
        if (shift0 != 0) s.constant = dsl::symAddConst(s.constant, shift0);
        if (s.gather) return nullptr;
      }
      for (CExprPtr& a : r->args) {
        a = self(*a, self);
        if (!a) return nullptr;
      }
      return r;
    };
    pc.st.lhs = rewrite(*st.lhs, rewrite);
    pc.st.rhs = rewrite(*st.rhs, rewrite);
    if (!pc.st.lhs || !pc.st.rhs) return {};
    // Every dependent bound in the phase's indices; m's hull over the phase's q.
    for (std::size_t v = 0; v < n; ++v) {
      if (!bs.dependent[v]) continue;
      pc.bs.loBound[v] = substitute(bs.loBound[v], subs);
      pc.bs.hiBound[v] = substitute(bs.hiBound[v], subs);
    }
    for (const Phase& x : subs) {
      const int q = static_cast<int>(x.out);
      pc.bs.loBound[x.red] = shift(pc.bs.loBound[x.red], q, -x.a);
      pc.bs.hiBound[x.red] = shift(pc.bs.hiBound[x.red], q, -x.a);
      std::vector<std::int64_t> vals(n, 0);
      std::int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (std::int64_t qv = pc.bs.lo[x.out]; qv < pc.bs.hi[x.out]; ++qv) {
        vals[x.out] = qv;
        // Inside the original hull too: h = a q + m within [hull).
        const std::int64_t l = std::max(pc.bs.loBound[x.red].eval(vals), bs.lo[x.red] - x.a * qv);
        const std::int64_t h = std::min(pc.bs.hiBound[x.red].eval(vals), bs.hi[x.red] - x.a * qv);
        if (l < h) {
          lo = std::min(lo, l);
          hi = std::max(hi, h);
        }
      }
      if (lo >= hi) {
        lo = 0;
        hi = 0;
      }
      pc.bs.lo[x.red] = lo;
      pc.bs.hi[x.red] = hi;
    }
    // dy read in place (GemmPlan::bInPlace) only where no lane of it is masked: every sliver of
    // N whole and every range whole along N (a phase whose one tap along N reaches every
    // column, as the odd columns' phase of the README demo's 16-column rows). A masked lane at
    // the image's first or last column, in every step of the kernel, measured slower than the
    // packing (docs/CPU_SCHEDULES.md, "B read in place with dependent ranges").
    auto inside = [&](const CExpr& read) {
      return readInside(
          read, pc.bs, in.binding->tensors[static_cast<std::size_t>(read.tensor)].shape,
          [&](std::size_t d) { return in.binding->eval(*in.program, read.subs[d].constant); });
    };
    std::optional<GemmPlan> gemm =
        planGemm(pc.st, pc.bs, in.binding->dtype, in.strides, t, 0, inside);
    if (gemm && gemm->bInPlace) {
      const std::int64_t cols =
          pc.bs.hi[static_cast<std::size_t>(gemm->n)] - pc.bs.lo[static_cast<std::size_t>(gemm->n)];
      if (cols % gemm->nr != 0 || gemm->plainFrom != 0 || gemm->plainTo * gemm->nr != cols)
        gemm = planGemm(pc.st, pc.bs, in.binding->dtype, in.strides, t, 0);
    }
    if (!gemm) return {};
    pc.gemm = std::move(*gemm);
    double f = 2;
    for (std::size_t v = 0; v < n; ++v) f *= static_cast<double>(pc.bs.hi[v] - pc.bs.lo[v]);
    flops += f;
    pieces.push_back(std::move(pc));
  }
  if (pieces.empty() || flops < kGemmMinFlops) return {};
  return pieces;
}

} // namespace einjit::codegen::cpuschedule
