#pragma once
// What every backend needs to know about one call's memory layout: the strides each tensor has
// during the call (arguments as passed, ':=' outputs and intermediates dense row-major), and a
// text that identifies a binding (dtypes, shapes, strides, integer parameters used in
// subscripts): equal texts lower to the same code, so it keys each Kernel's memo.
#include "codegen/Schedule.h"
#include "dsl/Binding.h"

#include <string>
#include <vector>

namespace einjit::runtime {

codegen::Strides callStrides(const dsl::Program& p, const dsl::BoundProgram& b,
                             const std::vector<std::vector<std::int64_t>>& argStrides);

std::string bindingSignature(const dsl::Program& p, const dsl::BoundProgram& b,
                             const codegen::Strides& strides);

} // namespace einjit::runtime
