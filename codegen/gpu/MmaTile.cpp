// The tensor-core GPU tile: one skeleton (emitGpuMma) and the epilogue shared by its two
// families, mma.sync and wgmma, each of which supplies only one slice's products and its
// fragment coordinates (TensorCoreVariant); the tile's shape, its operands' layouts, stages and
// split-K come from its plan (gpuschedule::planTensorCoreTile).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

Stmt Lowerer::tileEpilogue(const Statement& st, const Ranges& r, const TileSplit& split,
                           const std::vector<std::size_t>& I, const std::vector<std::size_t>& J,
                           const TileFrame& f, const std::function<Stmt(Stmt)>& cells,
                           const Expr& slot, std::int64_t vec) {
  const std::int64_t extI = extentOfGroup(I, r), extJ = extentOfGroup(J, r);
  const std::int64_t P = f.BN + 4, threads = Target::gpuTileBlock, per = threads / f.BN;
  if (f.BN > threads || threads % f.BN != 0 || f.BM % per != 0)
    throw InternalError("lower: a tile epilogue that does not divide among the threads");
  const std::string buf = "tile.C";
  auto at = [P](const Expr& row, const Expr& col) { return row * P + col; };
  Stmt put = cells(ir::store(buf, at(f.li, f.lj), ir::load(vt_, "acc", slot)));
  Expr thr = ir::var("gpu.thread");
  // A thread's run of `vec` cells along a row (16 bytes of the output stored at once where the
  // plan says so: gpuschedule::planTensorCoreTile), else one cell.
  const Type et = elemType(st.output);
  const std::int64_t across = f.BN / vec, rows = threads / across;
  Expr col = thr % across * vec;
  Expr row = thr / across + ir::var("e.row") * rows;
  Expr gi = f.baseI + row, gj = f.baseJ + col;
  decompose(I, r, gi);
  decompose(J, r, gj);
  Expr inTile = both(ir::lt(gi, extI), ir::lt(gj, extJ));
  Stmt store;
  if (vec == 1) {
    store = ir::ifThen(inTile, storeCell(st, r, split, ir::load(vt_, buf, at(row, col))));
  } else {
    Expr inside;
    bool dropped = false;
    Expr off = offset(*st.lhs, &inside, &dropped); // in bounds (vectorRead)
    Expr l = ir::var("e.l");
    Stmt fill =
        ir::forLoop("e.l", ir::intImm(0), ir::intImm(vec), ForKind::Unrolled,
                    ir::store("e.vec", l, ir::cast(et, ir::load(vt_, buf, at(row, col + l)))));
    store = ir::ifThen(inTile, ir::block({fill, ir::copyVector(bufferName(st.output), off, "e.vec",
                                                               ir::intImm(0), 16)}));
  }
  Stmt drain =
      ir::forLoop("e.row", ir::intImm(0), ir::intImm(f.BM / rows), ForKind::Unrolled, store);
  if (vec > 1) drain = ir::allocate("e.vec", et, vec, drain);
  return ir::block(
      {ir::asyncWait(0), ir::barrier(),
       ir::allocate(buf, vt_, f.BM * P, ir::block({put, ir::barrier(), drain}), true)});
}

