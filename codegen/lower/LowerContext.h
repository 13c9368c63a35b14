#pragma once
// The modes a statement is lowered in, as one value instead of loose members: a family that
// opens a mode (an atomic scatter, a GPU tile, a residue phase, layout copies) sets it for the
// extent of its emission through `Scoped`, which restores the previous value on every way out
// (early returns included), and the shared steps (offset, storeOutput, setRanges, staging,
// masks) read it. Internal to codegen/ (lower/, gpu/).
#include "codegen/IR.h"
#include "codegen/schedule/GpuStatementPlan.h"
#include "dsl/Binding.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace einjit::codegen::lowering {

// While a statement is lowered inside row blocks (schedule/RowBlocks.h): its row index runs
// over the block's rows [0, rows) as a local value, the block starting at row `base`; every
// access adds `base` to it, except an access of a tensor kept in the group's scratch, which is
// addressed by the local row, in the group's own block of the scratch (`slot`).
struct RowBlockContext {
  int var = -1;              // the statement's row index; -1: not in row blocks
  std::int64_t rows = 0;     // rows of this block (the local range)
  std::int64_t lo = 0, hi = 0; // the rows of the whole run (what accesses are proven over)
  ir::Expr base, slot;       // the block's first row; the task group's scratch slot
  std::vector<std::int64_t> blockElems; // per tensor: elements of its scratch block; 0: none
  // A column sum (RowRun::sums): its output's stores add into partial sum `sumSlot`, each
  // partial `sumElems` elements (the whole output) long.
  int sumOutput = -1;
  std::int64_t sumElems = 0;
  ir::Expr sumSlot;
  // The statements whose output stores are non-temporal (RowRun::streamed), as they are lowered
  // (a fused group's members among them).
  std::vector<const dsl::Statement*> streamed;
  bool streams(const dsl::Statement& st) const {
    return std::find(streamed.begin(), streamed.end(), &st) != streamed.end();
  }
  // A staged output's last writer (RowRun::staged): its reads of its output come from the
  // scratch, its store goes to the tensor's own buffer `storesBuffer`; null: none.
  const dsl::Statement* storesBy = nullptr;
  std::string storesBuffer;
  // The statements whose store is left out (RowRun::forwarded): their value goes to
  // LowerContext::forwarded instead, where the later reads of their element loop take it.
  std::vector<const dsl::Statement*> forwarded;
  bool forwards(const dsl::Statement& st) const {
    return std::find(forwarded.begin(), forwarded.end(), &st) != forwarded.end();
  }
  bool scratch(int t) const {
    return t >= 0 && static_cast<std::size_t>(t) < blockElems.size() &&
           blockElems[static_cast<std::size_t>(t)] > 0;
  }
};

// Where each tensor's accesses go, per tensor id: the buffer, its strides and whether it is
// 16-byte aligned. Row blocks redirect a run's scratch tensors to per-task blocks, the GPU's
// layout copies the tensors they copy, for the extent of their emission (Scoped).
struct BufferMap {
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> strides;
  std::vector<bool> aligned;
};

struct LowerContext {
  BufferMap buffers;
  // --- an atomic scatter (atomicScatter) ---
  bool atomic = false; // storeOutput adds atomically
  std::string wide;    // ... into this f32 copy of a bf16 output (beginWideScatter)
  // --- a GPU tile ---
  // Indices that setRanges binds to their only value (the tile's indices of one value).
  std::vector<bool> pinned;
  const dsl::BoundStatement* maskBounds = nullptr; // the masked tile's statement (stageIssue)
  // Plain subscripts count as in bounds (a masked operand's reads inside its ranges, which
  // were solved from those subscripts).
  bool trustPlain = false;
  // --- element-wise statements fused into one loop (schedule/Fusion.h) ---
  // The last statement whose element body follows the current statement's (elementBodies);
  // 0 when none does.
  std::size_t fusedThrough = 0;
  // --- a packed GEMM's epilogue (schedule/Fusion.h, planEpilogue) ---
  // The last element-wise statement after the current one that its tile stores also run; 0
  // when none does.
  std::size_t epilogueThrough = 0;
  // Indices a packed GEMM merged (GemmPlan::merged): the statement's own ranges, over which
  // setRanges proves subscripts (the merged ranges address the same elements); empty otherwise.
  std::vector<std::pair<std::int64_t, std::int64_t>> provenRanges;
  // --- a statement inside row blocks (schedule/RowBlocks.h) ---
  RowBlockContext rows;
  // Per tensor: the value a forwarded statement (RowBlockContext::forwarded) computed for the
  // element being lowered, which reads of that tensor take; null where none. Set by its
  // writer and cleared where an element loop's body begins (rowLoop, elementBodies).
  std::vector<ir::Expr> forwarded;
  // --- a residue phase of a strided gradient (schedule/GpuStatementPlan.h, PhaseSub) ---
  std::vector<PhaseSub> phase;
};

// Sets `field` to `value` until the end of the scope, then restores what it held.
template <class T>
class Scoped {
public:
  Scoped(T& field, T value) : field_(field), saved_(std::exchange(field, std::move(value))) {}
  ~Scoped() { field_ = std::move(saved_); }
  Scoped(const Scoped&) = delete;
  Scoped& operator=(const Scoped&) = delete;

private:
  T& field_;
  T saved_;
};

} // namespace einjit::codegen::lowering
