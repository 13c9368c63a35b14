#pragma once
// Comparing a result with a reference (`run --check`, the demo): a comparison that can fail.
// A value that is finite on one side and not on the other (NaN, or an infinity of the other
// sign) is a mismatch; NaN on both sides agrees but compares nothing, so a comparison whose
// values are all NaN, or that has no element at all, is not a pass.
#include "einjit/einjit.h"

#include <string>

namespace einjit::cli {

struct Comparison {
  double relativeError = 0;      // max |a - b| / max |b| over the elements finite in both
  std::int64_t elements = 0;     // elements compared
  std::int64_t bothNaN = 0;      // elements NaN in both
  std::int64_t mismatched = 0;   // elements that disagree on finiteness (all, on a shape mismatch)
  std::string firstMismatch;     // "element 3: 1.5 against nan"
  void add(const Comparison& o); // several outputs together
  // "" when it passes at `tolerance`; otherwise why not ("nothing compared: ...", ...).
  std::string failure(double tolerance) const;
};

Comparison compare(const Tensor& got, const Tensor& ref);

// What `run --check` accepts against the float64 interpreter.
double toleranceFor(DType t);

} // namespace einjit::cli
