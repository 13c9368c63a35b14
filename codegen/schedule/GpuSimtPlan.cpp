#include "codegen/schedule/GpuSimtPlan.h"

#include "codegen/schedule/GpuStagingPlan.h"
#include "codegen/schedule/GpuTileSchedule.h"

namespace einjit::codegen::gpuschedule {

GpuTilePlan planSimtTile(const GpuPlanInput& in, const Target& t) {
  GpuTilePlan plan;
  plan.kind = GpuTileKind::Simt;
  plan.TM = simtCells(in.extI);
  plan.TN = simtCells(in.extJ);
  plan.BM = 16 * plan.TM;
  plan.BN = 16 * plan.TN;
  plan.BK = kSimtSlice;
  const std::int64_t BM = plan.BM, BN = plan.BN, BK = plan.BK;
  const std::int64_t tilesI = (in.extI + BM - 1) / BM, tilesJ = (in.extJ + BN - 1) / BN;
  const std::int64_t slices = (in.extK + BK - 1) / BK;
  const SplitK split = splitK(t, tilesI * tilesJ * in.extB, slices, BK,
                              static_cast<double>(in.outputElements * in.valueBytes), 0,
                              2.0 * static_cast<double>(BM * BN * BK));
  plan.splits = split.splits;
  plan.perSplit = split.perSplit;
  auto stage = [&](bool left, bool throughRegisters) {
    return left ? planStaging(in, in.L, plan.kind, "tile.L", BM, BK, throughRegisters, t)
                : planStaging(in, in.R, plan.kind, "tile.R", BN, BK, throughRegisters, t);
  };
  std::vector<GpuOperandPlan> ops = {stage(true, false), stage(false, false)};
  if ((ops[0].rowMajor || ops[1].rowMajor) && simtWordCopies(split.splits, slices)) {
    for (GpuOperandPlan& o : ops)
      if (o.rowMajor) {
        o.vector = 1;
        o.copyBytes = in.elemBytes;
        layoutOperand(o, plan.kind, BK);
      }
  } else if (ops[0].rowMajor != ops[1].rowMajor) {
    const bool left = ops[0].rowMajor;
    ops[left ? 0 : 1] = stage(left, true);
  }
  plan.stages = stagesFor(ops, in.elemBytes, t);
  plan.operands = std::move(ops);
  plan.I = in.I;
  plan.J = in.J;
  plan.K = in.K;
  plan.B = in.B;
  return plan;
}

} // namespace einjit::codegen::gpuschedule
