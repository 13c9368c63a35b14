#pragma once
// Tensors whose gradient is zero because the program's outputs do not change when they shift:
// a softmax's row maximum m. It enters only as e := exp(A - m) (so a shift by c scales e's row
// by exp(-c)), and e is read only in sums z := e over the same row (scaled alike) and in ratios
// e / z of the same row (unchanged). Every output is then the same function of x whatever m
// is, so the gradient leaves m out: no dm, no position of the maximum, no one-hot sum (the
// derivation in docs/GRADIENTS.md, "Shift-invariant maxima"). A program that reads m, e or z
// in any other way keeps dm.
#include "dsl/Program.h"

#include <vector>

namespace einjit::grad {

// Per tensor of p: true for a tensor whose every read is in the pattern above.
std::vector<bool> shiftInvariant(const dsl::Program& p);

} // namespace einjit::grad
