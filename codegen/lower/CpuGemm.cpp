// The packed GEMM path on the CPU (schedule/GemmPlan.h, docs/CPU_SCHEDULES.md): A packed into
// MR-wide slivers and B into NR-wide slivers, then a blocked loop nest around an MR x NR
// micro-kernel.
//
// Layouts. A sliver is contiguous along the reduction, so a KC block of it is one contiguous
// run and the micro-kernel reads both operands with unit stride whatever their own layouts:
//   packed whole (once per call, its own parallel function before the product): sliver s of
//   the operand, for one value of the batch indices it reads (flattened: bX), holds the
//   element at reduction position p (the reduction indices flattened, the last fastest) and
//   lane l at ((bX * S + s) * K + p) * W + l;
//   packed per block (by each task, inside the product): the slivers of the current MC (NC)
//   block along the current KC block, at group * size + ((s - first) * KC + p') * W + l, p'
//   the position inside the block, in the scratch of the task's group; A's lanes far apart,
//   each lane's run at group * size + ((s - first) * W + l) * KC + p' (CpuGemmPanels.h).
// Lanes past the operand's extent, and reduction positions outside a dependent range, hold 0.
//
// The product runs a parallel loop over groups of tasks; a task is one value of the batch
// indices and a chunk of M and N slivers; inside it NC blocks of N, KC blocks of the reduction,
// MC blocks of M, then the NR slivers of the B panel (one stays in L1) and the MR slivers of
// the A block (in L2) around the micro-kernel. The micro-kernel keeps MR x NR accumulators (an
// Allocate indexed only by constants: MR rows unrolled, NR columns as explicit vectors, so LLVM
// keeps them in registers) across a KC block; the products are fmul + fadd with LLVM's
// contract flag, which the backend fuses into vector FMAs. A whole tile whose columns are
// contiguous in the output is stored (or added, after the first KC block) with vector stores;
// any other tile through a local copy and scalar stores of its elements inside the output.
// Each element's sum runs over the KC blocks in order and within a block in order, whatever
// the thread count.
#include "codegen/IROperator.h"
#include "codegen/lower/CpuGemmColumns.h"
#include "codegen/lower/CpuGemmLowering.h"
#include "codegen/lower/CpuGemmTasks.h"
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

namespace {

using namespace gemm; // the IR shorthands (CpuGemmLowering.h)
using ir::let;

std::vector<std::size_t> group(const std::vector<int>& vs) {
  return std::vector<std::size_t>(vs.begin(), vs.end());
}

} // namespace

GemmLowering::GemmLowering(const Statement& st_, const BoundStatement& bs_, const GemmPlan& g_,
                           const GemmOperands& operands_, const Ranges& r_, const std::string& name,
                           const std::vector<Expr>& varExpr_)
    : st(st_), bs(bs_), g(g_), operands(operands_), r(r_),
      varExpr(varExpr_), ops{operands.read[g.aFactor], operands.read[1 - g.aFactor]},
      sideVar{static_cast<std::size_t>(g.m), static_cast<std::size_t>(g.n)}, W{g.mr, g.nr} {
  for (int x = 0; x < 2; ++x) {
    extent[x] = ext(sideVar[x]);
    S[x] = cdiv(extent[x], W[x]);
  }
  tailColumns = columnsTail(g, extent[1], !operands.tile.empty());
  K = group(g.k);
  Bt = group(g.batch);
  reads[0] = group(g.reads[0]);
  reads[1] = group(g.reads[1]);
  const auto split = static_cast<std::size_t>(g.kSplit);
  kq = K[split];
  kOuter.assign(K.begin(), K.begin() + static_cast<std::ptrdiff_t>(split));
  kInner.assign(K.begin() + static_cast<std::ptrdiff_t>(split) + 1, K.end());
  kTotal = gpuschedule::groupExtent(K, r);
  batchTotal = gpuschedule::groupExtent(Bt, r);
  innerTotal = gpuschedule::groupExtent(kInner, r);
  qBlocks = cdiv(ext(kq), g.kChunk);
  blockSl[0] = g.mc / g.mr;
  blockSl[1] = g.nc / g.nr;
  buf[0] = name + ".packA";
  buf[1] = name + ".packB";
  pad[0] = tailColumns > 0 ? std::max<std::int64_t>(g.width - g.mr, 0) : 0;
  for (int x = 0; x < 2; ++x)
    if (!(x == 1 && g.bInPlace) && !g.whole[static_cast<std::size_t>(x)])
      panel[x] = blockSl[x] * W[x] * g.kc;
}

