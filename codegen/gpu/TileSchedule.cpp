// The GPU tile decisions that read the lowerer's state (masked ranges), the access analysis the
// tile planners of schedule/ receive (GpuPlanInput), and a planned split-K's scratch.
#include "codegen/lower/Lowerer.h"

#include "codegen/schedule/GpuSimtPlan.h"
#include "codegen/schedule/GpuTensorCorePlan.h"

namespace einjit::codegen::lowering {

GpuOperandAccess Lowerer::operandAccess(const Statement& st, const std::vector<const CExpr*>& fs,
                                        const std::vector<std::size_t>& group,
                                        const std::vector<std::size_t>& K, const Ranges& r,
                                        Type elem, const std::vector<std::size_t>& masks) const {
  GpuOperandAccess a;
  a.kFast = unitAlongAny(fs, K);
  // A masked operand is copied by vectors only along the channel index run last (ctx_.kLast):
  // its masks are on other reduction indices, so a vector is wholly inside or outside.
  const bool vectorMasks =
      masks.empty() || (ctx_.kLast >= 0 && a.kFast && !K.empty() &&
                        K.back() == static_cast<std::size_t>(ctx_.kLast) &&
                        std::find(masks.begin(), masks.end(), K.back()) == masks.end());
  a.vector = vectorMasks ? vectorRead(fs, a.kFast ? K : group, r, elem, !masks.empty()) : 0;
  a.separable = separableRead(fs);
  if (!masks.empty()) a.masked = varNames(st, masks);
  for (std::size_t v : group) a.rows.push_back(r[v].second - r[v].first);
  return a;
}

GpuPlanInput Lowerer::tileInput(const Statement& st, const BoundStatement& bs, const Ranges& r,
                                const TileGroups& g) {
  // The ranges and pinned indices the tile is emitted over (emitGpuTile).
  const Scoped<std::vector<bool>> pin(ctx_.pinned, g.pinned);
  const Scoped<const BoundStatement*> masked(ctx_.maskBounds, &bs);
  setRanges(st, r);
  GpuPlanInput in;
  in.mma = g.mma;
  in.extI = extentOfGroup(g.I, r);
  in.extJ = extentOfGroup(g.J, r);
  in.extK = extentOfGroup(g.K, r);
  in.extB = extentOfGroup(g.B, r);
  for (std::size_t v : g.K) in.reduction.push_back(r[v].second - r[v].first);
  const Type elem = g.mma ? Type::bf16 : vt_;
  in.elemBytes = typeBytes(elem);
  in.valueBytes = typeBytes(vt_);
  in.outputElements = extentOfGroup(outputIndices(st), r);
  in.L = operandAccess(st, g.mma ? std::vector<const CExpr*>{g.L[0]} : g.L, g.I, g.K, r, elem,
                       g.maskL);
  in.R = operandAccess(st, g.mma ? std::vector<const CExpr*>{g.R[0]} : g.R, g.J, g.K, r, elem,
                       g.maskR);
  in.outputVector = vectorRead({st.lhs.get()}, g.J, r, elemType(st.output));
  in.outputOwned = st.assign == Assign::Define && !ctx_.atomic;
  in.I = varNames(st, g.I);
  in.J = varNames(st, g.J);
  in.K = varNames(st, g.K);
  in.B = g.B.empty() ? std::string() : varNames(st, g.B);
  return in;
}

GpuTilePlan Lowerer::tileSchedule(const Statement& st, const BoundStatement& bs, const Ranges& r,
                                  const TileGroups& g) {
  const GpuPlanInput in = tileInput(st, bs, r, g);
  return in.mma ? gpuschedule::planTensorCoreTile(in, target_)
                : gpuschedule::planSimtTile(in, target_);
}

auto Lowerer::tileSplit(const Statement& st, const Ranges& r, const GpuTilePlan& plan,
                        const std::string& name) -> TileSplit {
  TileSplit t;
  t.elements = extentOfGroup(outputIndices(st), r);
  t.splits = plan.splits;
  t.perSplit = plan.perSplit;
  if (t.splits > 1) {
    t.partial = name + ".partial";
    out_.scratch.push_back({t.partial, vt_, t.elements * t.splits});
  }
  return t;
}

bool Lowerer::maskedRanges(const Statement& st, const BoundStatement& bs, const Ranges& r,
                           const std::vector<std::size_t>& I, const std::vector<std::size_t>& J,
                           const std::vector<std::size_t>& B, std::vector<std::size_t>& maskL,
                           std::vector<std::size_t>& maskR) const {
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
  double share = 1;
  for (std::size_t v = 0; v < n; ++v) {
    if (!bs.dependent[v]) continue;
    if (v < nOut) return false;
    const std::vector<std::size_t> read = boundReads(st, v);
    auto within = [&](const std::vector<std::size_t>& g) {
      for (std::size_t u : read)
        if (std::find(g.begin(), g.end(), u) == g.end() &&
            std::find(B.begin(), B.end(), u) == B.end())
          return false;
      return true;
    };
    if (within(I))
      maskL.push_back(v);
    else if (within(J))
      maskR.push_back(v);
    else
      return false;
    share *= meanShare(bs, r, v, read);
  }
  return share >= 0.5;
}

} // namespace einjit::codegen::lowering
