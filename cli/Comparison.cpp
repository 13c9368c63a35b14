#include "Comparison.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace einjit::cli {

namespace {

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

} // namespace

Comparison compare(const Tensor& got, const Tensor& ref) {
  Comparison c;
  if (got.shape() != ref.shape()) {
    c.elements = std::max(got.numel(), ref.numel());
    c.mismatched = std::max<std::int64_t>(c.elements, 1);
    c.firstMismatch = "shape " + got.shapeString() + " against " + ref.shapeString();
    return c;
  }
  std::vector<double> a = got.toVector(), b = ref.toVector();
  double num = 0, den = 0;
  c.elements = static_cast<std::int64_t>(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isfinite(a[i]) && std::isfinite(b[i])) {
      den = std::max(den, std::fabs(b[i]));
      num = std::max(num, std::fabs(a[i] - b[i]));
    } else if (std::isnan(a[i]) && std::isnan(b[i])) {
      ++c.bothNaN;
    } else if (a[i] != b[i]) {
      if (c.mismatched++ == 0)
        c.firstMismatch =
            "element " + std::to_string(i) + ": " + number(a[i]) + " against " + number(b[i]);
    }
  }
  c.relativeError = num == 0 ? 0 : num / std::max(den, 1e-300);
  return c;
}

void Comparison::add(const Comparison& o) {
  relativeError = std::max(relativeError, o.relativeError);
  elements += o.elements;
  bothNaN += o.bothNaN;
  if (mismatched == 0) firstMismatch = o.firstMismatch;
  mismatched += o.mismatched;
}

std::string Comparison::failure(double tolerance) const {
  if (mismatched > 0)
    return std::to_string(mismatched) + " element(s) not finite on one side and different (" +
           firstMismatch + ")";
  if (elements == 0) return "nothing compared: every output is empty";
  if (bothNaN == elements) return "every value is NaN on both sides";
  if (!(relativeError <= tolerance)) return "relative error above the tolerance";
  return "";
}

double toleranceFor(DType t) { return t == DType::f64 ? 1e-10 : t == DType::bf16 ? 1e-2 : 1e-4; }

} // namespace einjit::cli
