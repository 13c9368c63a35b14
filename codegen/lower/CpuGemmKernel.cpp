// The micro-kernel of the CPU's packed GEMM path (lower/CpuGemm.cpp): MR x NR accumulators
// across a KC block over the packed slivers (or B read in place), then the tile into the output
// (vector stores, or element by element inside it), the epilogue after the last KC block.
#include "codegen/IROperator.h"
#include "codegen/lower/CpuGemmColumns.h"
#include "codegen/lower/CpuGemmLowering.h"
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

namespace {

using namespace gemm; // the IR shorthands (CpuGemmLowering.h)
using ir::let;

} // namespace

// B read in place with a window along the task's batch index (a stride-2 convolution's
// x[n,c,2h+a,2w+b] over tasks of (n, h), an input gradient's dy[n,o,u-a,v-b]): each step also
// fetches into L2 the line of its sliver's first lane at the next batch value, the next task's
// rows (GemmPlan::prefetchNext; the lanes' other line is the next sliver's first). Each task meets
// one or two rows no task has read, a line from memory per channel and sliver in the steps of
// one tap, that the FMAs did not hide (bench/RESULTS.md, "the 3x3 stride-1 rows on Zen 4").
// A fetch past B's end or before a masked lane's start is only a hint (never a fault).
Stmt Lowerer::nextRowsPrefetch(const GemmLowering& gl) {
  const GemmPlan& g = gl.g;
  if (!g.prefetchNext || g.batchInside || g.batchFastest || gl.Bt.empty()) return nullptr;
  const CExpr& b = *gl.ops[1];
  const std::size_t v = gl.Bt.back();
  // A window whose next task reads one new row just past this task's rows, its taps in
  // ascending order (the stride-1 forward's x[n,c,h+a,w+b]: rows h..h+2, then h+3), is left
  // to the hardware's stream prefetcher: fetched too, it measured slower. Rows two apart
  // (the stride-2 forward: two new rows a task) and taps against the index (the input
  // gradient's u - a: the new row read first) are fetched.
  bool window = false;
  for (const Subscript& sub : b.subs)
    if (sub.coef[v] != 0)
      for (std::size_t k : gl.K)
        if (sub.coef[k] != 0)
          window = window || sub.coef[v] > 1 || (sub.coef[v] > 0) != (sub.coef[k] > 0);
  if (!window || gl.r[v].second - gl.r[v].first < 2) return nullptr;
  const Expr savedV = varExpr_[v], savedN = varExpr_[gl.n];
  varExpr_[v] = minOf(ir::add(savedV, imm(1)), imm(gl.r[v].second - 1));
  varExpr_[gl.n] = ir::substitute(savedN, gl.jj, imm(0));
  Expr at;
  bool gone = false;
  Expr off;
  {
    const Scoped<bool> trust(ctx_.trustPlain, true);
    off = offset(b, &at, &gone);
  }
  varExpr_[v] = savedV;
  varExpr_[gl.n] = savedN;
  if (gone || at) return nullptr;
  return ir::prefetch(bufferName(b.tensor), off, true);
}

