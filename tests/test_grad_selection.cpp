// (max)/(min) gradients: each output's gradient goes to exactly one element of its reduction,
// the first extreme, on every backend. The summands here compute (products and sums that
// round, fused or not), so a gradient that located the extreme by comparing a recomputed
// summand with the forward's stored value would lose outputs (a different rounding, no match)
// or double them. Every program adds a witness b[o] (read once per iteration, derivative 1),
// so db[o] counts the selected iterations of output o times dy[o]: it must equal dy[o].
#include "GradTable.h"

#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <cmath>
#include <map>

using einjit::Arg;
using einjit::Device;
using einjit::DType;
using einjit::Kernel;
using einjit::Shape;
using einjit::Tensor;

namespace {

struct SelectionRow {
  const char* program;
  std::map<std::string, Shape> shapes;
  const char* witness; // a tensor read as "+ b[o]": its gradient is dY
};

const std::vector<SelectionRow>& selectionRows() {
  static const std::vector<SelectionRow> rows = {
      // The affine summand of the report (a maxout unit): one fused multiply-add on the JIT.
      {"(min) y[i] := x[i,j] * w[j] + b[i]", {{"x", {6, 9}}, {"w", {9}}, {"b", {6}}}, "b"},
      {"(max) y[i] := x[i,j] * w[j] + b[i]", {{"x", {6, 9}}, {"w", {9}}, {"b", {6}}}, "b"},
      // Two reduction indices (iteration numbers over a box).
      {"(max) y[i] := x[i,j,k] * w[j,k] - 0.5 * x[i,k,j] + b[i]",
       {{"x", {3, 4, 4}}, {"w", {4, 4}}, {"b", {3}}},
       "b"},
      // A max-pool 3x3, stride 2, padding 1, with a scaled and shifted input: the windows are
      // dependent ranges clipped at the borders.
      {"(max) y[i,j] := x[2i+a-1, 2j+c-1] * w[a,c] + b[i,j] where i in 0:fdiv(size(x,0)+1, 2), "
       "j in 0:fdiv(size(x,1)+1, 2), a in max(0, 1-2i):min(3, size(x,0)+1-2i), "
       "c in max(0, 1-2j):min(3, size(x,1)+1-2j)",
       {{"x", {7, 6}}, {"w", {3, 3}}, {"b", {4, 3}}},
       "b"},
      // A triangular range (suffix minima) and a range starting below 0 (padded reads).
      {"(min) y[i] := x[k] * w[i] + x[k] / 3 + b[i] where i in 0:size(x,0), k in i:size(x,0)",
       {{"x", {8}}, {"w", {8}}, {"b", {8}}},
       "b"},
      {"(max) y[i] := x[pad(i+k)] * w[k+1] + b[i] where k in -1:2",
       {{"x", {7}}, {"w", {3}}, {"b", {7}}},
       "b"},
      // A rank-0 output: dy is a scalar parameter.
      {"(max) s := x[i] * w[i] + exp(x[i]) + b[0]", {{"x", {11}}, {"w", {11}}, {"b", {1}}}, "b"},
  };
  return rows;
}

// Inputs: uniform random values (products that round), or small integers (many exact ties).
std::map<std::string, Tensor> inputsFor(const SelectionRow& row, DType dt, bool ties,
                                        std::uint64_t seed) {
  std::map<std::string, Tensor> in;
  for (const auto& [name, shape] : row.shapes)
    in[name] = ties ? Tensor::randomInt(shape, -1, 2, DType::i64, ++seed).to(dt)
                    : Tensor::random(shape, dt, ++seed);
  return in;
}

// Runs the gradient `calls` times on fresh inputs; returns how many outputs lost or gained
// gradient (db[o] != dy[o]) over all calls.
int wrongOutputs(const SelectionRow& row, Device dev, DType dt, int calls, bool ties) {
  einjit::Options opt;
  opt.device = dev;
  opt.defaultDType = dt;
  Kernel fwd = einjit::compile(row.program, opt);
  Kernel back = fwd.gradient();
  const std::string dyName = back.gradientInputs().at(0);
  int wrong = 0;
  for (int c = 0; c < calls; ++c) {
    auto in = inputsFor(row, dt, ties, 1000 * static_cast<std::uint64_t>(c) + 17);
    Tensor y = fwd.call(in)[0];
    std::map<std::string, double> scalars;
    Tensor dy;
    if (y.rank() == 0)
      scalars[dyName] = 0.75 + c;
    else
      in[dyName] = dy = Tensor::random(y.shape(), dt, 7 + static_cast<std::uint64_t>(c));
    std::map<std::string, Tensor> gin;
    for (const auto& n : back.tensorArguments()) gin[n] = in.at(n);
    einjit::Outputs g = back.call(gin, scalars);
    std::vector<double> got = g["d" + std::string(row.witness)].toVector();
    std::vector<double> want = y.rank() == 0 ? std::vector<double>{scalars[dyName]} : dy.toVector();
    REQUIRE(got.size() == want.size());
    for (std::size_t o = 0; o < got.size(); ++o)
      if (!(got[o] == want[o])) ++wrong; // NaN counts as wrong
  }
  return wrong;
}

} // namespace

