// The lanes of a packing run where an element is a term (Lowerer.h, termLanes / safeLanes).
// A packing run is w lanes of one operand along the GEMM's M or N index v = base + l. Its
// conditions (the operand's extent, dependent ranges of the reduction indices, padded and
// unproven subscripts) are affine in v inside max, min and floor/ceiling division, so each
// holds on an interval of l: solved here once per run, instead of testing every lane.
#include "codegen/lower/Lowerer.h"

#include <functional>

namespace einjit::codegen::lowering {

namespace {

Expr imm(std::int64_t v) { return ir::intImm(v); }
Expr bin(BinOp op, Expr a, Expr b) { return ir::binary(op, std::move(a), std::move(b)); }
Expr floorDiv(Expr a, std::int64_t d) {
  return d == 1 ? a : bin(BinOp::FloorDiv, std::move(a), imm(d));
}
Expr ceilDiv(Expr a, std::int64_t d) { return d == 1 ? a : bin(BinOp::CeilDiv, std::move(a), imm(d)); }

// Conditions on the lane l, collected: [lo, hi) and the part free of l.
struct LaneSolver {
  Expr lo, hi, cond;
  // c l <= r (c != 0)
  void atMost(std::int64_t c, const Expr& r) {
    if (c > 0)
      hi = bin(BinOp::Min, hi, ir::add(floorDiv(r, c), imm(1)));
    else
      lo = bin(BinOp::Max, lo, ceilDiv(ir::sub(imm(0), r), -c));
  }
  // c l >= r (c != 0)
  void atLeast(std::int64_t c, const Expr& r) {
    if (c > 0)
      lo = bin(BinOp::Max, lo, ceilDiv(r, c));
    else
      hi = bin(BinOp::Min, hi, ir::add(floorDiv(ir::sub(imm(0), r), -c), imm(1)));
  }
  void always(Expr c) { cond = cond ? bin(BinOp::And, cond, std::move(c)) : std::move(c); }
  // 0 <= idx0 + c l < extent
  void inside(const Expr& idx0, std::int64_t c, std::int64_t extent) {
    if (c == 0) {
      always(bin(BinOp::And, bin(BinOp::Ge, idx0, imm(0)), bin(BinOp::Lt, idx0, imm(extent))));
      return;
    }
    atLeast(c, ir::sub(imm(0), idx0));
    atMost(c, ir::sub(imm(extent - 1), idx0));
  }
};

std::int64_t coefficientOf(const ConcreteBound& b, std::size_t side) {
  std::int64_t c = 0;
  for (auto [v, k] : b.terms)
    if (static_cast<std::size_t>(v) == side) c += k;
  return c;
}

// Keeps the lanes where bound b >= y (atLeastY) or b <= y, y free of the lane; value(b) is b
// at the run's first lane. False where those lanes are not an interval the solver can state.
bool boundAgainst(const ConcreteBound& b, const Expr& y, bool atLeastY, std::size_t side,
                  LaneSolver& s, const std::function<Expr(const ConcreteBound&)>& value) {
  if (b.direction(static_cast<int>(side)) == 0) {
    s.always(bin(atLeastY ? BinOp::Ge : BinOp::Le, value(b), y));
    return true;
  }
  switch (b.kind) {
  case IndexBound::Kind::Affine: {
    const std::int64_t c = coefficientOf(b, side);
    Expr r = ir::sub(y, value(b)); // b = value(b) + c l
    if (atLeastY)
      s.atLeast(c, r);
    else
      s.atMost(c, r);
    return true;
  }
  case IndexBound::Kind::Max:
  case IndexBound::Kind::Min: {
    // max <= y and min >= y hold where every argument does; the other two are disjunctions.
    if ((b.kind == IndexBound::Kind::Max) == atLeastY) return false;
    for (const ConcreteBound& a : b.args)
      if (!boundAgainst(a, y, atLeastY, side, s, value)) return false;
    return true;
  }
  case IndexBound::Kind::FDiv:
  case IndexBound::Kind::CDiv: {
    const std::int64_t d = b.divisor;
    if (d <= 0) return false;
    const bool floor = b.kind == IndexBound::Kind::FDiv;
    // floor(a/d) <= y <=> a <= d y + d - 1; ceil(a/d) <= y <=> a <= d y;
    // floor(a/d) >= y <=> a >= d y;         ceil(a/d) >= y <=> a >= d y - d + 1.
    Expr dy = ir::mul(imm(d), y);
    Expr z = atLeastY ? (floor ? dy : ir::add(dy, imm(1 - d)))
                      : (floor ? ir::add(dy, imm(d - 1)) : dy);
    return boundAgainst(b.args[0], z, atLeastY, side, s, value);
  }
  case IndexBound::Kind::Sum: {
    // One term moves with the lane: s a + rest <= y <=> a <= floor((y - rest) / s) (s > 0) or
    // a >= ceil((rest - y) / -s) (s < 0); likewise for >=.
    std::size_t j = b.args.size();
    for (std::size_t i = 0; i < b.args.size(); ++i)
      if (b.args[i].direction(static_cast<int>(side)) != 0) {
        if (j != b.args.size()) return false;
        j = i;
      }
    if (j == b.args.size()) return false;
    Expr rest = imm(0);
    for (std::size_t i = 0; i < b.args.size(); ++i)
      if (i != j) rest = ir::add(rest, ir::mul(imm(b.scale[i]), value(b.args[i])));
    const std::int64_t sc = b.scale[j];
    if (sc == 0) return false;
    Expr r = ir::sub(y, rest);
    if (sc > 0)
      return boundAgainst(b.args[j], atLeastY ? ceilDiv(r, sc) : floorDiv(r, sc), atLeastY, side,
                          s, value);
    Expr nr = ir::sub(imm(0), r);
    return boundAgainst(b.args[j], atLeastY ? floorDiv(nr, -sc) : ceilDiv(nr, -sc), !atLeastY,
                        side, s, value);
  }
  }
  return false;
}

} // namespace

std::optional<Lowerer::Lanes> Lowerer::termLanes(const CExpr& op, const BoundStatement& bs,
                                                 const std::vector<int>& masks, std::size_t side,
                                                 const Expr& base, std::int64_t w,
                                                 std::int64_t sideHi) {
  LaneSolver s{imm(0), bin(BinOp::Min, imm(w), ir::sub(imm(sideHi), base)), nullptr};
  const Scoped<Expr> at(varExpr_[side], base);
  auto value = [&](const ConcreteBound& b) { return boundExpr(b); };
  for (std::size_t d = 0; d < op.subs.size(); ++d) {
    const Subscript& sub = op.subs[d];
    if (sub.mode != IndexMode::Pad) continue;
    if (sub.gather) return std::nullopt;
    s.inside(subscriptIndex(sub), sub.coef[side], extentOf(op.tensor, d));
  }
  for (int v : masks) {
    const auto u = static_cast<std::size_t>(v);
    // lo(v) <= x and hi(v) >= x + 1, x the masked index's value.
    if (!boundAgainst(bs.loBound[u], varExpr_[u], false, side, s, value) ||
        !boundAgainst(bs.hiBound[u], ir::add(varExpr_[u], imm(1)), true, side, s, value))
      return std::nullopt;
  }
  return Lanes{s.lo, s.hi, s.cond};
}

std::optional<Lowerer::Lanes> Lowerer::safeLanes(const CExpr& op, std::size_t side,
                                                 const Expr& base, std::int64_t w) {
  LaneSolver s{imm(0), imm(w), nullptr};
  const Scoped<Expr> at(varExpr_[side], base);
  for (std::size_t d = 0; d < op.subs.size(); ++d) {
    const Subscript& sub = op.subs[d];
    if (sub.mode != IndexMode::Plain || subscriptInBounds(op, d)) continue;
    if (sub.gather) return std::nullopt;
    s.inside(subscriptIndex(sub), sub.coef[side], extentOf(op.tensor, d));
  }
  return Lanes{s.lo, s.hi, s.cond};
}

} // namespace einjit::codegen::lowering
