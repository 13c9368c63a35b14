#pragma once
// A post-pass over GPU functions: launches that a statement marked to share one grid become one
// launch.
#include "codegen/IR.h"

#include <cstddef>
#include <vector>

namespace einjit::codegen::passes {

// Functions [first, end) of a lowered program that write disjoint outputs (a statement's residue
// phases, GpuPhasesPlan) and may share one launch; `merged` is the function they become (named,
// with its buffers; its body is replaced).
struct LaunchGroup {
  std::size_t first = 0, end = 0;
  ir::Func merged;
};

// Each group whose functions are two or more, each one launch of the same block size, becomes
// one launch in their place: block b runs function p's block b - offset_p, so one function's
// last blocks share the GPU with the next's first instead of leaving it part idle. A group that
// uses wgmma stays apart: on warpgroup tiles merging costs more than the idle tail it saves
// (ptxas keeps the products of the merged copies of the tile apart; docs/GPU_SCHEDULES.md).
// The groups lie in order, apart. Returns, per group, whether it was merged.
std::vector<bool> mergeLaunches(std::vector<ir::Func>& funcs,
                                const std::vector<LaunchGroup>& groups);

} // namespace einjit::codegen::passes
