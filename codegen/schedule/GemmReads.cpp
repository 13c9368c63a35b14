// The packed GEMM's reads: which product or element-wise summand has two operands the packing
// loops can address (gemmOperands), and whether a read stays inside its tensor over a
// statement's ranges (readInside), and the small facts the plan asks of a read (which indices
// it uses, its stride along one, its constant scale). Declared in GemmPlan.h.
#include "codegen/schedule/GemmPlan.h"

#include <cmath>
#include <functional>

namespace einjit::codegen {

using namespace einjit::dsl;

namespace {

// A read the packing loops can address: affine subscripts, plain or padded (zero outside),
// no gather.
bool plainRead(const CExpr& e) {
  if (e.kind != CKind::Read || !e.args.empty()) return false;
  for (const Subscript& s : e.subs)
    if (s.gather || (s.mode != IndexMode::Plain && s.mode != IndexMode::Pad)) return false;
  return true;
}

// Collects the distinct reads of an element-wise expression; false at an index's value or a
// read that is not plain.
bool collectReads(const CExpr& e, std::vector<const CExpr*>& reads) {
  if (e.kind == CKind::Index) return false;
  if (e.kind == CKind::Read) {
    if (!plainRead(e)) return false;
    for (const CExpr* r : reads)
      if (sameExpr(*r, e)) return true;
    reads.push_back(&e);
    return true;
  }
  for (const CExprPtr& a : e.args)
    if (!collectReads(*a, reads)) return false;
  return true;
}

} // namespace

void boundVars(const ConcreteBound& c, std::vector<bool>& vars) {
  for (auto [v, k] : c.terms)
    if (k != 0) vars[static_cast<std::size_t>(v)] = true;
  for (const ConcreteBound& a : c.args) boundVars(a, vars);
}

bool readInside(const CExpr& read, const BoundStatement& bs, const std::vector<std::int64_t>& shape,
                const std::function<std::int64_t(std::size_t)>& constant) {
  const std::size_t n = bs.lo.size();
  for (std::size_t d = 0; d < read.subs.size(); ++d) {
    const Subscript& s = read.subs[d];
    if (s.gather || s.mode != IndexMode::Plain) return false;
    // The indices to enumerate: those the subscript reads that are not dependent, and those
    // the bounds of its dependent ones read (a convolution gradient's u for its tap a).
    std::vector<bool> walk(n, false);
    std::vector<std::size_t> deps;
    for (std::size_t v = 0; v < n; ++v) {
      if (s.coef[v] == 0) continue;
      if (!bs.dependent[v]) continue;
      deps.push_back(v);
      boundVars(bs.loBound[v], walk);
      boundVars(bs.hiBound[v], walk);
    }
    std::vector<std::size_t> outer;
    std::int64_t points = 1;
    for (std::size_t v = 0; v < n; ++v) {
      if (!walk[v] && (s.coef[v] == 0 || bs.dependent[v])) continue;
      if (bs.dependent[v]) return false; // a dependent bound reading a dependent index
      if (walk[v]) {
        outer.push_back(v);
        points *= std::max<std::int64_t>(bs.hi[v] - bs.lo[v], 1);
        if (points > (1 << 16)) return false;
      }
    }
    // Per point of the enumerated indices: the subscript's extremes over the others (their
    // hulls, or the dependent ranges at that point), the affine terms apart.
    std::vector<std::int64_t> vals(n, 0);
    const std::int64_t c0 = constant(d);
    std::function<bool(std::size_t)> at = [&](std::size_t q) {
      if (q < outer.size()) {
        for (std::int64_t x = bs.lo[outer[q]]; x < bs.hi[outer[q]]; ++x) {
          vals[outer[q]] = x;
          if (!at(q + 1)) return false;
        }
        return true;
      }
      std::int64_t lo = c0, hi = c0;
      for (std::size_t v = 0; v < n; ++v) {
        const std::int64_t c = s.coef[v];
        if (c == 0) continue;
        std::int64_t a = bs.lo[v], e = bs.hi[v] - 1;
        if (walk[v] && !bs.dependent[v]) a = e = vals[v];
        if (bs.dependent[v]) {
          a = std::max(bs.loBound[v].eval(vals), bs.lo[v]);
          e = std::min(bs.hiBound[v].eval(vals), bs.hi[v]) - 1;
          if (e < a) return true; // no term at this point
        }
        lo += std::min(c * a, c * e);
        hi += std::max(c * a, c * e);
      }
      return lo >= 0 && hi < shape[d];
    };
    if (!at(0)) return false;
  }
  return true;
}

std::optional<GemmOperands> gemmOperands(const CExpr& rhs, int outputs) {
  GemmOperands o;
  if (rhs.kind == CKind::Binary && rhs.binop == BinOp::Mul && plainRead(*rhs.args[0]) &&
      plainRead(*rhs.args[1])) {
    o.read[0] = rhs.args[0].get();
    o.read[1] = rhs.args[1].get();
    o.product = true;
    return o;
  }
  std::vector<const CExpr*> reads, operands;
  if (!collectReads(rhs, reads)) return std::nullopt;
  for (const CExpr* r : reads) {
    bool reduces = false;
    for (const Subscript& s : r->subs)
      for (std::size_t v = static_cast<std::size_t>(outputs); v < s.coef.size(); ++v)
        reduces = reduces || s.coef[v] != 0;
    (reduces ? operands : o.tile).push_back(r);
  }
  if (operands.size() != 2) return std::nullopt;
  o.read[0] = operands[0];
  o.read[1] = operands[1];
  return o;
}

bool uses(const CExpr& read, int v) {
  for (const Subscript& s : read.subs)
    if (s.coef[static_cast<std::size_t>(v)] != 0) return true;
  return false;
}

std::string formatScale(double s) {
  std::string r = std::to_string(s);
  r.erase(r.find_last_not_of('0') + 1);
  if (!r.empty() && r.back() == '.') r.pop_back();
  return r;
}

namespace {

bool powerOfTwo(double c) {
  int e = 0;
  return std::isfinite(c) && std::abs(std::frexp(c, &e)) == 0.5;
}

} // namespace

// e without its constant power-of-two factors (through products and negations), their product
// multiplied into `scale`.
CExprPtr withoutScale(const CExprPtr& e, double& scale) {
  if (e->kind == CKind::Unary && e->unop == UnOp::Neg) {
    scale = -scale;
    return withoutScale(e->args[0], scale);
  }
  if (e->kind != CKind::Binary || e->binop != BinOp::Mul) return e;
  for (std::size_t i = 0; i < 2; ++i)
    if (e->args[i]->kind == CKind::Const && powerOfTwo(e->args[i]->value)) {
      scale *= e->args[i]->value;
      return withoutScale(e->args[1 - i], scale);
    }
  CExprPtr a = withoutScale(e->args[0], scale), b = withoutScale(e->args[1], scale);
  if (a == e->args[0] && b == e->args[1]) return e;
  auto m = std::make_shared<CExpr>(*e);
  m->args = {a, b};
  return m;
}

std::int64_t strideAlong(const CExpr& read, int v, const std::vector<std::int64_t>& st) {
  std::int64_t c = 0;
  for (std::size_t d = 0; d < read.subs.size(); ++d)
    c += read.subs[d].coef[static_cast<std::size_t>(v)] * st[d];
  return c;
}

} // namespace einjit::codegen
