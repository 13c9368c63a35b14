#pragma once
// The plan of a CPU statement, decided before anything is emitted: which family runs it (the
// packed contraction, with the element-wise statements after it in its tile stores; residue
// phases, each a packed contraction; a one-hot sum; a core/border split; a split reduction; or
// the loop nest of its schedule) and the family's own plan. cpuschedule::planCpuStatement
// decides it, a free function of the statement's facts (CpuStatementInput, computed once: its
// schedule, box, residue phases and core) and the Target, trying the families in their order;
// Lowerer::lowerStatement (lower/CpuStatement.cpp) carries it out, deciding nothing;
// codegen::planCpuStatement (Lower.h) gives it without lowering (tests). The program's row runs
// and element-wise groups are planned before any statement (planProgram): a statement in a row
// run is planned inside the run's blocks, over the block's rows.
#include "codegen/Schedule.h"
#include "codegen/Target.h"
#include "codegen/schedule/AccessBounds.h"
#include "codegen/schedule/CpuPlanInput.h"
#include "codegen/schedule/DependentRanges.h"
#include "codegen/schedule/Fusion.h"
#include "codegen/schedule/GemmPlan.h"
#include "codegen/schedule/RowBlocks.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace einjit::codegen {

// The plans made over the whole program before any statement's: its row runs
// (schedule/RowBlocks.h; a GPU target gets none) and its element-wise groups (schedule/Fusion.h),
// the groups that a row run would cut dissolved.
struct ProgramPlan {
  RowPlan rows;
  FusionPlan fusion;
};

// A core/border split (docs/GRADIENTS.md, G6): the core's box and binding (coreBox) and its
// schedule (a register or dot-product tile), and the border strips' schedule (the statement's,
// without tiles: the strips keep the dependent bounds).
struct CpuCoreBorderPlan {
  Box core;
  dsl::BoundStatement bs;
  StatementSchedule schedule;
  StatementSchedule border;
};

struct CpuStatementPlan {
  enum class Family : std::uint8_t {
    Empty,      // no output element is covered (the schedule says so)
    Rows,       // lowered in row run `rowRun`, over its blocks' rows (codegen::planCpuStatement)
    Fused,      // an element-wise group's statement (planFused: its first; its others)
    Split,      // a split reduction (the schedule chose one: Schedule.h)
    Gemm,       // the packed contraction (sched.gemm), `epilogue` in its tile stores
    Phases,     // residue phases (`phases`), each a packed contraction
    OneHot,     // a one-hot sum (sched.oneHot)
    CoreBorder, // a tiled core and generic border strips (`core`)
    Loops, // the loop nest of its schedule: register or dot-product tiles and edges, or generic
  };
  Family family = Family::Loops;
  std::size_t stmt = 0;
  StatementSchedule sched; // the statement's schedule
  EpiloguePlan
      epilogue; // Gemm: statements stmt+1..epilogue.last in its stores (last <= stmt: none)
  std::vector<CpuGemmPhase> phases;          // Phases
  std::optional<CpuCoreBorderPlan> core;     // CoreBorder
  int rowRun = -1;                           // Rows: the run in the program's RowPlan
  std::size_t fusedFirst = 0, fusedLast = 0; // Fused: the group's first and last statements
  std::string groupNote;                     // Rows and Fused: the run's or the group's note
  // The last statement the plan lowers (a Gemm with an epilogue: its last member).
  std::size_t last() const {
    return family == Family::Gemm && epilogue.last > stmt ? epilogue.last : stmt;
  }
};

// One line for `einjit explain`: the family and its plan, as lowering writes it (a statement's
// note: the schedule's, the packed plan's with its epilogue, the phases', the core's; Rows and
// a member of a Fused group after its first: the run's or the group's part of it). Residue phases
// whose code merged into one copy say so after it (an outcome of emission: passes::mergeVariants).
std::string describe(const CpuStatementPlan& p);

namespace cpuschedule {

// The row runs and element-wise groups of a program.
ProgramPlan planProgram(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
                        const Target& t);

// The epilogue statement k's packed contraction may take (planEpilogue), where the row run after
// it is exactly its element-wise group and keeps nothing in scratch (the epilogue takes them
// before row blocks do); none on a GPU target.
EpiloguePlan epilogueOf(const ProgramPlan& plan, const dsl::Program& p, const dsl::BoundProgram& b,
                        std::size_t k, const Target& t);

// Statements first..last as one element-wise group (schedule/Fusion.h; on either device): the
// first statement's schedule serves the group without split, tiles, packed plan or one-hot (no
// reduction; the group's loop passes over every element anyway); `note` the group's.
CpuStatementPlan planFused(const dsl::Program& p, const dsl::BoundProgram& b, std::size_t first,
                           std::size_t last, const Strides& strides, const Target& t,
                           const std::string& note);

// Statement k's facts for its plan: its box `ranges` (row-local in a row block of row index
// `rowVar`), the call's strides, its epilogue; its schedule, residue phases and core computed
// here, once.
CpuStatementInput cpuStatementInput(const dsl::Program& p, const dsl::BoundProgram& b,
                                    std::size_t k, const Box& ranges, int rowVar,
                                    const Strides& strides, const EpiloguePlan& epilogue,
                                    const Target& t);

// The family order (docs/CPU_SCHEDULES.md, "The family order"), the whole plan decided before
// anything is emitted: nothing where no element is covered; a split reduction where the schedule
// chose one; the packed contraction where its plan applies; a one-hot sum (unless its index is
// the row block's); residue phases where every phase takes the packed path; a core/border split
// where the core takes a tile; else the loop nest of the schedule.
CpuStatementPlan planCpuStatement(const CpuStatementInput& in, const Target& t);

} // namespace cpuschedule

} // namespace einjit::codegen
