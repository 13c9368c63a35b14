// The reference interpreter against hand-worked results.
//
// Every expected value below is written out by hand (or computed by a plain loop / the C++
// standard library inside the test), never by einjit itself. Inputs are small and mostly f64 so
// the comparisons are exact up to rounding.
//
// Rows that are alike (one program, positional arguments, one tensor to check) live in the table
// `kRows`; programs that need more checks (several outputs, in-place writes, dtypes, errors,
// signed zeros, randomized loop references) are separate TEST_CASEs.
#include "TestSupport.h"

#include "dsl/Program.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

using einjit::Arg;
using einjit::DType;
using einjit::Outputs;
using einjit::Shape;
using einjit::Tensor;

#include "InterpreterTable.h"

using namespace einjit::test::interp;

namespace {

// This file tests the reference interpreter: every kernel runs on Device::reference().
// The tables read intermediates by name too.
einjit::Kernel compileRef(const std::string& source, einjit::Options opt = {}) {
  opt.device = einjit::Device::reference();
  opt.keepIntermediates = true;
  return einjit::compile(source, opt);
}

} // namespace

TEST_CASE("interpreter: table of programs with hand-worked results") {
  std::vector<Row> table = rows();
  CHECK(table.size() >= 45);
  for (std::size_t n = 0; n < table.size(); ++n) {
    const Row& row = table[n];
    INFO("row " << n << ": " << row.program);
    try {
      einjit::Kernel k = compileRef(row.program);
      Outputs r = k.call(cloned(row.args));
      const Tensor& t = row.output.empty() ? r[std::size_t{0}] : r[std::string_view(row.output)];
      checkTensor(t, row.shape, row.want);
      CHECK(t.dtype() == DType::f64);
      einjit::test::checkRoundTrip(row.program);
      // The canonical text is the same program: same results (on fresh copies of the
      // arguments: in-place rows changed those of the first call).
      Outputs again = compileRef(k.source()).call(cloned(row.args));
      const Tensor& t2 =
          row.output.empty() ? again[std::size_t{0}] : again[std::string_view(row.output)];
      checkTensor(t2, row.shape, row.want);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << e.what());
    }
  }
}

// ---- programs that need more than one check -----------------------------------------------

