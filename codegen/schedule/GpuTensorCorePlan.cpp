#include "codegen/schedule/GpuTensorCorePlan.h"

#include "codegen/schedule/GpuStagingPlan.h"
#include "codegen/schedule/GpuTileSchedule.h"

namespace einjit::codegen::gpuschedule {

GpuTilePlan planTensorCoreTile(const GpuPlanInput& in, const Target& t) {
  GpuTilePlan plan;
  plan.BK = kMmaSlice;
  const std::int64_t BK = plan.BK, slices = (in.extK + BK - 1) / BK;
  // The warpgroup family needs both operands copied asynchronously (whatever their layout).
  const bool copied = in.L.vector > 0 && in.R.vector > 0;
  const TensorCoreShape tc =
      tensorCoreShape(t, t.gpuWarpgroupMma() && copied, in.extI, in.extJ, in.extK);
  plan.kind = tc.kind;
  plan.WM = tc.WM;
  plan.WN = tc.WN;
  plan.sideBySide = tc.sideBySide;
  plan.BM = 64 * tc.WM;
  const std::int64_t tilesI = (in.extI + plan.BM - 1) / plan.BM;
  int stages = 0;
  if (tc.kind == GpuTileKind::Wgmma) {
    const WarpgroupShape shape = warpgroupShape(t, tc.sideBySide, tilesI, in.extJ, in.extB);
    plan.WBN = shape.BN;
    plan.BN = shape.BN * (tc.sideBySide ? 2 : 1);
    plan.inFlight = shape.inFlight;
    stages = shape.stages;
  } else {
    plan.BN = tc.WN * 32; // WN warps of 32 columns
  }
  const std::int64_t tilesJ = (in.extJ + plan.BN - 1) / plan.BN, tiles = tilesI * tilesJ * in.extB;
  const SplitK split =
      splitK(t, tiles, slices, BK, static_cast<double>(in.outputElements * in.valueBytes),
             tensorCoreBlocksWanted(t, tc.kind, tiles), 0);
  plan.splits = split.splits;
  plan.perSplit = split.perSplit;
  plan.operands = {planStaging(in, in.L, plan.kind, "tile.A", plan.BM, BK, false, t),
                   planStaging(in, in.R, plan.kind, "tile.B", plan.BN, BK, false, t)};
  plan.stages = stages > 0 ? stages : stagesFor(plan.operands, in.elemBytes, t);
  constexpr std::int64_t threads = Target::gpuTileBlock;
  const std::int64_t v = in.outputVector;
  if (split.splits == 1 && in.outputOwned && v > 1 && plan.BN % v == 0 &&
      threads % (plan.BN / v) == 0 && plan.BM % (threads / (plan.BN / v)) == 0)
    plan.outputVector = static_cast<int>(v);
  plan.vectoredOutput = plan.outputVector > 1;
  plan.I = in.I;
  plan.J = in.J;
  plan.K = in.K;
  plan.B = in.B;
  return plan;
}

} // namespace einjit::codegen::gpuschedule
