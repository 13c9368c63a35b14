#pragma once
// The statement lowerer shared by the files of codegen/lower/, codegen/gpu/ and
// codegen/passes/ (internal to codegen/; the entry point is codegen/Lower.h). Its methods are
// defined in the file of their family: statement lowering and access checks
// (lower/StatementLowering.cpp), CPU loops, split reductions, core/border splits and dependent
// ranges (lower/), GPU threads, launches, relayouts, staging, tiles and residue phases (gpu/),
// and the post-passes (passes/).
#include "codegen/IROperator.h"
#include "codegen/Lower.h"
#include "codegen/lower/LowerContext.h"
#include "codegen/lower/LowerTypes.h"
#include "codegen/passes/HoistChecks.h"
#include "codegen/passes/MergeLaunches.h"
#include "codegen/schedule/Fusion.h"
#include "codegen/schedule/RowBlocks.h"
#include "codegen/schedule/AccessBounds.h"
#include "codegen/schedule/CpuStatementPlan.h"
#include "codegen/schedule/DependentRanges.h"
#include "codegen/schedule/GpuAccess.h"
#include "codegen/schedule/GpuPlanInput.h"
#include "codegen/schedule/GpuTileSchedule.h"

#include "einjit/Error.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

namespace einjit::codegen::lowering {

struct GemmLowering; // lower/CpuGemmLowering.h

using namespace einjit::dsl;
using ir::BinOp;
using ir::Expr;
using ir::ForKind;
using ir::Stmt;
using ir::Type;

using Interval = IndexInterval; // schedule/AccessBounds.h

class Lowerer {
public:
  Lowerer(const Program& p, const BoundProgram& b, const Strides& s, const Target& t,
          const Aligned16& a)
      : p_(p), b_(b), target_(t), vt_(irType(computeDType(b.dtype))) {
    for (const auto& tensor : p.tensors) ctx_.buffers.names.push_back(tensor.name);
    ctx_.buffers.strides = s;
    ctx_.buffers.aligned = a;
    ctx_.buffers.aligned.resize(p.tensors.size(), false);
  }

  // The statements lowered, in order (Lower.cpp); the post-passes run on the result.
  LoweredProgram run();

  // The checked subscripts recorded while lowering (passes/HoistChecks).
  const passes::AccessChecks& accessChecks() const { return checks_; }
  // The function that evaluates checked subscript c at every point of the box of the indices
  // `box`: a GPU thread, or a CPU loop iteration, per point (passes::CheckFunction).
  ir::Func checkFunction(const passes::CheckedSubscript& c, const std::vector<std::size_t>& box,
                         const std::string& name);

  // The residue phases' launches that may share one grid (passes/MergeLaunches), and their
  // statements' notes updated for the groups that merged.
  std::vector<passes::LaunchGroup> launchGroups();
  void noteMerged(std::vector<std::string>& notes, const std::vector<bool>& merged) const;

private:
  const Program& p_;
  const BoundProgram& b_;
  const Target& target_;
  Type vt_;
  LoweredProgram out_;
  bool checked_ = false;
  // The subscripts checked at run time, and whether each check can be repeated ahead of the
  // program (noteCheck); hoisting_: checkFunction is lowering a check, which records nothing.
  passes::AccessChecks checks_;
  bool hoisting_ = false;
  // Per statement lowered as residue phases: its note, its schedule, the merged launch's name.
  struct PhaseLaunches {
    std::size_t note;
    GpuTileSchedule schedule;
    std::string name;
  };
  std::vector<PhaseLaunches> phaseLaunches_;
  std::size_t stmt_ = 0; // the statement being lowered
  // The modes the current statement is lowered in (lower/LowerContext.h).
  LowerContext ctx_;
  // Per index variable of the current statement: its value as IR, and its range (hull,
  // inclusive) for proving accesses in bounds.
  std::vector<Expr> varExpr_;
  // Where a packing of an operand packed whole knows the KC block of k[kSplit] and the position
  // in it (the transposed packing's chunks, CpuGemmPacking.cpp), they replace the division and
  // modulo of its value by kChunk in the packed slot: an index linear in the chunk's lanes.
  std::optional<std::pair<Expr, Expr>> packedKBlock_;
  std::vector<Interval> varRange_;

  const std::string& bufferName(int t) const;
  Type elemType(int t) const;
  std::int64_t extentOf(int t, std::size_t d) const;
  Expr num(double v) const;
  Expr truth(Expr cond) const;
  Expr nonzero(Expr v) const;

