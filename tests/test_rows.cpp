// Reductions over a row and what follows them (softmax, layernorm, RMS norm, log-sum-exp, row
// max / min / sum / sum of squares; column sums, the shape of their gradients), forward and
// gradient, on the CPU JIT against the
// reference interpreter: row lengths around the vector width (shorter than a vector, odd,
// several vectors plus a tail), strided views, f32 and f64, one and two threads. Also the
// inline exponential (codegen/VectorMath.h) against the C library, ulp by ulp.
#include "Compare.h"

#include "einjit/einjit.h"

#include <doctest/doctest.h>
#ifdef EINJIT_HAVE_TBB
#include <tbb/global_control.h>
#endif

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <tuple>
#include <vector>

using namespace einjit::test;

namespace {

struct RowProgram {
  const char* name;
  const char* program;
  bool gain; // takes g[j] and b[j] (and eps)
};

const RowProgram kPrograms[] = {
    {"softmax",
     "(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\ny[i,j] := e[i,j] / z[i]",
     false},
    {"layernorm",
     "mu[i] := x[i,j] / size(x,1)\nd[i,j] := x[i,j] - mu[i]\nvar[i] := d[i,j]^2 / size(x,1)\n"
     "y[i,j] := d[i,j] / sqrt(var[i] + eps) * g[j] + b[j]",
     true},
    {"rms norm",
     "ms[i] := x[i,j] * x[i,j] / size(x,1)\ny[i,j] := x[i,j] / sqrt(ms[i] + eps) * g[j]", true},
    {"log-sum-exp", "(max) m[i] := x[i,j]\ns[i] := exp(x[i,j] - m[i])\ny[i] := m[i] + log(s[i])",
     false},
    {"row min and max", "(min) lo[i] := x[i,j]\n(max) hi[i] := x[i,j]\ny[i] := hi[i] - lo[i]",
     false},
    {"column sum of squares and maximum (gain and bias gradients' shape)",
     "s[j] := x[i,j] * x[i,j]\n(max) c[j] := x[i,j]\ny[j] := s[j] + c[j]", false},
    {"first position of the row maximum",
     "(max) m[i] := x[i,j]\n(min) y[i] := x[i,j] == m[i] ? j : 1e300", false},
};

std::map<std::string, Shape> shapesOf(const RowProgram& p, std::int64_t rows, std::int64_t cols) {
  std::map<std::string, Shape> s{{"x", {rows, cols}}};
  if (p.gain) {
    s["g"] = {cols};
    if (std::string(p.program).find("b[j]") != std::string::npos) s["b"] = {cols};
  }
  return s;
}

std::map<std::string, double> scalarsOf(const RowProgram& p) {
  return p.gain ? std::map<std::string, double>{{"eps", 1e-5}} : std::map<std::string, double>{};
}

// Ulps between two finite floats of one type (adjacent values are 1 apart, across zero too).
template <class F>
std::int64_t ulps(F a, F b) {
  using I = std::conditional_t<sizeof(F) == 4, std::int32_t, std::int64_t>;
  auto key = [](F v) {
    const auto u = std::bit_cast<I>(v);
    return u < 0 ? static_cast<std::int64_t>(std::numeric_limits<I>::min()) - u
                 : static_cast<std::int64_t>(u);
  };
  const std::int64_t d = key(a) - key(b);
  return d < 0 ? -d : d;
}

template <class F>
void checkExp(const std::vector<F>& xs, DType dt, std::int64_t maxUlps) {
  Tensor x = Tensor::fromValues({static_cast<std::int64_t>(xs.size())},
                                std::vector<double>(xs.begin(), xs.end()), dt);
  Kernel k = einjit::compile("y[i] := exp(x[i])", on(Device::cpu(), dt));
  const std::vector<double> got = Tensor(k(x)).toVector();
  REQUIRE(got.size() == xs.size());
  std::int64_t worst = 0;
  for (std::size_t n = 0; n < xs.size(); ++n) {
    const F want = static_cast<F>(std::exp(static_cast<long double>(xs[n])));
    const F have = static_cast<F>(got[n]);
    CAPTURE(xs[n]);
    if (std::isnan(xs[n])) {
      CHECK(std::isnan(have));
      continue;
    }
    if (std::isinf(want) || want == 0) {
      CHECK(have == want);
      continue;
    }
    REQUIRE(std::isfinite(have));
    const std::int64_t u = ulps(have, want);
    worst = std::max(worst, u);
    CHECK(u <= maxUlps);
  }
  MESSAGE("exp " << (dt == DType::f32 ? "f32" : "f64") << ": worst " << worst << " ulp over "
                 << xs.size() << " values");
}

template <class F>
std::vector<F> expInputs(F lo, F hi) {
  std::vector<F> xs = {F(0),
                       -F(0),
                       F(1),
                       F(-1),
                       F(0.5) * std::numbers::ln2_v<F>,
                       -F(0.5) * std::numbers::ln2_v<F>,
                       std::numeric_limits<F>::denorm_min(),
                       std::numeric_limits<F>::infinity(),
                       -std::numeric_limits<F>::infinity(),
                       std::numeric_limits<F>::quiet_NaN(),
                       std::numeric_limits<F>::max(),
                       std::numeric_limits<F>::lowest(),
                       lo,
                       hi,
                       lo - 1,
                       hi + 1,
                       std::log(std::numeric_limits<F>::max()),
                       std::log(std::numeric_limits<F>::min()),
                       std::log(std::numeric_limits<F>::denorm_min())};
  // A sweep over the whole finite range of results, subnormal ones included, and a dense one
  // around 0 (the reduced argument's whole interval).
  for (int q = 0; q <= 4000; ++q) xs.push_back(lo + (hi - lo) * static_cast<F>(q) / F(4000));
  for (int q = 0; q <= 2000; ++q) xs.push_back(F(-2) + F(4) * static_cast<F>(q) / F(2000));
  return xs;
}

} // namespace

