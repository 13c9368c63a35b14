// GPU launch shapes: a thread per point, a block per tile.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

Stmt Lowerer::threadPerPoint(const std::vector<std::size_t>& order, const Ranges& r,
                             const std::function<Stmt(Expr&)>& body) {
  const std::int64_t total = extentOfGroup(order, r);
  if (total <= 0) return nullptr;
  const std::int64_t block = std::min<std::int64_t>(target_.gpuBlock, total);
  Expr t = ir::add(ir::mul(ir::var("gpu.block"), ir::intImm(block)), ir::var("gpu.thread"));
  decompose(order, r, t);
  Expr guard;
  if (total % block != 0) guard = ir::binary(BinOp::Lt, t, ir::intImm(total));
  Stmt s = body(guard);
  if (!s) return nullptr;
  if (guard) s = ir::ifThen(guard, s);
  s = ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(block), ForKind::GpuThread, s);
  return ir::forLoop("gpu.block", ir::intImm(0), ir::intImm((total + block - 1) / block),
                     ForKind::GpuBlock, s);
}

Stmt Lowerer::blockLaunch(Stmt body, std::int64_t blocks, std::int64_t threads) {
  body = ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(threads), ForKind::GpuThread, body);
  return ir::forLoop("gpu.block", ir::intImm(0), ir::intImm(blocks), ForKind::GpuBlock, body);
}

Stmt Lowerer::tileLaunch(Stmt body, std::int64_t blocks) {
  return blockLaunch(std::move(body), blocks, Target::gpuTileBlock);
}

} // namespace einjit::codegen::lowering
