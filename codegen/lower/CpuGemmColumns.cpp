// The columns kernel (CpuGemmColumns.h). The last B sliver's few columns (N = 17 with NR = 16:
// one) with A's MR lanes as the vector, the lanes past MR masked off A's loads: each term one
// FMA of a sliver's A lanes by a broadcast B element per column, G slivers of the MC block at
// a time, their chains interleaved (one sliver alone would wait on the FMA latency). The
// half-width tile it replaces spent MR FMAs per term on one column, on MR chains that waited
// on that latency. Where the block's G slivers and the columns make fewer chains than the FMA
// pipes keep in flight (16 channels: 3 slivers, 3 chains for one column), the KC block's terms
// go to S accumulator sets (term p to set p mod S, the block's remainder to set 0, the sets
// added in order at its end), as the packed kernel's accumulator sets do: the order of the
// additions changes, not the terms, and it depends on the shapes only (not the threads).
#include "codegen/lower/CpuGemmColumns.h"

#include "codegen/IROperator.h"
#include "codegen/schedule/GemmPlan.h"

#include <algorithm>
#include <vector>

namespace einjit::codegen::lowering {

using ir::Expr;
using ir::ForKind;
using ir::Stmt;

std::int64_t columnsTail(const GemmPlan& g, std::int64_t nExtent, bool tileReads) {
  const std::int64_t cols = nExtent % g.nr;
  return cols <= 2 && g.mr <= g.width && g.product && g.kSets == 1 && !tileReads && !g.bInPlace
             ? cols
             : 0;
}

// Per run, as for the other slivers: tested per element (a condition and checked reads at
// every position), the one column of the stride-2 input gradient's 17-column phases cost a
// quarter of its phase's packing.
Stmt columnsPacking(std::int64_t columns, const Lanes* terms, const Lanes* safe, Stmt copy,
                    Stmt zeros, Stmt each) {
  using namespace ir;
  if (!terms || !safe) return each;
  auto le = [](Expr a, Expr b) { return binary(BinOp::Le, std::move(a), std::move(b)); };
  auto conj = [](Expr a, Expr b) { return !a ? b : !b ? a : binary(BinOp::And, a, b); };
  const std::string lv = "gemm.lo", hv = "gemm.hi";
  const Expr L = var(lv), H = var(hv), tc = intImm(columns);
  Expr all = conj(conj(le(L, intImm(0)), le(tc, H)),
                  conj(safe->cond, conj(le(safe->lo, intImm(0)), le(tc, safe->hi))));
  Stmt run = ifThen(all, copy, ifThen(binary(BinOp::Or, le(H, intImm(0)), le(tc, L)), zeros, each));
  if (terms->cond) run = ifThen(terms->cond, run, zeros);
  return let(lv, terms->lo, let(hv, terms->hi, run));
}

Stmt columnsKernel(const ColumnsKernel& c) {
  using namespace ir;
  const std::string cg = "gemm.cg", cu = "gemm.cu", acc = "cacc", copy = "cedge";
  const std::int64_t G =
      std::max<std::int64_t>(1, std::min<std::int64_t>(c.blockSlivers, 8 / c.columns));
  const std::int64_t lanes = c.width;
  const Expr first = var(c.ic) + var(cg) * G;
  const Expr end = min(var(c.ic) + c.blockSlivers, var(c.as1));
  // Accumulator sets: chains G x columns x S of at least the FMA chains, at most 4 sets.
  const std::int64_t S =
      std::clamp<std::int64_t>((c.fmaChains + G * c.columns - 1) / (G * c.columns), 1, 4);
  const Expr cell = (var(cu) * c.columns + var(c.jj)) * lanes + var(c.ii);
  auto setName = [&](std::int64_t u) { return u == 0 ? acc : acc + std::to_string(u); };
  // The group's cells: slot cu's sliver (past the block's end: its last, computed again and not
  // stored), its columns, A's lanes as one vector.
  auto cells = [&](Stmt body) {
    body = forLoop(c.ii, intImm(0), intImm(lanes), ForKind::Vectorized, body, c.width);
    body = forLoop(c.jj, intImm(0), intImm(c.columns), ForKind::Unrolled, body);
    body = let(c.sv, min(first + var(cu), end - 1), body);
    return forLoop(cu, intImm(0), intImm(G), ForKind::Unrolled, body);
  };
  // A's lanes past MR read the next position of the sliver (the packed buffer is padded past
  // its last): their sums are never stored. Masked off instead (vmaskmovps), the loads could
  // not be FMA operands, and the kernel ran slower than the half-width tile it replaces.
  const Expr aLanes = c.a;
  auto addTerm = [&](std::int64_t u) {
    return cells(store(setName(u), cell, load(c.type, setName(u), cell) + aLanes * c.b));
  };
  std::vector<Stmt> zeros;
  for (std::int64_t u = 0; u < S; ++u)
    zeros.push_back(cells(store(setName(u), cell, floatImm(c.type, 0))));
  Stmt zero = block(std::move(zeros));
  Stmt sum = forLoop(c.pv, intImm(0), c.kcLen, ForKind::Serial, addTerm(0));
  if (S > 1) {
    const std::string pu = "gemm.cpu";
    std::vector<Stmt> round, steps;
    for (std::int64_t u = 0; u < S; ++u) round.push_back(let(c.pv, var(pu) * S + u, addTerm(u)));
    const Expr rounds = binary(BinOp::Div, c.kcLen, intImm(S));
    steps.push_back(forLoop(pu, intImm(0), rounds, ForKind::Serial, block(std::move(round))));
    steps.push_back(forLoop(c.pv, rounds * S, c.kcLen, ForKind::Serial, addTerm(0)));
    for (std::int64_t u = 1; u < S; ++u)
      steps.push_back(
          cells(store(acc, cell, load(c.type, acc, cell) + load(c.type, setName(u), cell))));
    sum = block(std::move(steps));
  }
  // Stored from a copy (the accumulators stay in registers): the group's slivers inside the
  // block, their rows inside M.
  Stmt stored = c.finish(
      [&](Stmt body) {
        body = forLoop(c.jj, intImm(0), intImm(c.columns), ForKind::Unrolled, body);
        body = forLoop(c.ii, intImm(0), min(intImm(c.mr), intImm(c.m) - var(c.sv) * c.mr),
                       ForKind::Rolled, body);
        body = let(c.sv, first + var(cu), body);
        return forLoop(cu, intImm(0), min(intImm(G), end - first), ForKind::Rolled, body);
      },
      load(c.type, copy, cell));
  Stmt out = allocate(copy, c.type, G * c.columns * lanes,
                      block({cells(store(copy, cell, load(c.type, acc, cell))), stored}));
  Stmt body = block({zero, sum, out});
  for (std::int64_t u = S; u-- > 0;)
    body = allocate(setName(u), c.type, G * c.columns * lanes, body);
  return forLoop(cg, intImm(0), (end - var(c.ic) + (G - 1)) / G, ForKind::Serial, body);
}

} // namespace einjit::codegen::lowering
