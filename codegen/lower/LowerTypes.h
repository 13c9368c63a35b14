#pragma once
// The value types the Lowerer's families pass between their steps (codegen/lower/Lowerer.h,
// where each is described beside the functions that make and take it): a GPU tile's k-split,
// staged operands, index groups, cell frame and tensor-core variant; a packed GEMM's task body;
// a packing run's lanes. Kept apart so that Lowerer.h holds the class's steps only.
#include "codegen/IROperator.h"
#include "codegen/schedule/GpuStatementPlan.h"
#include "dsl/Program.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace einjit::codegen::lowering {

using dsl::CExpr;
using ir::Expr;
using ir::Stmt;
using ir::Type;

struct TileSplit {
  std::int64_t splits = 1, perSplit = 0;
  std::int64_t elements = 0; // output elements (the stride of a range's partials)
  std::string partial;       // scratch buffer, when splits > 1
};
struct Staged {
  std::vector<const CExpr*> fs;
  std::vector<std::size_t> group;
  Expr base;
  std::int64_t BW = 0, stageElems = 0;
  bool kFast = false;
  int vector = 0;
  std::string buf;
  Type elem = Type::f32;
  // Layout of a stage: row-major, element (w, kk) at w * stride + kk, or k-major, at
  // kk * stride + w. With `core` (the wgmma operand layouts, ir::Wgmma, bf16): rows of 64
  // elements (128 bytes) whose 16-byte chunk c of row q is stored at chunk c ^ (q % 8) (the
  // 128-byte swizzle): row-major, row w holds kk = 0..63 (BK = 64); k-major, row (kk, w / 64)
  // holds w % 64, at (kk / 8) * stride + (w / 64) * 512 + (kk % 8) * 64 (stride = 8 BW).
  bool rowMajor = false, core = false;
  std::int64_t stride = 0;
  // Dependent reduction indices (a solved gradient's ranges) whose range this operand checks:
  // the tile runs over their hulls, and an element outside its range stages as 0.
  std::vector<std::size_t> masks;
  // A register-staged single read whose offset splits into a part of the row (and of the
  // batch) plus a part of the reduction (affine, proven in bounds): each thread's reduction
  // position is the same in every pass of a slice, so the reduction part is computed once a
  // slice, and the rows' parts are read from this shared table (BW 32-bit offsets, filled
  // once per block) instead of decomposing every element's indices. Empty when not so.
  std::string rowTable;
  // Otherwise, for a register-staged operand: the indices that vary from pass to pass (the
  // row's with consecutive threads along k, else the reduction's) are read from shared
  // tables, one per index (buf.t<index>: its value at each row of the tile, or at each
  // position of the whole reduction), filled once per block, instead of being decomposed
  // (divisions and remainders) for every element: None, Rows or Reduction.
  enum class Tables : std::uint8_t { None, Rows, Reduction } tables = Tables::None;
  std::string table(std::size_t v) const { return buf + ".t" + std::to_string(v); }
  // Elements of one stage in the layout that rowMajor, core and stride describe.
  std::int64_t stageSize(std::int64_t BK) const {
    return core ? BW * BK : (rowMajor ? BW : BK) * stride;
  }
  Expr slot(const Expr& w, const Expr& kk) const {
    if (core) {
      // Row start, the row's swizzle (q % 8) and the position along the row.
      Expr row = rowMajor ? w * 64 : kk / 8 * stride + w / 64 * 512 + kk % 8 * 64;
      Expr q = rowMajor ? w % 8 : kk % 8;
      Expr at = rowMajor ? kk : w % 64;
      Expr chunk = (at / 8) ^ q;
      return row + (chunk * 8 + at % 8);
    }
    return rowMajor ? w * stride + kk : kk * stride + w;
  }
};
using TileGroups = GpuTileGroups; // schedule/GpuStatementPlan.h
struct TileFrame {
  Expr baseI, baseJ;
  std::int64_t BM = 0, BN = 0;
  Expr li, lj;
};
struct TensorCoreVariant {
  std::int64_t BM = 0, BN = 0, WBN = 0, accumulators = 0;
  std::function<Stmt(const std::vector<Staged>&, const Expr&)> compute;
  int inFlight = 0;
  bool asyncProxy = false;
  std::function<Stmt(Stmt)> cells;
  Expr slot, li, lj;
};
struct GemmTasks {
  Stmt body;
  std::int64_t tasks = 0, groups = 1;
  double flops = 0;
  bool parallel = false;
};
struct Lanes {
  Expr lo, hi, cond;
};

} // namespace einjit::codegen::lowering
