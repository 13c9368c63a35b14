// The packed GEMM path on the CPU (schedule/GemmPlan.h, docs/ARCHITECTURE.md): A packed into
// MR-wide slivers and B into NR-wide slivers in scratch buffers, then a blocked loop nest
// around an MR x NR micro-kernel.
//
// Layouts: sliver s of A (rows m0 + s*MR + ii) holds A(m, p) at ((batch*SA + s)*K + p)*MR + ii,
// p the flattened reduction position (its last index fastest); B likewise with NR. A sliver is
// contiguous along the whole reduction, so a KC block of it is one contiguous run and the
// micro-kernel reads both operands with unit stride whatever the operands' own layouts. The
// last sliver of an extent that MR (NR) does not divide is packed with zeros past the end.
//
// The micro-kernel keeps MR x NR accumulators (an Allocate indexed only by constants: MR rows
// unrolled, NR columns as explicit vectors, so LLVM keeps them in registers) across a KC
// block; the products are fmul + fadd with LLVM's contract flag, which the backend fuses into
// vector FMAs. A whole tile is stored (or added, after the first KC block) with vector stores;
// an edge tile goes through a second local tile and scalar stores of its elements inside the
// output. Each element's sum runs over the KC blocks in order and within a block in order,
// whatever the thread count.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

namespace {

Expr cdiv(std::int64_t a, std::int64_t b) { return ir::intImm((a + b - 1) / b); }

Expr minOf(Expr a, Expr b) { return ir::binary(BinOp::Min, std::move(a), std::move(b)); }

// Elements along the lanes that the packing of an operand contiguous along them reads per step
// of the reduction: 4 cache lines of f32.
constexpr std::int64_t kGroupElements = 64;

} // namespace

