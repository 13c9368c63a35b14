// Ranges that depend on other indices, in emitted code: the mask of a dependent index (the
// facts they are planned with are schedule/DependentRanges.h's).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

Expr Lowerer::maskCondition(std::size_t v) {
  const BoundStatement& bs = *ctx_.maskBounds;
  std::vector<Expr> saved = varExpr_;
  Expr h = varExpr_[v], extra;
  for (const PhaseSub& x : ctx_.phase) {
    varExpr_[x.out] = ir::add(ir::mul(ir::intImm(x.g), saved[x.out]), ir::intImm(x.rho));
    if (x.red == v) {
      h = ir::add(ir::mul(ir::intImm(x.a), saved[x.out]), saved[v]);
      extra = ir::binary(BinOp::And, ir::binary(BinOp::Ge, h, ir::intImm(x.hullLo)),
                         ir::binary(BinOp::Lt, h, ir::intImm(x.hullHi)));
    }
  }
  Expr c = ir::binary(BinOp::And, ir::binary(BinOp::Ge, h, boundExpr(bs.loBound[v])),
                      ir::binary(BinOp::Lt, h, boundExpr(bs.hiBound[v])));
  varExpr_ = saved;
  return extra ? ir::binary(BinOp::And, extra, c) : c;
}

} // namespace einjit::codegen::lowering
