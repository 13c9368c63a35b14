#pragma once
// What the GPU planners read, as two values computed before anything is planned or emitted.
// GpuStatementInput: one statement's facts, once (gpuStatementInput, schedule/GpuStatementPlan.h):
// its box, the call's buffers, which thread families apply, the layout copies relayoutPlan
// chose, its residue phases and its rectangular core; planGpuStatement orders the families over
// it. GpuPlanInput: one tile's, gathered from its index groups (tileInput,
// schedule/GpuTileGroups.h): the extents of the groups and, per operand and for the output, the
// access analysis over the buffers (unit strides along the reduction, 16-byte copies, row
// offsets in 32 bits); the tile planners (schedule/GpuSimtPlan.h, GpuTensorCorePlan.h,
// GpuStagingPlan.h) are free functions of it and the Target.
#include "codegen/schedule/AccessBounds.h"
#include "codegen/schedule/DependentRanges.h"
#include "codegen/schedule/GpuAccess.h"
#include "codegen/schedule/GpuTile.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace einjit::codegen {

// One operand of a tile (L or R: a product of factors over its index group and the reduction).
struct GpuOperandAccess {
  // Some factor has unit stride along the reduction's last index: consecutive threads stage
  // consecutive k.
  bool kFast = false;
  // Elements per aligned 16-byte asynchronous copy along the reduction (kFast) or along its rows,
  // or 0 where the operand cannot be copied so (gpuschedule::vectorRead: a single read proven in
  // bounds, contiguous in runs of whole vectors; a masked operand only along the channel run last
  // with its masks on other indices).
  int vector = 0;
  // A single read whose row part of the offset fits a 32-bit table (gpuschedule::separableRead).
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

// One GPU statement's facts, computed once before its family is planned.
struct GpuStatementInput {
  const dsl::Program* program = nullptr;
  const dsl::BoundProgram* binding = nullptr;
  std::size_t stmt = 0;
  std::string base;                // its functions' names start so ("s3")
  Box ranges;                      // its box (each dependent range's hull)
  gpuschedule::GpuBuffers buffers; // the call's strides and alignment
  bool split = false;              // its schedule splits the reduction (Schedule.h)
  bool independent = false;        // its output elements are independent (independentOutputs)
  bool inPlace = false;            // it updates its output in place (dsl/InPlace.h)
  bool atomic = false;             // a '+=' scatter that may add several times into one element
  // The layout copies a tile of it runs over (gpuschedule::relayoutPlan), or none.
  std::optional<GpuRelayoutPlan> relayout;
  std::vector<PhaseSub> phases; // its residue phases (residuePhases; empty: none)
  std::optional<Box> core;      // its rectangular core (coreRanges), where it has one
};

} // namespace einjit::codegen
