#pragma once
// Indices that a packed GEMM runs as one (GemmPlan::merged; docs/CPU_SCHEDULES.md, "Indices
// merged into one"): two output indices of a statement that every access reads as one
// contiguous run (in each tensor the outer index's stride is the inner one's extent times its
// stride, so (outer, inner) addresses what one index of extent(outer) x extent(inner) would).
// A 1x1 convolution's image rows and columns:
// `y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]` is one GEMM per image over its H x W pixels,
// where the plan otherwise saw a GEMM per image row of W columns (a short N: a partial sliver
// per row, many small GEMMs). The plan and its lowering see the merged binding (mergedBinding):
// the outer index takes its first value only, the inner one runs over both extents; the
// interpreter and the other backends never see it. Exact only where nothing tells the two
// apart: every subscript that reads either is plain and proven inside its dimension over the
// statement's own ranges (so neither the checks nor padding see a merged value), no index's
// value is read, and no dependent range reads either (unless the range is its whole hull
// wherever it is evaluated: a 1x1 input gradient's taps). Output indices only: a 1x1 weight
// gradient's reduction over h*w (KC 242 or 224 pixels in one loop) ran slower than over h,w
// (KC 4 rows of 56) with the same blocks (bench/RESULTS.md, "1x1 convolutions as one GEMM per
// image").
#include "codegen/Schedule.h"
#include "codegen/schedule/GemmPlan.h"

#include <vector>

namespace einjit::codegen {

// The merges for statement k, in the order they apply (a merged index may merge again).
std::vector<GemmMerge> planMerges(const dsl::Program& p, const dsl::BoundProgram& b, std::size_t k,
                                  const Strides& strides);

// Statement k's binding with `merges` applied: each outer index one value, its inner index
// extent(outer) x extent(inner) values from its first; dependent ranges that are their whole
// hulls everywhere (the only ones a merged index's bound may read) made independent.
dsl::BoundStatement mergedBinding(const dsl::BoundStatement& bs,
                                  const std::vector<GemmMerge>& merges);

// Whether statement j (an epilogue of the statement `merges` were planned for: the same index
// positions and ranges) reads and writes the merged indices as one run too.
bool mergesHold(const dsl::Program& p, const dsl::BoundProgram& b, std::size_t j,
                const Strides& strides, const std::vector<GemmMerge>& merges);

} // namespace einjit::codegen
