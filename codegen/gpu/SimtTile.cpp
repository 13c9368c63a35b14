// The f32 GPU tile: shared-memory operands and a register block per thread (SIMT FMAs).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

auto Lowerer::planTile(const Statement& st, const BoundStatement& bs, const Ranges& r,
                       const std::string& name) -> std::optional<GpuTilePart> {
  std::optional<TileGroups> g = tileGroups(st, bs, r);
  if (!g) return std::nullopt;
  GpuTilePart part{st, bs, r, name, std::move(*g), {}, {}};
  part.tile = tileSchedule(part.st, part.bs, part.r, part.groups);
  return part;
}

GpuTilePlan Lowerer::emitTilePart(const GpuTilePart& t) {
  const Scoped<std::vector<PhaseSub>> inPhase(ctx_.phase, t.subs);
  emitGpuTile(t.st, t.bs, t.r, t.name, t.groups, t.tile);
  return t.tile;
}

auto Lowerer::tileGroups(const Statement& st, const BoundStatement& bs, const Ranges& r)
    -> std::optional<TileGroups> {
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
  if (st.reduce != Reduce::Add || n == nOut || st.lhsVars.empty()) return std::nullopt;
  std::vector<const CExpr*> factors;
  flattenProduct(*st.rhs, factors);
  // The column index: of the output indices some factors use and others do not (batch
  // indices, used by every factor, cannot separate them), the one with the smallest stride
  // in the output (coalesced stores when it is 1).
  const auto& os = ctx_.buffers.strides[static_cast<std::size_t>(st.output)];
  int fast = -1;
  std::int64_t fastStride = 0;
  std::vector<std::vector<bool>> uses(factors.size(), std::vector<bool>(n, false));
  for (std::size_t q = 0; q < factors.size(); ++q) usedVars(*factors[q], uses[q]);
  for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
    const auto v = static_cast<std::size_t>(st.lhsVars[d]);
    if (r[v].second - r[v].first < 2) continue;
    std::size_t users = 0;
    for (const auto& u : uses) users += u[v] ? 1 : 0;
    if (users == 0 || users == factors.size()) continue;
    std::int64_t stride = 0; // in the output (a residue phase's q moves by g elements)
    for (std::size_t e = 0; e < st.lhs->subs.size(); ++e) stride += st.lhs->subs[e].coef[v] * os[e];
    if (fast < 0 || std::abs(stride) < fastStride) {
      fast = static_cast<int>(v);
      fastStride = std::abs(stride);
    }
  }
  if (fast < 0) return std::nullopt;
  std::vector<const CExpr*> L, R;
  std::vector<bool> inL(n, false), inR(n, false);
  for (std::size_t q = 0; q < factors.size(); ++q) {
    const CExpr* f = factors[q];
    const std::vector<bool>& u = uses[q];
    auto& side = u[static_cast<std::size_t>(fast)] ? R : L;
    auto& in = u[static_cast<std::size_t>(fast)] ? inR : inL;
    side.push_back(f);
    for (std::size_t v = 0; v < n; ++v) in[v] = in[v] || u[v];
  }
  if (L.empty() || R.empty()) return std::nullopt;
  std::vector<std::size_t> I, J, B, K;
  for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
    const auto v = static_cast<std::size_t>(st.lhsVars[d]);
    if (std::find(I.begin(), I.end(), v) != I.end() ||
        std::find(J.begin(), J.end(), v) != J.end() || std::find(B.begin(), B.end(), v) != B.end())
      continue;
    if (inL[v] && !inR[v])
      I.push_back(v);
    else if (inR[v] && !inL[v])
      J.push_back(v);
    else
      B.push_back(v);
  }
  for (std::size_t v = nOut; v < n; ++v) K.push_back(v);
  if (ctx_.kLast >= 0) { // planOverCopies: the channel index last
    const auto c = static_cast<std::size_t>(ctx_.kLast);
    K.erase(std::remove(K.begin(), K.end(), c), K.end());
    K.push_back(c);
  }
  // Indices of one value (a 1x1 filter's a, b) leave the groups and keep that value: a unit
  // stride along one must not decide an operand's layout or break a contiguous run (the 1x1
  // convolution's input was staged through registers as if contiguous along b).
  const Scoped<std::vector<bool>> pin(ctx_.pinned, std::vector<bool>(n, false));
  for (auto* g : {&I, &J, &B, &K})
    g->erase(std::remove_if(g->begin(), g->end(),
                            [&](std::size_t v) {
                              ctx_.pinned[v] = r[v].second - r[v].first == 1 && !bs.dependent[v];
                              return ctx_.pinned[v];
                            }),
             g->end());
  if (I.empty() || J.empty() || K.empty()) return std::nullopt;
  std::vector<std::size_t> maskL, maskR;
  if (!maskedRanges(st, bs, r, I, J, B, maskL, maskR)) return std::nullopt;
  setRanges(st, r);
  if ((maskL.empty() && !maskR.empty() && !provenInBounds(L)) ||
      (maskR.empty() && !maskL.empty() && !provenInBounds(R)))
    return std::nullopt;
  const Scoped<const BoundStatement*> masked(ctx_.maskBounds, &bs);
  const std::int64_t extI = extentOfGroup(I, r), extJ = extentOfGroup(J, r),
                     extK = extentOfGroup(K, r);
  // (A residue phase is tiled whatever its size: planPhases weighed the whole statement.)
  if (!gpuschedule::worthTile(extI, extJ, extK, !ctx_.phase.empty())) return std::nullopt;
  // bf16 operands read as they are (rounding them again to bf16 is exact): tensor cores.
  const bool mma = b_.dtype == DType::bf16 && L.size() == 1 && R.size() == 1 &&
                   L[0]->kind == CKind::Read && R[0]->kind == CKind::Read && extK >= 16;
  if (!maskL.empty() || !maskR.empty())
    sliceAlongFullIndex(K, r, mma ? gpuschedule::kMmaSlice : gpuschedule::kSimtSlice);
  // An output none of whose elements can be written (a padded dimension of extent 0): no tile.
  setRanges(st, r);
  if (!storeOutput(st, num(0))) return std::nullopt;
  return TileGroups{std::move(L), std::move(R),     std::move(I),     std::move(J), std::move(B),
                    std::move(K), std::move(maskL), std::move(maskR), ctx_.pinned,  mma};
}

void Lowerer::emitGpuTile(const Statement& st, const BoundStatement& bs, const Ranges& r,
                          const std::string& name, const TileGroups& g, const GpuTilePlan& plan) {
  const Scoped<std::vector<bool>> pin(ctx_.pinned, g.pinned);
  const Scoped<const BoundStatement*> masked(ctx_.maskBounds, &bs);
  setRanges(st, r); // the ranges tileGroups decided over (another statement's may be set)
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
