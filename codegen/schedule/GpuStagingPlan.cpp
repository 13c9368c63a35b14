#include "codegen/schedule/GpuStagingPlan.h"

#include "codegen/schedule/GpuTileSchedule.h"

#include <algorithm>

namespace einjit::codegen::gpuschedule {

namespace {

// Whether decomposing a flattened group divides by other than powers of two: an index after the
// first whose extent is not one. Tables pay only then (shifts and masks are cheap; f32 stride-2
// input gradient: tables over a reduction of extents 128 x 2 x 2 measured slower).
bool dividing(const std::vector<std::int64_t>& extents) {
  return std::any_of(extents.begin() + (extents.empty() ? 0 : 1), extents.end(),
                     [](std::int64_t e) { return e > 1 && (e & (e - 1)) != 0; });
}

} // namespace

void layoutOperand(GpuOperandPlan& o, GpuTileKind kind, std::int64_t BK) {
  switch (kind) {
  case GpuTileKind::Simt:
    o.rowMajor = o.kFast && o.vector > 1;
    o.core = false;
    o.stride = o.rowMajor ? BK + 4 : o.rows + (o.kFast ? 4 : 0);
    break;
  case GpuTileKind::MmaSync:
    o.rowMajor = o.kFast;
    o.core = false;
    o.stride = o.rowMajor ? BK + 8 : o.rows + 8;
    break;
  case GpuTileKind::Wgmma:
    o.rowMajor = o.kFast;
    o.core = true;
    o.stride = o.rowMajor ? BK : o.rows * 8;
    break;
  }
  o.stageElems = o.core ? o.rows * BK : (o.rowMajor ? o.rows : BK) * o.stride;
}

GpuOperandPlan planStaging(const GpuPlanInput& in, const GpuOperandAccess& a, GpuTileKind kind,
                           const std::string& buffer, std::int64_t rows, std::int64_t BK,
                           bool throughRegisters, const Target& t) {
  GpuOperandPlan o;
  o.buffer = buffer;
  o.masked = a.masked;
  o.rows = rows;
  o.kFast = a.kFast;
  o.vector = throughRegisters && a.kFast ? 0 : a.vector;
  constexpr std::int64_t threads = Target::gpuTileBlock;
  const bool masked = !a.masked.empty();
  if (o.vector == 0 && !masked && a.kFast && rows <= threads && threads % BK == 0 && a.separable) {
    o.index = GpuOperandPlan::Index::RowOffsets;
  } else if (o.vector == 0 && threads % (a.kFast ? BK : rows) == 0) {
    // Row tables of a masked operand (the bounds then read table entries) measured faster for the
    // bf16 stride-2 input gradient but slower for the f32 one: f32 tiles keep decomposing a masked
    // operand's rows.
    const bool bf16 = in.elemBytes == 2;
    // Every slice lies in one combination of the reduction's indices but the last (whose
    // extent BK divides): the reduction's indices come from the slice alone.
    const bool aligned = in.reduction.size() > 1 && in.reduction.back() % BK == 0;
    const std::int64_t wholeSlices = (in.extK + BK - 1) / BK * BK;
    if (a.kFast && dividing(a.rows) && rows <= threads && (!masked || bf16))
      o.index = GpuOperandPlan::Index::RowTables;
    else if (!a.kFast && dividing(in.reduction) && !aligned &&
             static_cast<std::int64_t>(in.reduction.size()) * wholeSlices * 4 <= t.gpuTableShared)
      o.index = GpuOperandPlan::Index::ReductionTables;
  }
  o.copyBytes = o.vector * in.elemBytes;
  layoutOperand(o, kind, BK);
  return o;
}

int stagesFor(const std::vector<GpuOperandPlan>& ops, int elemBytes, const Target& t) {
  const bool allAsync =
      std::all_of(ops.begin(), ops.end(), [](const GpuOperandPlan& o) { return o.vector != 0; });
  std::int64_t bytes = 0;
  for (const GpuOperandPlan& o : ops) bytes += o.stageElems * elemBytes;
  return pipelineStages(t, allAsync, bytes);
}

} // namespace einjit::codegen::gpuschedule
