// The f32 GPU tile: shared-memory operands and a register block per thread (SIMT FMAs).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

GpuTilePlan Lowerer::emitTilePart(const GpuTilePart& t) {
  const Scoped<std::vector<PhaseSub>> inPhase(ctx_.phase, t.subs);
  emitGpuTile(t.st, t.bs, t.r, t.name, t.groups, t.tile);
  return t.tile;
}

void Lowerer::emitGpuTile(const Statement& st, const BoundStatement& bs, const Ranges& r,
                          const std::string& name, const TileGroups& g, const GpuTilePlan& plan) {
  const Scoped<std::vector<bool>> pin(ctx_.pinned, g.pinned);
  const Scoped<const BoundStatement*> masked(ctx_.maskBounds, &bs);
  setRanges(st, r); // the ranges the plan decided over (another statement's may be set)
  const std::vector<const CExpr*>&L = g.L, &R = g.R;
  const std::vector<std::size_t>&I = g.I, &J = g.J, &B = g.B, &K = g.K, &maskL = g.maskL,
        &maskR = g.maskR;
  const std::int64_t extI = extentOfGroup(I, r), extJ = extentOfGroup(J, r),
                     extK = extentOfGroup(K, r), extB = extentOfGroup(B, r);
  if (plan.kind != GpuTileKind::Simt) {
    emitGpuMma(st, bs, r, name, *L[0], *R[0], I, J, B, K, maskL, maskR, plan);
    return;
  }
  const std::int64_t TM = plan.TM, TN = plan.TN, BM = plan.BM, BN = plan.BN, BK = plan.BK;
  const std::int64_t tilesI = (extI + BM - 1) / BM, tilesJ = (extJ + BN - 1) / BN;
  const std::int64_t slices = (extK + BK - 1) / BK;
  setRanges(st, r);
  const TileSplit split = tileSplit(st, r, plan, name);
  ir::Func f = newFunc(name);
  Expr blk = tileBlock(split), thr = ir::var("gpu.thread");
  Expr tj = blk % tilesJ, ti = blk / tilesJ % tilesI, bt = blk / (tilesJ * tilesI);
  Expr tx = thr % 16, ty = thr / 16;
  if (!B.empty()) decompose(B, r, bt);
  // Each operand as planned (gpuschedule::planSimtTile): copied 4 floats at a time along k into
  // rows of BK + 4, or k-major, slot kk * stride + w, by copies along the row, 4-byte copies or
  // registers.
  Expr baseI = ti * BM, baseJ = tj * BN;
  const std::vector<Staged> ops = {staged(L, I, baseI, plan.operands[0], vt_, maskL),
                                   staged(R, J, baseJ, plan.operands[1], vt_, maskR)};
  const int stages = plan.stages;
  // The register tile: acc[m * TN + n], thread (tx, ty) holding rows cellOf(L, ty, m) and
  // columns cellOf(R, tx, n). From a k-major operand (rows of a slice contiguous) a thread
  // takes runs of V = min(4, T) adjacent elements, 16 V apart (one 16-byte load; the threads
  // of a warp read distinct banks or the same word), and with T = 6 or 7 a last run of T - 4
  // after the 16 runs of 4; from a row-major one every 16th row (adjacent threads then hit
  // distinct banks).
  auto cellOf = [](const Staged& sg, const Expr& th, const Expr& q, std::int64_t T) {
    if (sg.rowMajor) return th + q * 16;
    const std::int64_t V = std::min<std::int64_t>(4, T), whole = T / V * V;
    Expr runs = th * V + q % V + q / V * (16 * V);
    if (whole == T) return runs;
    // The last T - whole cells: one shorter run per thread after the 16-wide runs.
    Expr rest = 16 * whole + th * (T - whole) + (q - whole);
    return ir::select(ir::lt(q, whole), runs, rest);
  };
  Expr m = ir::var("t.m"), nn = ir::var("t.n"), kk = ir::var("k.i");
  Expr slot = m * TN + nn;
  auto cells = [&](Stmt body) {
    return ir::forLoop("t.m", ir::intImm(0), ir::intImm(TM), ForKind::Unrolled,
                       ir::forLoop("t.n", ir::intImm(0), ir::intImm(TN), ForKind::Unrolled, body));
  };
  auto compute = [&](const Expr& stg) {
    auto at = [&](const Staged& sg, const Expr& w) {
      return ir::load(vt_, sg.buf, stg * sg.stageElems + sg.slot(w, kk));
    };
    Stmt fillRegs =
        ir::block({ir::forLoop("t.m", ir::intImm(0), ir::intImm(TM), ForKind::Unrolled,
                               ir::store("reg.L", m, at(ops[0], cellOf(ops[0], ty, m, TM)))),
                   ir::forLoop("t.n", ir::intImm(0), ir::intImm(TN), ForKind::Unrolled,
                               ir::store("reg.R", nn, at(ops[1], cellOf(ops[1], tx, nn, TN))))});
    Stmt fma = cells(ir::store("acc", slot,
                               ir::load(vt_, "acc", slot) +
                                   ir::load(vt_, "reg.L", m) * ir::load(vt_, "reg.R", nn)));
    return ir::forLoop("k.i", ir::intImm(0), ir::intImm(BK), ForKind::Unrolled,
                       ir::block({fillRegs, fma}));
  };
  Stmt kloop = pipeline(ops, K, r, BK, split, slices, stages, compute);
  // Stores: each cell's output indices from its row and column.
  Expr gi = baseI + cellOf(ops[0], ty, m, TM);
  Expr gj = baseJ + cellOf(ops[1], tx, nn, TN);
  decompose(I, r, gi);
  decompose(J, r, gj);
  Stmt out = storeCell(st, r, split, ir::load(vt_, "acc", slot));
  out = cells(ir::ifThen(both(ir::lt(gi, extI), ir::lt(gj, extJ)), out));
  Stmt body = ir::allocate(
      "acc", vt_, TM * TN,
      ir::allocate("reg.L", vt_, TM,
                   ir::allocate("reg.R", vt_, TN,
                                ir::block({cells(ir::store("acc", slot, num(0))), kloop, out}))));
  f.body = tileLaunch(body, tilesI * tilesJ * extB * split.splits);
  out_.funcs.push_back(std::move(f));
  finishSplit(st, bs, r, split, name);
}

} // namespace einjit::codegen::lowering