  // --- accesses ------------------------------------------------------------------------------
  Interval interval(const Subscript& s, std::int64_t constant) const;

  // Whether subscript d of read e stays inside its dimension over the current ranges.
  bool subscriptInBounds(const CExpr& e, std::size_t d) const;

  // The element offset of an access; `inside` collects the conditions of padded dimensions;
  // `dropped` is set when a padded or folded dimension has extent 0 (nothing is read/written);
  // `emptyCheck` then receives the failing check of a plain subscript into extent 0, if any.
  Expr offset(const CExpr& acc, Expr* inside, bool* dropped, Expr* emptyCheck = nullptr);

  // Subscript s as an index (unchecked).
  // Subscript s as an index (unchecked). In row blocks, the row index is the block's first row
  // plus the local row, except for a tensor `t` kept in scratch (RowBlockContext).
  Expr subscriptIndex(const Subscript& s, int t = -1);

  // The value of a gather index tensor as an i64. Integer tensors convert exactly; a
  // floating-point one (an intermediate computed by the program) must hold integers: any other
  // value sets the status, and the interpreter reports it.
  Expr gatherIndex(const CExpr& g);

  // --- access checks hoisted ahead of the program (Lower.h, passes/HoistChecks) -------------
  // A subscript checked at run time: recorded for hoistChecks when it belongs to the statement
  // being lowered (a residue phase's rewritten copy does not: nothing is hoisted then).
  void noteCheck(const CExpr& access, std::size_t dim);
  static bool holds(const CExpr& e, const CExpr* node);

  static Expr clampIndex(Expr idx, std::int64_t e);

  // A tensor read: as a value (converted to the value type) or raw (gather indices).
  Expr read(const CExpr& e, bool asValue);

  // The value of e; its tensor reads through `readAs` when given (a packed GEMM's summand
  // reads its operands from the packed slivers).
  using ReadAs = std::function<Expr(const CExpr&)>;
  Expr value(const CExpr& e, const ReadAs* readAs = nullptr);

  // --- reductions ----------------------------------------------------------------------------
  Expr identity(Reduce r) const;

  // Strict comparisons keep the first extreme; NaN never replaces the accumulator.
  static Expr combine(Reduce r, const Expr& acc, const Expr& v);
  // Lanes combined pairwise (a tree: the order a vector reduction's lanes are summed in).
  static Expr combineTree(Reduce r, std::vector<Expr> lanes);

  // Writes the reduced value v of the current output element.
  Stmt storeOutput(const Statement& st, const Expr& v);

  Expr boundExpr(const ConcreteBound& c) const;

  // --- statements ----------------------------------------------------------------------------
  using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;
  // A statement's box: each index's range (its hull where it depends on other indices).
  static Ranges rangesOf(const BoundStatement& bs);

  // Statement k in the program (lower/CpuStatement.cpp): the row run it starts (rowBlocks), the
  // element-wise group it starts (fusedStatements), or the statement by its plan (statement),
  // then the row plan's note on why it is in no run. Returns the last statement it lowered.
  std::size_t programStatement(const ProgramPlan& program, std::size_t k);
  // Statement k by its plan (lower/CpuStatement.cpp): on the CPU, its facts
  // (cpuschedule::cpuStatementInput), its plan (cpuschedule::planCpuStatement,
  // schedule/CpuStatementPlan.h), then lowerStatement; on the GPU, a split reduction or
  // gpuStatement. With epilogue.last > k, the element-wise statements k+1..epilogue.last in its
  // packed GEMM's tile stores when it takes that path. Returns the last statement it lowered.
  std::size_t statement(std::size_t k, const EpiloguePlan& epilogue = {});
  // A CPU statement's plan carried out, deciding nothing: its note (the plan's printer), the
  // zero fill of an output it does not cover, the family's emitter. Returns plan.last().
  std::size_t lowerStatement(const CpuStatementPlan& plan);
  // Statement k on the GPU (gpu/GpuStatement.cpp): its facts (gpuschedule::gpuStatementInput),
  // its plan (gpuschedule::planGpuStatement, schedule/GpuStatementPlan.h), then the plan carried
  // out; `sched` gets the tile's value (GpuTileSchedule) where a tile family runs it.
  void gpuStatement(std::size_t k, StatementSchedule& sched, const Ranges& ranges,
                    const std::string& base);
  // Statements first..last, element-wise and fused (schedule/Fusion.h): one loop nest (CPU) or
  // one GPU thread per element, the schedule of the first (cpuschedule::planFused), each
  // element's updates in order.
  void fusedStatements(std::size_t first, std::size_t last, const std::string& note);
  // A statement's box, the row index local to its row block when it is in one.
  Ranges statementRanges(const BoundStatement& bs) const;
  // A run of statements in row blocks (schedule/RowBlocks.h, lower/CpuRows.cpp): one parallel
  // function over task groups of full blocks, then one for the last, partial block.
  void rowBlocks(const RowPlan& plan, std::size_t run, const FusionPlan& fusion);
  // The statements of the run, one after another, over one block of `rows` rows starting at
  // `base`, with scratch slot `slot` and the column sums' partial sum `sumSlot`: their loop
  // nests, every loop serial.
  Stmt rowBlockBody(const RowPlan& plan, const RowRun& run, const FusionPlan& fusion,
                    std::int64_t rows, const Expr& base, const Expr& slot, const Expr& sumSlot,
                    const std::vector<std::int64_t>& blockElems);
  // A row loop of the run (RowRun::loops) over the block of `block` (its rows, base and slot;
  // each statement's row index and stores set per statement): one function whose loop along
  // each row runs every statement's update of an element in order.
  Stmt prefetchNextBlock(const RowRun::Loop& loop, const RowBlockContext& block, const Stmt& e,
                         const std::string& row, const std::string& lane) const;
  void rowLoop(const RowPlan& plan, const RowRun& run, const RowRun::Loop& loop,
               const RowBlockContext& block);
  // After the run: column sum k's partial sums added into its output (a function of its own).
  void combineSums(const RowRun& run, std::size_t k, const std::string& name);