// B read in place (GemmPlan::bInPlace): every sliver from the operand itself, a partial last
// one with masked loads (its lanes past N are neither read nor stored).
Stmt Lowerer::gemmKernel(const GemmLowering& gl, std::int64_t nr, bool inPlace, bool masked,
                         std::int64_t columns) {
  const Statement& st = gl.st;
  const BoundStatement& bs = gl.bs;
  const GemmPlan& g = gl.g;
  const GemmLowering::Ranges& r = gl.r;
  const CExpr* const* ops = gl.ops;
  const GemmOperands* operands = &gl.operands;
  const std::int64_t *S = gl.S, *blockSl = gl.blockSl;
  const std::string* buf = gl.buf;
  const std::vector<std::size_t>&Bt = gl.Bt, &kInner = gl.kInner;
  const std::vector<std::size_t>&laneMasked = gl.laneMasked, &loopBounded = gl.loopBounded;
  const std::size_t kq = gl.kq, m = gl.m, n = gl.n;
  const std::int64_t batchTotal = gl.batchTotal, innerTotal = gl.innerTotal;
  const std::int64_t MR = gl.MR, NR = gl.NR, M = gl.M, N = gl.N;
  const std::string &pb = gl.pb, &ic = gl.ic, &tv = gl.tv, &sv = gl.sv, &pv = gl.pv, &ii = gl.ii,
                    &jj = gl.jj, &q0 = gl.q0, &q1 = gl.q1, &as1 = gl.as1, &acc = gl.acc,
                    &edge = gl.edge, &partial = gl.partial, &pb0 = gl.pb0;
  const bool splitK = gl.splitK, halfTail = gl.halfTail;
  const Expr &kPart = gl.kPart, &kcLen = gl.kcLen;
  auto packed = [&](int x, const Expr& sl, const Expr& p, const Expr& l) {
    return gl.packed(x, sl, p, l);
  };
  auto flat = [&](const std::vector<std::size_t>& grp) { return gl.flat(grp); };
  auto tileBuf = [](std::size_t c) { return GemmLowering::tileBuf(c); };
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
    Stmt body = addTerm(0);
    if (Stmt ahead = nextRowsPrefetch(gl)) body = ir::block({ahead, body});
    Stmt step = let(
        pv,
        ir::add(ir::mul(ir::sub(var(st.vars[kq].name), var(q0)), imm(innerTotal)), flat(kInner)),
        body);
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
    steps.push_back(ir::forLoop(pu, imm(0), rounds, ForKind::Serial, ir::block(std::move(round))));
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
    Stmt add =
        cells(ir::store(out, off, ir::cast(et, ir::add(ir::cast(vt_, ir::load(et, out, off)), v))));
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
    ColumnsKernel c{columns,
                    MR,
                    g.width,
                    blockSl[0],
                    M,
                    vt_,
                    sv,
                    ii,
                    jj,
                    pv,
                    ic,
                    as1,
                    kcLen,
                    ir::load(vt_, buf[0], packed(0, var(sv), var(pv), var(ii))),
                    ir::load(vt_, buf[1], packed(1, var(tv), var(pv), var(jj))),
                    finish,
                    target_.fmaChains};
    return columnsKernel(c);
  }
  Stmt part = ir::allocate(
      edge, vt_, MR * nr,
      ir::block({tile(ir::store(edge, cell, a)), finish(rows, ir::load(vt_, edge, cell))}));
  Stmt store = part;
  const bool storedOnce = !g.vectorStore && g.kBlocks == 1 && st.assign == Assign::Define;
  std::int64_t outStep = 0; // the output's stride along N
  {
    const auto& os = ctx_.buffers.strides[static_cast<std::size_t>(st.output)];
    for (std::size_t d = 0; d < st.lhs->subs.size(); ++d)
      outStep += st.lhs->subs[d].coef[static_cast<std::size_t>(n)] * os[d];
  }
  const bool rowVectors =
      target_.vectorBytes >= 64 && outStep >= 2 && outStep <= 4 && ctx_.epilogueThrough <= stmt_;
  if (storedOnce) {
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
    // A row of columns that is not whole vectors (the last sliver's 12 of 16 at N = 28) is
    // stored the same way with the lanes past it off; a tile with rows past M (the last of 64
    // channels in 22-row tiles) loops over the rows it has.
    auto fixed = [&](std::int64_t cols, bool rowsPastM) {
      const std::int64_t span = cdiv(cols, g.width) * g.width;
      const bool vec = rowVectors && span <= nr;
      const Expr rowCount =
          rowsPastM ? minOf(imm(MR), ir::sub(imm(M), ir::mul(var(sv), imm(MR)))) : imm(MR);
      const Stmt rowsOut = finish(
          [&](Stmt body) {
            if (vec && span != cols) body = ir::ifThen(less(var(jj), imm(cols)), body);
            body = vec ? ir::forLoop(jj, imm(0), imm(span), ForKind::Vectorized, body, g.width)
                       : ir::forLoop(jj, imm(0), imm(cols), ForKind::Unrolled, body);
            return ir::forLoop(ii, imm(0), rowCount, ForKind::Rolled, body);
          },
          ir::load(vt_, edge, cell));
      return ir::allocate(edge, vt_, MR * nr, ir::block({tile(ir::store(edge, cell, a)), rowsOut}));
    };
    const std::int64_t lastCols = N - (S[1] - 1) * NR;
    auto rowsOf = [&](bool rowsPastM) {
      Stmt whole = fixed(nr == NR ? NR : lastCols, rowsPastM);
      if (nr == NR && !halfTail && lastCols != NR)
        whole = ir::ifThen(less(var(tv), imm(S[1] - 1)), whole, fixed(lastCols, rowsPastM));
      return whole;
    };
    const bool vectorRows = rowVectors && cdiv(lastCols, g.width) * g.width <= nr;
    if (M % MR == 0)
      store = rowsOf(false);
    else
      store =
          ir::ifThen(less(var(sv), imm(M / MR)), rowsOf(false), vectorRows ? rowsOf(true) : part);
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
  // A residue phase's rows (stored once, as spread vectors: rowVectors) span two or more
  // lines each: a column every line's width apart.
  const bool stridedRows = storedOnce && rowVectors;
  // (A partial output stays in L2.)
  if ((g.vectorStore || stridedRows) && !splitK && g.prefetchOut) {
    const Expr savedM = varExpr_[m], savedN = varExpr_[n];
    varExpr_[m] = minOf(savedM, imm(r[m].second - 1));
    std::vector<Stmt> lines;
    std::vector<std::int64_t> cols{0};
    if (stridedRows) {
      const std::int64_t elemBytes = target_.vectorBytes / g.width;
      const std::int64_t lineCols = std::max<std::int64_t>(64 / (outStep * elemBytes), 1);
      for (std::int64_t col = lineCols; col < nr - 1; col += lineCols) cols.push_back(col);
    }
    cols.push_back(nr - 1);
    for (const std::int64_t col : cols) {
      varExpr_[n] = minOf(ir::substitute(savedN, jj, imm(col)), imm(r[n].second - 1));
      Expr at;
      bool gone = false;
      lines.push_back(ir::prefetch(out, offset(*st.lhs, &at, &gone)));
    }
    varExpr_[m] = savedM;
    varExpr_[n] = savedN;
    steps.push_back(
        ir::forLoop(ii, imm(0), imm(MR), ForKind::Unrolled, ir::block(std::move(lines))));
  }
  steps.push_back(update);
  steps.push_back(store);
  Stmt kernel = ir::block(std::move(steps));
  for (int u = sets; u-- > 0;) kernel = ir::allocate(setName(u), vt_, MR * nr, kernel);
  for (std::size_t c = tileReads.size(); c-- > 0;)
    kernel = ir::allocate(tileBuf(c), vt_, MR * nr, kernel);
  return ir::forLoop(sv, var(ic), minOf(ir::add(var(ic), imm(blockSl[0])), var(as1)),
                     ForKind::Serial, kernel);
}

} // namespace einjit::codegen::lowering
