#pragma once
// Inputs for the tool's commands: tensors read from --input NAME=file.npy, random tensors of
// the shapes given with --shape (index tensors hold valid indices of the dimension they gather
// into), scalars from --scalar.
#include "Arguments.h"

#include "dsl/Binding.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"

namespace einjit::cli {

struct Inputs {
  std::vector<Tensor> tensors;
  std::vector<double> scalars;
  DType dtype = DType::f32;            // of the random tensors: --dtype, or that of an --input file
  std::vector<Arg> positional() const; // tensors, then scalars
};

Inputs makeInputs(const dsl::Program& prog, const Arguments& args);
std::vector<dsl::ArgSpec> specsOf(const std::vector<Tensor>& ts);

} // namespace einjit::cli
