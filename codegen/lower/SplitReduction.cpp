// Split reductions: chunks of a long reduction into partials, combined in chunk order (CPU and
// GPU).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

void Lowerer::emitSplit(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                        const Ranges& r, const std::string& name) {
  setRanges(st, r);
  if (!storeOutput(st, num(0))) return; // nothing is written
  std::string partial;
  if (s.splitChunks > 1) {
    partial = name + ".partial";
    out_.scratch.push_back({partial, vt_, extentOfGroup(outputIndices(st), r) * s.splitChunks});
  }
  if (target_.gpu)
    emitSplitGpu(st, s, r, name, partial);
  else
    emitSplitCpu(st, bs, s, r, name, partial);
  if (s.splitChunks > 1) emitCombine(st, bs, s, r, name + "_combine", partial);
}

Stmt Lowerer::finishChunk(const Statement& st, const std::string& partial, const Expr& slot,
                          const Expr& v) {
  return partial.empty() ? storeOutput(st, v) : ir::store(partial, slot, v);
}

void Lowerer::emitSplitCpu(const Statement& st, const BoundStatement& bs,
                           const StatementSchedule& s, const Ranges& r, const std::string& name,
                           const std::string& partial) {
  ir::Func f = newFunc(name);
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
  const auto p = static_cast<std::size_t>(s.splitVar);
  const std::int64_t extP = r[p].second - r[p].first;
  Expr c = ir::var("split.c");
  Expr qlo = ir::mul(c, ir::intImm(s.splitChunk));
  Expr qhi =
      ir::binary(BinOp::Min, ir::add(qlo, ir::intImm(s.splitChunk)), ir::intImm(s.splitPrefix));
  // The chunk [qlo, qhi) of the flattened prefix: the indices before splitVar from the group
  // counter g, splitVar over its part of g's row.
  std::vector<std::size_t> group;
  for (std::size_t v = nOut; v < p; ++v) group.push_back(v);
  Expr g = ir::var("split.g");
  if (!group.empty()) decompose(group, r, g);
  const std::string acc = "acc";
  Expr a = ir::load(vt_, acc, ir::intImm(0));
  Stmt inner = ir::store(acc, ir::intImm(0), combine(st.reduce, a, value(*st.rhs)));
  auto kind = [&](std::size_t v) { return v == n - 1 ? ForKind::Vectorized : ForKind::Serial; };
  auto width = [&](std::size_t v) { return v == n - 1 ? vectorWidth() : 1; };
  for (std::size_t v = n; v-- > p + 1;) inner = loopOver(bs, st, v, r, kind(v), inner, width(v));
  Expr lo = qlo, hi = qhi;
  if (!group.empty()) {
    Expr row = ir::mul(g, ir::intImm(extP));
    lo = ir::binary(BinOp::Max, ir::sub(qlo, row), ir::intImm(0));
    hi = ir::binary(BinOp::Min, ir::sub(qhi, row), ir::intImm(extP));
  }
  Expr first = ir::intImm(r[p].first);
  inner = ir::forLoop(st.vars[p].name, ir::add(first, lo), ir::add(first, hi), kind(p), inner,
                      width(p));
  if (!group.empty())
    inner =
        ir::forLoop("split.g", ir::binary(BinOp::Div, qlo, ir::intImm(extP)),
                    ir::add(ir::binary(BinOp::Div, ir::sub(qhi, ir::intImm(1)), ir::intImm(extP)),
                            ir::intImm(1)),
                    ForKind::Serial, inner);
  Expr slot = ir::add(ir::mul(flatOutput(st, r), ir::intImm(s.splitChunks)), c);
  Stmt body = ir::allocate(acc, vt_, 1,
                           ir::block({ir::store(acc, ir::intImm(0), identity(st.reduce)), inner,
                                      finishChunk(st, partial, slot, a)}));
  for (std::size_t v = nOut; v-- > 0;) body = loopOver(bs, st, v, r, ForKind::Serial, body);
  ForKind chunkKind = ForKind::Serial;
  if (s.splitChunks > 1) {
    chunkKind = ForKind::Parallel;
    f.parallel = true;
    f.parallelLo = 0;
    f.parallelHi = s.splitChunks;
    f.grain = 1;
  }
  f.body = ir::forLoop("split.c", ir::intImm(0), ir::intImm(s.splitChunks), chunkKind, body);
  out_.funcs.push_back(std::move(f));
}

