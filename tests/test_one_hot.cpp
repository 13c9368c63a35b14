// One-hot sums (codegen/schedule/OneHot.h): which '+=' statements run only at the element their
// equality selects, as `explain` prints it, and those statements on the CPU JIT against the
// interpreter bit for bit, with selectors that are in range, out of range, not integers, NaN
// or infinite, and summands that are inf or NaN. Then the (max) gradient that produces them
// (the softmax's), with many ties, and its semantics where the selected gradient is infinite:
// the elements the maximum did not select get exactly 0 from it, not NaN.
#include "Compare.h"

#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace einjit::test;

namespace {

einjit::Options cpu(DType dt) {
  einjit::Options o;
  o.device = Device::cpu();
  o.defaultDType = dt;
  return o;
}

struct OneHotRow {
  const char* program;
  bool fByRow, dByRow; // f and d have y's first extent (else its second)
  const char* oneHot;  // the index in the last statement's note, or nullptr: not one-hot
};

// The first statement is a row reduction (the '+=' joins it in row blocks) or a contraction
// with a register tile (no row blocks): both keep the '+=' out of an element-wise group.
const char* kRows = "y[i,j] := x[i,j,k]\n";
const char* kTiled = "y[i,j] := w[k,i] * v[k,j]\n";

std::vector<OneHotRow> oneHotRows() {
  auto p = [](const char* first, const char* second) { return std::string(first) + second; };
  static const std::vector<std::string> text = {
      p(kRows, "y[i,j] += j == f[i] ? d[i] : 0"),
      p(kTiled, "y[i,j] += j == f[i] ? d[i] : 0"),
      // the equality second in a conjunction, reversed, with a summand that reads the element
      p(kRows, "y[i,j] += x[i,j,0] > 0.5 && f[i] == j ? d[i] * x[i,j,1] : 0"),
      // the first index one-hot (a column of selectors)
      p(kTiled, "y[i,j] += i == f[j] + 0 ? d[j] : 0"),
      // not one-hot: the selector moves with j, the other branch is not 0, a disjunction, a ':='
      p(kTiled, "y[i,j] += j == f[j] ? d[i] : 0"),
      p(kTiled, "y[i,j] += j == f[i] ? d[i] : 1"),
      p(kTiled, "y[i,j] += j == f[i] || w[0,i] > 0 ? d[i] : 0"),
      "y[i,j] := j == f[i] ? d[i] : 0 where j in 0:size(v,1)\nz[i,j] := v[k,j] * w[k,i]",
  };
  return {{text[0].c_str(), true, true, "j"},      {text[1].c_str(), true, true, "j"},
          {text[2].c_str(), true, true, "j"},      {text[3].c_str(), false, false, "i"},
          {text[4].c_str(), false, true, nullptr}, {text[5].c_str(), true, true, nullptr},
          {text[6].c_str(), true, true, nullptr},  {text[7].c_str(), true, true, nullptr}};
}

// Element by element: equal, or NaN on both sides (-0 and +0 compare equal: OneHot.h).
void checkIdentical(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.toVector(), y = b.toVector();
  REQUIRE(!x.empty());
  for (std::size_t e = 0; e < x.size(); ++e) {
    CAPTURE(e);
    CHECK(((std::isnan(x[e]) && std::isnan(y[e])) || x[e] == y[e]));
  }
}

} // namespace

