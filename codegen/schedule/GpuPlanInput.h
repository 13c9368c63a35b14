#pragma once
// What the planners of a GPU contraction tile read (schedule/GpuSimtPlan.h,
// schedule/GpuTensorCorePlan.h, schedule/GpuStagingPlan.h): the extents of the tile's index
// groups and, per operand and for the output, the read-only access analysis over the call's
// strides and alignment (unit strides along the reduction, 16-byte copies, row offsets in 32
// bits). gpu/ gathers it from a tile's index groups (Lowerer::tileInput), emitting nothing; the
// planners are free functions of this value and the Target.
#include <cstdint>
#include <string>
#include <vector>

namespace einjit::codegen {

// One operand of a tile (L or R: a product of factors over its index group and the reduction).
struct GpuOperandAccess {
  // Some factor has unit stride along the reduction's last index: consecutive threads stage
  // consecutive k.
  bool kFast = false;
  // Elements per aligned 16-byte asynchronous copy along the reduction (kFast) or along its rows,
  // or 0 where the operand cannot be copied so (Lowerer::vectorRead: a single read proven in
  // bounds, contiguous in runs of whole vectors; a masked operand only along the channel run last
  // with its masks on other indices).
  int vector = 0;
  // A single read whose row part of the offset fits a 32-bit table (Lowerer::separableRead).
  bool separable = false;
  // The dependent reduction indices it is masked to ("a,b"; "": none).
  std::string masked;
  // The extents of its index group (I or J), the last fastest.
  std::vector<std::int64_t> rows;
};

struct GpuPlanInput {
  bool mma = false; // bf16 operands read as they are: a tensor-core tile (tileGroups)
  std::int64_t extI = 0, extJ = 0, extK = 0, extB = 1;
  std::vector<std::int64_t>
      reduction; // the extents of the reduction's indices, in the tile's order
  GpuOperandAccess L, R;
  int elemBytes = 4;               // a staged element (the value type; bf16 on tensor cores)
  int valueBytes = 4;              // a partial sum (the value type)
  std::int64_t outputElements = 0; // the output box's elements (split-K's partials)
  // Elements per 16-byte store of the output along J (as `vector`), 0: none; and whether the
  // tile writes the output itself (':=', no atomic adds), which such stores need.
  int outputVector = 0;
  bool outputOwned = false;
  std::string I, J, K, B; // the groups' index names ("i,j"; B "" when empty)
};

} // namespace einjit::codegen