void Lowerer::emitGemm(const Statement& st, const BoundStatement& /*bs*/,
                       const StatementSchedule& s, const Ranges& r, const std::string& name) {
  const GemmPlan& g = *s.gemm;
  std::vector<const CExpr*> fs;
  flattenProduct(*st.rhs, fs);
  const CExpr& A = *fs[static_cast<std::size_t>(g.aFactor)];
  const CExpr& B = *fs[static_cast<std::size_t>(1 - g.aFactor)];
  const auto m = static_cast<std::size_t>(g.m), n = static_cast<std::size_t>(g.n);
  const std::int64_t MR = g.mr, NR = g.nr;
  const std::int64_t M = r[m].second - r[m].first, N = r[n].second - r[n].first;
  const std::vector<std::size_t> K(g.k.begin(), g.k.end()), Bt(g.batch.begin(), g.batch.end());
  const std::int64_t kTotal = extentOfGroup(K, r), batchTotal = extentOfGroup(Bt, r);
  const std::int64_t SA = (M + MR - 1) / MR, SB = (N + NR - 1) / NR; // slivers, the last partial
  const std::string packA = name + ".packA", packB = name + ".packB";
  out_.scratch.push_back({packA, vt_, batchTotal * SA * MR * kTotal});
  out_.scratch.push_back({packB, vt_, batchTotal * SB * NR * kTotal});

  // The flattened position of the current values of a group of indices (the last fastest).
  auto flat = [&](const std::vector<std::size_t>& group) {
    Expr e = ir::intImm(0);
    for (std::size_t v : group)
      e = ir::add(ir::mul(e, ir::intImm(r[v].second - r[v].first)),
                  ir::sub(varExpr_[v], ir::intImm(r[v].first)));
    return e;
  };
  auto loops = [&](const std::vector<std::size_t>& group, Stmt body) {
    for (std::size_t q = group.size(); q-- > 0;)
      body = ir::forLoop(st.vars[group[q]].name, ir::intImm(r[group[q]].first),
                         ir::intImm(r[group[q]].second), ForKind::Serial, body);
    return body;
  };
  // The parallel loop of a function over [0, count), each iteration `inner` flops of work.
  auto parallelLoop = [&](ir::Func& f, const std::string& v, std::int64_t count, double inner,
                          Stmt body) {
    ForKind kind = ForKind::Serial;
    if (g.parallel && count >= 2) {
      kind = ForKind::Parallel;
      f.parallel = true;
      f.parallelLo = 0;
      f.parallelHi = count;
      f.grain = std::max<std::int64_t>(
          1, static_cast<std::int64_t>(std::ceil(target_.minParallelWork / std::max(inner, 1.0))));
    }
    return ir::forLoop(v, ir::intImm(0), ir::intImm(count), kind, std::move(body));
  };

  // Packing: one function per operand, parallel over groups of its whole slivers, the partial
  // sliver (lanes past the extent read as 0, from a clamped address) in one more iteration.
  // An operand contiguous along the sliver's lanes is read a group of slivers at a time (whole
  // cache lines: otherwise each sliver would fetch every line of a power-of-two row stride
  // again), the lanes innermost (vector loads for B); otherwise each lane's run along the
  // reduction is read in turn.
  auto pack = [&](const CExpr& op, std::size_t side, std::int64_t width, std::int64_t slivers,
                  const std::string& buf, const std::string& fname) {
    setRanges(st, r);
    ir::Func f = newFunc(fname);
    const std::string gv = "gemm.sg", sv = "gemm.s", lv = "gemm.l";
    const std::int64_t lo = r[side].first, hi = r[side].second, whole = (hi - lo) / width;
    Expr at =
        ir::add(ir::add(ir::intImm(lo), ir::mul(ir::var(sv), ir::intImm(width))), ir::var(lv));
    Expr slot = ir::add(
        ir::mul(ir::add(ir::mul(ir::add(ir::mul(flat(Bt), ir::intImm(slivers)), ir::var(sv)),
                                ir::intImm(kTotal)),
                        flat(K)),
                ir::intImm(width)),
        ir::var(lv));
    varExpr_[side] = at;
    Stmt body = ir::store(buf, slot, read(op, true));
    std::int64_t unit = 0;
    const auto& os = strides_[static_cast<std::size_t>(op.tensor)];
    for (std::size_t d = 0; d < op.subs.size(); ++d) unit += op.subs[d].coef[side] * os[d];
    std::int64_t group = 1;
    if (unit == 1) {
      const bool vec = side == n && width % g.width == 0;
      group = std::max<std::int64_t>(1, kGroupElements / width);
      body = ir::forLoop(lv, ir::intImm(0), ir::intImm(width),
                         vec ? ForKind::Vectorized : ForKind::Unrolled, body, vec ? g.width : 1);
      Expr first = ir::mul(ir::var(gv), ir::intImm(group));
      body = ir::forLoop(sv, first, minOf(ir::add(first, ir::intImm(group)), ir::intImm(whole)),
                         ForKind::Serial, body);
      body = loops(K, body);
    } else {
      body = ir::forLoop(lv, ir::intImm(0), ir::intImm(width), ForKind::Unrolled, loops(K, body));
      body =
          ir::forLoop(sv, ir::var(gv), ir::add(ir::var(gv), ir::intImm(1)), ForKind::Serial, body);
    }
    const std::int64_t groups = (whole + group - 1) / group;
    if (whole < slivers) {
      varExpr_[side] = minOf(at, ir::intImm(hi - 1));
      Expr inside = ir::binary(BinOp::Lt, at, ir::intImm(hi));
      Stmt edge = ir::store(buf, slot, ir::select(inside, read(op, true), num(0)));
      edge = ir::forLoop(lv, ir::intImm(0), ir::intImm(width), ForKind::Unrolled, loops(K, edge));
      edge = ir::forLoop(sv, ir::intImm(whole), ir::intImm(whole + 1), ForKind::Serial, edge);
      body = ir::ifThen(ir::binary(BinOp::Lt, ir::var(gv), ir::intImm(groups)), body, edge);
    }
    body = parallelLoop(f, gv, groups + (whole < slivers ? 1 : 0),
                        static_cast<double>(kTotal * width * group), body);
    f.body = loops(Bt, body);
    out_.funcs.push_back(std::move(f));
  };
  pack(A, m, MR, SA, packA, name + "_packA");
  pack(B, n, NR, SB, packB, name + "_packB");

  // The product: parallel over (batch element, M block); in each, NC blocks of N, KC blocks of
  // the reduction, NR slivers of the B panel (one stays in L1), MR slivers of the A block (in
  // L2), the micro-kernel.
  setRanges(st, r);
  ir::Func f = newFunc(name);
  const std::string gv = "gemm.g", jc = "gemm.jc", pc = "gemm.pc", tv = "gemm.t", sv = "gemm.s",
                    pv = "gemm.p", ii = "gemm.i", jj = "gemm.j", acc = "acc", edge = "edge";
  const std::int64_t perBlock = g.mBlock / MR, perPanel = std::max<std::int64_t>(g.nc / NR, 1);
  Expr block = ir::var(gv), bflat = ir::intImm(0);
  if (batchTotal > 1) {
    block = ir::binary(BinOp::Mod, ir::var(gv), ir::intImm(g.mBlocks));
    bflat = ir::binary(BinOp::Div, ir::var(gv), ir::intImm(g.mBlocks));
    decompose(Bt, r, bflat);
  }
  varExpr_[m] =
      ir::add(ir::add(ir::intImm(r[m].first), ir::mul(ir::var(sv), ir::intImm(MR))), ir::var(ii));
  varExpr_[n] =
      ir::add(ir::add(ir::intImm(r[n].first), ir::mul(ir::var(tv), ir::intImm(NR))), ir::var(jj));
  Expr cell = ir::add(ir::mul(ir::var(ii), ir::intImm(NR)), ir::var(jj));
  auto tile = [&](Stmt body) {
    body = ir::forLoop(jj, ir::intImm(0), ir::intImm(NR), ForKind::Vectorized, body, g.width);
    return ir::forLoop(ii, ir::intImm(0), ir::intImm(MR), ForKind::Unrolled, body);
  };
  auto sliver = [&](const Expr& batch, std::int64_t count, const std::string& v, std::int64_t w,
                    const std::string& lane) {
    return ir::add(ir::mul(ir::add(ir::mul(ir::add(ir::mul(batch, ir::intImm(count)), ir::var(v)),
                                           ir::intImm(kTotal)),
                                   ir::var(pv)),
                           ir::intImm(w)),
                   ir::var(lane));
  };
  Expr a = ir::load(vt_, acc, cell);
  Stmt update =
      tile(ir::store(acc, cell,
                     ir::add(a, ir::mul(ir::load(vt_, packA, sliver(bflat, SA, sv, MR, ii)),
                                        ir::load(vt_, packB, sliver(bflat, SB, tv, NR, jj))))));
  Expr kLo = ir::mul(ir::var(pc), ir::intImm(g.kc));
  update = ir::forLoop(pv, kLo, minOf(ir::add(kLo, ir::intImm(g.kc)), ir::intImm(kTotal)),
                       ForKind::Serial, update);
  // The tile into the output: stored by the first KC block of a ':=', added by the others.
  Expr inside;
  bool dropped = false;
  Expr off = offset(*st.lhs, &inside, &dropped);
  if (dropped || inside) throw InternalError("lower: a packed GEMM's output is not plain");
  const std::string& out = bufferName(st.output);
  const Type et = elemType(st.output);
  auto finish = [&](const std::function<Stmt(Stmt)>& cells, const Expr& v) {
    Stmt put = cells(ir::store(out, off, ir::cast(et, v)));
    Stmt add =
        cells(ir::store(out, off, ir::cast(et, ir::add(ir::cast(vt_, ir::load(et, out, off)), v))));
    return st.assign == Assign::Define
               ? ir::ifThen(ir::binary(BinOp::Eq, ir::var(pc), ir::intImm(0)), put, add)
               : add;
  };
  Stmt store = finish(tile, a);
  if (M % MR != 0 || N % NR != 0) {
    // An edge tile: its elements inside the output, from a copy of the accumulators (indexed
    // by loop variables, it leaves the accumulators themselves in registers).
    auto rows = [&](Stmt body) {
      body = ir::forLoop(
          jj, ir::intImm(0),
          minOf(ir::intImm(NR), ir::sub(ir::intImm(N), ir::mul(ir::var(tv), ir::intImm(NR)))),
          ForKind::Serial, body);
      return ir::forLoop(
          ii, ir::intImm(0),
          minOf(ir::intImm(MR), ir::sub(ir::intImm(M), ir::mul(ir::var(sv), ir::intImm(MR)))),
          ForKind::Serial, body);
    };
    Stmt part = ir::allocate(
        edge, vt_, MR * NR,
        ir::block({tile(ir::store(edge, cell, a)), finish(rows, ir::load(vt_, edge, cell))}));
    Expr whole = ir::binary(BinOp::And, ir::binary(BinOp::Lt, ir::var(sv), ir::intImm(M / MR)),
                            ir::binary(BinOp::Lt, ir::var(tv), ir::intImm(N / NR)));
    store = ir::ifThen(whole, store, part);
  }
  Stmt kernel = ir::allocate(acc, vt_, MR * NR,
                             ir::block({tile(ir::store(acc, cell, num(0))), update, store}));
  Expr sLo = ir::mul(block, ir::intImm(perBlock)), tLo = ir::mul(ir::var(jc), ir::intImm(perPanel));
  Stmt body = ir::forLoop(sv, sLo, minOf(ir::add(sLo, ir::intImm(perBlock)), ir::intImm(SA)),
                          ForKind::Serial, kernel);
  body = ir::forLoop(tv, tLo, minOf(ir::add(tLo, ir::intImm(perPanel)), ir::intImm(SB)),
                     ForKind::Serial, body);
  body = ir::forLoop(pc, ir::intImm(0), cdiv(kTotal, g.kc), ForKind::Serial, body);
  body = ir::forLoop(jc, ir::intImm(0), cdiv(SB, perPanel), ForKind::Serial, body);
  f.body = parallelLoop(f, gv, batchTotal * g.mBlocks,
                        2.0 * static_cast<double>(g.mBlock * SB * NR * kTotal), body);
  out_.funcs.push_back(std::move(f));
}

} // namespace einjit::codegen::lowering