  // A bf16 scatter adds into an f32 copy of its output (a scratch buffer indexed like the output),
  // widened before and rounded back after: each element is rounded once, as in the interpreter,
  // instead of once per add. Returns the copy's name. Only the elements the scatter adds to are
  // widened and rounded back when the output box has fewer points than the output has elements (an
  // embedding's gradient: the rows of the batch's tokens, not the table); a thread per point of the
  // box then, points that share an element writing the same value. Widening only the tokens' rows
  // measured faster than widening the whole table.
  std::string beginWideScatter(const Statement& st, const BoundStatement& bs, const Ranges& r,
                               const std::string& base);
  void endWideScatter(const Statement& st, const BoundStatement& bs, const Ranges& r,
                      const std::string& base);
  // A GPU function of a thread per element of st's output that the statement writes (or more:
  // all of them), body(the element's offset).
  void eachTouched(const Statement& st, const BoundStatement& bs, const Ranges& r,
                   const std::string& name, const std::function<Stmt(const Expr&)>& body);
  // A GPU function of one thread per element of tensor t: body(the element's offset).
  void eachElement(int t, const std::string& name, const std::function<Stmt(const Expr&)>& body);

  // --- layout copies around a GPU tile (the decision: gpuschedule::relayoutPlan) ---------------
  std::int64_t elementsOf(int t) const;

  // A GPU function copying tensor t from buffer `from` (strides fs) to buffer `to` (strides ts):
  // blocks take a TS x TD tile of the two layouts' (different) fastest dimensions, one value of
  // every other dimension, read along the source's fastest into shared memory (rows padded by
  // one) and write along the destination's fastest.
  void relayoutCopy(int t, const std::string& from, const std::vector<std::int64_t>& fs,
                    const std::string& to, const std::vector<std::int64_t>& ts,
                    const std::string& name);

  // Emits the copies of `relaid` (the plan's: gpuschedule::relayoutPlan chose them, the tile
  // family was planned over their layouts) in, `emit` (the tile family) over them with
  // ctx_.buffers redirected to them, and the output's copy back; the schedule `emit` returns,
  // with the copies.
  GpuTileSchedule emitOverCopies(const Statement& st, const GpuRelayoutPlan& relaid,
                                 const std::string& base,
                                 const std::function<GpuTileSchedule()>& emit);

  // A statement box under a schedule: the full tiles, then the edges (columns right of the
  // last full tile, every row; rows below it, the tiled columns), themselves tiled with a
  // narrower tile where one fits, generic otherwise.
  void emitBox(const Statement& st, const BoundStatement& bs, const StatementSchedule& sched,
               const Ranges& ranges, const std::string& name);