TEST_CASE("rows: the inline exp against the C library (f32 within 2 ulp, f64 within 2 ulp)") {
  // From the smallest subnormal result to the largest finite one.
  checkExp<float>(expInputs<float>(-103.0f, 88.7f), DType::f32, 2);
  checkExp<double>(expInputs<double>(-744.0, 709.7), DType::f64, 2);
}

TEST_CASE("rows: sigmoid at the ends of the range (its exp overflows and underflows)") {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = Tensor::fromValues({6}, {-1000, -90, -20, 0, 20, 1000}, dt);
    Kernel k = einjit::compile("y[i] := sigmoid(x[i])", on(Device::cpu(), dt));
    const std::vector<double> got = Tensor(k(x)).toVector();
    const std::vector<double> want = {0,   1 / (1 + std::exp(90.0)),  1 / (1 + std::exp(20.0)),
                                      0.5, 1 / (1 + std::exp(-20.0)), 1};
    for (std::size_t n = 0; n < want.size(); ++n) {
      CAPTURE(n);
      CHECK(got[n] == doctest::Approx(want[n]).epsilon(dt == DType::f32 ? 1e-6 : 1e-14));
    }
  }
}

TEST_CASE("rows: every row program, forward and gradient, against the interpreter") {
  // Row lengths: shorter than a vector, one odd, a vector and one, several vectors and a tail.
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {
      {1, 1}, {3, 5}, {7, 9}, {9, 33}, {33, 257}, {257, 100}, {300, 77}};
  for (const RowProgram& p : kPrograms)
    for (auto [rows, cols] : sizes)
      for (DType dt : {DType::f64, DType::f32}) {
        INFO(p.name << ", " << rows << " x " << cols << (dt == DType::f32 ? ", f32" : ", f64"));
        compareProgram(p.program, shapesOf(p, rows, cols), scalarsOf(p), {}, dt, 7);
      }
}

TEST_CASE("rows: strided views (every other element of each row) and one and two threads") {
  const std::vector<int> threads = {1, 2};
  for (const RowProgram& p : kPrograms)
    for (int th : threads)
      for (DType dt : {DType::f64, DType::f32}) {
        INFO(p.name << ", " << th << " thread(s)" << (dt == DType::f32 ? ", f32" : ", f64"));
#ifdef EINJIT_HAVE_TBB
        tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                                  static_cast<std::size_t>(th));
#endif
        Kernel fwd = einjit::compile(p.program, on(Device::reference(), dt));
        Kernel back = fwd.gradient();
        const auto shapes = shapesOf(p, 37, 45);
        auto in = randomArgs(fwd.program(), shapes, dt, 5);
        std::vector<Arg> args;
        for (const auto& n : fwd.tensorArguments()) args.push_back(in.at(n));
        for (const auto& [n, v] : scalarsOf(p)) args.push_back(v);
        compareCall(p.program, args, dt, /*strideArgs=*/true);
        // The gradient program on strided views of its arguments (dy of every output).
        Outputs r = fwd.call(in, scalarsOf(p));
        std::vector<std::string> dys = back.gradientInputs();
        for (std::size_t o = 0; o < r.size(); ++o)
          in[dys[o]] = Tensor::random(r[o].shape(), dt, 60 + o);
        std::vector<Arg> gargs;
        for (const auto& n : back.tensorArguments()) gargs.push_back(in.at(n));
        for (const auto& [n, v] : scalarsOf(p)) gargs.push_back(v);
        compareCall(back.source(), gargs, dt, /*strideArgs=*/true);
      }
}

TEST_CASE("rows: the distance layer's gradients (a register tile over a step-invariant read)") {
  // dx[k,j] := dy[i,j] * -(2 * (w[k,i] - x[k,j])) tiles k x j: x[k,j] is read once per tile.
  for (auto [k, i, j] : {std::tuple{7, 19, 37}, std::tuple{3, 300, 40}, std::tuple{9, 8, 17}})
    for (DType dt : {DType::f64, DType::f32}) {
      INFO(k << " x " << i << " x " << j << (dt == DType::f32 ? ", f32" : ", f64"));
      compareProgram("y[i,j] := (w[k,i] - x[k,j]) ^ 2", {{"w", {k, i}}, {"x", {k, j}}}, {}, {}, dt,
                     9);
    }
}
