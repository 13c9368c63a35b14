#pragma once
// Range inference, a stage of its own (after Sema): gives every index variable of a statement
// a symbolic half-open range [lo, hi).
//  - 'where' ranges are authoritative.
//  - A bare use "x[..., i, ...]" fixes the range of i to [0, size(x,d)); all bare uses must
//    agree (checked by Binding when the extents are known). Other uses never narrow it.
//  - An index with neither a 'where' range nor a bare use takes the largest range for which
//    each affine use is in bounds for all values of the other indices (the intersection).
//  - pad/clamp/wrap dimensions and gathered dimensions bound nothing.
//  - An index with no bound is an error naming it.
// Every plain subscript becomes a bounds check that Binding proves over the whole box, so a
// fixed range that an access would leave is an error there, not a narrower loop.
#include "dsl/Program.h"

namespace einjit::dsl {

void inferRanges(Program& program, int stmt);

} // namespace einjit::dsl