  // Core/border split (docs/GRADIENTS.md, G6): when the ranges of reduction indices depend on
  // output indices (the solved gradients' max/min bounds), the output box splits into a core,
  // where every such range equals its full hull (plain loops, tiles; its ranges from
  // schedule/DependentRanges.h, coreRanges), and borders that keep the dependent bounds. Only
  // bounds that read a single output index are split.
  // The border strips around a core: per split output index, below and above the core, each
  // later index restricted to its core (so every element is in exactly one part).
  template <class F>
  void forEachBorder(const Statement& st, const Ranges& ranges, const Ranges& core,
                     const std::string& base, F&& emit) {
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
    Ranges outer = ranges;
    for (std::size_t o = 0; o < nOut; ++o) {
      if (core[o] == ranges[o]) continue;
      Ranges lowPart = outer, highPart = outer;
      lowPart[o] = {ranges[o].first, core[o].first};
      highPart[o] = {core[o].second, ranges[o].second};
      if (lowPart[o].second > lowPart[o].first)
        emit(lowPart, base + "_border" + std::to_string(o) + "lo");
      if (highPart[o].second > highPart[o].first)
        emit(highPart, base + "_border" + std::to_string(o) + "hi");
      outer[o] = core[o]; // later borders cover only the core of this index
    }
  }

  // G6 on the CPU: the core (plan.core) by emitBox under the core's schedule, the border strips
  // generic (cpuschedule::planCpuStatement decides).
  void coreSplit(const Statement& st, const BoundStatement& bs, const CpuCoreBorderPlan& plan,
                 const Ranges& ranges, const std::string& base);

  // G6 on the GPU: the core (box ranges) as a contraction tile, the border strips one thread
  // per output element. gpuschedule::planCoreSplit decides (schedule/GpuCoreBorder.h),
  // emitCoreSplit carries the plan out.
  GpuTileSchedule emitCoreSplit(const Statement& st, const BoundStatement& bs, const Ranges& ranges,
                                const std::string& base, const GpuStatementPlan& plan);

  // A `:=` statement k whose schedule `s` does not write every element of its output: the
  // output is zero-filled before the call (once, however many statements ask).
  void zeroFillUncovered(std::size_t k, const StatementSchedule& s);

  void setRanges(const Statement& st, const Ranges& r);

  // Loop kind for output index v, and the function's parallel fields.
  ForKind outerKind(const StatementSchedule& s, int v, std::int64_t lo, std::int64_t hi,
                    double innerWork, ir::Func& f);

  ir::Func newFunc(const std::string& name);

  static double workOf(const Ranges& r, std::size_t from);

  Stmt loopOver(const BoundStatement& bs, const Statement& st, std::size_t v, const Ranges& r,
                ForKind kind, Stmt body, int width = 1);

  int vectorWidth() const;

  // One output element: the reduction into a local accumulator, then the store (null when
  // nothing is written).
  Stmt elementBody(const Statement& st, const BoundStatement& bs, const Ranges& r, bool vectorize);
  // The same for st, followed by the element bodies of the statements fused after it
  // (ctx_.fusedThrough), over the same index values.
  Stmt elementBodies(const Statement& st, const BoundStatement& bs, const Ranges& r,
                     bool vectorize);

  void emitGeneric(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                   const Ranges& r, const std::string& name);
  // A one-hot sum (schedule/OneHot.h, lower/CpuOneHot.cpp): loops over the output indices but
  // the one-hot one, which takes only the value its summand compares it with, when that is an
  // integer inside its range.
  void emitOneHot(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                  const Ranges& r, const std::string& name);

  // One GPU thread per element of the output box: thread t of the flattened box (the first
  // index of `order` varying fastest) computes one element; dependent output ranges and the
  // last block's spare threads are guarded.
  void emitGpuGeneric(const Statement& st, const BoundStatement& bs, const Ranges& r,
                      const std::string& name);
  // A GPU function of one thread per point of the output box (dependent ranges guarded), the
  // index with unit stride in the output fastest (coalesced stores), else the last one;
  // body() gives a point's work, with the indices bound.
  void eachOutputPoint(const Statement& st, const BoundStatement& bs, const Ranges& r,
                       const std::string& name, const std::function<Stmt()>& body);

  // One GPU thread per point of the box of `order` (its last index fastest): binds the indices
  // (decompose), then body(guard) gives the thread's work, and may add to the guard, which
  // starts as the last block's spare threads' test. Null when the box or the body is empty.
  Stmt threadPerPoint(const std::vector<std::size_t>& order, const Ranges& r,
                      const std::function<Stmt(Expr&)>& body);

  // --- split reductions ------------------------------------------------------------------------
  // A split reduction (Schedule.h). Chunk c of output element o (its position in the flattened
  // output box, the last index fastest) leaves its partial in scratch[o * chunks + c]; a second
  // function combines each element's partials in chunk order into the output (a single chunk
  // writes the output directly). CPU: a parallel loop over chunks, each running the output
  // elements and its part of the reduction in iteration order. GPU: one block per (element,
  // chunk), its threads striding through the chunk, then a tree in shared memory.
  void emitSplit(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                 const Ranges& r, const std::string& name);

