#pragma once
// The reference interpreter: evaluates a checked, bound Program directly from its checked
// expression trees, in double precision, with no code generation. It is the oracle every
// backend and every gradient is tested against, so it stays simple and obviously right.
//
// Semantics (docs/LANGUAGE.md): each statement loops over its output indices (in left-hand
// order), then over its reduction indices (in order of first appearance), reducing the
// right-hand side with the statement's reduction into a local accumulator. max/min keep the
// first extreme value in that order. Statements write into double copies of the tensors they
// write; results are converted and written to the outputs only after every statement
// succeeded, so a failing call (a gather index out of bounds) leaves the caller's outputs
// untouched. Arguments that no statement writes are read in place, never copied.
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include "einjit/DType.h"

namespace einjit::codegen {

// A strided view of host memory, by Program tensor id.
struct HostBuffer {
  DType dtype = DType::f32;
  void* data = nullptr;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides; // in elements
};

// `tensors` has one entry per Program tensor: the arguments as passed and every ':=' tensor
// allocated by the caller with the shape and dtype from `bound`. Every tensor that a
// statement assigns is written; nothing else is.
//
// writeCounts, when given, receives per statement the number of times each element of its
// output was written (row-major): the test that gradient statements write each element once,
// that is, that their outer loops can run in parallel.
void interpret(const dsl::Program& program, const dsl::BoundProgram& bound,
               const std::vector<HostBuffer>& tensors,
               std::vector<std::vector<std::int64_t>>* writeCounts = nullptr);

} // namespace einjit::codegen
