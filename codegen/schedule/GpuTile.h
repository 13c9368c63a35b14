#pragma once
// The schedule of a GPU statement as a value, and its printer. A contraction tile: which tile
// family, its shape, how each operand reaches shared memory, the pipeline depth, split-K, and what
// surrounds the tile (residue phases, layout copies, a core/border split). The planners of
// schedule/ decide it before anything is emitted (GpuSimtPlan.h, GpuTensorCorePlan.h,
// GpuStagingPlan.h, over the rules of GpuTileSchedule.h); the gpu/ emitters carry it out, deciding
// nothing; the statement's schedule keeps it (StatementSchedule::gpuTile) and `describe` prints it
// for `einjit explain` (the only place the tile's note is written).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace einjit::codegen {

enum class GpuTileKind : std::uint8_t {
  Simt,    // f32 FMAs, a register block of TM x TN cells per thread
  MmaSync, // bf16 mma.sync m16n8k16, 8 warps of 64 x 32
  Wgmma,   // bf16 wgmma (sm_90a), 2 warpgroups of 64 x WBN
};

// How one operand of a tile is staged in shared memory.
struct GpuOperandPlan {
  std::string buffer; // its shared buffer ("tile.L", "tile.A", ...)
  int copyBytes = 0;  // bytes per asynchronous copy; 0: loaded through registers
  // Where a register-staged operand's indices come from (else they are decomposed).
  enum class Index : std::uint8_t { Decomposed, RowOffsets, RowTables, ReductionTables };
  Index index = Index::Decomposed;
  std::string masked; // the dependent indices the operand is masked to ("": none)
  // Its layout in shared memory, as the emitter (gpu/Staging, lowering::Staged) lays it out:
  int vector = 0;     // elements per asynchronous copy (copyBytes / element bytes); 0: registers
  bool kFast = false; // consecutive threads stage consecutive k (else consecutive rows)
  // Row-major (element (w, kk) at w * stride + kk) or k-major (kk * stride + w); `core`: the
  // 128-byte-swizzled rows of the warpgroup tile.
  bool rowMajor = false, core = false;
  std::int64_t rows = 0, stride = 0, stageElems = 0; // the tile's rows of it; one stage's elements
  bool operator==(const GpuOperandPlan&) const = default;
};

struct GpuTilePlan {
  GpuTileKind kind = GpuTileKind::Simt;
  std::int64_t BM = 0, BN = 0, BK = 0; // tile rows, columns, reduction slice
  std::int64_t TM = 0, TN = 0;         // Simt: cells per thread
  std::int64_t WM = 0, WN = 0;         // MmaSync: the warps' grid
  std::int64_t WBN = 0;                // Wgmma: a warpgroup's columns
  bool sideBySide = false;             // Wgmma: the two warpgroups split the columns
  int inFlight = 0;                    // Wgmma: groups of products left running
  std::string I, J, K, B;              // the index groups' names ("i,j"; B "-" when empty)
  bool batched = false;                // one tile row per value of B
  int stages = 2;                      // slices kept in shared memory
  std::vector<GpuOperandPlan> operands;
  bool vectoredOutput = false; // the output stored 16 bytes at a time ...
  int outputVector = 1;        // ... `outputVector` elements at once
  std::int64_t splits = 1, perSplit = 0;
  bool operator==(const GpuTilePlan&) const = default;
};

// A tensor that a tile reads (or writes) from a scratch copy in another layout.
struct GpuRelayoutCopy {
  int tensor = -1;                   // its id
  std::vector<std::int64_t> strides; // the copy's layout
};

// The layout copies around a tile, decided by gpuschedule::relayoutPlan and carried out by
// gpu/Relayout (emitOverCopies), which emits exactly these copies or none.
struct GpuRelayoutPlan {
  std::vector<GpuRelayoutCopy> inputs;   // factors copied before the tile (each tensor once)
  std::optional<GpuRelayoutCopy> output; // the output, computed in its copy and copied back
  bool outputIn = false;                 // the output's copy is filled from it first
  int kLast = -1;                        // the reduction index the tile runs last, or -1
  std::string tensors;                   // "a, b": the copied tensors, inputs then output
  std::string channel; // "": batch-outermost layouts; else the index run fastest and last
};

// Residue phases of a strided gradient (planPhases).
struct GpuPhasesPlan {
  // One strided reduction split into phases: output index `out` = g q + r, reduction index
  // `red` = a q + m (printed "u = 2q + r, h = q + m").
  struct Split {
    std::string out, red;
    std::int64_t g = 2, a = 1;
  };
  std::int64_t count = 0;
  std::vector<Split> splits;
  // The functions the phases were emitted as, [firstLaunch, endLaunch): the launches that
  // passes::mergeLaunches merges after every statement is lowered, when it can (`merged`).
  std::size_t firstLaunch = 0, endLaunch = 0;
  bool merged = false; // the phases run in one launch
};

struct GpuTileSchedule {
  GpuTilePlan tile; // of the last phase when there are phases
  std::optional<GpuPhasesPlan> phases;
  std::optional<GpuRelayoutPlan> relayout;
  bool coreBorder = false; // the tile is the core of a core/border split
};

// A GPU statement without a tile whose threads are not one per independent output element
// (that case keeps the statement schedule's note).
struct GpuThreadsPlan {
  enum class Kind : std::uint8_t {
    InPlace,   // one thread per element of an output it reads only at that element
    Atomic,    // one thread per element of `indices`, adding atomically into `output`
    OneThread, // output elements not independent: one thread runs the statement
  };
  Kind kind = Kind::InPlace;
  std::string indices, output; // Atomic: the output indices' names ("i,j"), the output's name
  bool wide = false;           // Atomic: into an f32 copy of the bf16 output
  bool scatter = false;        // OneThread: because of a scatter (else the left-hand side)
};

// The one-line note of `einjit explain`.
std::string describe(const GpuTilePlan& t);
std::string describe(const GpuTileSchedule& s);
std::string describe(const GpuThreadsPlan& t);

} // namespace einjit::codegen