TEST_CASE("interpreter: softmax as a multi-statement program") {
  auto k = compileRef("(max) m[i] := x[i,j]\n"
                      "e[i,j] := exp(x[i,j] - m[i])\n"
                      "s[i] := e[i,j]\n"
                      "y[i,j] := e[i,j] / s[i]");
  Tensor x = F64({2, 3}, {1, 2, 3, 0, 0, 0});
  Outputs r = k(x);
  CHECK(r.size() == 1);
  CHECK(r.names() == std::vector<std::string>{"y"});
  double a = std::exp(-2.0), b = std::exp(-1.0), c = 1.0, sum = a + b + c;
  checkTensor(r["m"], {2}, {3, 0});
  checkTensor(r["e"], {2, 3}, {a, b, c, 1, 1, 1});
  checkTensor(r["s"], {2}, {sum, 3});
  checkTensor(r["y"], {2, 3}, {a / sum, b / sum, c / sum, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  Tensor y = r; // the single output
  checkTensor(y, {2, 3}, {a / sum, b / sum, c / sum, 1.0 / 3, 1.0 / 3, 1.0 / 3});
}

TEST_CASE("interpreter: layernorm as a multi-statement program") {
  auto k = compileRef("mu[i] := x[i,j] / size(x, 1)\n"
                      "d[i,j] := x[i,j] - mu[i]\n"
                      "v[i] := d[i,j]^2 / size(x, 1)\n"
                      "y[i,j] := d[i,j] / sqrt(v[i] + eps) * g[j] + b[j]");
  CHECK(k.tensorArguments() == std::vector<std::string>{"x", "g", "b"});
  CHECK(k.scalarArguments() == std::vector<std::string>{"eps"});
  Tensor x = F64({2, 4}, {1, 2, 3, 4, 2, 2, 2, 6});
  Tensor g = F64({4}, {1, 2, 1, 1});
  Tensor b = F64({4}, {0, 0, 1, 0});
  const double eps = 1e-5;
  Outputs r = k(x, g, b, eps);
  // Plain loop reference.
  std::vector<double> xv = x.toVector(), gv = g.toVector(), bv = b.toVector(), want, mus, vs;
  for (int i = 0; i < 2; ++i) {
    double mu = 0, var = 0;
    for (int j = 0; j < 4; ++j) mu += xv[4 * i + j] / 4;
    for (int j = 0; j < 4; ++j) var += (xv[4 * i + j] - mu) * (xv[4 * i + j] - mu) / 4;
    for (int j = 0; j < 4; ++j)
      want.push_back((xv[4 * i + j] - mu) / std::sqrt(var + eps) * gv[j] + bv[j]);
    mus.push_back(mu);
    vs.push_back(var);
  }
  // Hand check of the reference: row 0 has mean 2.5 and variance 1.25, row 1 mean 3, var 3.
  CHECK(mus == std::vector<double>{2.5, 3});
  CHECK(vs == std::vector<double>{1.25, 3});
  checkTensor(r["mu"], {2}, {2.5, 3});
  checkTensor(r["v"], {2}, {1.25, 3});
  checkTensor(r["y"], {2, 4}, want);
  CHECK(r.size() == 1);
}

TEST_CASE("interpreter: intermediate read by a later statement is returned by name") {
  auto k = compileRef("t[i] := x[i,j]; y[i] := t[i] * 2");
  Outputs r = k(F64({2, 2}, {1, 2, 3, 4}));
  CHECK(r.size() == 1);
  checkTensor(r[std::size_t{0}], {2}, {6, 14});
  checkTensor(r["y"], {2}, {6, 14});
  checkTensor(r["t"], {2}, {3, 7});
}

TEST_CASE("interpreter: two independent outputs in statement order") {
  auto k = compileRef("a[i] := x[i]*2\nb[i] := x[i]+1");
  Outputs r = k(F64({3}, {1, 2, 3}));
  REQUIRE(r.size() == 2);
  CHECK(r.names() == std::vector<std::string>{"a", "b"});
  checkTensor(r[std::size_t{0}], {3}, {2, 4, 6});
  checkTensor(r[std::size_t{1}], {3}, {2, 3, 4});
  auto [a, b] = r.take<2>();
  checkTensor(a, {3}, {2, 4, 6});
  checkTensor(b, {3}, {2, 3, 4});
}

TEST_CASE("interpreter: '=' overwrites only the covered elements") {
  SUBCASE("where range") {
    auto k = compileRef("y[i] = x[i] where i in 1:3");
    Tensor y = F64({4}, {9, 9, 9, 9});
    Outputs r = k(y, F64({4}, {1, 2, 3, 4}));
    checkTensor(r["y"], {4}, {9, 2, 3, 9});
    checkTensor(y, {4}, {9, 2, 3, 9}); // written in place
  }
  SUBCASE("one column of a matrix") {
    auto k = compileRef("y[i,j] = a[i,j]*2 where j in 0:1");
    Tensor y = F64({2, 2}, {7, 7, 7, 7});
    Outputs r = k(y, F64({2, 2}, {1, 2, 3, 4}));
    checkTensor(r["y"], {2, 2}, {2, 7, 6, 7});
  }
  SUBCASE("diagonal only, off-diagonal kept") {
    auto k = compileRef("D[i,i] = v[i]");
    Tensor d = F64({3, 3}, {7, 7, 7, 7, 7, 7, 7, 7, 7});
    Outputs r = k(d, F64({3}, {1, 2, 3}));
    checkTensor(r["D"], {3, 3}, {1, 7, 7, 7, 2, 7, 7, 7, 3});
  }
  SUBCASE("a full overwrite with a contraction") {
    auto k = compileRef("y[i] = x[i,j]");
    Tensor y = F64({2}, {100, 100});
    Outputs r = k(y, F64({2, 2}, {1, 2, 3, 4}));
    checkTensor(r["y"], {2}, {3, 7});
  }
}

TEST_CASE("interpreter: '+=' combines with the existing value using the reduction") {
  SUBCASE("(+)") {
    auto k = compileRef("y[i] += x[i,j]");
    Tensor y = F64({2}, {10, 20});
    Outputs r = k(y, F64({2, 2}, {1, 2, 3, 4}));
    checkTensor(r["y"], {2}, {13, 27});
    checkTensor(y, {2}, {13, 27});
  }
  SUBCASE("(max)") {
    auto k = compileRef("(max) y[i] += x[i,j]");
    Tensor y = F64({2}, {2, 10});
    Outputs r = k(y, F64({2, 2}, {1, 5, 3, 4}));
    checkTensor(r["y"], {2}, {5, 10});
  }
  SUBCASE("(min)") {
    auto k = compileRef("(min) y[i] += x[i,j]");
    Tensor y = F64({2}, {2, 10});
    Outputs r = k(y, F64({2, 2}, {1, 5, 3, 4}));
    checkTensor(r["y"], {2}, {1, 3});
  }
  SUBCASE("(*)") {
    auto k = compileRef("(*) y[i] += x[i,j]");
    Tensor y = F64({2}, {2, 3});
    Outputs r = k(y, F64({2, 2}, {1, 2, 3, 4}));
    checkTensor(r["y"], {2}, {4, 36});
  }
  SUBCASE("scalar") {
    auto k = compileRef("s += x[i]");
    Tensor s = F64({}, {10});
    Outputs r = k(s, F64({3}, {1, 2, 3}));
    checkTensor(r["s"], {}, {16});
  }
  SUBCASE("only the covered part accumulates") {
    auto k = compileRef("y[i] += x[i] where i in 0:2");
    Tensor y = F64({3}, {1, 1, 1});
    Outputs r = k(y, F64({3}, {5, 6, 7}));
    checkTensor(r["y"], {3}, {6, 7, 1});
  }
}

TEST_CASE("interpreter: scalar output is rank 0") {
  auto k = compileRef("s := x[i]*x[i]");
  Tensor s = k(F64({3}, {1, 2, 3}));
  CHECK(s.rank() == 0);
  CHECK(s.shape().empty());
  CHECK(s.numel() == 1);
  CHECK(s.toVector()[0] == 14);
}

TEST_CASE("interpreter: calling by name with scalar parameters") {
  auto k = compileRef("y[i] := alpha * x[N-1-i]");
  CHECK(k.tensorArguments() == std::vector<std::string>{"x"});
  CHECK(k.scalarArguments() == std::vector<std::string>{"alpha", "N"});
  Tensor x = F64({4}, {1, 2, 3, 4});
  Outputs r = k.call({{"x", x}}, {{"N", 4.0}, {"alpha", 0.5}});
  checkTensor(r[std::size_t{0}], {4}, {2, 1.5, 1, 0.5});
  Outputs r2 = k(x, 2.0, 4);
  checkTensor(r2[std::size_t{0}], {4}, {8, 6, 4, 2});
}

TEST_CASE("interpreter: f32 inputs give an f32 output") {
  auto k = compileRef("y[i] := x[i,j]*w[j]");
  Tensor x = Tensor::fromValues({2, 2}, {1, 2.5, -1, 0.25}, DType::f32);
  Tensor w = Tensor::fromValues({2}, {2, 4}, DType::f32);
  Tensor y = k(x, w);
  CHECK(y.dtype() == DType::f32);
  checkTensor(y, {2}, {12, -1});
}

TEST_CASE("interpreter: output dtype follows the float table, not the index tensor") {
  auto k = compileRef("y[b,d] := E[tok[b],d]");
  Tensor y = k(Tensor::fromValues({2, 1}, {1.5, 2.5}, DType::f32), I64({2}, {1, 0}));
  CHECK(y.dtype() == DType::f32);
  checkTensor(y, {2, 1}, {2.5, 1.5});
}

TEST_CASE("interpreter: out-of-range gather index throws einjit::Error") {
  auto k = compileRef("y[b,d] := E[tok[b],d]");
  Tensor e = F64({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  CHECK_THROWS_AS(k(e, I64({2}, {0, 4})), einjit::Error);
  CHECK_THROWS_AS(k(e, I64({2}, {-1, 0})), einjit::Error);
  checkTensor(k(e, I64({2}, {3, 0}))[std::size_t{0}], {2, 2}, {30, 31, 0, 1});
}

TEST_CASE("interpreter: max/min reductions keep the first extreme (signed zeros)") {
  // -0.0 == +0.0, so which zero survives shows which tie was kept.
  auto kmax = compileRef("(max) y[i] := x[i,j]");
  Tensor x = F64({2, 2}, {-0.0, 0.0, 0.0, -0.0});
  std::vector<double> m = Tensor(kmax(x)).toVector();
  REQUIRE(m.size() == 2);
  CHECK(m[0] == 0.0);
  CHECK(std::signbit(m[0]));
  CHECK_FALSE(std::signbit(m[1]));
  auto kmin = compileRef("(min) y[i] := x[i,j]");
  std::vector<double> n = Tensor(kmin(x)).toVector();
  REQUIRE(n.size() == 2);
  CHECK(std::signbit(n[0]));
  CHECK_FALSE(std::signbit(n[1]));
}

TEST_CASE("interpreter: empty output when the kernel is longer than the input") {
  auto k = compileRef("y[i] := x[i+k]*w[k]");
  Tensor y = k(F64({2}, {1, 2}), F64({3}, {1, 1, 1}));
  CHECK(y.shape() == Shape{0});
  CHECK(y.numel() == 0);
  CHECK(y.toVector().empty());
}

TEST_CASE("interpreter: index values only, default dtype") {
  auto k = compileRef("y[i] := i where i in 2:4");
  Tensor y = k();
  CHECK(y.dtype() == DType::f32);
  checkTensor(y, {4}, {0, 0, 2, 3});
}

TEST_CASE("interpreter: strided (transposed) input views") {
  auto k = compileRef("y[i,j] := x[i,j] + 0");
  Tensor x = F64({2, 3}, {1, 2, 3, 4, 5, 6}).transpose(0, 1);
  checkTensor(k(x)[std::size_t{0}], {3, 2}, {1, 4, 2, 5, 3, 6});
  auto mm = compileRef("C[i,k] := A[i,j]*B[j,k]");
  // A = [[1,3],[2,4]] through the view, B = identity
  Tensor a = F64({2, 2}, {1, 2, 3, 4}).transpose(0, 1);
  checkTensor(mm(a, F64({2, 2}, {1, 0, 0, 1}))[std::size_t{0}], {2, 2}, {1, 3, 2, 4});
}

// ---- randomized inputs against plain loops ------------------------------------------------

TEST_CASE("interpreter: permuted contraction against a loop") {
  const int I = 3, J = 4, B = 2, K = 5;
  Tensor a = Tensor::random({I, J, B}, DType::f64, 1);
  Tensor b = Tensor::random({B, K, J}, DType::f64, 2);
  Tensor c = compileRef("C[i,k,b] := A[i,j,b]*B[b,k,j]")(a, b);
  std::vector<double> want;
  for (int i = 0; i < I; ++i)
    for (int k = 0; k < K; ++k)
      for (int bb = 0; bb < B; ++bb) {
        double s = 0;
        for (int j = 0; j < J; ++j) s += a.get({i, j, bb}) * b.get({bb, k, j});
        want.push_back(s);
      }
  checkTensor(c, {I, K, B}, want);
}

TEST_CASE("interpreter: strided multi-channel conv2d against a loop") {
  const int N = 2, C = 3, H = 7, W = 6, O = 2, KH = 3, KW = 2;
  // 2h+a <= 6 with a <= 2 => h in 0:3; 2w+b <= 5 with b <= 1 => w in 0:3
  const int OH = 3, OW = 3;
  Tensor x = Tensor::random({N, C, H, W}, DType::f64, 3);
  Tensor w = Tensor::random({O, C, KH, KW}, DType::f64, 4);
  Tensor y = compileRef("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]")(x, w);
  std::vector<double> want;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o)
      for (int h = 0; h < OH; ++h)
        for (int ww = 0; ww < OW; ++ww) {
          double s = 0;
          for (int c = 0; c < C; ++c)
            for (int a = 0; a < KH; ++a)
              for (int b = 0; b < KW; ++b)
                s += x.get({n, c, 2 * h + a, 2 * ww + b}) * w.get({o, c, a, b});
          want.push_back(s);
        }
  checkTensor(y, {N, O, OH, OW}, want);
}

TEST_CASE("interpreter: embedding with random token ids against a loop") {
  const int V = 7, D = 3, Bn = 11;
  Tensor e = Tensor::random({V, D}, DType::f64, 5);
  Tensor tok = Tensor::randomInt({Bn}, 0, V, DType::i64, 6);
  Tensor y = compileRef("y[b,d] := E[tok[b], d]")(e, tok);
  std::vector<double> want;
  for (int b = 0; b < Bn; ++b)
    for (int d = 0; d < D; ++d) want.push_back(e.get({static_cast<std::int64_t>(tok.get({b})), d}));
  checkTensor(y, {Bn, D}, want);
}

// ---- ranges that depend on other indices ------------------------------------------------------

TEST_CASE("interpreter: dependent ranges give prefix sums and triangular writes") {
  Tensor x = Tensor::fromValues({4}, {1, 2, 3, 4}, DType::f64);
  Tensor c = compileRef("y[i] := x[k] where i in 0:size(x,0), k in 0:i+1")(x);
  CHECK(c.toVector() == std::vector<double>{1, 3, 6, 10});
  // Reverse cumulative maximum, the reduction index read after its bound's index.
  Tensor m = compileRef("(max) y[i] := x[k] where i in 0:4, k in i:size(x,0)")(
      Tensor::fromValues({4}, {3, 1, 4, 1}, DType::f64));
  CHECK(m.toVector() == std::vector<double>{4, 4, 4, 1});
  // '=' with a triangular output range: the upper triangle keeps its values.
  Tensor y = Tensor::full({3, 3}, -1, DType::f64);
  Tensor a = Tensor::fromValues({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, DType::f64);
  compileRef("y[i,j] = a[i,j] * 10 where j in 0:i+1")(y, a);
  CHECK(y.toVector() == std::vector<double>{10, -1, -1, 40, 50, -1, 70, 80, 90});
  // Floor division in a bound: k runs over 0..floor(i/2).
  Tensor h = compileRef("y[i] := x[k] where i in 0:4, k in 0:fdiv(i, 2)+1")(x);
  CHECK(h.toVector() == std::vector<double>{1, 1, 3, 3});
  // An empty dependent range writes the reduction's identity.
  Tensor e = compileRef("(*) y[i] := x[k] where i in 0:3, k in 1:i")(x);
  CHECK(e.toVector() == std::vector<double>{1, 1, 2});
}

TEST_CASE("interpreter: a conv1d input gradient in gather form with exact bounds (E1)") {
  // y[i] = sum_k x[i+k] w[k]; dx[j] = sum_{k = max(0, j-N+1)}^{min(K-1, j)} dy[j-k] w[k].
  const std::int64_t M = 9, K = 3, N = M - K + 1;
  Tensor dy = Tensor::random({N}, DType::f64, 5), w = Tensor::random({K}, DType::f64, 6);
  Tensor dx = Tensor::zeros({M}, DType::f64);
  compileRef("dx[j] = dy[j-k] * w[k] where k in max(0, j-size(dy,0)+1):min(size(w,0), j+1)")(dx, dy,
                                                                                             w);
  std::vector<double> want(M, 0.0); // the scatter form, by hand
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t k = 0; k < K; ++k)
      want[static_cast<std::size_t>(i + k)] += dy.get({i}) * w.get({k});
  std::vector<double> got = dx.toVector();
  for (std::size_t j = 0; j < want.size(); ++j)
    CHECK(got[j] == doctest::Approx(want[j]).epsilon(1e-14));
}

TEST_CASE("interpreter: the stride-2 phase form of a strided conv1d gradient (E2b)") {
  // y[i] = sum_k x[2i+k] w[k]; dx[2q+r] = sum_m dy[q-m] w[r+2m], one statement per phase r.
  const std::int64_t M = 11, K = 3, N = (M - K) / 2 + 1;
  Tensor dy = Tensor::random({N}, DType::f64, 7), w = Tensor::random({K}, DType::f64, 8);
  Tensor dx = Tensor::full({M}, 99, DType::f64);
  einjit::Kernel phases = compileRef(R"(
    dx[2q] = dy[q-m] * w[2m]
      where q in 0:fdiv(size(dx,0)-1, 2)+1, m in max(0, q-size(dy,0)+1):min(fdiv(size(w,0)-1, 2)+1, q+1)
    dx[2q+1] = dy[q-m] * w[2m+1]
      where q in 0:fdiv(size(dx,0)-2, 2)+1, m in max(0, q-size(dy,0)+1):min(fdiv(size(w,0)-2, 2)+1, q+1)
  )");
  CHECK(phases.tensorArguments() == std::vector<std::string>{"dx", "dy", "w"});
  phases(dx, dy, w);
  std::vector<double> want(M, 0.0);
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t k = 0; k < K; ++k)
      want[static_cast<std::size_t>(2 * i + k)] += dy.get({i}) * w.get({k});
  std::vector<double> got = dx.toVector();
  for (std::size_t j = 0; j < want.size(); ++j)
    CHECK(got[j] == doctest::Approx(want[j]).epsilon(1e-14));
}

TEST_CASE("interpreter: an access that a dependent range pushes out of bounds is an error") {
  Tensor x = Tensor::fromValues({3}, {1, 2, 3}, DType::f64);
  Tensor w = Tensor::fromValues({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, DType::f64);
  try {
    compileRef("s := x[i] + w[i,k] where k in 0:i+2")(x, w);
    FAIL("no error");
  } catch (const einjit::Error& e) {
    CHECK(std::string(e.what()).find("subscript 'k' goes out of bounds: it reaches 3") !=
          std::string::npos);
    CHECK(e.column() == 17);
  }
  Tensor y = Tensor::full({3}, 7, DType::f64);
  CHECK_THROWS_AS(compileRef("y[i] = x[k] where k in 0:i+2")(y, x), einjit::Error);
  CHECK(y.toVector() == std::vector<double>{7, 7, 7}); // nothing written
}

TEST_CASE("interpreter: affine and gathering left-hand sides") {
  Tensor x = Tensor::fromValues({4}, {1, 2, 3, 4}, DType::f64);
  // Reversal written through the left-hand side.
  Tensor r = Tensor::zeros({4}, DType::f64);
  compileRef("r[N-1-i] = x[i]")(r, x, 4);
  CHECK(r.toVector() == std::vector<double>{4, 3, 2, 1});
  // Interleave two tensors into the even and odd elements.
  Tensor a = Tensor::fromValues({3}, {1, 2, 3}, DType::f64);
  Tensor b = Tensor::fromValues({3}, {10, 20, 30}, DType::f64);
  Tensor z = Tensor::full({6}, -1, DType::f64);
  compileRef("z[2i] = a[i]; z[2i+1] = b[i]")(z, a, b);
  CHECK(z.toVector() == std::vector<double>{1, 10, 2, 20, 3, 30});
  // A scatter: the gradient of an embedding lookup with repeated tokens.
  Tensor tok = Tensor::fromValues({4}, {2, 0, 2, 1}, DType::i64);
  Tensor dy = Tensor::fromValues({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}, DType::f64);
  Tensor dE = Tensor::zeros({3, 2}, DType::f64);
  einjit::Kernel k = compileRef("dE[tok[b], d] += dy[b, d]");
  CHECK(k.program().stmts[0].scatter);
  k(dE, tok, dy);
  CHECK(dE.toVector() == std::vector<double>{3, 4, 7, 8, 6, 8});
  // '+=' may reach an element from several index values: y[i+j] sums anti-diagonals.
  Tensor m = Tensor::fromValues({2, 2}, {1, 2, 3, 4}, DType::f64);
  Tensor s = Tensor::zeros({3}, DType::f64);
  compileRef("s[i+j] += m[i,j]")(s, m);
  CHECK(s.toVector() == std::vector<double>{1, 5, 4});
}

TEST_CASE("interpreter: pad() on a '+=' left-hand side drops writes outside the tensor") {
  Tensor x = Tensor::fromValues({4}, {1, 2, 3, 4}, DType::f64);
  Tensor y = Tensor::zeros({3}, DType::f64);
  einjit::Kernel k = compileRef("y[pad(i-1)] += x[i]");
  CHECK(k.program().stmts[0].scatter);
  k(y, x);
  CHECK(y.toVector() == std::vector<double>{2, 3, 4}); // x[0] would land at -1: dropped
}

TEST_CASE("interpreter: clamp() and wrap() on a '+=' left-hand side fold writes") {
  Tensor x = Tensor::fromValues({4}, {1, 2, 3, 4}, DType::f64);
  Tensor c = Tensor::zeros({3}, DType::f64);
  compileRef("c[clamp(i-1)] += x[i]")(c, x); // x[0] and x[1] land on c[0]
  CHECK(c.toVector() == std::vector<double>{3, 3, 4});
  Tensor w = Tensor::zeros({3}, DType::f64);
  compileRef("w[wrap(i+1)] += x[i]")(w, x); // indices 1, 2, 3 -> 0, 4 -> 1
  CHECK(w.toVector() == std::vector<double>{3, 5, 2});
}
