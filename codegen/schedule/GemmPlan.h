#pragma once
// The packed GEMM plan of a statement (docs/CPU_SCHEDULES.md, "The packed CPU contraction
// path"): decided before lowering, a value that `einjit explain` prints and lower/CpuGemm.cpp
// follows. A '+' reduction of a product of two plain tensor reads, large enough that packing
// pays, runs as BLIS does: operand A packed into MR-wide slivers along one output index M,
// operand B into NR-wide slivers along one output index N (each read through its own
// subscripts and strides: transposes, permutes and convolution windows cost no extra pass and
// no im2col tensor), an MR x NR micro-kernel with its accumulators in vector registers across
// a KC-deep block of the reduction, and MC / KC / NC blocking sized from the caches. Every
// other output index (a batch index, read by both operands, or a second index of one side,
// such as a convolution's image and row) is looped around the GEMM: a task is one value of
// those indices and a chunk of M and of N.
//
// Reduction indices whose range depends on other indices (a convolution's input gradient:
// the filter taps that reach a given input pixel) run over their hull; the packing writes a
// zero wherever the term is outside its range, so the sum is the same (a zero term adds
// nothing; a non-finite value of the other operand at such a position is the one difference:
// it would give NaN, where the range skips it).
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace einjit::codegen {

struct Target;

// The tensor reads of a packed statement's summand: the two operands, in the order they
// appear, and reads of output indices only (`tile`: constant across the reduction, read once
// per micro-kernel tile). A product of two reads is `product`; otherwise the summand is any
// element-wise expression of constants, parameters and its reads, each possibly read more
// than once: the distance layer's `(w[k,i] - x[k,j])^2`, its gradient
// `dy[i,j] * (2 * (w[k,i] - x[k,j]))`. Every read is plain or padded, without gathers. Nothing
// for any other summand (a third read of a reduction index, an index's value). Indices below
// `outputs` are the statement's output indices.
struct GemmOperands {
  const dsl::CExpr* read[2] = {nullptr, nullptr};
  std::vector<const dsl::CExpr*> tile;
  bool product = false;
};
std::optional<GemmOperands> gemmOperands(const dsl::CExpr& rhs, int outputs);

// Two indices the plan runs as one (schedule/GemmBinding.h): `outer` takes its first value
// only, `inner` extent(outer) x extent(inner) values.
struct GemmMerge {
  int outer = -1, inner = -1;
};

struct GemmPlan {
  int aFactor = 0;        // which operand read is A (0: the first, gemmOperands)
  bool product = true;    // the summand is A * B (else an element-wise expression, GemmOperands)
  // An element-wise summand with a constant power-of-two factor (2 in the distance gradient's
  // `dy[i,j] * (2 * (w[k,i] - x[k,j]))`) sums `summand` and multiplies the sums by `scale`:
  // scaling by a power of two commutes with every rounding (the same bits, unless a value
  // overflows or is subnormal), and the micro-kernel saves one operation per term.
  dsl::CExprPtr summand;
  double scale = 1;
  int m = -1, n = -1;     // the M and N indices (output indices)
  std::vector<int> k;     // reduction indices, outermost first (the last fastest in a sliver)
  std::vector<int> batch; // the other output indices, looped around the GEMM
  // Per operand (0: A, 1: B): the batch indices it reads (a whole-packed operand is laid out
  // per value of these only), the dependent reduction indices whose ranges its packing applies,
  // and whether it is packed whole once per call, shared by every task (when it fits), or a
  // cache block at a time by each task into that task group's scratch.
  std::array<std::vector<int>, 2> reads, masks;
  std::array<bool, 2> whole{true, true};
  // The batch values run inside each KC block (a task is a chunk of M and N only): every batch
  // index is a window tap of the operand packed per block (read only in subscripts that also
  // hold a reduction index, as a weight gradient reads x[n,c,a+h,b+w] at its taps a, b) and the
  // other operand reads none, so consecutive batch values pack nearly the same elements, from
  // cache, and the other operand's packed block serves them all.
  bool batchInside = false;
  // ... in this many groups of consecutive batch values (sizes that differ by one at most), a
  // task per group and chunk of M and N: tasks for the threads where M and N give too few
  // chunks, without packing anything twice (each batch value's block is packed by one task).
  std::int64_t batchGroups = 1;
  // B read in place: the micro-kernel loads B straight from the operand, nothing of it packed
  // (a last, partial sliver with masked loads). For a window (a convolution's x[n,c,h+a,w+b]
  // along w: N and a reduction index in one subscript), whose packed panel would hold each
  // element once per tap: read with unit stride along N (or two apart where 512-bit
  // operations run in halves: a stride-2 window, two loads and a permute a vector; its tile
  // then in one more equal tile where that pads M less), otherwise packed per block, no
  // padding, every subscript proven inside its dimension at every term. A KC block reads a few
  // rows that stay in L1, so the copy bought nothing but its own cost. Dependent ranges of B
  // (the stride-1 input gradient's dy[n,o,u-a,v-b]) are applied by the kernel: a range that
  // reads only batch indices bounds its index's loop, one that reads N masks B's lanes.
  bool bInPlace = false;
  // ... its slivers [plainFrom, plainTo) of N read without a mask; the others (N's last, a
  // dependent range that reads N cut short) with masked loads.
  std::int64_t plainFrom = 0, plainTo = 0;
  int mr = 0, nr = 0, width = 0; // micro-kernel rows, columns (NR: vectors of `width` lanes)
  // Accumulator sets along the reduction: consecutive terms go to `kSets` MR x NR sets in turn,
  // added together after the block. A tile too small for the FMA pipes' latency (the element-
  // wise summands whose local tiles take registers) gets more independent chains this way.
  int kSets = 1;
  // KC blocks of the reduction: k[0..kSplit) take one value per block, k[kSplit] kChunk values,
  // the indices after it their whole ranges; kc = kChunk x (their extents), kBlocks blocks.
  int kSplit = 0;
  std::int64_t kChunk = 1, kc = 0, kBlocks = 1;
  std::int64_t mc = 0, nc = 0; // cache blocks along M and N (multiples of MR and NR)
  // Tasks: every batch value (or group of them, batchInside) split into mTasks x nTasks chunks
  // of at most mChunk x nChunk slivers (sizes that differ by one at most); the tasks run in
  // `groups` contiguous groups (the parallel loop), each with its own scratch.
  std::int64_t mChunk = 0, nChunk = 0, mTasks = 1, nTasks = 1, tasks = 1, groups = 1;
  bool parallel = false;
  // Task t is batch value t mod (batch values) of chunk t / (batch values), where it is
  // otherwise chunk t mod (chunks) of batch value t / (chunks): where one cache line of the
  // output holds several batch values (C[i,k,b], b fastest), the threads' contiguous runs of
  // tasks then hold different chunks of the output's rows, not different batch values of the
  // same lines, which two threads would write at once (each line moving between their caches).
  bool batchFastest = false;
  // A batch index outside the KC blocks has an output stride under a cache line (C[i,k,b]): each
  // task's tiles cover a quarter (b of 4) of their output lines, so every KC block's tiles
  // would be added into the output element by element, each line read and written once per
  // batch value. Such an output is staged (GemmPlan::staged, any size, any thread count) and
  // its last pass runs the batch values fastest, each line written whole while in cache.
  bool batchInLine = false;
  // The reduction split across tasks (kParts > 1): the KC blocks in kParts runs of consecutive
  // blocks, sizes that differ by one at most; part p's tasks are tasks [p T, (p + 1) T) of the
  // one-thread plan's T (tasks = kParts x T), each summing its run into part p's own partial
  // output (scratch), and a last pass adds the partials in part order into the output (`:=`,
  // `+=`, then the epilogue). For a small output over a long reduction (a convolution's weight
  // gradient): tasks over chunks of the output each stream the whole reduction's operands, so
  // two threads read twice what one does. The split count is the plan's, not the machine's:
  // the same bits on any number of threads.
  std::int64_t kParts = 1;
  // Indices run as one (GemmBinding.h), in the order they apply: the plan's indices and
  // extents are those of mergedBinding, which the lowering runs.
  std::vector<GemmMerge> merged;
  // The output staged (always where kParts > 1): the tiles summed into the contiguous partial
  // output above, one pass then storing it into the output. Also for one part: a one-thread
  // plan whose output is not contiguous along N (a weight gradient's dk[o,c,a,b], channels 9
  // apart) over several KC blocks otherwise adds every block's tiles into it element by element.
  bool staged = false;
  bool prefetchOut = true; // the tile's output lines fetched before its reduction (lower/CpuGemm)
  // B read in place: each step of the reduction also fetches the next task's line of B into L2
  // where B's window runs along the task's batch index (lower/CpuGemmKernel: nextRowsPrefetch).
  // Where 512-bit operations run in halves (Zen 4), where it was measured.
  bool prefetchNext = false;
  bool vectorStore = true; // N has unit stride in the output: whole tiles stored as vectors
  std::string why;         // one line for `einjit explain`
};

// The plan for statement `stmt`, or nothing when it does not take the packed path.
std::optional<GemmPlan> planGemm(const dsl::Program& p, const dsl::BoundProgram& b,
                                 std::size_t stmt,
                                 const std::vector<std::vector<std::int64_t>>& strides,
                                 const Target& t);
// Whether the last sliver of N (extent n) runs a kernel of NR / 2 columns: it holds at most
// half of NR's lanes and NR / 2 is whole vectors, or, where 512-bit operations run as two
// 256-bit halves (Target::halvedVectors), whole half vectors (NR 16: the last 8 columns of N =
// 54 or 56 in 256-bit vectors, each half the issue of a 512-bit one).
bool halfWidthTail(const GemmPlan& g, std::int64_t n, const Target& t);

// Below this many flops the register tiles (no packing) are as fast: packing costs a pass
// over both operands and a scratch buffer per call.
constexpr double kGemmMinFlops = 1e6;

// The note of a strided gradient's residue phases on the packed path (lower/CpuGemmPhases):
// `phases` of them, each planned like `each` (the last phase's plan).
std::string describePhases(std::size_t phases, const GemmPlan& each);

// Whether every subscript of `read` (plain, no gather) stays inside its dimension (`shape`)
// at every point of the statement's ranges where the summand is a term: dependent ranges
// applied, not their hulls (a stride-1 input gradient's dy[n,o,u-a,v-b] is inside at its taps
// a, b only). `constant(d)`: the value of subscript d's constant.
bool readInside(const dsl::CExpr& read, const dsl::BoundStatement& bs,
                const std::vector<std::int64_t>& shape,
                const std::function<std::int64_t(std::size_t)>& constant);

// Whether `read` reads index v in any subscript.
bool uses(const dsl::CExpr& read, int v);
// The elements between consecutive values of index v in `read` (tensor strides `st`).
std::int64_t strideAlong(const dsl::CExpr& read, int v, const std::vector<std::int64_t>& st);
// e without its constant power-of-two factors (through products and negations), their product
// multiplied into `scale`; formatScale prints such a scale for `einjit explain`.
dsl::CExprPtr withoutScale(const dsl::CExprPtr& e, double& scale);
std::string formatScale(double s);

// Marks the indices (vars[v]) that bound c reads.
void boundVars(const dsl::ConcreteBound& c, std::vector<bool>& vars);

// The same for a statement and its binding given apart (a residue phase of one: CpuGemmPhases,
// which judges the phases' flops together).
// `inside(read)`: whether every subscript of a read stays inside its dimension over the
// statement's ranges (B is read in place only then); none: B is always packed. `merged`: the
// merges `bs` has applied (mergedBinding), for the plan's note and GemmPlan::merged. `rows`:
// the one-vector tile's rows for a product; 0: the rule's (fittedRows; where 512-bit
// operations run in halves, then the tallest of at least 16 rows that divides M).
std::optional<GemmPlan> planGemm(const dsl::Statement& st, const dsl::BoundStatement& bs,
                                 DType dtype,
                                 const std::vector<std::vector<std::int64_t>>& strides,
                                 const Target& t, double minFlops = kGemmMinFlops,
                                 const std::function<bool(const dsl::CExpr&)>& inside = {},
                                 const std::vector<GemmMerge>& merged = {},
                                 std::int64_t rows = 0);

} // namespace einjit::codegen
