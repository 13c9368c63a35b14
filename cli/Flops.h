#pragma once
// The floating-point operations of one call of a bound program, for `einjit bench`'s GFLOP/s.
#include "dsl/Binding.h"
#include "dsl/Program.h"

namespace einjit::cli {

// Per statement: the iterations of its loops times the operations of its right-hand side,
// plus one per iteration for the reduction and one per element for '+='. A dependent range
// (a gradient's `h in max(0, cdiv(u - 2, 2)):...`) counts the iterations it runs, evaluated
// over the indices its bounds read; only where those span more than 10^7 points does it
// count its hull (an upper bound: `exact` is then false).
struct FlopCount {
  double flops = 0;
  bool exact = true;
};
FlopCount flops(const dsl::Program& p, const dsl::BoundProgram& b);

} // namespace einjit::cli