TEST_CASE("gradients: (max)/(min) send each output's gradient to exactly one element") {
  for (const SelectionRow& row : selectionRows()) {
    INFO(std::string(row.program));
    for (Device dev : {Device::cpu(), Device::reference()})
      for (DType dt : {DType::f64, DType::f32})
        for (bool ties : {false, true}) {
          std::string where =
              dev.name() + " " + std::string(einjit::dtypeName(dt)) + (ties ? " ties" : " random");
          INFO(where);
          const int calls = dev.kind == Device::Kind::cpu ? 200 : 20;
          CHECK(wrongOutputs(row, dev, dt, calls, ties) == 0);
        }
  }
}

#if EINJIT_HAVE_LLVM
// f32 arithmetic is the JIT's (the interpreter counts in double, where these numbers are exact).
// The first extreme is found by comparing iteration numbers in the program's dtype. One number
// over all of a 4097 x 4097 box passes 2^24, where f32 keeps only even integers: iteration
// 2^24 + 1 (x[4095, 2]) rounded to 2^24 (that of x[4095, 1]), and the gradient went to x[4095, 1]
// and x[4095, 2] both. Each reduction index is numbered on its own now (its values stay
// below 2^24), and the tie at x[4095, 3] must not take any either.
TEST_CASE("gradients: an f32 (max)/(min) over more than 2^24 iterations selects the first extreme") {
  const std::int64_t n = 4097;
  REQUIRE(n * n > (std::int64_t{1} << 24));
  const std::pair<const char*, double> rows[] = {{"(max) s := x[i,j]", 0.75},
                                                 {"(min) s := -x[i,j]", -0.75}};
  for (const auto& [program, want] : rows) {
    INFO(std::string(program));
    std::vector<float> values(static_cast<std::size_t>(n * n), 0.0f);
    const std::int64_t first = (std::int64_t{1} << 24) + 1; // x[4095, 2]
    REQUIRE(first / n == 4095);
    REQUIRE(first % n == 2);
    values[static_cast<std::size_t>(first)] = 1.0f;
    values[static_cast<std::size_t>(first + 1)] = 1.0f; // a tie after it
    Tensor x = Tensor::fromValues({n, n}, std::vector<double>(values.begin(), values.end()),
                                  DType::f32);
    einjit::Options opt;
    opt.device = Device::cpu();
    opt.defaultDType = DType::f32;
    Kernel back = einjit::compile(program, opt).gradient();
    const std::string dyName = back.gradientInputs().at(0);
    std::map<std::string, Tensor> in = {{"x", x}};
    std::map<std::string, double> scalars = {{dyName, 0.75}};
    Tensor dx = back.call(in, scalars)["dx"];
    std::vector<double> got = dx.toVector();
    std::int64_t nonzero = 0;
    for (double v : got) nonzero += v != 0.0;
    CHECK(nonzero == 1);
    CHECK(got[static_cast<std::size_t>(first)] == want);
  }
}
#endif // EINJIT_HAVE_LLVM