auto Lowerer::mmaSyncVariant(std::int64_t WM, std::int64_t WN) -> TensorCoreVariant {
  constexpr std::int64_t BK = gpuschedule::kMmaSlice, MT = 4, NT = 4;
  TensorCoreVariant v;
  v.BM = 64 * WM;
  v.BN = WN * NT * 8;
  v.accumulators = MT * NT * 4;
  Expr thr = ir::var("gpu.thread");
  Expr lane = thr % Target::gpuWarp, warp = thr / Target::gpuWarp, g = lane / 4, t = lane % 4;
  Expr wm = warp / WN, wn = warp % WN;
  Expr mt = ir::var("w.m"), nt = ir::var("w.n"), ks = ir::var("k.s"), c = ir::var("w.c");
  // A warp's fragments for 16 of the reduction from ks * 16: rows from `first` (wm * 64 for
  // A, wn * 32 for B), fragment i `rows` further.
  auto operand = [ks](const Staged& sg, const Expr& stg, const Expr& first, std::int64_t rows) {
    ir::MmaOperand o;
    o.buffer = sg.buf;
    o.kMajor = !sg.rowMajor;
    o.stride = sg.stride;
    Expr at = sg.slot(first, ks * 16);
    o.base = stg * sg.stageElems + at;
    o.step = o.kMajor ? rows : rows * sg.stride;
    return o;
  };
  v.compute = [=](const std::vector<Staged>& ops, const Expr& stg) {
    Stmt step =
        ir::mma(operand(ops[0], stg, wm * (MT * 16), 16), operand(ops[1], stg, wn * (NT * 8), 8),
                static_cast<int>(MT), static_cast<int>(NT), "acc", ir::intImm(0));
    return ir::forLoop("k.s", ir::intImm(0), ir::intImm(BK / 16), ForKind::Unrolled, step);
  };
  // This lane's accumulator c of tile (mt, nt): row g (+8 for c >= 2), column 2t + c % 2.
  Expr rowA = wm * (MT * 16) + mt * 16 + g;
  v.slot = (mt * NT + nt) * 4 + c;
  v.li = rowA + c / 2 * 8;
  v.lj = wn * (NT * 8) + nt * 8 + (t * 2 + c % 2);
  v.cells = [](Stmt body) {
    body = ir::forLoop("w.n", ir::intImm(0), ir::intImm(NT), ForKind::Unrolled,
                       ir::forLoop("w.c", ir::intImm(0), ir::intImm(4), ForKind::Unrolled, body));
    return ir::forLoop("w.m", ir::intImm(0), ir::intImm(MT), ForKind::Unrolled, body);
  };
  return v;
}

auto Lowerer::wgmmaVariant(std::int64_t WM, bool sideBySide,
                           const gpuschedule::WarpgroupShape& shape) -> TensorCoreVariant {
  constexpr std::int64_t BK = gpuschedule::kMmaSlice;
  TensorCoreVariant v;
  // A warpgroup's columns (wgmma's n), the tile's.
  const std::int64_t WBN = shape.BN;
  v.BM = 64 * WM;
  v.BN = shape.BN * (sideBySide ? 2 : 1);
  v.WBN = WBN;
  v.accumulators = WBN / 2;
  v.inFlight = shape.inFlight;
  v.asyncProxy = true;
  Expr thr = ir::var("gpu.thread");
  Expr lane = thr % Target::gpuWarp, warp = thr / Target::gpuWarp, g = lane / 4, t = lane % 4;
  Expr nt = ir::var("w.n"), c = ir::var("w.c");
  // Warpgroup wgi multiplies rows 64 wgi.. of A by all BN columns of B (side by side: all 64
  // rows of A by columns WBN wgi.. of B).
  Expr wgi = thr / Target::gpuWarpgroup;
  Expr wgRowA = sideBySide ? ir::intImm(0) : wgi * 64,
       wgColB = sideBySide ? wgi * WBN : ir::intImm(0);
  auto coreOperand = [](const Staged& sg, const Expr& stg, const Expr& first) {
    ir::WgmmaOperand o;
    o.buffer = sg.buf;
    o.kMajor = sg.rowMajor;
    o.base = stg * sg.stageElems + sg.slot(first, ir::intImm(0));
    // 128-byte swizzle: k-major rows in 8-row atoms of 1024 bytes, a step 16 elements along
    // the row; mn-major: 64-wide atoms 1024 bytes apart, groups of 8 k 2 stride bytes apart.
    o.swizzle128 = true;
    o.lbo = sg.rowMajor ? 16 : 1024;
    o.sbo = sg.rowMajor ? 1024 : 2 * sg.stride;
    o.kStep = sg.rowMajor ? 16 : 2 * sg.stride;
    return o;
  };
  const int inFlight = shape.inFlight;
  v.compute = [=](const std::vector<Staged>& ops, const Expr& stg) {
    return ir::wgmma(coreOperand(ops[0], stg, wgRowA), coreOperand(ops[1], stg, wgColB),
                     static_cast<int>(WBN), static_cast<int>(BK / 16), "acc", ir::intImm(0),
                     inFlight);
  };
  // This lane's accumulator c of the warpgroup's n8 column block nt: rows from 16 (warp % 4),
  // row g (+8 for c >= 2), column 2t + c % 2.
  v.slot = nt * 4 + c;
  v.li = wgRowA + warp % 4 * 16 + g + c / 2 * 8;
  v.lj = wgColB + nt * 8 + (t * 2 + c % 2);
  v.cells = [WBN](Stmt body) {
    return ir::forLoop("w.n", ir::intImm(0), ir::intImm(WBN / 8), ForKind::Unrolled,
                       ir::forLoop("w.c", ir::intImm(0), ir::intImm(4), ForKind::Unrolled, body));
  };
  return v;
}