  static std::vector<std::size_t> outputIndices(const Statement& st);

  // The position of the current output element in the flattened output box.
  Expr flatOutput(const Statement& st, const Ranges& r) const;

  // The end of a chunk's partial: its slot in the scratch buffer, or the output itself.
  Stmt finishChunk(const Statement& st, const std::string& partial, const Expr& slot,
                   const Expr& v);

  void emitSplitCpu(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                    const Ranges& r, const std::string& name, const std::string& partial);

  void emitSplitGpu(const Statement& st, const StatementSchedule& s, const Ranges& r,
                    const std::string& name, const std::string& partial);

  // Each output element's partials combined in chunk order (from the reduction's identity, as
  // the unsplit reduction starts), then stored like any reduced value. CPU: serial loops over
  // the few output elements; GPU: one thread each.
  // chunkMajor: the partials are laid out scratch[c * elements + o] instead (split-K tiles).
  void emitCombine(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                   const Ranges& r, const std::string& name, const std::string& partial,
                   bool chunkMajor = false);

  // --- GPU contraction tiles -------------------------------------------------------------------

  // Split-K for tiles (decided by gpuschedule::splitK): the reduction's slices cut into
  // `splits` contiguous ranges, one block per (tile, range); each block leaves its tile's partial
  // sums in scratch[range * elements + o], and a second kernel adds them in range order
  // (deterministic, like the split reductions). tileSplit gives the plan's split with its
  // scratch buffer.
  using TileSplit = lowering::TileSplit;
  TileSplit tileSplit(const Statement& st, const Ranges& r, const GpuTilePlan& plan,
                      const std::string& name);
  // The k-slices of one block's range, and where a cell's sum goes.
  Expr splitIndex(const TileSplit& t) const;
  Expr tileBlock(const TileSplit& t) const;
  void sliceBounds(const TileSplit& t, std::int64_t slices, Expr* lo, Expr* hi) const;
  Stmt storeCell(const Statement& st, const Ranges& r, const TileSplit& t, const Expr& v);
  void finishSplit(const Statement& st, const BoundStatement& bs, const Ranges& r,
                   const TileSplit& t, const std::string& name);

  static void flattenProduct(const CExpr& e, std::vector<const CExpr*>& out);

  // value = lo + (g / div) % ext for each index of a group, the last one varying fastest (g >= 0,
  // so truncating division and remainder are exact).
  // On the GPU, a group of two indices or more whose flattened extent is below 2^30 divides in 32
  // bits (g runs at most a tile or a block of threads past the extent, far inside 2^31): a 64-bit
  // division by a constant takes several times the instructions (it measured much slower on the
  // stride-2 bf16 weight gradient).
  void decompose(const std::vector<std::size_t>& group, const Ranges& r, const Expr& g);

  // One operand of a contraction tile, staged in shared memory one slice at a time: BW rows of
  // its index group (from `base`) by BK of the flattened reduction (from slice k.o), at
  // `slot(w, kk)` within a stage of `stageElems` elements of type `elem`. With `vector` > 0
  // the operand is copied `vector` elements at a time (contiguous along k when kFast, else
  // along the row) by asynchronous copies straight into shared memory; with 0, each thread
  // loads its elements into registers (buf.v) and stores them afterwards, which works for any
  // operand (products, padded or strided reads) and lets the loads of the next slice overlap
  // the products of this one. Consecutive threads take consecutive k when kFast (coalesced
  // when the operand has unit stride along k), else consecutive rows.
  using Staged = lowering::Staged;
  // An operand of a tile over `group` x K, from `base`, staged as its plan says
  // (gpuschedule::planStaging).
  static Staged staged(const std::vector<const CExpr*>& fs, const std::vector<std::size_t>& group,
                       const Expr& base, const GpuOperandPlan& o, Type elem,
                       const std::vector<std::size_t>& masks);
  static std::int64_t stageUnits(const Staged& s, std::int64_t BK);
  static std::int64_t stageReps(const Staged& s, std::int64_t BK);

  // Element (or vector) e = thread + Target::gpuTileBlock * rep of a staging pass: its row w, its
  // reduction position kk in the slice, and whether e exists (null when every thread's does).
  static void stagePos(const Staged& s, std::int64_t BK, const Expr& rep, Expr* w, Expr* kk,
                       Expr* valid);
  static Stmt guarded(const Expr& valid, Stmt s);