TEST_CASE("one-hot sums: which statements, and each against the interpreter bit for bit") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  // 17 columns: the contraction gets its register tile at every vector width (with 7, the
  // 16-lane AVX-512 plan has none, and the '+=' joins it in row blocks instead).
  const std::int64_t R = 9, C = 17;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const OneHotRow& row : oneHotRows()) {
      CAPTURE(std::string(row.program));
      CAPTURE(dt);
      Kernel jit = einjit::compile(row.program, cpu(dt));
      Kernel ref = einjit::compile(row.program, on(Device::reference(), dt));
      // Selectors: inside, at both ends, just outside, not an integer, NaN, infinite, huge.
      const std::int64_t nf = row.fByRow ? R : C, span = row.fByRow ? C : R;
      std::vector<double> f = {
          0, static_cast<double>(span - 1), 2, -1, static_cast<double>(span), 2.5, nan, inf, 1e30};
      f.resize(static_cast<std::size_t>(nf), 1);
      const std::int64_t nd = row.dByRow ? R : C;
      std::vector<double> d = {1.5, -2, inf, nan, -inf, 3, 4, 0.25, 7};
      d.resize(static_cast<std::size_t>(nd), 1);
      std::map<std::string, Tensor> in{
          {"x", Tensor::random({R, C, 2}, dt, 3)},
          // small integers: the contraction is exact
          {"w", Tensor::randomInt({3, R}, -3, 4, DType::i64, 4).to(dt)},
          {"v", Tensor::randomInt({3, C}, -3, 4, DType::i64, 5).to(dt)},
          {"f", Tensor::fromValues({nf}, f, dt)},
          {"d", Tensor::fromValues({nd}, d, dt)}};
      const std::vector<Arg> args = argsOf(jit, in, {});
      const std::string text = jit.explain(args);
      CAPTURE(text);
      const std::string note = row.oneHot ? std::string("one-hot along ") + row.oneHot : "one-hot";
      CHECK((text.find(note) != std::string::npos) == (row.oneHot != nullptr));
      checkIdentical(jit.call(args)["y"], ref.call(args)["y"]);
    }
  }
}

TEST_CASE("one-hot sums: a (max) path beside a softmax, with many ties, against the interpreter") {
  // The softmax's own maximum carries no gradient (grad/ShiftInvariance.h); read once more
  // outside exp(x - m), it does, through the one-hot sum at the first maximum.
  const char* softmax = "(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\n"
                        "y[i,j] := e[i,j] / z[i] + m[i]";
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt);
    Kernel fwd = einjit::compile(softmax, cpu(dt));
    Kernel back = einjit::compile(fwd.gradient().source(), cpu(dt));
    Kernel ref = einjit::compile(fwd.gradient().source(), on(Device::reference(), dt));
    // Values from {0, 1, 2}: every row has its maximum several times.
    std::map<std::string, Tensor> in{{"x", Tensor::randomInt({37, 41}, 0, 3, DType::i64, 5).to(dt)},
                                     {"dy", Tensor::random({37, 41}, dt, 6)}};
    const std::vector<Arg> args = argsOf(back, in, {});
    const std::string text = back.explain(args);
    CAPTURE(text);
    CHECK(text.find("one-hot along j") != std::string::npos);
    checkSame(back.call(args), ref.call(args), {"dx"}, dt);
  }
}

TEST_CASE("one-hot sums: an infinite (max) gradient reaches the selected element only") {
  // dm[0] = sum of dy * x over row 0 overflows to inf; dx[0,j] = dy * m (finite) everywhere, plus
  // dm at the first maximum (j = 0). The elements the maximum did not select stay finite: the
  // gradient is `j == first_m[i] ? dm[i] : 0`, not dm[i] * (j == first_m[i] ? 1 : 0) (inf * 0).
  const char* program = "(max) m[i] := x[i,j]\ny[i,j] := x[i,j] * m[i]";
  Kernel fwd = einjit::compile(program, cpu(DType::f64));
  const std::string grad = fwd.gradient().source();
  CAPTURE(grad);
  const Tensor x = Tensor::fromValues({2, 4}, {1e308, 1e308, 1, 2, 3, 1, 3, 0}, DType::f64);
  const Tensor dy = Tensor::full({2, 4}, 1, DType::f64);
  for (Device dev : {Device::cpu(), Device::reference()}) {
    CAPTURE(dev.kind == Device::Kind::cpu);
    Kernel back = einjit::compile(grad, on(dev, DType::f64));
    const std::vector<double> dx = back.call({{"x", x}, {"dy", dy}})["dx"].toVector();
    CHECK(dx[0] == std::numeric_limits<double>::infinity());
    for (std::size_t j = 1; j < 4; ++j) CHECK(dx[j] == 1e308);
    // Row 1: m = 3 (first at j = 0), dm = 3 + 1 + 3 + 0 = 7.
    CHECK(dx[4] == 3 + 7);
    CHECK(dx[5] == 3);
    CHECK(dx[6] == 3);
    CHECK(dx[7] == 3);
  }
}
