#pragma once
// Range inference, a stage of its own (after Sema): gives every index variable of a statement
// a symbolic half-open range [lo, hi).
//  - 'where' ranges are authoritative.
//  - A bare use "x[..., i, ...]" bounds i by [0, size(x,d)); all bare uses must agree
//    (checked by Binding when the extents are known).
//  - An affine use bounds i so that the access is in bounds for all values of the other
//    indices in it; the range is the intersection over all uses.
//  - pad/clamp/wrap dimensions and gathered dimensions bound nothing.
//  - An index with no bound is an error naming it.
// Variables are resolved in dependency order; a cycle is broken at a variable with a bare use,
// and the constraints that could not be used become bounds checks for Binding.
#include "dsl/Program.h"

namespace einjit::dsl {

void inferRanges(Program& program, int stmt);

} // namespace einjit::dsl
