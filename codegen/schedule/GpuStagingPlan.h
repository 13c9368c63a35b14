#pragma once
// How a GPU tile's operands reach shared memory, decided before the tile is emitted
// (gpu/Staging carries it out): per operand, asynchronous copies of 16 bytes (or 4-byte words)
// or loads through registers, where a register-staged operand's indices come from (tables or
// decomposition), its layout in a stage; and the slices the tile keeps in flight.
#include "codegen/Target.h"
#include "codegen/schedule/GpuPlanInput.h"
#include "codegen/schedule/GpuTile.h"

#include <string>
#include <vector>

namespace einjit::codegen::gpuschedule {

// Operand `a` of a tile of `kind`: `rows` rows (BW) by slices of BK of the reduction, staged
// as `buffer`. Copied by vectors where its access allows (along k when kFast, else along the
// row), unless `throughRegisters` sends a kFast operand through registers; a register-staged
// operand reads the row parts of its offsets from a table (a separable unmasked kFast read:
// RowOffsets), its rows' indices from tables (kFast, rows whose decomposition divides by other
// than powers of two; masked only for bf16: RowTables) or the reduction's (k-major, a reduction
// that so divides and whose slices do not lie in one combination of its indices, the tables
// within Target::gpuTableShared: ReductionTables), else decomposes them. Laid out as the family
// lays its operands (layoutOperand).
GpuOperandPlan planStaging(const GpuPlanInput& in, const GpuOperandAccess& a, GpuTileKind kind,
                           const std::string& buffer, std::int64_t rows, std::int64_t BK,
                           bool throughRegisters, const Target& t);

// The operand's layout in a stage, by family: the f32 tile row-major (rows of BK + 4, 16-byte
// aligned) when copied by vectors along k, else k-major (rows of BW, padded by 4 when kFast:
// consecutive threads store down a column); mma.sync row-major when kFast (rows of BK + 8),
// else k-major (rows of BW + 8, read by ldmatrix.trans), padded so fragment loads hit distinct
// banks; wgmma the 128-byte-swizzled layouts (lowering::Staged::core), no padding. Sets
// rowMajor, core, stride and stageElems from kFast, vector and rows.
void layoutOperand(GpuOperandPlan& o, GpuTileKind kind, std::int64_t BK);

// The slices in flight of a tile whose operands are staged so (pipelineStages: 2 unless every
// operand is copied asynchronously).
int stagesFor(const std::vector<GpuOperandPlan>& ops, int elemBytes, const Target& t);

} // namespace einjit::codegen::gpuschedule
