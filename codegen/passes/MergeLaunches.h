#pragma once
// A post-pass over GPU functions: launches that can share one grid become one launch.
#include "codegen/IR.h"

#include <cstddef>
#include <vector>

namespace einjit::codegen::passes {

// Functions [from, end) of `funcs` that are each one launch of the same block size and write
// disjoint outputs (residue phases without split-K) become one launch, `merged` (named, with
// its buffers; its body is replaced): block b runs function p's block b - offset_p, so one
// function's last blocks share the GPU with the next's first instead of leaving it part idle.
// False (nothing changed) unless there are two or more such launches, or when they use wgmma:
// on warpgroup tiles merging costs more than the idle tail it saves (ptxas keeps the products of
// the merged copies of the tile apart), so those stay apart (docs/GPU_SCHEDULES.md).
bool mergeLaunches(std::vector<ir::Func>& funcs, std::size_t from, ir::Func merged);

} // namespace einjit::codegen::passes
