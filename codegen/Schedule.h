#pragma once
// Schedules: how each statement of a bound program becomes loops. Lowering (Lower.h) follows a
// schedule; it never decides one. A schedule fixes the loop order of the output indices, the
// loop run in parallel, the loop hinted for vectorization, and for contraction-like statements
// a register tile: MR values of one output index times NR (a multiple of the vector width)
// of the unit-stride output index, kept in registers across the whole reduction.
//
// A statement with few output elements and a long reduction gets a *split reduction* instead:
// its reduction runs in a fixed number of chunks (contiguous in iteration order) in parallel,
// each into a partial result, and the partials are combined in chunk order. The chunk count
// depends on the shapes only (never on threads or the machine), so results are bit-identical
// from run to run and for any thread count.
//
// Large products of two reads take the packed GEMM path (schedule/GemmPlan.h: packing
// buffers, a micro-kernel, cache blocking); backends need no change.
#include "codegen/Target.h"
#include "codegen/schedule/GemmPlan.h"
#include "codegen/schedule/GpuTile.h"
#include "codegen/schedule/OneHot.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <optional>

namespace einjit::codegen {

struct StatementSchedule {
  bool run = true;             // false: no output element is covered
  std::vector<int> outerOrder; // output indices, outermost first
  int parallelVar = -1;        // an output index whose loop (or tile loop) is split among
                               // threads
  bool vectorizeInner = false; // hint the innermost loop to LLVM's vectorizer
  // Register tile (tileJ >= 0): tileJ has unit stride in the output, tileI is another output
  // index (or -1: a single row).
  int tileI = -1, tileJ = -1;
  int mr = 1, nr = 1, width = 1;
  // Dot-product tile (dotVar >= 0): no output index is contiguous in the reads, but a
  // reduction index (+, max or min) is. MR x NR outputs (tileI x tileJ, tileJ may be -1), each
  // a vector of `width` partial results along dotVar, combined at the end.
  int dotVar = -1;
  // Split reduction (splitChunks > 0): the reduction indices from the first one to splitVar,
  // flattened (splitPrefix iterations, the last index fastest), run in splitChunks chunks of
  // splitChunk iterations (the last chunk may be shorter); the later reduction indices run
  // whole inside each iteration. Partials are combined in chunk order.
  int splitChunks = 0;
  int splitVar = -1;
  std::int64_t splitPrefix = 0, splitChunk = 0;
  // A GPU contraction tile (set by the lowering, which chooses it through
  // schedule/GpuTileSchedule.h): its note replaces `why`.
  std::optional<GpuTileSchedule> gpuTile;
  // The packed GEMM path (schedule/GemmPlan.h): it replaces the tiles above.
  std::optional<GemmPlan> gemm;
  // A one-hot sum (schedule/OneHot.h): evaluated only at the one value of an output index
  // whose summand may be non-zero.
  std::optional<OneHot> oneHot;
  std::string why; // one line for `einjit explain`
};

// Strides (in elements) of every tensor of the call, by tensor id.
using Strides = std::vector<std::vector<std::int64_t>>;

// Elements from a tensor's first to one past its last (its largest offset + 1; 1 when empty).
std::int64_t spanElements(const std::vector<std::int64_t>& shape,
                          const std::vector<std::int64_t>& strides);

// Distinct output index tuples write distinct elements and no element is read by another
// iteration: the statement's output elements may be computed in parallel, in any order (no
// scatter, no read of its own output, an injective left-hand side).
bool independentOutputs(const dsl::Statement& st);

// The statement reads its own output (on the right, or in a left-hand gather).
bool readsOwnOutput(const dsl::Statement& st);

// A ':=' statement run under `s` writes every element of its output: its left-hand indices are
// distinct, run over whole dimensions and do not depend on other indices.
bool coversOutput(const dsl::BoundProgram& b, const dsl::Statement& st,
                  const dsl::BoundStatement& bs, const StatementSchedule& s);

StatementSchedule scheduleStatement(const dsl::Program& p, const dsl::BoundProgram& b,
                                    std::size_t stmt, const Strides& strides, const Target& t);

// The note of a statement split into a rectangular core, run under `core` (the schedule of the
// core's box), and generic borders (docs/GRADIENTS.md, G6).
std::string coreBorderNote(const StatementSchedule& core);

} // namespace einjit::codegen