  // Sets the group's and the reduction's indices for row w and position kk of `slice`; returns
  // whether the element lies inside the operand's box, or null where it always does: the
  // tiles (base = tile * BW, w < BW) and slices divide the extents exactly (unmasked operands).
  Expr stageIndices(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r,
                    std::int64_t BK, const Expr& slice, const Expr& w, const Expr& kk);
  // Whether every slice of BK along the reduction lies in one combination of its indices but
  // the last (whose extent BK divides).
  static bool slicesAligned(const std::vector<std::size_t>& K, const Ranges& r, std::int64_t BK);
  // The reduction's indices at position slice * BK + kk. With slicesAligned, the indices but
  // the last come from the slice alone (the same for every element a thread stages in it) and
  // the last from kk: no division per element.
  void decomposeReduction(const std::vector<std::size_t>& K, const Ranges& r, std::int64_t BK,
                          const Expr& slice, const Expr& kk);
  // a && b, either possibly null (true).
  static Expr both(const Expr& a, const Expr& b);

  // Starts the staging of `slice` into stage `stage`: asynchronous copies, or loads into
  // registers (the product of the factors, 0 outside the operand).
  Stmt stageIssue(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r,
                  std::int64_t BK, const Expr& slice, const Expr& stage);
  // Stores the registers of a register-staged operand into stage `stage`.
  Stmt stagePut(const Staged& s, std::int64_t BK, const Expr& stage);

  // The reduction loop of a tile over its slices with every operand staged in `stages` slots
  // of shared memory (the plan's): before slice k.o is multiplied (`compute(slot)`), the copies
  // of slice k.o + stages - 1 are issued into the slot slice k.o - 1 used, and the operands
  // staged through registers load slice k.o + 1, stored after the products; one barrier per
  // slice. With `inFlight` (asynchronous warpgroup products that `compute` leaves running),
  // the copies run inFlight slices less ahead, and the products are waited for after the loop.
  Stmt pipeline(const std::vector<Staged>& ops, const std::vector<std::size_t>& K, const Ranges& r,
                std::int64_t BK, const TileSplit& split, std::int64_t slices, int stages,
                const std::function<Stmt(const Expr&)>& compute, bool asyncProxy = false,
                int inFlight = 0);

  // The part of read f's offset that the indices in `of` contribute (with the constants when
  // `constants`), from the current index expressions.
  Expr offsetPart(const CExpr& f, const std::vector<bool>& of, bool constants) const;
  std::vector<bool> inGroup(const std::vector<std::size_t>& g) const;
  // Fills a row table (Staged::rowTable): entry w holds the row part of the offset of row
  // base + w, 0 for rows past the extent (their products only reach cells never stored).
  Stmt fillRowTable(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r);

  // Fills the index tables of a register-staged operand (Staged::tables): per row of the tile,
  // or per position of the reduction padded to whole slices.
  Stmt fillTables(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r,
                  std::int64_t BK);
  static std::int64_t tableEntries(const Staged& s, const std::vector<std::size_t>& K,
                                   const Ranges& r, std::int64_t BK);
  // The reduction's extent rounded up to whole slices.
  static std::int64_t wholeSlices(const std::vector<std::size_t>& K, const Ranges& r,
                                  std::int64_t BK);

  // A launch of `blocks` blocks of `threads` threads around a block's body.
  static Stmt blockLaunch(Stmt body, std::int64_t blocks, std::int64_t threads);
  // The tile kernel's launch: Target::gpuTileBlock threads per block, a block per (tile,
  // reduction range).
  static Stmt tileLaunch(Stmt body, std::int64_t blocks);

  // "i,j" for a group of indices ("-" when empty), for schedule notes.
  static std::string varNames(const Statement& st, const std::vector<std::size_t>& group);

  static std::int64_t extentOfGroup(const std::vector<std::size_t>& group, const Ranges& r);

  // Whether the current element lies in dependent index v's range (its original index, in a
  // residue phase; varExpr_ holds the slots' values).
  Expr maskCondition(std::size_t v);

