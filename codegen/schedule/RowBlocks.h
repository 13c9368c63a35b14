#pragma once
// Row blocks (CPU): a run of consecutive statements that all write rows of one index — the
// first left-hand subscript of each is a bare output index with the same range, the *row* —
// runs as one parallel loop over blocks of rows; inside a block the statements run one after
// another, each over the block's rows only, so that a row written by one statement is read by
// the next while it is still in L1/L2 (a softmax gradient is ten such statements, each a full
// pass over the rows when run alone).
//
// Program order runs every row of statement A before any row of a later statement B; a block
// runs rows [r0, r1) of A, then of B, then the next block. That gives the same result exactly
// when a tensor that a statement of the run writes is touched, by every statement of the run
// (reads and writes), only in the row being computed: its first subscript is exactly the
// statement's row index (coefficient 1, no other index, no constant, plain). Then the rows of
// one block touch only their own rows of those tensors, and blocks may run in any order and
// on any thread. Tensors the run only reads are read anywhere (x[i+1] is fine). A member must
// update its elements independently (no scatter, one write per element, no read of its own
// output: an in-place statement ends a run), have no range that depends on another index, no
// gathered subscript, and keep the box schedule with at most a row of outputs per tile (no split
// reduction, no packed GEMM, no contraction's register tile over two output indices).
//
// A tensor the run writes that is no output of the program, no argument, not saved
// (Options::saved: the caller reads it after the call), is written and read
// only by statements of the run, and whose first write is a ':=' covering it, needs no memory
// of full size: it lives in a block-sized scratch per task group (the softmax gradient's
// m, e, z, de, dz, dm and first_m), which is what removes the traffic.
//
// The decision is a value made from the bound program, the call's strides and the Target before
// lowering; `einjit explain` prints it with each statement's schedule.
#include "codegen/Schedule.h"
#include "codegen/Target.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace einjit::codegen {

// Rows per block: the rows' bytes of every tensor the run touches by rows fill about a quarter
// of L2 (the rest for what the hardware keeps of the tensors read in full, such as a
// layernorm's gain, and for the lines in flight of the tensors streamed from memory), a
// multiple of kRowAlignWide rows, or of kRowAlign where fewer than kRowAlignWide rows fit (the
// 4-row register tiles divide both, so a full block has no row edge), between that multiple and
// kMaxBlockRows. Rows of 4096 f32 make blocks of 4 rows (a softmax gradient's five such
// tensors: 320 KiB, within a 512 KiB L2; 8 rows spilled out of it).
inline constexpr std::int64_t kRowAlign = 4, kRowAlignWide = 8;
inline constexpr std::int64_t kRowBlockL2Share = 4; // the blocks' rows fill L2 / this
// A run with column sums (RowRun::sums) adds each block's rows into its group's partial sums,
// a full row of each per block: its blocks fill half of L2, a multiple of 8 rows (the layernorm
// gradient measured slower with blocks of 4 rows).
inline constexpr std::int64_t kRowSumL2Share = 2;
inline constexpr std::int64_t kMaxBlockRows = 512;
// Zen 4: runs whose rows are a quarter of this many bytes to this many each may run blocks of
// one row (RowBlocks.cpp, singleRowBlocks).
inline constexpr std::int64_t kRowPageBytes = 4096;
// A row loop's reductions (RowRun::loops) keep this many vectors of partial results, a step
// of as many vectors along the row updating each one: independent chains, where one would
// wait on the previous add at every vector (a layernorm's loops do little else per vector).
// A loop that evaluates a polynomial function (exp, log, tanh, ...) keeps one: its dozens of
// instructions per vector hide the add's latency, and more accumulators push the function's
// constants out of the 16 vector registers (measured slower: bench/RESULTS.md).
inline constexpr std::int64_t kRowLoopChains = 4;
// Task groups per thread (each with its own scratch; a group runs a contiguous range of blocks).
inline constexpr std::int64_t kRowGroupsPerThread = 4;
// Task groups of a run with column sums (RowRun::sums), whatever the thread count: the groups'
// partial sums are added in a fixed order.
inline constexpr std::int64_t kRowSumGroups = 8;
// A run's output is stored non-temporally (RowRun::streamed) from this many times the L2 size
// on: a smaller one may still be in a cache when the next program reads it.
inline constexpr std::int64_t kStreamL2s = 8;

