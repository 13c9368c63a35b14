#pragma once
// One-hot sums (CPU): an element-wise '+=' whose summand is `j == g ? s : 0` (a conjunction that
// holds the equality, in any position), with g independent of the output index j, adds a
// non-zero term only where j equals g: the (max)/(min) gradient `dx[i,j] += j == first_m[i] ?
// dm[i] : 0` gives each row one element. It runs as a loop over the other output indices that
// computes g once, and when g is an integer value inside j's range evaluates the statement at
// that j only (the same operations the full loop does there, so the same bits); the other
// elements are left as they are. The full loop would add +0 to them, which changes nothing
// except a -0 into +0: the only difference, and one that compares equal.
//
// Exactness of the comparison: j is compared as a value of the compute type, so the rule
// applies only where every value of j's range is exact in it (|j| <= 2^24 in f32, 2^53 in f64):
// then exactly one j can equal g. GPU targets keep one thread per element.
#include "codegen/Target.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <optional>
#include <string>

namespace einjit::codegen {

struct OneHot {
  int var = -1;                   // the output index j
  const dsl::CExpr* at = nullptr; // g, a node of the statement's right-hand side
  std::string why;                // for `einjit explain`
};

std::optional<OneHot> planOneHot(const dsl::Program& p, const dsl::BoundProgram& b, std::size_t k,
                                 const Target& t);

} // namespace einjit::codegen
