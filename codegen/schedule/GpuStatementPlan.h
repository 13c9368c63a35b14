#pragma once
// The plan of a GPU statement, decided before anything is emitted: which family runs it (a tile,
// residue phases of tiles, the core of a core/border split, or threads), the layout copies
// around its tile, each tile's statement, box, index groups and schedule (family, shape,
// operands' staging, stages, split-K: GpuTilePlan, from the planners of schedule/), and the
// residue phases' split. gpuschedule::planGpuStatement decides it, a free function of the
// statement's facts (GpuStatementInput, computed once) and the Target, trying the families in
// their order (each family's planner in its own file: GpuTileGroups, GpuPhases, GpuCoreBorder);
// Lowerer::gpuStatement (gpu/GpuStatement.cpp) carries it out, deciding nothing;
// codegen::planGpuStatement (Lower.h) gives it without lowering (tests).
#include "codegen/Schedule.h"
#include "codegen/Target.h"
#include "codegen/schedule/DependentRanges.h"
#include "codegen/schedule/GpuPlanInput.h"
#include "codegen/schedule/GpuTile.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace einjit::codegen {

// The index groups of a contraction tile over L * R (tileGroups): I the output indices only L
// uses, J those only R uses (the output's fastest among them), B the other output indices
// (batch), K the reduction; the dependent reduction indices each side masks; the indices of one
// value, kept at it; whether it runs on tensor cores.
struct GpuTileGroups {
  std::vector<const dsl::CExpr*> L, R;
  std::vector<std::size_t> I, J, B, K;
  std::vector<std::size_t> maskL, maskR;
  std::vector<bool> pinned;
  bool mma = false;
};

// One tile a statement runs: its statement (a residue phase's rewritten copy; the factors in
// `groups` point into it), its bound statement and box, its function's name, its groups, the
// residue phase's substitutions (empty for a tile of the whole statement or a core), and the
// tile's schedule, which its emitter carries out.
struct GpuTilePart {
  dsl::Statement st;
  dsl::BoundStatement bs;
  std::vector<std::pair<std::int64_t, std::int64_t>> r;
  std::string name;
  GpuTileGroups groups;
  std::vector<PhaseSub> subs;
  GpuTilePlan tile;
};

struct GpuStatementPlan {
  enum class Family : std::uint8_t {
    Split,      // a split reduction (the statement's schedule chose one: Schedule.h)
    Tile,       // one contraction tile (tiles[0])
    Phases,     // residue phases, a tile each (tiles; `phases` the split)
    CoreBorder, // a tile of the core (tiles[0]), one thread per element of the borders
    Threads,    // one thread per output element
    InPlace,    // ... in place (`threads`)
    Atomic,     // ... atomic adds (`threads`)
    OneThread,  // one thread (`threads`)
  };
  Family family = Family::Threads;
  std::optional<GpuRelayoutPlan> relayout; // Tile and Phases: the copies the tiles run over
  std::vector<GpuTilePart> tiles;
  std::optional<GpuPhasesPlan> phases; // Phases: their count and split
  GpuThreadsPlan threads;              // InPlace, Atomic, OneThread
  bool tiled() const {
    return family == Family::Tile || family == Family::Phases || family == Family::CoreBorder;
  }
};

// One line: the family; for a tile family the note of its last tile (shape, staging, stages,
// split-K), the phases' split, the copies, as lowering writes it (describe(GpuTileSchedule)).
std::string describe(const GpuStatementPlan& p);

namespace gpuschedule {

// Statement k's facts for its plan: its box `ranges` and schedule `sched`, the call's buffers;
// the layout copies, residue phases and core computed here, once.
GpuStatementInput gpuStatementInput(const dsl::Program& p, const dsl::BoundProgram& b,
                                    std::size_t k, const StatementSchedule& sched,
                                    const Box& ranges, const GpuBuffers& buffers);

// The family order (docs/GPU_SCHEDULES.md, "The family order"), the whole plan decided before
// anything is emitted: a split reduction where the schedule chose one; for independent outputs
// the first tile family that applies, else one thread per element; in place; atomic adds for
// scatters; else one thread. The tile families in turn: a tile over the layout copies, a plain
// tile, residue phases over the copies, plain residue phases, a core/border split's core.
// The copies come first because relayoutPlan asks for them only where they measured faster
// than the tile over the call's layout. The later families take what the earlier refuse: a
// plain tile masks dependent ranges that fill at least half their hulls; residue phases take
// the strided ones that fill a sliver; a core/border split the other dependent ranges that read
// one output index each.
GpuStatementPlan planGpuStatement(const GpuStatementInput& in, const Target& t);

} // namespace gpuschedule

} // namespace einjit::codegen
