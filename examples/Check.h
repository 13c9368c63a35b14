#pragma once
// What the examples use to show that their results are right: a comparison with a plain-loop
// reference (relative tolerance; a NaN on either side fails) and a gradient check against
// central finite differences in float64 (einjit::gradcheck). Each prints one line per check.
#include "einjit/einjit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace example {

inline int failures = 0;

inline void expectClose(const char* what, const einjit::Tensor& got,
                        const std::vector<double>& want, double tol = 1e-4) {
  std::vector<double> g = got.toVector();
  double worst = g.size() == want.size() ? 0.0 : INFINITY;
  for (std::size_t i = 0; i < g.size() && i < want.size(); ++i) {
    double err = std::abs(g[i] - want[i]) / std::max(1.0, std::abs(want[i]));
    if (!(err <= tol)) worst = INFINITY; // NaN fails
    else worst = std::max(worst, err);
  }
  const bool ok = worst <= tol && !want.empty();
  std::printf("%s %s: max relative error %.2g over %zu elements\n", ok ? "ok  " : "FAIL", what,
              worst, want.size());
  if (!ok) ++failures;
}

inline void expectGradient(const char* what, const std::string& source,
                           const std::map<std::string, einjit::Shape>& shapes,
                           const std::map<std::string, double>& scalars = {}) {
  einjit::GradCheckResult r = einjit::gradcheck(source, shapes, scalars);
  std::printf("%s %s gradients against finite differences:", r.passed ? "ok  " : "FAIL", what);
  for (std::size_t i = 0; i < r.inputs.size(); ++i)
    std::printf(" d%s %.2g", r.inputs[i].c_str(), r.maxRelativeError[i]);
  std::printf("%s%s\n", r.passed ? "" : " ", r.why.c_str());
  if (!r.passed) ++failures;
}

inline int result() {
  std::printf(failures == 0 ? "all checks passed\n" : "%d checks failed\n", failures);
  return failures == 0 ? 0 : 1;
}

} // namespace example
