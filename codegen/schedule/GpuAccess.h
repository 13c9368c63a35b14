#pragma once
// What the GPU planners know of a tile's accesses, as functions of values: the buffers' strides
// and alignment, the box the tile runs over, the residue phase it is. Unit strides, 16-byte
// copies, row-offset tables in 32 bits, subscripts proven inside (schedule/AccessBounds.h) and
// whether the output can be written at all, each decided before anything is emitted and with
// no access to the lowerer (the emitters of gpu/ carry out what the planners decide from them).
#include "codegen/IR.h"
#include "codegen/Schedule.h"
#include "codegen/schedule/AccessBounds.h"
#include "codegen/schedule/DependentRanges.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace einjit::codegen::gpuschedule {

// Where a tile's accesses go, per tensor id: its strides and whether its pointer is 16-byte
// aligned (the call's, or a layout copy's: GpuRelayoutPlan).
struct GpuBuffers {
  Strides strides;
  std::vector<bool> aligned;
};

// What one tile is planned over, beside its statement and box: the program and its binding, the
// buffers (a layout copy's where the tile runs over one), the reduction index the copies run last
// (GpuRelayoutPlan::kLast, -1: none) and the residue phase the statement is (empty: none).
struct GpuTileContext {
  const dsl::Program* program = nullptr;
  const dsl::BoundProgram* binding = nullptr;
  GpuBuffers buffers;
  int kLast = -1;
  std::vector<PhaseSub> phase;
  // The element type of tensor t, and of the values the program computes in.
  ir::Type elemType(int t) const;
  ir::Type valueType() const;
};

// "i,j" for a group of index slots ("-" when empty).
std::string groupNames(const dsl::Statement& st, const std::vector<std::size_t>& group);
// The points of a group of indices over box r.
std::int64_t groupExtent(const std::vector<std::size_t>& group, const Box& r);
// The factors of a product, in order.
void flattenProduct(const dsl::CExpr& e, std::vector<const dsl::CExpr*>& out);

// Whether some read of e (affine along v) has unit stride along index v.
bool unitAlong(const GpuBuffers& buffers, const dsl::CExpr& e, std::size_t v);
// Whether some factor has unit stride along the last index of K (false when K is empty).
bool unitAlongAny(const GpuBuffers& buffers, const std::vector<const dsl::CExpr*>& fs,
                  const std::vector<std::size_t>& K);

// Elements per asynchronous 16-byte copy of operand fs along the index group `along` (the last
// fastest) over box r, or 0 when it cannot be copied so: a single read whose subscripts are
// proven inside (no gather, pad or fold), stored as `elem`, from a 16-byte aligned pointer,
// contiguous along a run of the group's last indices (unit stride on the last, each earlier one
// moving by the extent of those after it: a convolution's weights along (c,a,b)) whose length is
// a multiple of the vector; every other index of two values or more moves it by whole vectors,
// and so does its offset at the box's first element. With trustPlain (a masked operand), plain
// subscripts count as inside (the lowering trusts them so).
int vectorRead(const GpuTileContext& c, const std::vector<const dsl::CExpr*>& fs,
               const std::vector<std::size_t>& along, const Box& r, ir::Type elem,
               bool trustPlain = false);

// A single read with affine subscripts proven inside over r (no gather, pad or fold) in a tensor
// whose offsets fit in 32 bits: its rows' offsets fit a table (Staged::rowTable).
bool separableRead(const GpuTileContext& c, const std::vector<const dsl::CExpr*>& fs, const Box& r);

// Whether every plain subscript of the factors is proven inside over r (no mask needed).
bool provenInside(const GpuTileContext& c, const std::vector<const dsl::CExpr*>& fs, const Box& r);

// Whether some element of the statement's output can be written: not when a padded (or folded)
// dimension of its left-hand side has extent 0 (a plain one keeps its failing check, which the
// lowering evaluates).
bool outputWritable(const GpuTileContext& c, const dsl::Statement& st);

} // namespace einjit::codegen::gpuschedule
