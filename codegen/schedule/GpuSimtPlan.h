#pragma once
// The f32 GPU tile's plan (gpu/SimtTile carries it out): 256 threads, each a TM x TN block of
// cells (simtCells), slices of kSimtSlice, split-K by the cost model of splitK, the operands'
// staging and the pipeline depth.
#include "codegen/Target.h"
#include "codegen/schedule/GpuPlanInput.h"
#include "codegen/schedule/GpuTile.h"

namespace einjit::codegen::gpuschedule {

// Both operands are first staged by vectors where their access allows. A row-major operand
// (copied by vectors along k) is then, over a whole long reduction (simtWordCopies), copied 4
// bytes at a time into the k-major layout instead: every operand asynchronous, so up to 4
// slices in flight. Otherwise, when only one operand would be row-major, it goes through
// registers into the k-major layout (ptxas reads a row-major operand 4 k at a time along its
// rows, which costs registers); both row-major stay so. docs/GPU_SCHEDULES.md gives the
// measurements behind each choice.
GpuTilePlan planSimtTile(const GpuPlanInput& in, const Target& t);

} // namespace einjit::codegen::gpuschedule