void Lowerer::emitSplitGpu(const Statement& st, const StatementSchedule& s, const Ranges& r,
                           const std::string& name, const std::string& partial) {
  ir::Func f = newFunc(name);
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
  const std::int64_t threads = target_.gpuBlock, chunks = s.splitChunks;
  const std::vector<std::size_t> outs = outputIndices(st);
  Expr blk = ir::var("gpu.block"), thr = ir::var("gpu.thread");
  Expr c = chunks > 1 ? ir::binary(BinOp::Mod, blk, ir::intImm(chunks)) : ir::intImm(0);
  decompose(outs, r, chunks > 1 ? ir::binary(BinOp::Div, blk, ir::intImm(chunks)) : blk);
  // Iteration q of the flattened reduction: thread t takes chunk start + t, + threads, ...
  std::vector<std::size_t> red;
  for (std::size_t v = nOut; v < n; ++v) red.push_back(v);
  Expr qlo = ir::mul(c, ir::intImm(s.splitChunk));
  Expr qhi =
      ir::binary(BinOp::Min, ir::add(qlo, ir::intImm(s.splitChunk)), ir::intImm(s.splitPrefix));
  Expr q = ir::add(ir::add(qlo, ir::mul(ir::var("split.k"), ir::intImm(threads))), thr);
  decompose(red, r, q);
  const std::string acc = "acc", tree = "split.tree";
  Expr a = ir::load(vt_, acc, ir::intImm(0));
  Stmt update = ir::ifThen(ir::binary(BinOp::Lt, q, qhi),
                           ir::store(acc, ir::intImm(0), combine(st.reduce, a, value(*st.rhs))));
  Stmt strided =
      ir::forLoop("split.k", ir::intImm(0), ir::intImm((s.splitChunk + threads - 1) / threads),
                  ForKind::Serial, update);
  // The tree: at each level the lower half absorbs the upper half (the earlier element
  // first, so that max/min keep it on ties).
  std::int64_t levels = 1;
  while (levels < threads) levels *= 2;
  std::vector<Stmt> steps = {ir::store(tree, thr, a), ir::barrier()};
  for (std::int64_t half = levels / 2; half >= 1; half /= 2) {
    Expr other = ir::add(thr, ir::intImm(half));
    Expr active = ir::binary(BinOp::Lt, thr, ir::intImm(half));
    if (2 * half > threads)
      active = ir::binary(BinOp::And, active, ir::binary(BinOp::Lt, other, ir::intImm(threads)));
    steps.push_back(ir::ifThen(active, ir::store(tree, thr,
                                                 combine(st.reduce, ir::load(vt_, tree, thr),
                                                         ir::load(vt_, tree, other)))));
    if (half > 1) steps.push_back(ir::barrier());
  }
  steps.push_back(ir::ifThen(ir::binary(BinOp::Eq, thr, ir::intImm(0)),
                             finishChunk(st, partial, blk, ir::load(vt_, tree, ir::intImm(0)))));
  Stmt body = ir::allocate(
      acc, vt_, 1,
      ir::block({ir::store(acc, ir::intImm(0), identity(st.reduce)), strided, ir::block(steps)}));
  body = ir::allocate(tree, vt_, threads, body, true);
  body = ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(threads), ForKind::GpuThread, body);
  f.body = ir::forLoop("gpu.block", ir::intImm(0), ir::intImm(extentOfGroup(outs, r) * chunks),
                       ForKind::GpuBlock, body);
  out_.funcs.push_back(std::move(f));
}

void Lowerer::emitCombine(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                          const Ranges& r, const std::string& name, const std::string& partial,
                          bool chunkMajor) {
  setRanges(st, r);
  ir::Func f = newFunc(name);
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
  const std::vector<std::size_t> outs = outputIndices(st);
  const std::int64_t total = extentOfGroup(outs, r);
  const std::int64_t block = std::min<std::int64_t>(target_.gpuBlock, total);
  Expr o = ir::add(ir::mul(ir::var("gpu.block"), ir::intImm(block)), ir::var("gpu.thread"));
  if (target_.gpu)
    decompose(outs, r, o);
  else
    o = flatOutput(st, r);
  const std::string acc = "acc";
  Expr a = ir::load(vt_, acc, ir::intImm(0));
  Expr slot = chunkMajor ? ir::add(ir::mul(ir::var("split.c"), ir::intImm(total)), o)
                         : ir::add(ir::mul(o, ir::intImm(s.splitChunks)), ir::var("split.c"));
  Stmt fold = ir::forLoop(
      "split.c", ir::intImm(0), ir::intImm(s.splitChunks), ForKind::Serial,
      ir::store(acc, ir::intImm(0), combine(st.reduce, a, ir::load(vt_, partial, slot))));
  Stmt body = ir::allocate(
      acc, vt_, 1,
      ir::block({ir::store(acc, ir::intImm(0), identity(st.reduce)), fold, storeOutput(st, a)}));
  if (target_.gpu) {
    if (total % block != 0) body = ir::ifThen(ir::binary(BinOp::Lt, o, ir::intImm(total)), body);
    body = ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(block), ForKind::GpuThread, body);
    body = ir::forLoop("gpu.block", ir::intImm(0), ir::intImm((total + block - 1) / block),
                       ForKind::GpuBlock, body);
  } else {
    for (std::size_t v = nOut; v-- > 0;) body = loopOver(bs, st, v, r, ForKind::Serial, body);
  }
  f.body = body;
  out_.funcs.push_back(std::move(f));
}

} // namespace einjit::codegen::lowering
