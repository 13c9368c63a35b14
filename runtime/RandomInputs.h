#pragma once
// Made-up arguments that a program accepts, for the tools that run a program on inputs nobody
// gave (gradcheck, `einjit run`): index tensors hold indices spread over the whole valid
// range of the dimensions they gather into, both ends and a repeated value included, so that
// a gather's gradient (a scatter that must accumulate) meets repeats and edges.
#include "dsl/Binding.h"
#include "einjit/einjit.h"

#include <map>
#include <string>

namespace einjit {

// Binds `p` to these shapes (index tensors i64, the other tensors `dtype`) and scalars. Throws
// the call's own einjit::Error for a missing shape or scalar, or any shape mistake.
dsl::BoundProgram bindShapes(const dsl::Program& p, const std::map<std::string, Shape>& shapes,
                             const std::map<std::string, double>& scalars, DType dtype);

// An i64 tensor of `shape` for index tensor `tensor`: values in dsl::gatherValueRange, the
// lowest and highest among them and the lowest twice (when it has three elements or more),
// the rest uniform, in an order drawn from `seed`. All zeros when no value is valid (the call
// then reports the gather out of bounds).
Tensor randomIndices(const dsl::Program& p, const dsl::BoundProgram& b, int tensor,
                     const Shape& shape, std::uint64_t seed);

} // namespace einjit
