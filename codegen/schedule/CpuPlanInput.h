#pragma once
// What the CPU planners read and the residue phases' plan, apart from CpuStatementPlan.h so that
// the family planners (schedule/CpuPhases.h) need not include the plan that includes them.
// CpuStatementInput: one statement's facts, computed once before its family is planned
// (cpuschedule::cpuStatementInput, schedule/CpuStatementPlan.h).
#include "codegen/Schedule.h"
#include "codegen/schedule/AccessBounds.h"
#include "codegen/schedule/DependentRanges.h"
#include "codegen/schedule/Fusion.h"
#include "codegen/schedule/GemmPlan.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <cstddef>
#include <optional>
#include <vector>

namespace einjit::codegen {

// One residue phase of a strided gradient on the packed path: the phase as a statement of its
// own (q in u's slot, m in h's: schedule/DependentRanges.h, PhaseSub), its binding, and its
// packed contraction's plan.
struct CpuGemmPhase {
  dsl::Statement st;
  dsl::BoundStatement bs;
  GemmPlan gemm;
};

// One CPU statement's facts, computed once before its family is planned.
struct CpuStatementInput {
  const dsl::Program* program = nullptr;
  const dsl::BoundProgram* binding = nullptr;
  std::size_t stmt = 0;
  Box ranges;              // its box (dependent ranges' hulls; the row index local in row blocks)
  int rowVar = -1;         // the row index of the row block it is lowered in, or -1
  Strides strides;         // the call's strides
  StatementSchedule sched; // its schedule (scheduleStatement)
  EpiloguePlan epilogue;   // the statements its packed contraction may run in its tile stores
  // Where the families before them do not take the statement: its residue phases
  // (residuePhases; empty: none) and its rectangular core (coreRanges).
  std::vector<PhaseSub> phases;
  std::optional<Box> core;
};

} // namespace einjit::codegen