// Packed whole, a KC block's slivers lie together (blocks of KC x W elements, a short last one
// padded), so that an MC block of A is one run of memory: sliver after sliver, each whole along
// K, put an MC block's parts a sliver's length apart, and at a power of two (64 KiB: the
// distance layer's dw, K = 4096 with 4 lanes) on the same L2 sets, more of them than its ways.
Expr GemmLowering::wholeAt(int x, const Expr& bX, const Expr& sl, const Expr& blk, const Expr& p,
                           const Expr& l) const {
  Expr slot = ir::add(ir::mul(ir::add(ir::mul(bX, imm(g.kBlocks)), blk), imm(S[x])), sl);
  return ir::add(ir::mul(ir::add(ir::mul(slot, imm(g.kc)), p), imm(W[x])), l);
}

Expr GemmLowering::panelAt(int x, const Expr& sl, const Expr& p, const Expr& l) const {
  const std::string& first = x == 0 ? ic : jc;
  if (x == 0 && laneMajorA)
    return ir::add(
        ir::add(ir::mul(var(gv), imm(panel[x])),
                ir::mul(ir::add(ir::mul(ir::sub(sl, var(first)), imm(W[x])), l), imm(g.kc))),
        p);
  return ir::add(
      ir::add(ir::mul(var(gv), imm(panel[x])),
              ir::mul(ir::add(ir::mul(ir::sub(sl, var(first)), imm(g.kc)), p), imm(W[x]))),
      l);
}

Expr GemmLowering::packed(int x, const Expr& sl, const Expr& p, const Expr& l) const {
  return g.whole[static_cast<std::size_t>(x)] ? wholeAt(x, flat(reads[x]), sl, var(pb), p, l)
                                              : panelAt(x, sl, p, l);
}

Expr GemmLowering::flat(const std::vector<std::size_t>& grp) const {
  Expr e = imm(0);
  for (std::size_t v : grp)
    e = ir::add(ir::mul(e, imm(ext(v))), ir::sub(varExpr[v], imm(r[v].first)));
  return e;
}

Stmt GemmLowering::loops(const std::vector<std::size_t>& grp, Stmt body, ForKind kind) const {
  for (std::size_t q = grp.size(); q-- > 0;)
    body =
        ir::forLoop(st.vars[grp[q]].name, imm(r[grp[q]].first), imm(r[grp[q]].second), kind, body);
  return body;
}

// The packing loops stay as written (ForKind::Rolled): their bodies are already vectors where
// they can be, and LLVM's own versions of them cost compile time for no speed.
Stmt GemmLowering::kLoops(bool block, Stmt body) const {
  if (!block) return loops(K, std::move(body), ForKind::Rolled);
  return ir::forLoop(st.vars[kq].name, var(q0), var(q1), ForKind::Rolled,
                     loops(kInner, std::move(body), ForKind::Rolled));
}

Stmt GemmLowering::kLoopsOf(bool block, const std::function<bool(std::size_t)>& keep,
                            Stmt body) const {
  for (std::size_t q = K.size(); q-- > 0;) {
    const std::size_t v = K[q];
    if (!keep(v)) continue;
    const bool chunked = block && v == kq;
    body = ir::forLoop(st.vars[v].name, chunked ? var(q0) : imm(r[v].first),
                       chunked ? var(q1) : imm(r[v].second), ForKind::Rolled, std::move(body));
  }
  return body;
}

Expr GemmLowering::kPos(bool block) const {
  if (!block) return flat(K);
  return ir::add(ir::mul(ir::sub(varExpr[kq], var(q0)), imm(innerTotal)), flat(kInner));
}