void Lowerer::emitGpuMma(const Statement& st, const BoundStatement& bs, const Ranges& r,
                         const std::string& name, const CExpr& lf, const CExpr& rf,
                         const std::vector<std::size_t>& I, const std::vector<std::size_t>& J,
                         const std::vector<std::size_t>& B, const std::vector<std::size_t>& K,
                         const std::vector<std::size_t>& maskL,
                         const std::vector<std::size_t>& maskR, const GpuTilePlan& plan) {
  const std::int64_t extI = extentOfGroup(I, r), extJ = extentOfGroup(J, r),
                     extK = extentOfGroup(K, r), extB = extentOfGroup(B, r);
  const std::int64_t BK = plan.BK, slices = (extK + BK - 1) / BK;
  const bool wg = plan.kind == GpuTileKind::Wgmma;
  const TensorCoreVariant v =
      !wg ? mmaSyncVariant(plan.WM, plan.WN)
          : wgmmaVariant(plan.WM, plan.sideBySide, {plan.WBN, plan.stages, plan.inFlight});
  const std::int64_t BM = plan.BM, BN = plan.BN;
  if (v.BM != BM || v.BN != BN || BK != gpuschedule::kMmaSlice)
    throw InternalError("lower: a tensor-core tile whose shape its variant does not have");
  const std::int64_t tilesI = (extI + BM - 1) / BM, tilesJ = (extJ + BN - 1) / BN;
  setRanges(st, r);
  const TileSplit split = tileSplit(st, r, plan, name);
  ir::Func f = newFunc(name);
  Expr blk = tileBlock(split);
  Expr tj = blk % tilesJ, ti = blk / tilesJ % tilesI, bt = blk / (tilesJ * tilesI);
  if (!B.empty()) decompose(B, r, bt);
  Expr baseI = ti * BM, baseJ = tj * BN;
  const std::vector<Staged> ops = {staged({&lf}, I, baseI, plan.operands[0], Type::bf16, maskL),
                                   staged({&rf}, J, baseJ, plan.operands[1], Type::bf16, maskR)};
  Stmt kloop = pipeline(
      ops, K, r, BK, split, slices, plan.stages,
      [&](const Expr& stg) { return v.compute(ops, stg); }, v.asyncProxy, v.inFlight);
  Stmt out = tileEpilogue(st, r, split, I, J, {baseI, baseJ, BM, BN, v.li, v.lj}, v.cells, v.slot,
                          plan.outputVector);
  Stmt body = ir::allocate("acc", vt_, v.accumulators,
                           ir::block({v.cells(ir::store("acc", v.slot, num(0))), kloop, out}));
  f.body = tileLaunch(body, tilesI * tilesJ * extB * split.splits);
  out_.funcs.push_back(std::move(f));
  finishSplit(st, bs, r, split, name);
}

} // namespace einjit::codegen::lowering