  // Residue phases of a strided gradient as tiles (schedule/GpuPhases.h): emitPhases carries
  // the plan's phases out, one tile each.
  GpuTileSchedule emitPhases(const GpuStatementPlan& plan);
  // A '+' contraction whose right-hand side is a product L * R, R holding every factor that
  // uses the output index with unit stride: each block of 256 threads computes a BM x BN tile
  // of (I = output indices only L uses) x (J = output indices only R uses) for one value of the
  // other output indices, staging BK-deep slices of L and R (over the flattened reduction
  // indices) in shared memory; each thread keeps TM x TN accumulators in registers.
  // gpuschedule::tileGroups decides the groups and the tile's plan (schedule/GpuTileGroups.h,
  // emitting nothing); emitGpuTile carries the plan out, deciding nothing; emitTilePart emits
  // one tile of a statement's plan.
  using TileGroups = lowering::TileGroups;
  void emitGpuTile(const Statement& st, const BoundStatement& bs, const Ranges& r,
                   const std::string& name, const TileGroups& g, const GpuTilePlan& plan);
  GpuTilePlan emitTilePart(const GpuTilePart& t);

  // Where a tile's cells are: the tile's first row and column, its size, and the row and
  // column inside it of the cell a thread holds (expressions of the cell loops' variables).
  using TileFrame = lowering::TileFrame;

  // The end of a tensor-core tile, through shared memory (the slices' buffers are free by then):
  // every thread leaves its accumulators (`cells` around acc[slot]) in a BM x BN f32 tile, rows
  // padded by 4 (at most two lanes of a warp on a bank); then the block writes the tile out a row
  // at a time, consecutive threads taking consecutive columns. J holds the output's fastest-varying
  // index (the column index of gpuschedule::tileGroups), so a warp's stores fill whole 32-byte
  // sectors (the fragments' own layout spreads a warp over 8 rows, 8 bytes in each, so an output
  // sector takes several L2 writes), and a thread's column, so its indices along J, is decomposed
  // once.
  Stmt tileEpilogue(const Statement& st, const Ranges& r, const TileSplit& split,
                    const std::vector<std::size_t>& I, const std::vector<std::size_t>& J,
                    const TileFrame& f, const std::function<Stmt(Stmt)>& cells, const Expr& slot,
                    std::int64_t vec);

  // The tile of emitGpuTile on tensor cores, for bf16 operands: one skeleton (emitGpuMma) for
  // two families that supply only what differs (TensorCoreVariant): BK = 64 slices of both
  // operands staged in shared memory as bf16 (see `staged`), a pipeline over the slices, the
  // shared epilogue (tileEpilogue), accumulating in f32 registers.
  // - mma.sync (mmaSyncVariant): 256 threads (8 warps, WM x WN) compute a 128 x 128 tile (or 64 x
  //   256); padded rows, so fragment loads hit distinct banks; each warp computes 64 x 32 with
  //   4 x 4 mma.sync m16n8k16 per 16 of the reduction, fragments by ldmatrix (PTX ISA fragment
  //   layouts).
  // - wgmma (wgmmaVariant, sm_90, Target::gpuWarpgroupMma): 128 x BN (warpgroupShape: 64, 128 or
  //   256 per warpgroup), 2 warpgroups of 64 x BN (or side by side), wgmma.mma_async reading
  //   both operands from shared memory in the 128-byte-swizzled layouts (Staged::core, no
  //   padding), 4 steps of k16 per slice; the barrier before each slice orders the copies before
  //   the tensor cores' reads (fence.proxy.async).
  void emitGpuMma(const Statement& st, const BoundStatement& bs, const Ranges& r,
                  const std::string& name, const CExpr& lf, const CExpr& rf,
                  const std::vector<std::size_t>& I, const std::vector<std::size_t>& J,
                  const std::vector<std::size_t>& B, const std::vector<std::size_t>& K,
                  const std::vector<std::size_t>& maskL, const std::vector<std::size_t>& maskR,
                  const GpuTilePlan& plan);
  // What a tensor-core family supplies to emitGpuMma's skeleton: its tile, one slice's products
  // (from the staged operands, at a stage) and the products it leaves in flight, and its
  // fragment coordinates: the accumulators a thread holds (`cells` loops around acc[slot]) and
  // the row and column of each in the tile.
  using TensorCoreVariant = lowering::TensorCoreVariant;
  static TensorCoreVariant mmaSyncVariant(std::int64_t WM, std::int64_t WN);
  static TensorCoreVariant wgmmaVariant(std::int64_t WM, bool sideBySide,
                                        const gpuschedule::WarpgroupShape& shape);

  void emitTiled(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                 const Ranges& r, const std::string& name);

  // Tile index v is <lo> + <v>.o * size + <v>.i: the tile loop and the position inside it.
  void tileVar(const Statement& st, const Ranges& r, int v, int size);

  // Wraps a tile body in the loops over the other output indices and the tile loops of
  // tileI/tileJ (counts of full tiles), marking the parallel one.
  Stmt tileLoops(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                 const Ranges& r, Stmt body, double inside, ir::Func& f);

