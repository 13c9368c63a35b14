#include "codegen/passes/MergeLaunches.h"

namespace einjit::codegen::passes {

using ir::BinOp;
using ir::Expr;
using ir::ForKind;
using ir::Stmt;

namespace {

// Merges functions [from, end) of fs into `merged` (LaunchGroup), or returns false.
bool mergeGroup(std::vector<ir::Func>& fs, std::size_t from, std::size_t end, ir::Func merged) {
  if (end < from + 2) return false;
  struct FindWgmma : ir::Visitor {
    bool found = false;
    void visitWgmma(const ir::Wgmma&) override { found = true; }
  } wgmma;
  for (std::size_t i = from; i < end; ++i) wgmma.visit(fs[i].body);
  if (wgmma.found) return false;
  std::vector<std::int64_t> blocks;
  std::int64_t threads = 0;
  for (std::size_t i = from; i < end; ++i) {
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
  std::int64_t last = total;
  for (std::size_t i = end; i-- > from;) {
    const std::int64_t off = last - blocks[i - from];
    const auto& ft = static_cast<const ir::For&>(*static_cast<const ir::For&>(*fs[i].body).body);
    Stmt part =
        off == 0 ? ft.body : ir::substitute(ft.body, "gpu.block", ir::sub(blk, ir::intImm(off)));
    chain = chain ? ir::ifThen(ir::binary(BinOp::Lt, blk, ir::intImm(last)), part, chain) : part;
    last = off;
  }
  merged.body = ir::forLoop(
      "gpu.block", ir::intImm(0), ir::intImm(total), ForKind::GpuBlock,
      ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(threads), ForKind::GpuThread, chain));
  fs.erase(fs.begin() + static_cast<std::ptrdiff_t>(from + 1),
           fs.begin() + static_cast<std::ptrdiff_t>(end));
  fs[from] = std::move(merged);
  return true;
}

} // namespace

std::vector<bool> mergeLaunches(std::vector<ir::Func>& funcs,
                                const std::vector<LaunchGroup>& groups) {
  std::vector<bool> merged(groups.size(), false);
  // Last group first: merging one moves only the functions after it.
  for (std::size_t g = groups.size(); g-- > 0;)
    merged[g] = mergeGroup(funcs, groups[g].first, groups[g].end, groups[g].merged);
  return merged;
}

} // namespace einjit::codegen::passes
