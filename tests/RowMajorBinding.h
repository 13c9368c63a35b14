#pragma once
// A program bound to its arguments' shapes, every tensor stored row-major: what the schedule
// and plan tables (test_schedule.cpp, test_cpu_schedule_plan.cpp) plan from, and the strides
// the generated-code dumps (GeneratedDump.h) lay their arguments out with.
#include "codegen/Schedule.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace einjit::test {

inline std::vector<std::int64_t> rowMajor(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

struct RowMajorBinding {
  dsl::Program program;
  dsl::BoundProgram bound;
  codegen::Strides strides; // per tensor of the program, row-major
};

// Checks `source`, binds its arguments (in order of first appearance) to `shapes` of `dtype`.
inline RowMajorBinding bindRowMajor(const std::string& source,
                                    const std::vector<std::vector<std::int64_t>>& shapes,
                                    DType dtype) {
  RowMajorBinding r;
  r.program = dsl::check(source);
  std::vector<dsl::ArgSpec> args;
  for (const auto& s : shapes) args.push_back({dtype, s});
  r.bound = dsl::bind(r.program, args, {}, dtype);
  r.strides.resize(r.program.tensors.size());
  for (std::size_t t = 0; t < r.program.tensors.size(); ++t)
    r.strides[t] = rowMajor(r.bound.tensors[t].shape);
  return r;
}

} // namespace einjit::test
