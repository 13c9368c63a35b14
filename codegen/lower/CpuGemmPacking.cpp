// The packings of the CPU's packed GEMM path (lower/CpuGemm.cpp has the layouts): slivers of an
// operand copied into a packed buffer along the reduction positions of a whole operand or of a
// KC block, lanes past the extent and positions outside a dependent range as zeros.
#include "codegen/IROperator.h"
#include "codegen/lower/CpuGemmColumns.h"
#include "codegen/lower/CpuGemmLowering.h"
#include "codegen/lower/CpuGemmPanels.h"
#include "codegen/lower/Lowerer.h"
#include "codegen/schedule/GemmKnobs.h"

#include <algorithm>

namespace einjit::codegen::lowering {

namespace {

using namespace gemm; // the IR shorthands (CpuGemmLowering.h)
using ir::let;

// Elements along the lanes that the packing of an operand contiguous along them reads per step
// of the reduction: 4 cache lines of f32.
constexpr std::int64_t kGroupElements = 64;

} // namespace

// Packing slivers [sLo, sHi) of operand x at the reduction positions of kLoops(block) into
// slot(s, p, l). Where a lane is past the extent, a masked index outside its range or a
// padded subscript outside its dimension, the element is 0 and nothing is read; a run of
// lanes (contiguous in the operand) that is all inside, every unproven subscript in bounds
// at both ends, is read with vector loads and no checks; any other element with the
// ordinary checked read.
Stmt Lowerer::gemmPacking(const GemmLowering& gl, int x, const Expr& sLo, const Expr& sHi,
                          bool block, const std::function<Expr(Expr, Expr, Expr)>& slot) {
  const Statement& st = gl.st;
  const BoundStatement& bs = gl.bs;
  const GemmPlan& g = gl.g;
  const GemmLowering::Ranges& r = gl.r;
  const CExpr* const* ops = gl.ops;
  const std::size_t* sideVar = gl.sideVar;
  const std::int64_t *W = gl.W, *extent = gl.extent, *S = gl.S;
  const std::string* buf = gl.buf;
  const std::int64_t tailColumns = gl.tailColumns;
  const std::size_t kq = gl.kq;
  const std::vector<std::size_t>& kInner = gl.kInner;
  const std::string &q0 = gl.q0, &q1 = gl.q1;
  const bool laneMajorA = gl.laneMajorA;
  auto kLoops = [&](bool b, Stmt body) { return gl.kLoops(b, std::move(body)); };
  auto kLoopsOf = [&](bool b, const std::function<bool(std::size_t)>& keep, Stmt body) {
    return gl.kLoopsOf(b, keep, std::move(body));
  };
  auto kPos = [&](bool b) { return gl.kPos(b); };
  const CExpr& op = *ops[x];
  const std::size_t side = sideVar[x];
  const std::int64_t w = W[x], lo = r[side].first, hi = r[side].second;
  const std::vector<int>& masks = g.masks[static_cast<std::size_t>(x)];
  bool monotone = true;
  for (int v : masks)
    for (const ConcreteBound* cb :
         {&bs.loBound[static_cast<std::size_t>(v)], &bs.hiBound[static_cast<std::size_t>(v)]})
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
      c = conj(c,
               ir::binary(BinOp::And, ir::binary(BinOp::Ge, varExpr_[u], boundExpr(bs.loBound[u])),
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
      for (const ConcreteBound* cb :
           {&bs.loBound[static_cast<std::size_t>(v)], &bs.hiBound[static_cast<std::size_t>(v)]}) {
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
        Stmt chunk =
            ir::forLoop(ls, imm(0), imm(g.width), ForKind::Vectorized,
                        ir::substitute(put(readAt(at, true)), ls, ir::add(j, var(ls))), g.width);
        chunk = let(js, minOf(ir::add(L, ir::mul(var(cs), imm(g.width))), ir::sub(H, imm(g.width))),
                    chunk);
        Expr chunks =
            ir::binary(BinOp::Div, ir::add(ir::sub(H, L), imm(g.width - 1)), imm(g.width));
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
      Stmt columns =
          columnsPacking(tailColumns, terms ? &*terms : nullptr, safe ? &*safe : nullptr,
                         lanes(put(readAt(at, true))), lanes(put(num(0))), lanes(element()));
      body = ir::ifThen(less(var(ps), imm(S[1] - 1)), body, columns);
    }
    const std::int64_t grp = std::max<std::int64_t>(1, kGroupElements / w);
    Expr first = ir::add(sLo, ir::mul(var(gs), imm(grp)));
    body = ir::forLoop(ps, first, minOf(ir::add(first, imm(grp)), sHi), ForKind::Rolled, body);
    body = kLoopsOf(
        block, [&](std::size_t v) { return !free(v); }, body);
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
    // Where 512-bit operations run in halves (Zen 4), each lane's lines of the next KC block
    // are fetched into L2 while this one is copied (its run continues there: a weight
    // gradient's next rows of dy or x), one prefetch per cache line of the innermost loop's
    // run: without it the copy waits on memory a run of lines at a time (bench/RESULTS.md,
    // "transposed B packing"). Zen 4 only: the other targets were not measured with it.
    Stmt ahead;
    Expr rd = readAt(at, false);
    const std::int64_t line = 64 / static_cast<std::int64_t>(ir::typeBytes(rd->type));
    std::int64_t ilo = 0, ihi = 0;
    const int pa = gemmKnobs().prefetchA;
    if ((pa < 0 ? target_.halvedVectors : pa == 1) && rd->kind == ir::NodeKind::Load &&
        kInner.size() == 1 &&
        ir::isConst(run.back().lo, &ilo) && ir::isConst(run.back().hi, &ihi)) {
      const auto& ld = static_cast<const ir::Load&>(*rd);
      Expr next = ir::substitute(ld.index, st.vars[kq].name,
                                 ir::add(var(st.vars[kq].name), ir::sub(var(q1), var(q0))));
      std::vector<Stmt> lines;
      for (std::int64_t p = ilo; p < ihi; p += line)
        lines.push_back(ir::prefetch(ld.buffer, ir::substitute(next, run.back().var, imm(p)), true));
      ahead = ir::block(lines);
    }
    return laneMajorPacking(ps, sLo, sHi, ls, inside, w, run, g.width, put, rd, num(0), ahead);
  }
  Stmt plain = lanes(ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), readAt(at, false)),
                     ForKind::Unrolled);
  if (const int tw = transposeWidth(gl, x); tw > 0) {
    // B's lanes far apart, its innermost reduction index contiguous (or nearly) in the operand:
    // tw positions of each of tw lanes read as one vector per lane, transposed in registers and
    // stored as one vector per position (the codegen's transposed stores, VectorTranspose.h),
    // instead of a scalar load and store per element (a weight gradient's x, a GEMM's B^T).
    // The innermost index in chunks of tw, the last one ending at its end (it may overlap the
    // one before); a block shorter than tw takes the scalar copies.
    const std::size_t u = gl.K.back();
    const std::string& un = st.vars[u].name;
    const bool chunked = block && u == kq, blocks = !block && u == kq;
    const std::string cs = "gemm.tc", js = "gemm.tj", tv = "gemm.tv", tb = "gemm.tb";
    auto put = [&]() {
      return ir::store(buf[x], slot(var(ps), kPos(block), var(ls)), readAt(at, true));
    };
    // [lo, hi) of u in chunks of tw (hi - lo >= tw); `pos`: the KC block's position of u.
    auto chunks = [&](const Expr& from, const Expr& to, const std::function<Expr(Expr)>& pos) {
      Expr first = ir::add(var(js), var(tv));
      if (pos) packedKBlock_ = std::make_pair(var(tb), pos(first));
      Stmt one = ir::forLoop(ls, imm(0), imm(w), ForKind::Unrolled, put());
      packedKBlock_.reset();
      one = ir::forLoop(tv, imm(0), imm(tw), ForKind::Vectorized, ir::substitute(one, un, first), tw);
      one = let(js, minOf(ir::add(from, ir::mul(var(cs), imm(tw))), ir::sub(to, imm(tw))), one);
      Expr n = ir::binary(BinOp::Div, ir::add(ir::sub(to, from), imm(tw - 1)), imm(tw));
      return ir::forLoop(cs, imm(0), n, ForKind::Rolled, one);
    };
    // A run shorter than tw: a lane at a time.
    auto scalar = [&](const Expr& from, const Expr& to) {
      return ir::forLoop(un, from, to, ForKind::Rolled,
                         ir::forLoop(ls, imm(0), imm(w), ForKind::Unrolled,
                                     ir::store(buf[x], slot(var(ps), kPos(block), var(ls)),
                                               readAt(at, false))));
    };
    auto longEnough = [&](const Expr& from, const Expr& to) {
      return ir::binary(BinOp::Ge, ir::sub(to, from), imm(tw));
    };
    // The KC blocks are kChunk long but the last: where none is shorter than tw, no block
    // takes the scalar copies, and they are left out (a packing of a few hundred LLVM
    // instructions less, which then shares a module with the other packings).
    const std::int64_t shortest =
        std::min(g.kChunk, gl.ext(u) - (gl.qBlocks - 1) * g.kChunk);
    auto orScalar = [&](const Expr& from, const Expr& to, Stmt whole) {
      return shortest >= tw ? whole : ir::ifThen(longEnough(from, to), whole, scalar(from, to));
    };
    Stmt run;
    if (chunked) {
      run = orScalar(var(q0), var(q1), chunks(var(q0), var(q1), nullptr));
    } else if (blocks) {
      // Packed whole, u the blocks' own index: its KC blocks in turn, each in chunks (a chunk
      // inside one block, so that the slot is linear in its lanes).
      const std::string bl = "gemm.tbl", bh = "gemm.tbh";
      const Expr from = var(bl), to = var(bh);
      Stmt each = orScalar(from, to, chunks(from, to, [&](Expr p) { return ir::sub(p, from); }));
      each = let(bh, minOf(ir::add(from, imm(g.kChunk)), imm(r[u].second)), each);
      each = let(bl, ir::add(imm(r[u].first), ir::mul(var(tb), imm(g.kChunk))), each);
      run = ir::forLoop(tb, imm(0), imm(gl.qBlocks), ForKind::Rolled, each);
    } else {
      run = chunks(imm(r[u].first), imm(r[u].second), nullptr);
    }
    // The other reduction loops of kLoops(block): per block, k[kSplit] and those inside it.
    const std::ptrdiff_t from = block ? std::find(gl.K.begin(), gl.K.end(), kq) - gl.K.begin() : 0;
    plain = kLoopsOf(
        block,
        [&](std::size_t v) {
          return v != u && std::find(gl.K.begin() + from, gl.K.end(), v) != gl.K.end();
        },
        run);
  }
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
    Stmt last =
        kLoops(block, ir::block({ir::forLoop(ls, imm(0), imm(inside), ForKind::Unrolled, put),
                                 ir::forLoop(ls, imm(inside), imm(w), ForKind::Unrolled, zero)}));
    body = ir::ifThen(less(var(ps), imm(extent[x] / w)), plain, last);
  } else
    body = plain;
  return ir::forLoop(ps, sLo, sHi, block ? ForKind::Outlined : ForKind::Rolled, body);
}

} // namespace einjit::codegen::lowering
