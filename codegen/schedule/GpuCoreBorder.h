#pragma once
// The core/border family on the GPU (docs/GRADIENTS.md, G6): a statement whose reduction ranges
// depend on output indices, split into a rectangular core where every such range is its hull
// (GpuStatementInput::core, coreRanges) and border strips around it. The core runs as a
// contraction tile; the borders one thread per output element.
#include "codegen/Target.h"
#include "codegen/schedule/GpuAccess.h"
#include "codegen/schedule/GpuPlanInput.h"
#include "codegen/schedule/GpuStatementPlan.h"

namespace einjit::codegen::gpuschedule {

// The core's tile (function base + "_core") as the plan's family and tile, or false with the
// plan unchanged where the statement has no core or its core takes no tile.
bool planCoreSplit(const GpuTileContext& c, const Target& t, const GpuStatementInput& in,
                   GpuStatementPlan& plan);

} // namespace einjit::codegen::gpuschedule
