#pragma once
// Whether a subscript stays inside its dimension over the ranges of the indices: the interval
// an affine subscript takes. Lowering proves its accesses with it (a proven subscript needs no
// check), and the GPU planners (schedule/GpuAccess.h) check a tile's operands with it before
// anything is emitted: one proof for both.
#include "codegen/IR.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace einjit::codegen {

// Each index slot's range [first, second): a statement's box, a core's, a residue phase's.
using Box = std::vector<std::pair<std::int64_t, std::int64_t>>;

// The IR type of a tensor element (or of the values a statement computes in).
inline ir::Type irType(DType t) {
  switch (t) {
  case DType::f32: return ir::Type::f32;
  case DType::f64: return ir::Type::f64;
  case DType::i32: return ir::Type::i32;
  case DType::i64: return ir::Type::i64;
  case DType::bf16: return ir::Type::bf16;
  }
  return ir::Type::f32;
}

// The values an index or a subscript takes, inclusive; not `known` where an index takes none or
// the subscript reads a gather.
struct IndexInterval {
  bool known = true;
  std::int64_t lo = 0, hi = 0;
};

// Subscript s (its constant `constant`) over the indices' intervals `vars`, per slot.
IndexInterval subscriptInterval(const dsl::Subscript& s, std::int64_t constant,
                                const std::vector<IndexInterval>& vars);
// Whether subscript d of read e stays inside its dimension over `vars`.
bool subscriptInside(const dsl::Program& p, const dsl::BoundProgram& b,
                     const std::vector<IndexInterval>& vars, const dsl::CExpr& e, std::size_t d);
// The intervals of a box's indices (an empty range is not known).
std::vector<IndexInterval> boxIntervals(const Box& r);

} // namespace einjit::codegen
