#pragma once
// The bf16 tensor-core GPU tile's plan (gpu/MmaTile carries it out): its family and warps
// (tensorCoreShape: wgmma on sm_90 where both operands are copied asynchronously and the tile
// is filled, else mma.sync), the warpgroup tile's width, stages and products in flight
// (warpgroupShape), split-K doubling towards tensorCoreBlocksWanted, the operands' staging,
// and whether the epilogue stores the output 16 bytes at a time.
#include "codegen/Target.h"
#include "codegen/schedule/GpuPlanInput.h"
#include "codegen/schedule/GpuTile.h"

namespace einjit::codegen::gpuschedule {

// The epilogue stores a thread's run of 16 bytes of the output at once where the tile writes the
// output itself (outputOwned, not split) and the output is contiguous along J in runs of whole
// vectors (outputVector) that divide among the tile's threads; else one cell at a time.
GpuTilePlan planTensorCoreTile(const GpuPlanInput& in, const Target& t);

} // namespace einjit::codegen::gpuschedule
