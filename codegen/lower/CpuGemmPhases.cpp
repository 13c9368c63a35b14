// Residue phases of a strided gradient on the CPU's packed GEMM path. The input gradient of a
// stride-g convolution, dx[u] := dy[h] * k[u - g h] with h's range a function of u, has taps
// that reach u only one in g of h's hull, so as one GEMM it would multiply mostly zeros
// (GemmPlan refuses it). Split u = g q + rho for each residue rho and h = a q + m, where a is
// how far h's range moves per step of q: each phase is a statement over (q, m) whose range of
// m is (nearly) constant, a stride-1 input gradient that the packed path takes, writing the
// output elements of its residue (dx[g q + rho], a strided store). The phases together write
// every output element once.
#include "codegen/lower/Lowerer.h"
#include "codegen/passes/MergeVariants.h"

#include <map>

namespace einjit::codegen::lowering {

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

std::int64_t cdivFloor(std::int64_t a, std::int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); }

} // namespace

bool Lowerer::emitGemmPhases(const Statement& st, const BoundStatement& bs, const Ranges& ranges,
                             const std::string& base) {
  const std::size_t n = st.vars.size();
  if (target_.gpu) return false;
  std::vector<Phase> subs = residuePhases(st, bs, ranges);
  if (subs.empty()) return false;
  std::int64_t combos = 1;
  for (const Phase& x : subs) combos *= x.g;
  if (combos > 16) return false;

  // Each phase as a statement and its binding; all of them must take the packed path.
  struct Piece {
    Statement st;
    BoundStatement bs;
    StatementSchedule sched;
  };
  std::vector<Piece> pieces;
  double flops = 0;
  for (std::int64_t c = 0; c < combos; ++c) {
    std::int64_t rest = c;
    for (Phase& x : subs) {
      x.rho = rest % x.g;
      rest /= x.g;
    }
    Piece pc{st, bs, {}};
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
    if (!pc.st.lhs || !pc.st.rhs) return false;
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
    pc.sched.gemm = planGemm(pc.st, pc.bs, b_.dtype, ctx_.buffers.strides, target_, 0);
    if (!pc.sched.gemm) return false;
    double f = 2;
    for (std::size_t v = 0; v < n; ++v) f *= static_cast<double>(pc.bs.hi[v] - pc.bs.lo[v]);
    flops += f;
    pieces.push_back(std::move(pc));
  }
  if (pieces.empty() || flops < kGemmMinFlops) return false;
  // The phases' packing functions first, then one product running each phase's task in turn.
  const std::size_t funcs0 = out_.funcs.size(), scratch0 = out_.scratch.size();
  std::vector<GemmTasks> parts(pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i)
    emitGemm(pieces[i].st, pieces[i].bs, pieces[i].sched, rangesOf(pieces[i].bs),
             base + "_phase" + std::to_string(i), &parts[i]);
  const bool merged = mergeGemmPhases(base, parts, funcs0, scratch0);
  if (!merged) emitGemmProduct(base + "_phases", parts);
  out_.notes.back() = describePhases(pieces.size(), *pieces.back().sched.gemm) +
                      (merged ? "; one copy of the phases' code" : "");
  return true;
}

