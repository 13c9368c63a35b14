#pragma once
// A post-pass over a lowered program: run-time access checks hoisted into functions that run
// before the program (Lower.h says when and why).
#include "codegen/IR.h"
#include "codegen/Lower.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace einjit::codegen::passes {

// A subscript checked at run time, as the lowering records it: dimension `dim` of `access`, a
// node of statement `stmt`'s expressions.
struct CheckedSubscript {
  std::size_t stmt = 0;
  const dsl::CExpr* access = nullptr;
  std::size_t dim = 0;
};

// What the lowering recorded of its run-time checks: each checked subscript once, and whether
// every check it made can be repeated ahead of the program (not so for a check of a rewritten
// statement, such as a residue phase's, or of a floating-point gather index).
struct AccessChecks {
  std::vector<CheckedSubscript> subscripts;
  bool hoistable = true;
};

// The function that evaluates subscript `c`'s check at every point of the box of the indices
// `box` (over their full ranges): the lowering supplies it (Lowerer::checkFunction), since
// evaluating a subscript may read gathers.
using CheckFunction = std::function<ir::Func(
    const CheckedSubscript& c, const std::vector<std::size_t>& box, const std::string& name)>;

// When the program has checks, every one hoistable, and each checked subscript reads only
// indices of fixed ranges and tensors no statement writes (their values are then those the
// statements see): one function per subscript, first in the program (`checks` of them,
// `prechecked`). Otherwise the program is returned as it is.
LoweredProgram hoistChecks(LoweredProgram lowered, const AccessChecks& checks,
                           const dsl::Program& p, const dsl::BoundProgram& b,
                           const CheckFunction& checkFunction);

} // namespace einjit::codegen::passes