void Lowerer::emitGemm(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                       const Ranges& r, const std::string& name, GemmTasks* tasksOut) {
  const GemmPlan& g = *s.gemm;
  const std::optional<GemmOperands> operands = gemmOperands(*st.rhs, st.numOutputVars());
  if (!operands) throw InternalError("lower: a packed GEMM's summand has no two operands");
  GemmLowering gl(st, bs, g, *operands, r, name, varExpr_);
  for (int x = 0; x < 2; ++x) {
    if (x == 1 && g.bInPlace) continue; // nothing of B is packed
    if (g.whole[static_cast<std::size_t>(x)])
      out_.scratch.push_back(
          {gl.buf[x], vt_,
           extentOfGroup(gl.reads[x], r) * g.kBlocks * gl.S[x] * gl.W[x] * g.kc + gl.pad[x]});
    else
      out_.scratch.push_back({gl.buf[x], vt_, g.groups * gl.panel[x] + gl.pad[x]});
  }
  const CExpr* const* ops = gl.ops;
  const std::size_t* sideVar = gl.sideVar;
  const std::int64_t *W = gl.W, *extent = gl.extent, *S = gl.S, *blockSl = gl.blockSl;
  const std::int64_t tailColumns = gl.tailColumns, kTotal = gl.kTotal;
  const std::int64_t batchTotal = gl.batchTotal, innerTotal = gl.innerTotal, qBlocks = gl.qBlocks;
  const std::vector<std::size_t>&Bt = gl.Bt, &kOuter = gl.kOuter, &kInner = gl.kInner;
  const std::vector<std::size_t>* reads = gl.reads;
  const std::size_t kq = gl.kq;
  const std::string &tk = gl.tk, &jc = gl.jc, &pb = gl.pb, &ic = gl.ic, &tv = gl.tv, &sv = gl.sv,
                    &ii = gl.ii, &jj = gl.jj, &q0 = gl.q0, &q1 = gl.q1, &bs0 = gl.bs0,
                    &bs1 = gl.bs1, &as0 = gl.as0, &as1 = gl.as1;
  auto ext = [&](std::size_t v) { return gl.ext(v); };
  auto flat = [&](const std::vector<std::size_t>& grp) { return gl.flat(grp); };
  // The parallel loop of a function over [0, count), each iteration `inner` flops of work.
  auto parallelLoop = [&](ir::Func& f, const std::string& v, std::int64_t count, double inner,
                          Stmt body) {
    return parallelOver(f, v, count, inner, g.parallel, target_.minParallelWork, std::move(body));
  };

  // Operands packed whole: a function each, parallel over (value of the batch indices the
  // operand reads, run of slivers); runs are whole operands once there are 4 per thread.
  for (int x = 0; x < 2; ++x) {
    if (!g.whole[static_cast<std::size_t>(x)]) continue;
    setRanges(st, r);
    ir::Func f = newFunc(name + (x == 0 ? "_packA" : "_packB"));
    f.explicitCode = true;
    const std::int64_t batches = extentOfGroup(reads[x], r);
    const std::int64_t want = 4 * std::max(target_.threads, 1);
    const std::int64_t per =
        batches >= want ? S[x] : std::max<std::int64_t>(cdiv(S[x], cdiv(want, batches)), 1);
    const std::int64_t runs = cdiv(S[x], per);
    const std::string cv = "gemm.c";
    Expr bX = ir::binary(BinOp::Div, var(cv), imm(runs));
    decompose(reads[x], r, bX);
    Expr sLo = ir::mul(ir::binary(BinOp::Mod, var(cv), imm(runs)), imm(per));
    // The KC block of the current reduction position and the position inside it (the
    // product's blocks: k[0..kSplit) one value each, k[kSplit] in chunks of kChunk).
    auto slot = [&, x, bX](Expr sl, Expr, Expr l) {
      Expr q = ir::sub(varExpr_[kq], imm(r[kq].first));
      Expr qb = packedKBlock_ ? packedKBlock_->first : ir::binary(BinOp::Div, q, imm(g.kChunk));
      Expr qp = packedKBlock_ ? packedKBlock_->second : ir::binary(BinOp::Mod, q, imm(g.kChunk));
      Expr blk = ir::add(ir::mul(flat(kOuter), imm(qBlocks)), qb);
      Expr p = ir::add(ir::mul(qp, imm(innerTotal)), flat(kInner));
      return gl.wholeAt(x, bX, sl, blk, p, l);
    };
    Stmt body = gemmPacking(gl, x, sLo, minOf(ir::add(sLo, imm(per)), imm(S[x])), false, slot);
    f.body = parallelLoop(f, cv, batches * runs, static_cast<double>(kTotal * W[x] * per), body);
    out_.funcs.push_back(std::move(f));
  }

  // The product.
  setRanges(st, r);
  gl.laneMajorA = !kInner.empty() && laneMajorPanel(g, *ops[0], sideVar[0], kInner.back(),
                                                    ext(kInner.back()), tailColumns > 0);
  const std::int64_t perTask = g.mTasks * g.nTasks;
  // Staged (GemmPlan::staged): task tk is task tk mod T of part tk / T, T = tasks / kParts.
  gl.splitK = g.staged;
  const bool splitK = gl.splitK;
  const Expr task = splitK ? var(tk) % (g.tasks / g.kParts) : var(tk);
  gl.kPart = var(tk) / (g.tasks / g.kParts);
  gl.partial = name + ".partial";
  const Expr& kPart = gl.kPart;
  const std::string &partial = gl.partial, &pb0 = gl.pb0, &pb1 = gl.pb1;
  // The batch value: the task's, or (batch inside) a loop's inside each KC block, over the
  // task's group of batch values: group tk mod batchGroups (consecutive tasks hold the groups
  // of one chunk, so that a run of tasks holds all of a chunk's batch values).
  const std::string bi = "gemm.bi";
  // Batch values fastest (GemmPlan::batchFastest): value tk mod batchTotal of chunk tk / batchTotal.
  decompose(Bt, r,
            g.batchInside    ? var(bi)
            : g.batchFastest ? ir::binary(BinOp::Mod, task, imm(batchTotal))
                             : ir::binary(BinOp::Div, task, imm(perTask)));
  const Expr chunk = g.batchGroups > 1 ? ir::binary(BinOp::Div, task, imm(g.batchGroups))
                     : g.batchFastest  ? ir::binary(BinOp::Div, task, imm(batchTotal))
                                       : task;
  Expr mi = ir::binary(BinOp::Mod, ir::binary(BinOp::Div, chunk, imm(g.nTasks)), imm(g.mTasks));
  Expr ni = ir::binary(BinOp::Mod, chunk, imm(g.nTasks));
  // The current KC block: k[0..kSplit) from the block number, k[kSplit] over [q0, q1).
  Expr outerFlat = ir::binary(BinOp::Div, var(pb), imm(qBlocks));
  decompose(kOuter, r, outerFlat);
  Expr q0v = ir::add(imm(r[kq].first),
                     ir::mul(ir::binary(BinOp::Mod, var(pb), imm(qBlocks)), imm(g.kChunk)));
  gl.kcLen = ir::mul(ir::sub(var(q1), var(q0)), imm(innerTotal));
  auto panelSlot = [&](int x) {
    return [&, x](Expr sl, Expr p, Expr l) { return gl.panelAt(x, sl, p, l); };
  };

  gl.m = sideVar[0];
  gl.n = sideVar[1];
  gl.MR = g.mr;
  gl.NR = g.nr;
  gl.M = extent[0];
  gl.N = extent[1];
  const std::size_t m = gl.m, n = gl.n;
  const std::int64_t MR = gl.MR, NR = gl.NR, M = gl.M, N = gl.N;
  // B read in place with dependent ranges (GemmPlan::bInPlace): an index whose range reads N
  // masks B's lanes (a stride-1 input gradient's tap b at the first and last columns); one
  // whose range reads only batch indices bounds its own loop (tap a at the first and last rows).
  std::vector<std::size_t>&laneMasked = gl.laneMasked, &loopBounded = gl.loopBounded;
  if (g.bInPlace)
    for (int v : g.masks[1]) {
      std::vector<bool> rd(st.vars.size(), false);
      boundVars(bs.loBound[static_cast<std::size_t>(v)], rd);
      boundVars(bs.hiBound[static_cast<std::size_t>(v)], rd);
      (rd[n] ? laneMasked : loopBounded).push_back(static_cast<std::size_t>(v));
    }
  varExpr_[m] = ir::add(ir::add(imm(r[m].first), ir::mul(var(sv), imm(MR))), var(ii));
  varExpr_[n] = ir::add(ir::add(imm(r[n].first), ir::mul(var(tv), imm(NR))), var(jj));
  // The micro-kernel over tiles nr columns wide: NR, or half of it for a last B sliver that
  // holds at most half its lanes (N = 54 or 56 with NR = 16: the last tile does 8 columns, not
  // 16; in half vectors where 512-bit operations run as two halves: halfWidthTail).
  gl.halfTail = halfWidthTail(g, N, target_);
  const bool halfTail = gl.halfTail;
  // ... or, for a last sliver of one or two columns, the columns kernel (tailColumns).
  const bool columnTail = tailColumns > 0;
  const bool inPlace = g.bInPlace;
  Stmt body = gemmKernel(gl, NR, inPlace, false);
  // In place: the slivers [t0, t1) read without a mask (GemmPlan::plainFrom); the others with
  // masked loads, a last half-width sliver with its own kernel.
  const std::int64_t t0 = g.plainFrom, t1 = g.plainTo;
  if (inPlace && (t0 > 0 || t1 < S[1])) {
    // A full-width masked kernel only where a masked sliver is not the half-width last one.
    const bool wide = t0 > 0 || t1 < S[1] - (halfTail ? 1 : 0);
    Stmt masked = gemmKernel(gl, halfTail ? NR / 2 : NR, true, true);
    if (halfTail && wide)
      masked = ir::ifThen(less(var(tv), imm(S[1] - 1)), gemmKernel(gl, NR, true, true), masked);
    Expr plain = less(var(tv), imm(t1));
    if (t0 > 0) plain = ir::binary(BinOp::And, ir::binary(BinOp::Ge, var(tv), imm(t0)), plain);
    body = t1 > t0 ? ir::ifThen(plain, body, masked) : masked;
  } else if (columnTail)
    body = ir::ifThen(less(var(tv), imm(S[1] - 1)), body,
                      gemmKernel(gl, NR, false, false, tailColumns));
  else if (halfTail)
    body = ir::ifThen(less(var(tv), imm(S[1] - 1)), body, gemmKernel(gl, NR / 2, false, false));
  body = ir::forLoop(tv, var(jc), minOf(ir::add(var(jc), imm(blockSl[1])), var(bs1)),
                     ForKind::Serial, body);
  // An A block per MC slivers (packed here unless A is packed whole), a B panel per NC slivers
  // and KC block.
  if (!g.whole[0])
    body =
        ir::block({gemmPacking(gl, 0, var(ic), minOf(ir::add(var(ic), imm(blockSl[0])), var(as1)),
                               true, panelSlot(0)),
                   body});
  const std::string icb = "gemm.icb", jcb = "gemm.jcb";
  body = let(ic, ir::add(var(as0), ir::mul(var(icb), imm(blockSl[0]))), body);
  body = ir::forLoop(icb, imm(0), imm(cdiv(g.mChunk, blockSl[0])), ForKind::Serial, body);
  if (!g.whole[1] && !inPlace)
    body =
        ir::block({gemmPacking(gl, 1, var(jc), minOf(ir::add(var(jc), imm(blockSl[1])), var(bs1)),
                               true, panelSlot(1)),
                   body});
  if (g.batchInside) {
    Expr lo = imm(0), hi = imm(batchTotal);
    if (g.batchGroups > 1) {
      const Expr grp = ir::binary(BinOp::Mod, task, imm(g.batchGroups));
      lo = ir::binary(BinOp::Div, ir::mul(grp, imm(batchTotal)), imm(g.batchGroups));
      hi = ir::binary(BinOp::Div, ir::mul(ir::add(grp, imm(1)), imm(batchTotal)),
                      imm(g.batchGroups));
    }
    body = ir::forLoop(bi, lo, hi, ForKind::Serial, body);
  }
  body = let(q0, q0v, let(q1, minOf(ir::add(var(q0), imm(g.kChunk)), imm(r[kq].second)), body));
  body = ir::forLoop(pb, splitK ? var(pb0) : imm(0), splitK ? var(pb1) : imm(g.kBlocks),
                     ForKind::Serial, body);
  body = let(jc, ir::add(var(bs0), ir::mul(var(jcb), imm(blockSl[1]))), body);
  body = ir::forLoop(jcb, imm(0), imm(cdiv(g.nChunk, blockSl[1])), ForKind::Serial, body);
  std::vector<TaskChunk> chunks{{as0, as1, mi, S[0], g.mTasks}, {bs0, bs1, ni, S[1], g.nTasks}};
  if (splitK) chunks.push_back({pb0, pb1, kPart, g.kBlocks, g.kParts});
  body = taskChunks(chunks, std::move(body));
  const double flops = 2.0 * static_cast<double>(batchTotal) * static_cast<double>(M * N) *
                       static_cast<double>(kTotal);
  GemmTasks t{body, g.tasks, g.groups, flops, g.parallel};
  if (tasksOut) {
    *tasksOut = std::move(t);
    return;
  }
  emitGemmProduct(name, {t});
  if (splitK) emitGemmSum(st, g, r, name + "_sum", partial);
}

} // namespace einjit::codegen::lowering
