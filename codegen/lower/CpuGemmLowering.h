#pragma once
// One packed GEMM's lowering state (lower/CpuGemm.cpp, docs/CPU_SCHEDULES.md), shared by the
// loop nest (CpuGemm.cpp), the packings (CpuGemmPacking.cpp) and the micro-kernel
// (CpuGemmKernel.cpp): the plan's shape, the packed buffers' layouts and the names the
// product's loops bind.
#include "codegen/lower/Lowerer.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace einjit::codegen::lowering {

// The IR shorthands of the packed GEMM's files.
namespace gemm {
inline std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
inline Expr minOf(Expr a, Expr b) { return ir::binary(BinOp::Min, std::move(a), std::move(b)); }
inline Expr less(Expr a, Expr b) { return ir::binary(BinOp::Lt, std::move(a), std::move(b)); }
inline Expr conj(Expr a, Expr b) {
  return !a ? b : !b ? a : ir::binary(BinOp::And, std::move(a), std::move(b));
}
inline Expr imm(std::int64_t v) { return ir::intImm(v); }
inline Expr var(const std::string& v) { return ir::var(v); }
} // namespace gemm

struct GemmLowering {
  using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;
  // The plan's shape, the operands and the packed buffers (scratch named buf[x]).
  GemmLowering(const Statement& st, const BoundStatement& bs, const GemmPlan& g,
               const GemmOperands& operands, const Ranges& r, const std::string& name,
               const std::vector<Expr>& varExpr);

  const Statement& st;
  const BoundStatement& bs;
  const GemmPlan& g;
  const GemmOperands operands;
  const Ranges& r;
  const std::vector<Expr>& varExpr; // the lowerer's current index values
  const CExpr* ops[2];
  std::size_t sideVar[2];
  std::int64_t W[2], extent[2], S[2]; // lanes, extent and slivers of M and N
  // A last B sliver of one or two columns runs the columns kernel, which reads only those.
  std::int64_t tailColumns = 0;
  std::vector<std::size_t> K, Bt, reads[2];
  std::size_t kq = 0; // the reduction index the KC blocks chunk (GemmPlan::kSplit)
  std::vector<std::size_t> kOuter, kInner;
  std::int64_t kTotal = 0, batchTotal = 0, innerTotal = 0, qBlocks = 0;
  std::int64_t blockSl[2]; // slivers per MC / NC block
  std::string buf[2];
  std::int64_t panel[2] = {0, 0}; // scratch elements per task group of a per-block packing
  // Past its last position, the lanes past MR of the columns kernel's A loads (columnsKernel).
  std::int64_t pad[2] = {0, 0};
  bool laneMajorA = false; // A's panel lane-major (laneMajorPanel): with the product's ranges

  // The names the product's loops bind.
  const std::string gv = "gemm.g", tk = "gemm.task", jc = "gemm.jc", pb = "gemm.pb", ic = "gemm.ic",
                    tv = "gemm.t", sv = "gemm.s", pv = "gemm.p", ii = "gemm.i", jj = "gemm.j",
                    q0 = "gemm.q0", q1 = "gemm.q1", bs0 = "gemm.b0", bs1 = "gemm.b1",
                    as0 = "gemm.a0", as1 = "gemm.a1", acc = "acc", edge = "edge";
  static std::string tileBuf(std::size_t c) { return "ctile" + std::to_string(c); }

  // The product's state that the micro-kernel reads (set by emitGemm before it).
  bool splitK = false; // staged (GemmPlan::staged): tasks split the KC blocks
  Expr kPart, kcLen;
  std::string partial, pb0 = "gemm.pb0", pb1 = "gemm.pb1";
  std::size_t m = 0, n = 0;
  std::int64_t MR = 0, NR = 0, M = 0, N = 0;
  // B read in place with dependent ranges: indices that mask B's lanes, and that bound a loop.
  std::vector<std::size_t> laneMasked, loopBounded;
  bool halfTail = false; // the micro-kernel over half NR for a last B sliver at most half full

  std::int64_t ext(std::size_t v) const { return r[v].second - r[v].first; }
  // Where a packed operand holds sliver sl at position p of KC block blk, lane l: packed whole
  // (the operand's batch value bX), or per block in the task group's scratch.
  Expr wholeAt(int x, const Expr& bX, const Expr& sl, const Expr& blk, const Expr& p,
               const Expr& l) const;
  Expr panelAt(int x, const Expr& sl, const Expr& p, const Expr& l) const;
  // The element of a packed operand at sliver s, position p of the current block, lane l.
  Expr packed(int x, const Expr& sl, const Expr& p, const Expr& l) const;
  // The flattened position of the current values of a group of indices (the last fastest).
  Expr flat(const std::vector<std::size_t>& grp) const;
  Stmt loops(const std::vector<std::size_t>& grp, Stmt body, ForKind kind) const;
  // The reduction positions a packing covers: all of them (packed whole), or the current KC
  // block (k[0..kSplit) bound by the product's block loop, k[kSplit] over [q0, q1)).
  Stmt kLoops(bool block, Stmt body) const;
  // The same loops, only over the reduction indices `keep` says (in their order).
  Stmt kLoopsOf(bool block, const std::function<bool(std::size_t)>& keep, Stmt body) const;
  Expr kPos(bool block) const;
};

} // namespace einjit::codegen::lowering