// The phases are the same loops with other constants (tap ranges, strides, residue offsets):
// where their code differs in nothing else (passes::mergeVariants), one copy of it runs each
// phase in turn, the phase a variable, so that the JIT compiles one phase's code instead of
// one per phase (its cost is LLVM's, per instruction and per module). Each merged packing
// function runs every phase's share of its parallel loop's iteration; the product runs each
// task's phases in turn, as the separate parts did. The phases' scratch buffers become one
// each, the phases' parts laid one after the other. False (nothing changed) where the phases'
// code or task structures differ.
bool Lowerer::mergeGemmPhases(const std::string& base, std::vector<GemmTasks>& parts,
                              std::size_t funcs0, std::size_t scratch0) {
  const std::size_t n = parts.size();
  const std::size_t nf = out_.funcs.size() - funcs0, ns = out_.scratch.size() - scratch0;
  if (n < 2 || nf % n != 0 || ns % n != 0) return false;
  const std::size_t perFuncs = nf / n, perScratch = ns / n;
  for (const GemmTasks& p : parts)
    if (p.tasks != parts[0].tasks || p.groups != parts[0].groups || p.parallel != parts[0].parallel)
      return false;
  // Phase i's buffer `prefix_i + suffix` is the merged `base_phases + suffix` at an offset.
  const std::string merged = base + "_phases";
  auto prefix = [&](std::size_t i) { return base + "_phase" + std::to_string(i); };
  std::map<std::string, passes::MergedBuffer> names;
  std::vector<ScratchBuffer> scratch;
  for (std::size_t j = 0; j < perScratch; ++j) {
    const ScratchBuffer& first = out_.scratch[scratch0 + j];
    if (first.name.rfind(prefix(0), 0) != 0) return false;
    const std::string suffix = first.name.substr(prefix(0).size());
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const ScratchBuffer& b = out_.scratch[scratch0 + i * perScratch + j];
      if (b.name != prefix(i) + suffix || b.elem != first.elem) return false;
      names[b.name] = {merged + suffix, offset};
      offset += b.elements;
    }
    scratch.push_back({merged + suffix, first.elem, offset});
  }
  const passes::BufferRename rename = [&](std::size_t, const std::string& b) {
    auto it = names.find(b);
    return it == names.end() ? std::nullopt : std::optional<passes::MergedBuffer>(it->second);
  };
  const std::string sel = "gemm.phase";
  // The loop over the phases around body, binding the phase's constants (`lets`) inside it.
  std::vector<std::pair<std::string, Expr>> lets;
  auto phases = [&](Stmt body) {
    for (std::size_t k = lets.size(); k-- > 0;)
      body = ir::forLoop(lets[k].first, lets[k].second, ir::add(lets[k].second, ir::intImm(1)),
                         ForKind::Serial, body);
    return ir::forLoop(sel, ir::intImm(0), ir::intImm(static_cast<std::int64_t>(n)),
                       ForKind::Rolled, std::move(body));
  };
  // The packing functions: function j of each phase, its parallel loop kept outermost.
  std::vector<ir::Func> funcs;
  for (std::size_t j = 0; j < perFuncs; ++j) {
    const ir::Func& first = out_.funcs[funcs0 + j];
    if (first.name.rfind(prefix(0), 0) != 0) return false;
    std::vector<Stmt> bodies;
    ir::Func f = first;
    for (std::size_t i = 0; i < n; ++i) {
      const ir::Func& g = out_.funcs[funcs0 + i * perFuncs + j];
      if (g.name != prefix(i) + first.name.substr(prefix(0).size()) ||
          g.parallel != first.parallel || g.parallelLo != first.parallelLo ||
          g.parallelHi != first.parallelHi || g.explicitCode != first.explicitCode)
        return false;
      f.grain = std::min(f.grain, g.grain);
      bodies.push_back(g.body);
    }
    std::optional<Stmt> body = passes::mergeVariants(bodies, sel, rename, &lets);
    if (!body) return false;
    if ((*body)->kind == ir::NodeKind::For) {
      const auto& loop = static_cast<const ir::For&>(**body);
      f.body = ir::forLoop(loop.var, loop.lo, loop.hi, loop.forKind, phases(loop.body), loop.width);
    } else {
      f.body = phases(*body);
    }
    f.name = merged + first.name.substr(prefix(0).size());
    funcs.push_back(std::move(f));
  }
  std::vector<Stmt> bodies;
  double flops = 0;
  for (const GemmTasks& p : parts) {
    bodies.push_back(p.body);
    flops += p.flops;
  }
  std::optional<Stmt> body = passes::mergeVariants(bodies, sel, rename, &lets);
  if (!body) return false;
  out_.funcs.resize(funcs0);
  for (ir::Func& f : funcs) out_.funcs.push_back(std::move(f));
  out_.scratch.resize(scratch0);
  for (ScratchBuffer& b : scratch) out_.scratch.push_back(std::move(b));
  // The phase's product outlined (a module of its own: below the size where the JIT's code
  // generation drops loop strength reduction, which its micro-kernel's loop needs).
  Stmt product =
      ir::forLoop("gemm.part", ir::var("gemm.task"), ir::add(ir::var("gemm.task"), ir::intImm(1)),
                  ForKind::Outlined, *body);
  emitGemmProduct(merged, {GemmTasks{phases(product), parts[0].tasks, parts[0].groups, flops,
                                     parts[0].parallel}});
  return true;
}

} // namespace einjit::codegen::lowering