  // The packed GEMM path (lower/CpuGemm.cpp, schedule/GemmPlan.h): A and B packed into
  // scratch slivers, the blocked micro-kernel over the whole MR x NR tiles, the edges by emitBox.
  // A strided gradient as residue phases, each on the packed path (CpuGemmPhases.cpp), as
  // schedule/CpuPhases.h planned them.
  void emitGemmPhases(const std::vector<CpuGemmPhase>& phases, const std::string& base);
  // One task of a packed GEMM's product (it reads gemm.task and, for its scratch, gemm.g).
  using GemmTasks = lowering::GemmTasks;
  // emitGemmPhases' phases, each lowered (parts, and the functions and scratch buffers from
  // funcs0 and scratch0 on), as one copy of their code: true when merged and emitted.
  bool mergeGemmPhases(const std::string& base, std::vector<GemmTasks>& parts, std::size_t funcs0,
                       std::size_t scratch0);
  // Emits the packing functions and, unless `tasksOut` takes its task body, the product.
  void emitGemm(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                const Ranges& r, const std::string& name, GemmTasks* tasksOut = nullptr);
  // Packing slivers [sLo, sHi) of operand x at the reduction positions of a whole operand or
  // of the current KC block (block) into slot(sliver, position, lane) (CpuGemmPacking.cpp).
  Stmt gemmPacking(const GemmLowering& gl, int x, const Expr& sLo, const Expr& sHi, bool block,
                   const std::function<Expr(Expr, Expr, Expr)>& slot);
  // The micro-kernel over tiles nr columns wide, around an A block's slivers for the current B
  // sliver, and their stores (CpuGemmKernel.cpp); B read in place, masked; or the columns
  // kernel over a last sliver of `columns` columns.
  Stmt gemmKernel(const GemmLowering& gl, std::int64_t nr, bool inPlace, bool masked,
                  std::int64_t columns = 0);
  // The in-place kernel's fetch of the next task's lines of B, or null (CpuGemmKernel.cpp).
  Stmt nextRowsPrefetch(const GemmLowering& gl);
  // The product function: a parallel loop over groups of tasks, each task running every part.
  void emitGemmProduct(const std::string& name, const std::vector<GemmTasks>& parts);
  // The partials of a reduction split across tasks (GemmPlan::kParts), a scratch buffer, and
  // the last pass: summed in part order into the output, then the epilogue.
  void emitGemmSum(const Statement& st, const GemmPlan& g, const Ranges& r,
                   const std::string& name, const std::string& partial);
  // Lanes this many elements apart or fewer are packed the way contiguous ones are (a sliver's
  // lanes span a few cache lines); farther apart, each lane's run along the reduction in turn.
  static constexpr std::int64_t kNearLanes = 4;
  // Whether operand A (op, its lanes along index `lane`) is packed lane-major per block
  // (CpuGemmPanels.cpp): each lane's run along the KC block, `innermost` in vectors.
  bool laneMajorPanel(const GemmPlan& g, const CExpr& op, std::size_t lane, std::size_t innermost,
                      std::int64_t innermostExtent, bool columnsKernel) const;
  // The lanes at a time of operand x's packing transposed in registers (CpuGemmPanels.cpp), 0
  // where it is packed a lane at a time.
  int transposeWidth(const GemmLowering& gl, int x) const;

  // The lanes l in [0, w) of a packing run, where index `side` is base + l, that satisfy some
  // conditions: [lo, hi) and `cond`, the part no lane changes (null: true). Nullopt where a
  // condition is not affine in the lane inside max, min, floor and ceiling division (the
  // packing then tests each lane). lower/LaneInterval.cpp.
  using Lanes = lowering::Lanes;
  // Where the element is a term: lanes below `sideHi`, the indices `masks` inside their
  // dependent ranges, padded subscripts of `op` inside their dimensions.
  std::optional<Lanes> termLanes(const CExpr& op, const BoundStatement& bs,
                                 const std::vector<int>& masks, std::size_t side,
                                 const Expr& base, std::int64_t w, std::int64_t sideHi);
  // Where every plain subscript of `op` not proven inside over the ranges is inside.
  std::optional<Lanes> safeLanes(const CExpr& op, std::size_t side, const Expr& base,
                                 std::int64_t w);

  // The dot-product tile: acc[(ii * NR + jj) * W + lane] holds partial sums along dotVar.
  void emitDot(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
               const Ranges& r, const std::string& name);
};

} // namespace einjit::codegen::lowering
