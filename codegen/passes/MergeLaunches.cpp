#include "codegen/passes/MergeLaunches.h"

namespace einjit::codegen::passes {

using ir::BinOp;
using ir::Expr;
using ir::ForKind;
using ir::Stmt;

bool mergeLaunches(std::vector<ir::Func>& fs, std::size_t from, ir::Func merged) {
  if (fs.size() < from + 2) return false;
  struct FindWgmma : ir::Visitor {
    bool found = false;
    void visitWgmma(const ir::Wgmma&) override { found = true; }
  } wgmma;
  for (std::size_t i = from; i < fs.size(); ++i) wgmma.visit(fs[i].body);
  if (wgmma.found) return false;
  std::vector<std::int64_t> blocks;
  std::int64_t threads = 0;
  for (std::size_t i = from; i < fs.size(); ++i) {
    const Stmt& b = fs[i].body;
    std::int64_t nb = 0, nt = 0, lo = -1;
    if (b->kind != ir::NodeKind::For) return false;
    const auto& fb = static_cast<const ir::For&>(*b);
    if (fb.forKind != ForKind::GpuBlock || !ir::isConst(fb.hi, &nb) || !ir::isConst(fb.lo, &lo) ||
        lo != 0 || fb.body->kind != ir::NodeKind::For)
      return false;
    const auto& ft = static_cast<const ir::For&>(*fb.body);
    if (ft.forKind != ForKind::GpuThread || !ir::isConst(ft.hi, &nt) || (threads && nt != threads))
      return false;
    threads = nt;
    blocks.push_back(nb);
  }
  const Expr blk = ir::var("gpu.block");
  std::int64_t total = 0;
  for (std::int64_t nb : blocks) total += nb;
  Stmt chain;
  std::int64_t end = total;
  for (std::size_t i = fs.size(); i-- > from;) {
    const std::int64_t off = end - blocks[i - from];
    const auto& ft = static_cast<const ir::For&>(*static_cast<const ir::For&>(*fs[i].body).body);
    Stmt part =
        off == 0 ? ft.body : ir::substitute(ft.body, "gpu.block", ir::sub(blk, ir::intImm(off)));
    chain = chain ? ir::ifThen(ir::binary(BinOp::Lt, blk, ir::intImm(end)), part, chain) : part;
    end = off;
  }
  merged.body = ir::forLoop(
      "gpu.block", ir::intImm(0), ir::intImm(total), ForKind::GpuBlock,
      ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(threads), ForKind::GpuThread, chain));
  fs.resize(from);
  fs.push_back(std::move(merged));
  return true;
}

} // namespace einjit::codegen::passes