struct RowRun {
  std::size_t first = 0, last = 0; // statements: the members, and the deferred ones between
  // Statements between first and last that are no members (not row statements: a layernorm
  // gradient's column sums dg[j], db[j]) and run after the run instead, in their order. Legal
  // because no later member writes what such a statement reads or writes, or reads what it
  // writes: moving it past them changes no value.
  std::vector<std::size_t> deferred;
  // Statements between first and last that sum over the run's rows into an output no member
  // touches (the layernorm gradient's column sums dg[j], db[j]): summed inside the run, each
  // block's rows at the statement's place among the members, into a partial sum per task group
  // (`partialSlots` of them, the tail block's last), which a combine after the run adds in group
  // order into the output. The blocks and groups are then fixed by the shapes, not the threads
  // (kRowSumGroups), so the result does not depend on the thread count.
  std::vector<std::size_t> sums;
  bool member(std::size_t k) const {
    return k >= first && k <= last &&
           std::find(deferred.begin(), deferred.end(), k) == deferred.end() &&
           std::find(sums.begin(), sums.end(), k) == sums.end();
  }
  bool summed(std::size_t k) const { return std::find(sums.begin(), sums.end(), k) != sums.end(); }
  // Members whose output is stored non-temporally (ir::Store::nonTemporal): an element-wise
  // statement writing a large tensor in full memory (no scratch) that no other statement of the
  // run reads or writes, except at one element per row (a one-hot sum), or the last writer of a
  // staged output (RowRun::staged: the others wrote the scratch): the softmax's y and dx, the
  // layernorm's y and its gradient's dx (staged). Such a line would leave the cache
  // before anything reads it; stored normally it costs a read for ownership and pushes the
  // block's rows out of L2.
  std::vector<std::size_t> streamed;
  bool streams(std::size_t k) const {
    return std::find(streamed.begin(), streamed.end(), k) != streamed.end();
  }
  // Members whose store is left out: an element-wise statement, the last writer of a scratch
  // tensor (not staged) that only later statements of its own element loop read afterwards
  // (its row loop, RowRun::loops, or outside row loops its element-wise group, FusionPlan),
  // at the element it writes; those reads take the value it would have stored (the softmax
  // gradient's `de += dz`, read only by `dx := de * e` beside it; the layernorm gradient's
  // `dd += ...`). The store would write a line of the block's scratch that nothing reads.
  std::vector<std::size_t> forwarded;
  bool forwards(std::size_t k) const {
    return std::find(forwarded.begin(), forwarded.end(), k) != forwarded.end();
  }
  // The column sums' partial sums: one per task group, then the tail block's (those of the
  // groups exist when there are full blocks; the tail's when there is a tail).
  std::int64_t partialSlots() const { return groups + 1; }
  // Row loops: consecutive members first..last that run as one loop along the row (each row
  // of the block once, vectors along the row's column index): element-wise statements over
  // [row, col] and reductions over col into [row] (a dot-product tile along col), each
  // element's updates in program order, the reductions' lanes kept as their dot-product tile
  // keeps them (the same sums, bit for bit), combined after the row. A block's rows are then
  // read once per loop instead of once per statement (the softmax gradient: e, de and dz in
  // one pass, de, dx, dm and first_m in a second). Legal when every access, by a statement of
  // the loop, to a tensor that an element-wise statement of the loop writes is at that element
  // (the same row and column), and nothing in the loop but its own writer touches what a
  // reduction of the loop writes (its value is known only after the row).
  // Each reduction keeps `chains` vectors of partial results (see kRowLoopChains).
  struct Loop {
    std::size_t first = 0, last = 0;
    std::int64_t chains = 1;
    // Inputs the loop reads along the row whose same vector of the next block (`blockRows`
    // rows on) each step fetches into L2 (ir::Prefetch::ahead): tensors no member writes,
    // larger than L2, read in a loop that evaluates a polynomial function (arithmetic for
    // the fetch to overlap with), or on Zen 4 in a run with column sums (passes over L2 for
    // it to overlap with). docs/CPU_SCHEDULES.md, "Row loops".
    std::vector<int> ahead;
  };
  std::vector<Loop> loops;
  // The row loop that statement k starts, or null.
  const Loop* loopAt(std::size_t k) const {
    for (const Loop& l : loops)
      if (l.first == k) return &l;
    return nullptr;
  }
  std::int64_t lo = 0, hi = 0;     // the rows
  std::int64_t blockRows = 0;      // rows per block
  std::int64_t groups = 1;         // task groups (the parallel loop's extent)
  // Tensors kept in a block-sized scratch per group (see above), ascending ids.
  std::vector<int> scratch;
  // Outputs staged in scratch (among `scratch` too): a tensor the run writes in full memory
  // that several members write (the layernorm gradient's dx := dd, then dx += dmu[i] / size):
  // every write but the last member's goes to the block's scratch, and the last one, which
  // writes every element of its rows, reads the scratch and stores to memory (non-temporally
  // where it is large: RowRun::streamed). Without it the first write moves each line in from
  // memory (a read for ownership) and the second rewrites it. `stagedBy`: the last writers.
  std::vector<int> staged;
  std::vector<std::size_t> stagedBy;
  // The output that statement k stores to memory out of the scratch (a staged tensor's last
  // writer), or -1.
  int stores(std::size_t k) const {
    for (std::size_t s = 0; s < staged.size(); ++s)
      if (stagedBy[s] == k) return staged[s];
    return -1;
  }
  std::int64_t fullBlocks() const { return (hi - lo) / blockRows; }
  std::int64_t tailRows() const { return (hi - lo) % blockRows; }
};

struct RowPlan {
  std::vector<RowRun> runs;
  std::vector<int> runOf;  // per statement: its run in `runs`, or -1
  std::vector<int> deferredBy; // per statement: the run it is deferred by (RowRun::deferred), or -1
  // Per statement in a run: the index variable of its rows (of a column sum: the reduction
  // index that runs over them).
  std::vector<int> rowVar;
  // Per statement: the decision in words for `einjit explain` (empty outside runs, and for a
  // statement that could not join the run before it only because it is not a row statement).
  std::vector<std::string> notes;
};

// A run may step over statements that cannot be members (no row statement), which then run
// after it (RowRun::deferred), when that is legal; a statement that a later member depends on,
// or that writes what it touches, ends the run before it instead.
//
// Why statement k cannot be a member of a run (empty when it can); `rowVar` receives its row.
std::string notRowStatement(const dsl::Program& p, const dsl::BoundProgram& b,
                            const Strides& strides, const Target& t, std::size_t k, int& rowVar);

// The note of statement k of a run (a member, or a statement the run defers): its own
// schedule's note `own`, then the run's part (RowPlan::notes).
std::string rowRunNote(const RowPlan& plan, std::size_t k, const std::string& own);

// Runs of two statements or more. CPU targets only (a GPU target gets no run).
RowPlan planRows(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
                 const Target& t);

} // namespace einjit::codegen
