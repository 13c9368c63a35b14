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
#include "codegen/lower/CpuGemmColumns.h"
#include "codegen/lower/CpuGemmPanels.h"
#include "codegen/lower/CpuGemmTasks.h"
#include "codegen/IROperator.h"
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

namespace {

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

Expr minOf(Expr a, Expr b) { return ir::binary(BinOp::Min, std::move(a), std::move(b)); }
Expr less(Expr a, Expr b) { return ir::binary(BinOp::Lt, std::move(a), std::move(b)); }
Expr conj(Expr a, Expr b) {
  return !a ? b : !b ? a : ir::binary(BinOp::And, std::move(a), std::move(b));
}
Expr imm(std::int64_t v) { return ir::intImm(v); }
Expr var(const std::string& v) { return ir::var(v); }

using ir::let;

// Elements along the lanes that the packing of an operand contiguous along them reads per step
// of the reduction: 4 cache lines of f32.
constexpr std::int64_t kGroupElements = 64;

} // namespace

void Lowerer::emitGemm(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                       const Ranges& r, const std::string& name, GemmTasks* tasksOut) {
  const GemmPlan& g = *s.gemm;
  const std::optional<GemmOperands> operands = gemmOperands(*st.rhs, st.numOutputVars());
  if (!operands) throw InternalError("lower: a packed GEMM's summand has no two operands");
  const CExpr* ops[2] = {operands->read[g.aFactor], operands->read[1 - g.aFactor]};
  const std::size_t sideVar[2] = {static_cast<std::size_t>(g.m), static_cast<std::size_t>(g.n)};
  const std::int64_t W[2] = {g.mr, g.nr};
  auto ext = [&](std::size_t v) { return r[v].second - r[v].first; };
  const std::int64_t extent[2] = {ext(sideVar[0]), ext(sideVar[1])};
  const std::int64_t S[2] = {cdiv(extent[0], W[0]), cdiv(extent[1], W[1])}; // slivers
  // A last B sliver of one or two columns runs the columns kernel, which reads only those.
  const std::int64_t tailColumns = columnsTail(g, extent[1], !operands->tile.empty());
  auto group = [](const std::vector<int>& vs) {
    return std::vector<std::size_t>(vs.begin(), vs.end());
  };
  const std::vector<std::size_t> K = group(g.k), Bt = group(g.batch);
  const std::vector<std::size_t> reads[2] = {group(g.reads[0]), group(g.reads[1])};
  const auto split = static_cast<std::size_t>(g.kSplit);
  const std::size_t kq = K[split];
  const std::vector<std::size_t> kOuter(K.begin(), K.begin() + static_cast<std::ptrdiff_t>(split)),
      kInner(K.begin() + static_cast<std::ptrdiff_t>(split) + 1, K.end());
  const std::int64_t kTotal = extentOfGroup(K, r), batchTotal = extentOfGroup(Bt, r);
  const std::int64_t innerTotal = extentOfGroup(kInner, r), qBlocks = cdiv(ext(kq), g.kChunk);
  const std::int64_t blockSl[2] = {g.mc / g.mr, g.nc / g.nr}; // slivers per MC / NC block
  std::string buf[2] = {name + ".packA", name + ".packB"};
  std::int64_t panel[2] = {0, 0}; // scratch elements per task group of a per-block packing
  // Past its last position, the lanes past MR of the columns kernel's A loads (columnsKernel).
  const std::int64_t pad[2] = {tailColumns > 0 ? std::max<std::int64_t>(g.width - g.mr, 0) : 0, 0};
  for (int x = 0; x < 2; ++x) {
    if (x == 1 && g.bInPlace) continue; // nothing of B is packed
    if (g.whole[static_cast<std::size_t>(x)])
      out_.scratch.push_back(
          {buf[x], vt_, extentOfGroup(reads[x], r) * g.kBlocks * S[x] * W[x] * g.kc + pad[x]});
    else {
      panel[x] = blockSl[x] * W[x] * g.kc;
      out_.scratch.push_back({buf[x], vt_, g.groups * panel[x] + pad[x]});
    }
  }
  // The names the product's loops bind.
  const std::string gv = "gemm.g", tk = "gemm.task", jc = "gemm.jc", pb = "gemm.pb",
                    ic = "gemm.ic", tv = "gemm.t", sv = "gemm.s", pv = "gemm.p", ii = "gemm.i",
                    jj = "gemm.j", q0 = "gemm.q0", q1 = "gemm.q1", bs0 = "gemm.b0",
                    bs1 = "gemm.b1", as0 = "gemm.a0", as1 = "gemm.a1", acc = "acc", edge = "edge";
  auto tileBuf = [](std::size_t c) { return "ctile" + std::to_string(c); };

  // Where a packed operand holds sliver sl at position p of KC block blk, lane l: packed whole
  // (the operand's batch value bX), or per block in the task group's scratch. Packed whole, a
  // KC block's slivers lie together (blocks of KC x W elements, a short last one padded), so
  // that an MC block of A is one run of memory: sliver after sliver, each whole along K, put
  // an MC block's parts a sliver's length apart, and at a power of two (64 KiB: the distance
  // layer's dw, K = 4096 with 4 lanes) on the same L2 sets, more of them than its ways.
  auto wholeAt = [&](int x, const Expr& bX, const Expr& sl, const Expr& blk, const Expr& p,
                     const Expr& l) {
    Expr slot = ir::add(ir::mul(ir::add(ir::mul(bX, imm(g.kBlocks)), blk), imm(S[x])), sl);
    return ir::add(ir::mul(ir::add(ir::mul(slot, imm(g.kc)), p), imm(W[x])), l);
  };
  bool laneMajorA = false; // A's panel lane-major (laneMajorPanel): with the product's ranges
  auto panelAt = [&](int x, const Expr& sl, const Expr& p, const Expr& l) {
    const std::string& first = x == 0 ? ic : jc;
    if (x == 0 && laneMajorA)
      return ir::add(ir::add(ir::mul(var(gv), imm(panel[x])),
                             ir::mul(ir::add(ir::mul(ir::sub(sl, var(first)), imm(W[x])), l),
                                     imm(g.kc))),
                     p);
    return ir::add(ir::add(ir::mul(var(gv), imm(panel[x])),
                           ir::mul(ir::add(ir::mul(ir::sub(sl, var(first)), imm(g.kc)), p),
                                   imm(W[x]))),
                   l);
  };
  // The flattened position of the current values of a group of indices (the last fastest).
  auto flat = [&](const std::vector<std::size_t>& grp) {
    Expr e = imm(0);
    for (std::size_t v : grp)
      e = ir::add(ir::mul(e, imm(ext(v))), ir::sub(varExpr_[v], imm(r[v].first)));
    return e;
  };
  auto loops = [&](const std::vector<std::size_t>& grp, Stmt body, ForKind kind) {
    for (std::size_t q = grp.size(); q-- > 0;)
      body = ir::forLoop(st.vars[grp[q]].name, imm(r[grp[q]].first), imm(r[grp[q]].second),
                         kind, body);
    return body;
  };
  // The reduction positions a packing covers: all of them (packed whole), or the current KC
  // block (k[0..kSplit) bound by the product's block loop, k[kSplit] over [q0, q1)).
  // The packing loops stay as written (ForKind::Rolled): their bodies are already vectors
  // where they can be, and LLVM's own versions of them cost compile time for no speed.
  auto kLoops = [&](bool block, Stmt body) {
    if (!block) return loops(K, std::move(body), ForKind::Rolled);
    return ir::forLoop(st.vars[kq].name, var(q0), var(q1), ForKind::Rolled,
                       loops(kInner, std::move(body), ForKind::Rolled));
  };
  // The same loops, only over the reduction indices `keep` says (in their order).
  auto kLoopsOf = [&](bool block, const std::function<bool(std::size_t)>& keep, Stmt body) {
    for (std::size_t q = K.size(); q-- > 0;) {
      const std::size_t v = K[q];
      if (!keep(v)) continue;
      const bool chunked = block && v == kq;
      body = ir::forLoop(st.vars[v].name, chunked ? var(q0) : imm(r[v].first),
                         chunked ? var(q1) : imm(r[v].second), ForKind::Rolled, std::move(body));
    }
    return body;
  };
  auto kPos = [&](bool block) {
    if (!block) return flat(K);
    return ir::add(ir::mul(ir::sub(varExpr_[kq], var(q0)), imm(innerTotal)), flat(kInner));
  };
  // The parallel loop of a function over [0, count), each iteration `inner` flops of work.
  auto parallelLoop = [&](ir::Func& f, const std::string& v, std::int64_t count, double inner,
                          Stmt body) {
    return parallelOver(f, v, count, inner, g.parallel, target_.minParallelWork, std::move(body));
  };

  // Packing slivers [sLo, sHi) of operand x at the reduction positions of kLoops(block) into
  // slot(s, p, l). Where a lane is past the extent, a masked index outside its range or a
  // padded subscript outside its dimension, the element is 0 and nothing is read; a run of
  // lanes (contiguous in the operand) that is all inside, every unproven subscript in bounds
  // at both ends, is read with vector loads and no checks; any other element with the
  // ordinary checked read.
  auto pack = [&](int x, const Expr& sLo, const Expr& sHi, bool block,
                  const std::function<Expr(Expr, Expr, Expr)>& slot) {
    const CExpr& op = *ops[x];
    const std::size_t side = sideVar[x];
    const std::int64_t w = W[x], lo = r[side].first, hi = r[side].second;
    const std::vector<int>& masks = g.masks[static_cast<std::size_t>(x)];
    bool monotone = true;
    for (int v : masks)
      for (const ConcreteBound* cb : {&bs.loBound[static_cast<std::size_t>(v)],
                                      &bs.hiBound[static_cast<std::size_t>(v)]})
        if (cb->direction(static_cast<int>(side)) == 2) monotone = false;
    const bool edgeLanes = extent[x] % w != 0;
    bool padded = false;
    for (const Subscript& sub : op.subs) padded = padded || sub.mode == IndexMode::Pad;
    const Expr saved = varExpr_[side];
    // Where a lane's element is a term of the sum: inside the extent, the masked indices
    // inside their ranges, padded subscripts inside their dimensions.
    auto termAt = [&](Expr at) {
      varExpr_[side] = at;
      Expr c = edgeLanes ? less(at, imm(hi)) : Expr();
      for (std::size_t d = 0; d < op.subs.size(); ++d)
        if (op.subs[d].mode == IndexMode::Pad) {
          Expr idx = subscriptIndex(op.subs[d]);
          c = conj(c, ir::binary(BinOp::And, ir::binary(BinOp::Ge, idx, imm(0)),
                                 less(idx, imm(extentOf(op.tensor, d)))));
        }
      for (int v : masks) {
        const auto u = static_cast<std::size_t>(v);
        c = conj(c, ir::binary(BinOp::And,
                               ir::binary(BinOp::Ge, varExpr_[u], boundExpr(bs.loBound[u])),
                               less(varExpr_[u], boundExpr(bs.hiBound[u]))));
      }
      varExpr_[side] = saved;
      return c;
    };
    // ... and where every plain subscript not proven inside over the ranges (the hull of a
    // masked index) is inside: a run of lanes where both hold at its ends reads unchecked.
    auto safeAt = [&](Expr at) {
      varExpr_[side] = at;
      Expr c;
      for (std::size_t d = 0; d < op.subs.size(); ++d)
        if (op.subs[d].mode == IndexMode::Plain && !subscriptInBounds(op, d)) {
          Expr idx = subscriptIndex(op.subs[d]);
          c = conj(c, ir::binary(BinOp::And, ir::binary(BinOp::Ge, idx, imm(0)),
                                 less(idx, imm(extentOf(op.tensor, d)))));
        }
      varExpr_[side] = saved;
      return c;
    };
    CExpr inBounds = op; // read only where termAt and safeAt hold: padded subscripts are inside
    for (Subscript& sub : inBounds.subs) sub.mode = IndexMode::Plain;
    auto readAt = [&](Expr at, bool trusted) {
      varExpr_[side] = std::move(at);
      const Scoped<bool> trust(ctx_.trustPlain, trusted);
      Expr v = read(trusted ? inBounds : op, true);
      varExpr_[side] = saved;
      return v;
    };
    const std::string gs = "gemm.sg", ps = "gemm.ps", ls = "gemm.l";
    Expr base = ir::add(imm(lo), ir::mul(var(ps), imm(w)));
    Expr at = ir::add(base, var(ls));
    // The lanes of a sliver that may pass the extent (and nothing else): read those inside,
    // zeros after them, with no condition per element.
    const bool edgeOnly = edgeLanes && masks.empty() && !padded;
    auto edgeSliver = [&](const std::function<Stmt(Stmt)>& around) {
      Expr inside = minOf(imm(w), ir::sub(imm(hi), base));
      Stmt put = ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), readAt(at, false));
      Stmt zero = ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), num(0));
      return ir::block({ir::forLoop(ls, imm(0), inside, ForKind::Rolled, around(put)),
                        ir::forLoop(ls, inside, imm(w), ForKind::Rolled, around(zero))});
    };
    // A run of vector lanes not all inside (an edge of the operand, a dependent range,
    // padding): masked vector loads, each lane read only where it is a term and its plain
    // subscripts are inside; a term outside its tensor reports the ordinary bounds error (the
    // check's clamped index differs from the index exactly there).
    auto maskedRun = [&]() {
      Expr term = termAt(at), ok = term;
      varExpr_[side] = at;
      for (std::size_t d = 0; d < op.subs.size(); ++d)
        if (op.subs[d].mode == IndexMode::Plain && !subscriptInBounds(op, d)) {
          Expr idx = subscriptIndex(op.subs[d]);
          Expr t = term ? ir::select(term, idx, imm(0)) : idx;
          ok = conj(ok, ir::binary(BinOp::Eq, t, ir::check(t, extentOf(op.tensor, d))));
        }
      varExpr_[side] = saved;
      Expr v = readAt(at, true);
      if (ok) v = ir::maskLoads(v, ok);
      return ir::forLoop(ls, imm(0), imm(w), ForKind::Vectorized,
                         ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), v), g.width);
    };
    // One element: read (with the ordinary checks) where it is a term, else 0.
    auto element = [&]() {
      Stmt put = ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), readAt(at, false));
      Expr c = termAt(at);
      return c ? ir::ifThen(c, put, ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), num(0)))
               : put;
    };
    std::int64_t unit = 0;
    const auto& os = ctx_.buffers.strides[static_cast<std::size_t>(op.tensor)];
    for (std::size_t d = 0; d < op.subs.size(); ++d) unit += op.subs[d].coef[side] * os[d];
    if (unit >= 1 && unit <= kNearLanes) {
      // Reduction indices that no condition of a run reads (a convolution's channels, beside
      // its taps) run innermost, inside the branches on the run's lanes and conditions: those
      // are solved and decided once for all of them, and each branch is a plain copy loop
      // (LLVM's pipeline here does not unswitch loops).
      std::vector<bool> inCond(st.vars.size(), false);
      for (int v : masks) {
        inCond[static_cast<std::size_t>(v)] = true;
        for (const ConcreteBound* cb : {&bs.loBound[static_cast<std::size_t>(v)],
                                        &bs.hiBound[static_cast<std::size_t>(v)]}) {
          std::vector<bool> rd(st.vars.size(), false);
          boundVars(*cb, rd);
          for (std::size_t u = 0; u < rd.size(); ++u) inCond[u] = inCond[u] || rd[u];
        }
      }
      for (std::size_t d = 0; d < op.subs.size(); ++d) {
        const Subscript& sub = op.subs[d];
        if (sub.mode == IndexMode::Plain && subscriptInBounds(op, d)) continue;
        for (std::size_t u = 0; u < sub.coef.size(); ++u) inCond[u] = inCond[u] || sub.coef[u] != 0;
        if (sub.gather) std::fill(inCond.begin(), inCond.end(), true);
      }
      auto free = [&](std::size_t v) { return !inCond[v]; };
      auto inner = [&](Stmt leaf) { return kLoopsOf(block, free, std::move(leaf)); };
      // Contiguous along the lanes, or nearly (a stride-2 convolution's window): the reduction
      // outermost, a group of slivers (whole cache lines) inside it, the lanes innermost
      // (vector loads for B where contiguous), so that each step reads a few whole lines.
      const bool vec = x == 1 && w % g.width == 0;
      Expr last = ir::add(base, imm(w - 1));
      Stmt fast = ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), readAt(at, true));
      fast = ir::forLoop(ls, imm(0), imm(w), vec ? ForKind::Vectorized : ForKind::Unrolled, fast,
                         vec ? g.width : 1);
      Stmt slow = vec        ? maskedRun()
                  : edgeOnly ? edgeSliver([](Stmt b) { return b; })
                             : ir::forLoop(ls, imm(0), imm(w), ForKind::Rolled, element());
      Stmt body = inner(slow);
      const std::optional<Lanes> terms = termLanes(op, bs, masks, side, base, w, hi);
      const std::optional<Lanes> safe = safeLanes(op, side, base, w);
      if (terms && safe) {
        // The run's terms are lanes [L, H), solved once per run: read with masked vector loads
        // (B) or a loop between zeros, no condition per lane; a term outside its tensor takes
        // the checked path, which reports it.
        const std::string lv = "gemm.lo", hv = "gemm.hi";
        const Expr L = var(lv), H = var(hv);
        auto put = [&](Expr v) { return ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), v); };
        Stmt zeros = ir::forLoop(ls, imm(0), imm(w), vec ? ForKind::Vectorized : ForKind::Rolled,
                                 put(num(0)), vec ? g.width : 1);
        Stmt part;
        if (vec) {
          // Zeros, then [L, H) in vectors of g.width lanes, the last one ending at H (it may
          // overlap the one before): every lane read is a term. Fewer lanes than a vector: one
          // at a time.
          const std::string cs = "gemm.cs", js = "gemm.js";
          Expr j = var(js);
          Stmt chunk = ir::forLoop(
              ls, imm(0), imm(g.width), ForKind::Vectorized,
              ir::substitute(put(readAt(at, true)), ls, ir::add(j, var(ls))), g.width);
          chunk = let(js, minOf(ir::add(L, ir::mul(var(cs), imm(g.width))), ir::sub(H, imm(g.width))),
                      chunk);
          Expr chunks = ir::binary(BinOp::Div, ir::add(ir::sub(H, L), imm(g.width - 1)), imm(g.width));
          Stmt few = ir::forLoop(ls, L, H, ForKind::Rolled, put(readAt(at, true)));
          if (target_.vectorBytes >= 64 && g.width >= 8) {
            // 64-byte vectors (AVX-512): a short last sliver (a stride-2 convolution's 27
            // columns leave 11) has at least half a vector of terms; two half vectors, at L
            // and ending at H, instead of a lane at a time (11 scalar loads and stores per
            // step, about as much work as the sliver's 16 vector FMAs per row of A).
            const int half = g.width / 2;
            auto halfAt = [&](Expr start) {
              return ir::forLoop(ls, imm(0), imm(half), ForKind::Vectorized,
                                 ir::substitute(put(readAt(at, true)), ls, ir::add(start, var(ls))),
                                 half);
            };
            few = ir::ifThen(ir::binary(BinOp::Ge, ir::sub(H, L), imm(half)),
                             ir::block({halfAt(L), halfAt(ir::sub(H, imm(half)))}), few);
          }
          Stmt copy = ir::ifThen(ir::binary(BinOp::Ge, ir::sub(H, L), imm(g.width)),
                                 ir::forLoop(cs, imm(0), chunks, ForKind::Rolled, chunk), few);
          part = ir::block({zeros, copy});
        } else {
          part = ir::block({ir::forLoop(ls, imm(0), L, ForKind::Rolled, put(num(0))),
                            ir::forLoop(ls, L, H, ForKind::Rolled, put(readAt(at, true))),
                            ir::forLoop(ls, H, imm(w), ForKind::Rolled, put(num(0)))});
        }
        Stmt inside = ir::ifThen(ir::binary(BinOp::And, ir::binary(BinOp::Eq, L, imm(0)),
                                            ir::binary(BinOp::Eq, H, imm(w))),
                                 inner(fast), inner(part));
        Expr ok = conj(safe->cond, ir::binary(BinOp::And, ir::binary(BinOp::Le, safe->lo, L),
                                              ir::binary(BinOp::Le, H, safe->hi)));
        // A term outside its tensor is a user's mistake: checked reads, one lane at a time, in
        // a function of their own (nothing of them is hoisted into the loops that run).
        inside = ir::ifThen(ok, inside,
                            inner(ir::forLoop(ls, imm(0), imm(w), ForKind::Outlined, element())));
        body = ir::ifThen(conj(terms->cond, less(L, H)), inside, inner(zeros));
        body = let(lv, terms->lo, let(hv, terms->hi, body));
      } else if (monotone) {
        Expr runOk = conj(conj(termAt(base), termAt(last)), conj(safeAt(base), safeAt(last)));
        body = runOk ? ir::ifThen(runOk, inner(fast), inner(slow)) : inner(fast);
      }
      if (x == 1 && tailColumns > 0) {
        // The columns kernel reads only the last sliver's first tailColumns lanes: those alone
        // (all of it cost as much as a whole sliver), decided once per run (columnsPacking).
        auto lanes = [&](Stmt one) {
          return inner(ir::forLoop(ls, imm(0), imm(tailColumns), ForKind::Unrolled, one));
        };
        auto put = [&](Expr v) { return ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), v); };
        Stmt columns = columnsPacking(tailColumns, terms ? &*terms : nullptr,
                                      safe ? &*safe : nullptr, lanes(put(readAt(at, true))),
                                      lanes(put(num(0))), lanes(element()));
        body = ir::ifThen(less(var(ps), imm(S[1] - 1)), body, columns);
      }
      const std::int64_t grp = std::max<std::int64_t>(1, kGroupElements / w);
      Expr first = ir::add(sLo, ir::mul(var(gs), imm(grp)));
      body = ir::forLoop(ps, first, minOf(ir::add(first, imm(grp)), sHi), ForKind::Rolled, body);
      body = kLoopsOf(block, [&](std::size_t v) { return !free(v); }, body);
      Expr groups = ir::binary(BinOp::Div, ir::add(ir::sub(sHi, sLo), imm(grp - 1)), imm(grp));
      // Packed by a task (per block): a function of its own beside the micro-kernel.
      return ir::forLoop(gs, imm(0), groups, block ? ForKind::Outlined : ForKind::Rolled, body);
    }
    // Otherwise lanes far apart (a weight gradient's channels): the reduction outermost, the
    // lanes innermost (ordinary checked reads), so that the sliver's lanes are read as
    // independent streams, each cache line of each lane in L1 for the next positions, and each
    // step writes one contiguous run of the sliver. (Each lane's run along the reduction in
    // turn waited on one load at a time.)
    auto lanes = [&](Stmt put, ForKind kind) {
      return kLoops(block, ir::forLoop(ls, imm(0), imm(w), kind, std::move(put)));
    };
    if (x == 0 && block && laneMajorA) {
      std::vector<PanelLoop> run{{st.vars[kq].name, var(q0), var(q1)}};
      for (std::size_t v : kInner)
        run.push_back({st.vars[v].name, imm(r[v].first), imm(r[v].second)});
      auto put = [&](Expr v) { return ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), v); };
      Expr inside = edgeLanes ? minOf(imm(w), ir::sub(imm(hi), base)) : imm(w);
      return laneMajorPacking(ps, sLo, sHi, ls, inside, w, run, g.width, put, readAt(at, false),
                              num(0));
    }
    Stmt plain = lanes(ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), readAt(at, false)),
                       ForKind::Unrolled);
    Stmt body;
    if (!masks.empty() || padded)
      body = lanes(element(), ForKind::Rolled);
    else if (edgeLanes) {
      // The last sliver, the only one past the extent: its lanes inside are known here, so its
      // copies and zeros are unrolled as the other slivers' copies are (as loops over a count
      // computed from the sliver, the 4 channels of the README demo's weight gradient cost as
      // much as the 12 of the other two slivers).
      const std::int64_t inside = extent[x] % w;
      Stmt put = ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), readAt(at, false));
      Stmt zero = ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), num(0));
      Stmt last = kLoops(block, ir::block({ir::forLoop(ls, imm(0), imm(inside), ForKind::Unrolled, put),
                                           ir::forLoop(ls, imm(inside), imm(w), ForKind::Unrolled, zero)}));
      body = ir::ifThen(less(var(ps), imm(extent[x] / w)), plain, last);
    } else
      body = plain;
    return ir::forLoop(ps, sLo, sHi, block ? ForKind::Outlined : ForKind::Rolled, body);
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
      Expr blk = ir::add(ir::mul(flat(kOuter), imm(qBlocks)), ir::binary(BinOp::Div, q, imm(g.kChunk)));
      Expr p = ir::add(ir::mul(ir::binary(BinOp::Mod, q, imm(g.kChunk)), imm(innerTotal)), flat(kInner));
      return wholeAt(x, bX, sl, blk, p, l);
    };
    Stmt body = pack(x, sLo, minOf(ir::add(sLo, imm(per)), imm(S[x])), false, slot);
    f.body = parallelLoop(f, cv, batches * runs, static_cast<double>(kTotal * W[x] * per), body);
    out_.funcs.push_back(std::move(f));
  }

  // The product.
  setRanges(st, r);
  laneMajorA = !kInner.empty() && laneMajorPanel(g, *ops[0], sideVar[0], kInner.back(),
                                                  ext(kInner.back()), tailColumns > 0);
  const std::int64_t perTask = g.mTasks * g.nTasks;
  // Staged (GemmPlan::staged): task tk is task tk mod T of part tk / T, T = tasks / kParts.
  const bool splitK = g.staged;
  const Expr task = splitK ? var(tk) % (g.tasks / g.kParts) : var(tk);
  const Expr kPart = var(tk) / (g.tasks / g.kParts);
  const std::string partial = name + ".partial", pb0 = "gemm.pb0", pb1 = "gemm.pb1";
  // The batch value: the task's, or (batch inside) a loop's inside each KC block, over the
  // task's group of batch values: group tk mod batchGroups (consecutive tasks hold the groups
  // of one chunk, so that a run of tasks holds all of a chunk's batch values).
  const std::string bi = "gemm.bi";
  decompose(Bt, r, g.batchInside ? var(bi) : ir::binary(BinOp::Div, task, imm(perTask)));
  const Expr chunk = g.batchGroups > 1 ? ir::binary(BinOp::Div, task, imm(g.batchGroups)) : task;
  Expr mi = ir::binary(BinOp::Mod, ir::binary(BinOp::Div, chunk, imm(g.nTasks)), imm(g.mTasks));
  Expr ni = ir::binary(BinOp::Mod, chunk, imm(g.nTasks));
  // The current KC block: k[0..kSplit) from the block number, k[kSplit] over [q0, q1).
  Expr outerFlat = ir::binary(BinOp::Div, var(pb), imm(qBlocks));
  decompose(kOuter, r, outerFlat);
  Expr q0v = ir::add(imm(r[kq].first),
                     ir::mul(ir::binary(BinOp::Mod, var(pb), imm(qBlocks)), imm(g.kChunk)));
  Expr kcLen = ir::mul(ir::sub(var(q1), var(q0)), imm(innerTotal));
  // The element of a packed operand at sliver s, position p of the current block, lane l.
  auto packed = [&](int x, const Expr& sl, const Expr& p, const Expr& l) {
    return g.whole[static_cast<std::size_t>(x)]
               ? wholeAt(x, flat(reads[x]), sl, var(pb), p, l)
               : panelAt(x, sl, p, l);
  };
  auto panelSlot = [&](int x) {
    return [&, x](Expr sl, Expr p, Expr l) { return panelAt(x, sl, p, l); };
  };

  const std::size_t m = sideVar[0], n = sideVar[1];
  const std::int64_t MR = g.mr, NR = g.nr, M = extent[0], N = extent[1];
  // B read in place with dependent ranges (GemmPlan::bInPlace): an index whose range reads N
  // masks B's lanes (a stride-1 input gradient's tap b at the first and last columns); one
  // whose range reads only batch indices bounds its own loop (tap a at the first and last rows).
  std::vector<std::size_t> laneMasked, loopBounded;
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
  const bool halfTail = halfWidthTail(g, N, target_);
  // ... or, for a last sliver of one or two columns, the columns kernel (tailColumns).
  const bool columnTail = tailColumns > 0;
  // B read in place (GemmPlan::bInPlace): every sliver from the operand itself, a partial last
  // one with masked loads (its lanes past N are neither read nor stored).
  auto kernelOf = [&](std::int64_t nr, bool inPlace, bool masked, std::int64_t columns = 0) {
    Expr cell = ir::add(ir::mul(var(ii), imm(nr)), var(jj));
    auto tile = [&](Stmt body) {
      body = ir::forLoop(jj, imm(0), imm(nr), ForKind::Vectorized, body,
                         static_cast<int>(std::min<std::int64_t>(nr, g.width)));
      return ir::forLoop(ii, imm(0), imm(MR), ForKind::Unrolled, body);
    };
    Expr a = ir::load(vt_, acc, cell);
    Expr opA = ir::load(vt_, buf[0], packed(0, var(sv), var(pv), var(ii)));
    Expr opB;
    if (inPlace) { // every subscript proven inside over the ranges (GemmPlan)
      const Scoped<bool> trust(ctx_.trustPlain, true);
      opB = read(*ops[1], true);
      if (masked) {
        Expr lanes = less(varExpr_[n], imm(r[n].second));
        for (std::size_t u : laneMasked)
          lanes = conj(lanes, ir::binary(BinOp::And,
                                         ir::binary(BinOp::Ge, varExpr_[u], boundExpr(bs.loBound[u])),
                                         less(varExpr_[u], boundExpr(bs.hiBound[u]))));
        opB = ir::maskLoads(opB, lanes);
      }
    } else
      opB = ir::load(vt_, buf[1], packed(1, var(tv), var(pv), var(jj)));
    // Reads of output indices only: a local tile each, loaded before the reduction. On an
    // edge of the output its cells are clamped (cells past the edge read its last element:
    // their sums are never stored); a tile inside reads them unclamped, as vector loads (the
    // clamp of N's lanes made each vector eight scalar loads).
    std::vector<Stmt> loadTiles;
    const std::vector<const CExpr*>& tileReads = operands->tile;
    auto tileLoads = [&](bool clampM, bool clampN) {
      std::vector<Stmt> loads;
      for (std::size_t c = 0; c < tileReads.size(); ++c) {
        const Expr savedM = varExpr_[m], savedN = varExpr_[n];
        if (clampM) varExpr_[m] = minOf(savedM, imm(r[m].second - 1));
        if (clampN) varExpr_[n] = minOf(savedN, imm(r[n].second - 1));
        loads.push_back(tile(ir::store(tileBuf(c), cell, value(*tileReads[c]))));
        varExpr_[m] = savedM;
        varExpr_[n] = savedN;
      }
      return ir::block(std::move(loads));
    };
    if (!tileReads.empty()) {
      // The half-width kernel runs the last sliver only, which N may not fill: clamped.
      const bool half = nr != NR, edgeM = M % MR != 0, edgeN = half || N % NR != 0;
      Expr inside;
      if (edgeM) inside = less(var(sv), imm(M / MR));
      if (edgeN && !half) inside = conj(inside, less(var(tv), imm(N / NR)));
      Stmt loads = tileLoads(edgeM, edgeN);
      if (inside) loads = ir::ifThen(inside, tileLoads(false, half), loads);
      loadTiles.push_back(std::move(loads));
    }
    Expr term;
    if (g.product)
      term = ir::mul(opA, opB);
    else { // the summand with its operands read from the slivers and the local tiles
      const ReadAs fromSlivers = [&](const CExpr& e) {
        if (sameExpr(e, *ops[0])) return opA;
        if (sameExpr(e, *ops[1])) return opB;
        for (std::size_t c = 0; c < tileReads.size(); ++c)
          if (sameExpr(e, *tileReads[c])) return ir::load(vt_, tileBuf(c), cell);
        throw InternalError("lower: a packed summand reads an unplanned tensor");
      };
      term = value(*g.summand, &fromSlivers);
    }
    // The reduction over the KC block; with several accumulator sets, term p goes to set
    // p mod kSets (the block's remainder to set 0) and the sets are added at its end.
    const int sets = g.kSets;
    auto setName = [&](int set) { return set == 0 ? acc : acc + std::to_string(set); };
    auto addTerm = [&](int set) {
      return tile(ir::store(setName(set), cell, ir::add(ir::load(vt_, setName(set), cell), term)));
    };
    Stmt update = ir::forLoop(pv, imm(0), kcLen, ForKind::Serial, addTerm(0));
    if (inPlace) {
      // The block's reduction indices as loops of their own (B's address is affine in them;
      // LLVM unrolls a window's short taps into constant offsets), the position in the
      // packed A sliver computed from them.
      Stmt step = let(pv, ir::add(ir::mul(ir::sub(var(st.vars[kq].name), var(q0)), imm(innerTotal)),
                                  flat(kInner)),
                      addTerm(0));
      for (std::size_t q = kInner.size(); q-- > 0;) {
        const std::size_t v = kInner[q];
        Expr lo = imm(r[v].first), hi = imm(r[v].second);
        if (std::find(loopBounded.begin(), loopBounded.end(), v) != loopBounded.end()) {
          lo = ir::binary(BinOp::Max, lo, boundExpr(bs.loBound[v]));
          hi = minOf(hi, boundExpr(bs.hiBound[v]));
        }
        step = ir::forLoop(st.vars[v].name, lo, hi, ForKind::Serial, std::move(step));
      }
      update = ir::forLoop(st.vars[kq].name, var(q0), var(q1), ForKind::Serial, std::move(step));
    }
    if (sets > 1) {
      const std::string pu = "gemm.pu";
      std::vector<Stmt> round, steps;
      for (int u = 0; u < sets; ++u)
        round.push_back(let(pv, ir::add(ir::mul(var(pu), imm(sets)), imm(u)), addTerm(u)));
      const Expr rounds = ir::binary(BinOp::Div, kcLen, imm(sets));
      steps.push_back(
          ir::forLoop(pu, imm(0), rounds, ForKind::Serial, ir::block(std::move(round))));
      steps.push_back(
          ir::forLoop(pv, ir::mul(rounds, imm(sets)), kcLen, ForKind::Serial, addTerm(0)));
      for (int u = 1; u < sets; ++u)
        steps.push_back(tile(ir::store(acc, cell, ir::add(a, ir::load(vt_, setName(u), cell)))));
      update = ir::block(std::move(steps));
    }
    // The tile into the output: stored by the first KC block of a ':=', added by the others;
    // split, into the part's partial output ([part][batch][M][N]), stored by its first block.
    auto partialAt = [&] {
      const Expr row = (kPart * batchTotal + flat(Bt)) * M + (varExpr_[m] - r[m].first);
      return row * N + (varExpr_[n] - r[n].first);
    };
    Expr inside;
    bool dropped = false;
    Expr off = splitK ? partialAt() : offset(*st.lhs, &inside, &dropped);
    if (dropped || inside) throw InternalError("lower: a packed GEMM's output is not plain");
    const std::string& out = splitK ? partial : bufferName(st.output);
    const Type et = splitK ? vt_ : elemType(st.output);
    auto finish = [&](const std::function<Stmt(Stmt)>& cells, const Expr& sum) {
      const Expr v = g.scale != 1 ? ir::mul(sum, num(g.scale)) : sum;
      Stmt put = cells(ir::store(out, off, ir::cast(et, v)));
      Stmt add = cells(ir::store(out, off, ir::cast(et, ir::add(ir::cast(vt_, ir::load(et, out, off)), v))));
      Stmt stored = add;
      if (splitK) return ir::ifThen(ir::binary(BinOp::Eq, var(pb), var(pb0)), put, add);
      if (st.assign == Assign::Define) // one KC block (a residue phase's): the first is the only one
        stored = g.kBlocks == 1 ? put : ir::ifThen(ir::binary(BinOp::Eq, var(pb), imm(0)), put, add);
      if (ctx_.epilogueThrough <= stmt_) return stored;
      // The epilogue (schedule/Fusion.h): once the last KC block has completed the tile, the
      // element-wise statements after this one, each element's in program order, reading the
      // tile back from the output while it is in cache.
      const std::size_t self = stmt_;
      std::vector<Stmt> members;
      for (std::size_t j = self + 1; j <= ctx_.epilogueThrough; ++j) {
        stmt_ = j;
        if (Stmt e = storeOutput(p_.stmts[j], value(*p_.stmts[j].rhs))) members.push_back(e);
      }
      stmt_ = self;
      if (members.empty()) return stored;
      return ir::block({stored, ir::ifThen(ir::binary(BinOp::Eq, var(pb), imm(g.kBlocks - 1)),
                                           cells(ir::block(std::move(members))))});
    };
    // A tile whose elements are stored one by one (inside the output), from a copy of the
    // accumulators (indexed by loop variables, it leaves the accumulators themselves in
    // registers): rolled loops over its rows and columns inside the output (no vector code to
    // compile for them).
    auto rows = [&](Stmt body) {
      body = ir::forLoop(jj, imm(0), minOf(imm(nr), ir::sub(imm(N), ir::mul(var(tv), imm(NR)))),
                         ForKind::Rolled, body);
      return ir::forLoop(ii, imm(0), minOf(imm(MR), ir::sub(imm(M), ir::mul(var(sv), imm(MR)))),
                         ForKind::Rolled, body);
    };
    if (columns > 0) {
      ColumnsKernel c{columns, MR, g.width, blockSl[0], M, vt_, sv, ii, jj, pv, ic, as1, kcLen,
                      ir::load(vt_, buf[0], packed(0, var(sv), var(pv), var(ii))),
                      ir::load(vt_, buf[1], packed(1, var(tv), var(pv), var(jj))), finish,
                      target_.fmaChains};
      return columnsKernel(c);
    }
    Stmt part = ir::allocate(edge, vt_, MR * nr,
                             ir::block({tile(ir::store(edge, cell, a)), finish(rows, ir::load(vt_, edge, cell))}));
    Stmt store = part;
    if (!g.vectorStore && g.kBlocks == 1 && st.assign == Assign::Define) {
      // An output not contiguous along N, each tile stored once (a residue phase's dx[2q + rho]:
      // a short reduction, so the stores weigh): a tile of MR whole rows is copied out of the
      // accumulators (vector stores) and stored from the copy by a rolled loop over its rows
      // whose body writes one row, its columns unrolled (each element at a constant offset
      // from the row's start): NR columns, or the last sliver's count (the half-width kernel
      // runs only the last sliver). Every element of the tile written out (no loop) ran a few
      // percent faster but was about half of a phase's code to compile; a loop per element
      // (rows and columns rolled, as for a partial tile) ran slower. Tiles stored once per KC
      // block of a long reduction keep the general loops (less code to compile, little time).
      // With 64-byte vectors a row of whole vectors a few elements apart in the output (the
      // phase's stride 2) is stored as vectors instead: each spread over the run it spans and
      // written by a masked store (codegen), two permutes and two stores where a row of 16
      // columns took 16 loads and 16 stores.
      std::int64_t outStep = 0;
      const auto& os = ctx_.buffers.strides[static_cast<std::size_t>(st.output)];
      for (std::size_t d = 0; d < st.lhs->subs.size(); ++d)
        outStep += st.lhs->subs[d].coef[static_cast<std::size_t>(n)] * os[d];
      const bool rowVectors = target_.vectorBytes >= 64 && outStep >= 2 && outStep <= 4 &&
                              ctx_.epilogueThrough <= stmt_;
      auto fixed = [&](std::int64_t cols) {
        const bool vec = rowVectors && cols % g.width == 0;
        const Stmt rowsOut = finish(
            [&](Stmt body) {
              body = vec ? ir::forLoop(jj, imm(0), imm(cols), ForKind::Vectorized, body, g.width)
                         : ir::forLoop(jj, imm(0), imm(cols), ForKind::Unrolled, body);
              return ir::forLoop(ii, imm(0), imm(MR), ForKind::Rolled, body);
            },
            ir::load(vt_, edge, cell));
        return ir::allocate(edge, vt_, MR * nr,
                            ir::block({tile(ir::store(edge, cell, a)), rowsOut}));
      };
      const std::int64_t lastCols = N - (S[1] - 1) * NR;
      Stmt whole = fixed(nr == NR ? NR : lastCols);
      if (nr == NR && !halfTail && lastCols != NR)
        whole = ir::ifThen(less(var(tv), imm(S[1] - 1)), whole, fixed(lastCols));
      store = M % MR == 0 ? whole : ir::ifThen(less(var(sv), imm(M / MR)), whole, part);
    }
    // Also the half-width kernel's tiles where N's last sliver fills them (N = 56, NR = 16): an
    // element-wise copy weighs where the reduction is short (a 1x1 forward's KC of 64).
    if ((g.vectorStore || splitK) && (nr == NR || (g.vectorStore && N % NR == nr))) {
      store = finish(tile, a);
      Expr whole;
      if (M % MR != 0) whole = less(var(sv), imm(M / MR));
      if (nr == NR && N % NR != 0) whole = conj(whole, less(var(tv), imm(N / NR)));
      if (whole) store = ir::ifThen(whole, store, part);
    }
    std::vector<Stmt> steps = std::move(loadTiles);
    for (int u = 0; u < sets; ++u) steps.push_back(tile(ir::store(setName(u), cell, num(0))));
    // The tile's lines of the output fetched before the reduction (ir::Prefetch), its rows'
    // first and last elements (a row of NR lanes spans one or two lines), clamped inside the
    // output: the stores (or loads and stores) after the reduction then find them in L1. A
    // task's part of the output is larger than L2, so each KC block's tiles came from L3 or
    // memory, a load per line that the reduction's loop no longer hides once it has ended.
    if (g.vectorStore && !splitK && g.prefetchOut) { // (a partial output stays in L2)
      const Expr savedM = varExpr_[m], savedN = varExpr_[n];
      varExpr_[m] = minOf(savedM, imm(r[m].second - 1));
      std::vector<Stmt> lines;
      for (const std::int64_t col : {std::int64_t{0}, nr - 1}) {
        varExpr_[n] = minOf(ir::substitute(savedN, jj, imm(col)), imm(r[n].second - 1));
        Expr at;
        bool gone = false;
        lines.push_back(ir::prefetch(out, offset(*st.lhs, &at, &gone)));
      }
      varExpr_[m] = savedM;
      varExpr_[n] = savedN;
      steps.push_back(ir::forLoop(ii, imm(0), imm(MR), ForKind::Unrolled, ir::block(std::move(lines))));
    }
    steps.push_back(update);
    steps.push_back(store);
    Stmt kernel = ir::block(std::move(steps));
    for (int u = sets; u-- > 0;) kernel = ir::allocate(setName(u), vt_, MR * nr, kernel);
    for (std::size_t c = tileReads.size(); c-- > 0;)
      kernel = ir::allocate(tileBuf(c), vt_, MR * nr, kernel);
    return ir::forLoop(sv, var(ic), minOf(ir::add(var(ic), imm(blockSl[0])), var(as1)),
                       ForKind::Serial, kernel);
  };
  const bool inPlace = g.bInPlace;
  Stmt body = kernelOf(NR, inPlace, false);
  // In place: the slivers [t0, t1) read without a mask (GemmPlan::plainFrom); the others with
  // masked loads, a last half-width sliver with its own kernel.
  const std::int64_t t0 = g.plainFrom, t1 = g.plainTo;
  if (inPlace && (t0 > 0 || t1 < S[1])) {
    // A full-width masked kernel only where a masked sliver is not the half-width last one.
    const bool wide = t0 > 0 || t1 < S[1] - (halfTail ? 1 : 0);
    Stmt masked = kernelOf(halfTail ? NR / 2 : NR, true, true);
    if (halfTail && wide)
      masked = ir::ifThen(less(var(tv), imm(S[1] - 1)), kernelOf(NR, true, true), masked);
    Expr plain = less(var(tv), imm(t1));
    if (t0 > 0) plain = ir::binary(BinOp::And, ir::binary(BinOp::Ge, var(tv), imm(t0)), plain);
    body = t1 > t0 ? ir::ifThen(plain, body, masked) : masked;
  } else if (columnTail)
    body = ir::ifThen(less(var(tv), imm(S[1] - 1)), body, kernelOf(NR, false, false, tailColumns));
  else if (halfTail)
    body = ir::ifThen(less(var(tv), imm(S[1] - 1)), body, kernelOf(NR / 2, false, false));
  body = ir::forLoop(tv, var(jc), minOf(ir::add(var(jc), imm(blockSl[1])), var(bs1)),
                     ForKind::Serial, body);
  // An A block per MC slivers (packed here unless A is packed whole), a B panel per NC slivers
  // and KC block.
  if (!g.whole[0])
    body = ir::block({pack(0, var(ic), minOf(ir::add(var(ic), imm(blockSl[0])), var(as1)), true,
                           panelSlot(0)),
                      body});
  const std::string icb = "gemm.icb", jcb = "gemm.jcb";
  body = let(ic, ir::add(var(as0), ir::mul(var(icb), imm(blockSl[0]))), body);
  body = ir::forLoop(icb, imm(0), imm(cdiv(g.mChunk, blockSl[0])), ForKind::Serial, body);
  if (!g.whole[1] && !inPlace)
    body = ir::block({pack(1, var(jc), minOf(ir::add(var(jc), imm(blockSl[1])), var(bs1)), true,
                           panelSlot(1)),
                      body});
  if (g.batchInside) {
    Expr lo = imm(0), hi = imm(batchTotal);
    if (g.batchGroups > 1) {
      const Expr grp = ir::binary(BinOp::Mod, task, imm(g.batchGroups));
      lo = ir::binary(BinOp::Div, ir::mul(grp, imm(batchTotal)), imm(g.batchGroups));
      hi = ir::binary(BinOp::Div, ir::mul(ir::add(grp, imm(1)), imm(batchTotal)), imm(g.batchGroups));
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
