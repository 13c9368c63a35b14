#pragma once
// The interpreter's table of programs with hand-worked results (tests/test_interpreter.cpp),
// shared with the JIT tests (tests/test_jit.cpp), which run every row on both devices.
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace einjit::test::interp {

using einjit::Arg;
using einjit::DType;
using einjit::Outputs;
using einjit::Shape;
using einjit::Tensor;

constexpr double kInf = std::numeric_limits<double>::infinity();

inline Tensor F64(const Shape& shape, const std::vector<double>& values) {
  return Tensor::fromValues(shape, values, DType::f64);
}

inline Tensor I64(const Shape& shape, const std::vector<double>& values) {
  return Tensor::fromValues(shape, values, DType::i64);
}

inline Tensor I32(const Shape& shape, const std::vector<double>& values) {
  return Tensor::fromValues(shape, values, DType::i32);
}

inline std::string shapeText(const Shape& s) {
  std::ostringstream o;
  o << "{";
  for (std::size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
  o << "}";
  return o.str();
}

inline bool close(double got, double want) {
  if (std::isinf(want) || std::isinf(got)) return got == want;
  if (std::isnan(want) || std::isnan(got)) return false;
  double scale = std::max({1.0, std::fabs(got), std::fabs(want)});
  return std::fabs(got - want) <= 1e-12 * scale;
}

// Checks shape and every element (row-major) within 1e-12 relative (absolute below 1).
inline void checkTensor(const Tensor& t, const Shape& shape, const std::vector<double>& want) {
  REQUIRE(t.defined());
  INFO("got shape " << shapeText(t.shape()) << ", want " << shapeText(shape));
  CHECK(t.shape() == shape);
  std::vector<double> got = t.toVector();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(close(got[i], want[i]));
  }
}

// The arguments with every tensor copied: in-place rows change the tensors they are given.
inline std::vector<Arg> cloned(const std::vector<Arg>& args) {
  std::vector<Arg> out;
  for (const Arg& a : args) out.push_back(a.isTensor() ? Arg(a.tensor().clone()) : a);
  return out;
}

struct Row {
  std::string program;
  std::vector<Arg> args;    // positional: tensors by first appearance, then scalars
  Shape shape;              // expected shape of the checked tensor
  std::vector<double> want; // expected values, row-major
  std::string output = "";  // tensor to check by name; empty: the first program output
};

// One Adam step: the program and its hand-written loop (in-place rows of rows()).
inline const char* const kAdam =
    "m[i] = b1*m[i] + (1-b1)*g[i]; v[i] = b2*v[i] + (1-b2)*g[i]*g[i]; "
    "p[i] = p[i] - lr*(m[i]/c1)/(sqrt(v[i]/c2) + eps)";

inline std::vector<double> adamStep() {
  std::vector<double> m = {0.1, -0.2, 0}, g = {0.5, 1, -2}, v = {0.01, 0.04, 0}, p = {1, 2, 3};
  const double b1 = 0.9, b2 = 0.999, lr = 0.01, c1 = 1 - b1 * b1, c2 = 1 - b2 * b2, eps = 1e-8;
  for (std::size_t i = 0; i < p.size(); ++i) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    p[i] = p[i] - lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
  }
  return p;
}

inline std::vector<Row> rows() {
  const double e0 = std::exp(0.0), e1 = std::exp(1.0), em1 = std::exp(-1.0);
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  auto misc = [](double v) {
    return std::sqrt(v) + std::log(v) + std::tanh(v) + std::sin(v) * std::cos(v);
  };
  return {
      // ---- contractions ---------------------------------------------------------------------
      // matmul: [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]]
      {"C[i,k] := A[i,j]*B[j,k]",
       {F64({2, 3}, {1, 2, 3, 4, 5, 6}), F64({3, 2}, {7, 8, 9, 10, 11, 12})},
       {2, 2},
       {58, 64, 139, 154}},
      // A^T B with A = [[1,2],[3,4],[5,6]], B = [[1,0],[0,1],[1,1]]
      {"C[i,k] := A[j,i]*B[j,k]",
       {F64({3, 2}, {1, 2, 3, 4, 5, 6}), F64({3, 2}, {1, 0, 0, 1, 1, 1})},
       {2, 2},
       {6, 8, 8, 10}},
      // matrix-vector
      {"y[i] := x[i,j]*w[j]",
       {F64({2, 3}, {1, 2, 3, 4, 5, 6}), F64({3}, {1, -1, 2})},
       {2},
       {5, 11}},
      // batched matmul: batch 0 times identity, batch 1 a row swap of [[2,3],[4,5]]
      {"C[b,i,k] := A[b,i,j]*B[b,j,k]",
       {F64({2, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0}), F64({2, 2, 2}, {1, 0, 0, 1, 2, 3, 4, 5})},
       {2, 2, 2},
       {1, 2, 3, 4, 4, 5, 2, 3}},
      // permuted contraction, i=1 j=2 b=2 k=2 (worked out element by element)
      {"C[i,k,b] := A[i,j,b]*B[b,k,j]",
       {F64({1, 2, 2}, {1, 2, 3, 4}), F64({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})},
       {1, 2, 2},
       {7, 34, 15, 46}},
      // transpose
      {"y[j,i] := x[i,j]", {F64({2, 3}, {1, 2, 3, 4, 5, 6})}, {3, 2}, {1, 4, 2, 5, 3, 6}},
      // trace (scalar output)
      {"s := A[i,i]", {F64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}, {}, {15}},
      // diagonal extraction
      {"y[i] := A[i,i]", {F64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}, {3}, {1, 5, 9}},
      // diagonal write: the rest is zero
      {"D[i,i] := v[i]", {F64({3}, {1, 2, 3})}, {3, 3}, {1, 0, 0, 0, 2, 0, 0, 0, 3}},
      // outer product
      {"y[i,j] := a[i]*b[j]", {F64({2}, {1, 2}), F64({3}, {3, 4, 5})}, {2, 3}, {3, 4, 5, 6, 8, 10}},
      // dot product of three vectors, scalar output
      {"s := a[i]*b[i]*c[i]",
       {F64({3}, {1, 2, 3}), F64({3}, {4, 5, 6}), F64({3}, {1, 0, -1})},
       {},
       {1 * 4 + 0 - 3 * 6}},
      // the whole right side is the summand: b[i] is added once per k (3 times)
      {"y[i] := a[i,k] + b[i]",
       {F64({2, 3}, {1, 2, 3, 4, 5, 6}), F64({2}, {10, 20})},
       {2},
       {36, 75}},

      // ---- reductions -----------------------------------------------------------------------
      {"s[i] := x[i,j]", {F64({2, 3}, {1, 2, 3, 4, 5, 6})}, {2}, {6, 15}},
      {"(+) s[i] := x[i,j]", {F64({2, 3}, {1, 2, 3, 4, 5, 6})}, {2}, {6, 15}},
      // product, second row contains a zero
      {"(*) p[i] := x[i,j]", {F64({2, 3}, {1, 2, 3, 4, 0, 6})}, {2}, {6, 0}},
      {"(*) p := x[i]", {F64({4}, {1, 2, 3, 4})}, {}, {24}},
      // max with ties (3 twice) and an all-negative row (identity is -inf, not 0)
      {"(max) m[i] := x[i,j]", {F64({2, 3}, {3, -1, 3, -5, -2, -7})}, {2}, {3, -2}},
      {"(min) m[i] := x[i,j]", {F64({2, 3}, {3, -1, 3, -5, -2, -7})}, {2}, {-1, -7}},
      // min of an all-positive vector (identity is +inf, not 0)
      {"(min) m := x[i]", {F64({3}, {3, 1, 2})}, {}, {1}},
      {"(max) m := x[i,j]", {F64({2, 2}, {-3, -1, -2, -4})}, {}, {-1}},
      // empty reduction ranges give the identity
      {"s[i] := x[i,j]", {F64({2, 0}, {})}, {2}, {0, 0}},
      {"(*) s[i] := x[i,j]", {F64({2, 0}, {})}, {2}, {1, 1}},
      {"(max) s[i] := x[i,j]", {F64({2, 0}, {})}, {2}, {-kInf, -kInf}},
      {"(min) s[i] := x[i,j]", {F64({2, 0}, {})}, {2}, {kInf, kInf}},
      {"(*) p := x[i]", {F64({0}, {})}, {}, {1}},
      {"(max) y[i] := x[i] + k where k in 0:0", {F64({2}, {5, 6})}, {2}, {-kInf, -kInf}},

      // ---- convolutions and affine subscripts ------------------------------------------------
      // conv1d valid: y[i] = x[i] + 2 x[i+1] - x[i+2], i in 0:3
      {"y[i] := x[i+k]*w[k]", {F64({5}, {1, 2, 3, 4, 5}), F64({3}, {1, 2, -1})}, {3}, {2, 4, 6}},
      // conv2d valid: x[r,c] = 4r+c+1, w = [[1,2],[3,4]] => y = 10 (4i+j+1) + 34
      {"y[i,j] := x[i+a,j+b]*w[a,b]",
       {F64({4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}),
        F64({2, 2}, {1, 2, 3, 4})},
       {3, 3},
       {44, 54, 64, 84, 94, 104, 124, 134, 144}},
      // strided conv1d: x of 8, 2i+2 <= 7 => i in 0:3 (floor)
      {"y[i] := x[2i+k]*w[k]",
       {F64({8}, {1, 2, 3, 4, 5, 6, 7, 8}), F64({3}, {1, 1, 1})},
       {3},
       {6, 12, 18}},
      // same with explicit '*'
      {"y[i] := x[2*i+k]*w[k]",
       {F64({8}, {1, 2, 3, 4, 5, 6, 7, 8}), F64({3}, {1, 1, 1})},
       {3},
       {6, 12, 18}},
      // strided sum with the window given by where: pairs (1+2, 3+4, 5+6)
      {"y[i] := x[2i+k] where k in 0:2", {F64({6}, {1, 2, 3, 4, 5, 6})}, {3}, {3, 7, 11}},
      // odd elements: 2i+1 <= 5
      {"y[i] := x[2*i+1]", {F64({6}, {1, 2, 3, 4, 5, 6})}, {3}, {2, 4, 6}},
      // dilated conv: y[i] = x[i] + 10 x[i+2], i in 0:4
      {"y[i] := x[i+2k]*w[k]",
       {F64({6}, {1, 2, 3, 4, 5, 6}), F64({2}, {1, 10})},
       {4},
       {31, 42, 53, 64}},
      // padded ('same') conv: y[i] = x[i-1] + 2 x[i] + 3 x[i+1], zeros outside
      {"y[i] := x[pad(i+k-1)]*w[k] where i in 0:size(x,0)",
       {F64({4}, {1, 2, 3, 4}), F64({3}, {1, 2, 3})},
       {4},
       {8, 14, 20, 11}},
      // 2x2 max-pool with stride 2; the bottom-left window is all negative
      {"(max) y[i,j] := x[2i+a,2j+b] where a in 0:2, b in 0:2",
       {F64({4, 4}, {1, 5, 2, 0, 3, 2, 8, 1, -3, -1, 4, 4, -2, -7, 3, 9})},
       {2, 2},
       {5, 8, -1, 9}},
      // output range starting above 0: i in 1:5, row 0 is zero; y[i,0]=x[i], y[i,1]=10x[i-1]
      {"y[i,j] := x[i-j]*w[j]",
       {F64({5}, {1, 2, 3, 4, 5}), F64({2}, {1, 10})},
       {5, 2},
       {0, 0, 2, 10, 3, 20, 4, 30, 5, 40}},
      // i+j-k with j,k in 0:2 => i in 1:4; y[i] = 5x[i] + 2x[i-1] + 3x[i+1]
      {"y[i] := x[i+j-k]*w[j,k]",
       {F64({5}, {1, 2, 3, 4, 5}), F64({2, 2}, {1, 2, 3, 4})},
       {4},
       {0, 21, 31, 41}},
      // kernel longer than the input: i in 0:0, an empty output
      {"y[i] := x[i+k]*w[k]", {F64({2}, {1, 2}), F64({3}, {1, 1, 1})}, {0}, {}},
      // a ':=' output whose where range starts above 0: element 0 is zero
      {"y[i] := x[i] where i in 1:3", {F64({4}, {5, 6, 7, 8})}, {3}, {0, 6, 7}},
      // reversal through a negated index
      {"y[i] := x[3-i]", {F64({4}, {1, 2, 3, 4})}, {4}, {4, 3, 2, 1}},

      // ---- clamp / wrap / pad ----------------------------------------------------------------
      {"y[i] := x[clamp(i-1)] where i in 0:size(x,0)", {F64({4}, {5, 6, 7, 8})}, {4}, {5, 5, 6, 7}},
      {"y[i] := x[clamp(i-2)] where i in 0:6", {F64({3}, {1, 2, 3})}, {6}, {1, 1, 1, 2, 3, 3}},
      {"y[i] := x[pad(i-2)] where i in 0:6", {F64({3}, {1, 2, 3})}, {6}, {0, 0, 1, 2, 3, 0}},
      // 3-tap box filter with edge replication
      {"y[i] := x[clamp(i+k-1)]*w[k] where i in 0:size(x,0)",
       {F64({4}, {1, 2, 3, 4}), F64({3}, {1, 1, 1})},
       {4},
       {4, 6, 9, 11}},
      {"y[i] := x[wrap(i+1)] where i in 0:size(x,0)", {F64({4}, {5, 6, 7, 8})}, {4}, {6, 7, 8, 5}},
      {"y[i] := x[wrap(i-1)] where i in 0:size(x,0)", {F64({4}, {5, 6, 7, 8})}, {4}, {8, 5, 6, 7}},
      // more than one period away, both directions
      {"y[i] := x[wrap(i+5)] where i in 0:4", {F64({4}, {5, 6, 7, 8})}, {4}, {6, 7, 8, 5}},
      {"y[i] := x[wrap(i-5)] where i in 0:4", {F64({4}, {5, 6, 7, 8})}, {4}, {8, 5, 6, 7}},
      // roll the rows of a matrix by one
      {"y[i,j] := x[wrap(i-1),j] where i in 0:size(x,0)",
       {F64({3, 2}, {1, 2, 3, 4, 5, 6})},
       {3, 2},
       {5, 6, 1, 2, 3, 4}},

      // ---- gather ----------------------------------------------------------------------------
      // embedding lookup with a repeated token
      {"y[b,d] := E[tok[b],d]",
       {F64({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31}), I64({4}, {2, 0, 2, 3})},
       {4, 2},
       {20, 21, 0, 1, 20, 21, 30, 31}},
      {"y[b,d] := E[tok[b],d]",
       {F64({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31}), I32({3}, {1, 1, 1})},
       {3, 2},
       {10, 11, 10, 11, 10, 11}},
      // 2-d token tensor
      {"y[b,t,d] := E[tok[b,t],d]",
       {F64({3, 1}, {5, 6, 7}), I64({2, 2}, {2, 0, 1, 2})},
       {2, 2, 1},
       {7, 5, 6, 7}},
      // gather plus an affine offset
      {"y[b] := x[tok[b]+1]", {F64({4}, {10, 20, 30, 40}), I64({3}, {0, 2, 1})}, {3}, {20, 40, 30}},
      // gathered rows summed (bag of embeddings)
      {"y[d] := E[tok[b],d]",
       {F64({3, 2}, {1, 2, 10, 20, 100, 200}), I64({3}, {2, 2, 0})},
       {2},
       {201, 402}},

      // ---- scalar parameters -----------------------------------------------------------------
      {"y[i] := x[N-1-i]", {F64({4}, {1, 2, 3, 4}), 4}, {4}, {4, 3, 2, 1}},
      {"y[i] := x[N-1-i] where i in 0:N", {F64({4}, {1, 2, 3, 4}), 3}, {3}, {3, 2, 1}},
      {"y[i] := alpha * x[i] + beta", {F64({3}, {1, 2, 3}), 2.0, 0.5}, {3}, {2.5, 4.5, 6.5}},
      {"y[i] := x[i+S]*w[i] ",
       {F64({5}, {1, 2, 3, 4, 5}), F64({3}, {1, 1, 2}), 2},
       {3},
       {3, 4, 10}},

      // ---- index variables as values, masks ---------------------------------------------------
      {"y[i] := i * x[i]", {F64({4}, {5, 5, 5, 5})}, {4}, {0, 5, 10, 15}},
      {"y[i,j] := 10*i + j + x[i,j]",
       {F64({2, 3}, {0, 0, 0, 0, 0, 0.5})},
       {2, 3},
       {0, 1, 2, 10, 11, 12.5}},
      {"y[i,j] := (i <= j) ? a[i,j] : 0",
       {F64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})},
       {3, 3},
       {1, 2, 3, 0, 5, 6, 0, 0, 9}},
      // exclusive and inclusive prefix sums through a mask on the reduced index
      {"y[i] := (j < i) ? x[j] : 0 where i in 0:size(x,0)",
       {F64({4}, {1, 2, 3, 4})},
       {4},
       {0, 1, 3, 6}},
      {"y[i] := (j <= i) ? x[j] : 0 where i in 0:size(x,0)",
       {F64({4}, {1, 2, 3, 4})},
       {4},
       {1, 3, 6, 10}},
      // size() as a value
      {"y[i] := x[i] * size(x, 0)", {F64({3}, {1, 2, 3})}, {3}, {3, 6, 9}},

      // ---- arithmetic and functions ----------------------------------------------------------
      {"y[i] := 2 + 3*x[i] - x[i]/4", {F64({2}, {4, 8})}, {2}, {13, 24}},
      {"y[i] := x[i]^2", {F64({2}, {3, -2})}, {2}, {9, 4}},
      // ^ binds tighter than * and unary minus
      {"y[i] := x[i]^2 * 3", {F64({1}, {2})}, {1}, {12}},
      {"y[i] := -x[i]^2", {F64({1}, {3})}, {1}, {-9}},
      {"y[i] := exp(x[i])", {F64({3}, {0, 1, -1})}, {3}, {e0, e1, em1}},
      {"y[i] := sigmoid(x[i])", {F64({3}, {0, 2, -2})}, {3}, {0.5, sig(2), sig(-2)}},
      {"y[i] := relu(x[i])", {F64({3}, {-1, 0, 2.5})}, {3}, {0, 0, 2.5}},
      {"y[i] := abs(x[i])", {F64({3}, {-1.5, 2, 0})}, {3}, {1.5, 2, 0}},
      {"y[i] := erf(x[i])", {F64({3}, {0, 0.5, -1})}, {3}, {0, std::erf(0.5), std::erf(-1.0)}},
      {"y[i] := pow(x[i], 3)", {F64({3}, {2, -1, 0.5})}, {3}, {8, -1, 0.125}},
      {"y[i] := atan(x[i])", {F64({3}, {0, 1, -1})}, {3}, {0, M_PI / 4, -M_PI / 4}},
      {"y[i] := atan2(x[i], w[i])",
       {F64({4}, {1, 1, -1, 0}), F64({4}, {1, -1, -1, 1})},
       {4},
       {M_PI / 4, 3 * M_PI / 4, -3 * M_PI / 4, 0}},
      {"y[i] := log2(x[i])", {F64({3}, {1, 8, 0.25})}, {3}, {0, 3, -2}},
      {"y[i] := log10(x[i])", {F64({3}, {1, 10, 1000})}, {3}, {0, 1, 3}},
      {"y[i] := log1p(x[i])", {F64({2}, {0, 1e-300})}, {2}, {0, 1e-300}},
      {"y[i] := expm1(x[i])", {F64({2}, {0, -1e-300})}, {2}, {0, -1e-300}},
      {"y[i] := cbrt(x[i])", {F64({3}, {27, -8, 0})}, {3}, {3, -2, 0}},
      // Halves round away from zero.
      {"y[i] := round(x[i])", {F64({5}, {2.5, -2.5, 0.49, -0.5, 1.5})}, {5}, {3, -3, 0, -1, 2}},
      {"y[i] := sign(x[i])", {F64({3}, {3, -0.5, 0})}, {3}, {1, -1, 0}},
      {"y[i] := sqrt(x[i]) + log(x[i]) + tanh(x[i]) + sin(x[i]) * cos(x[i])",
       {F64({2}, {0.5, 2})},
       {2},
       {misc(0.5), misc(2)}},
      {"y[i] := min(x[i], w[i]) + 10*max(x[i], w[i])",
       {F64({2}, {1, 5}), F64({2}, {3, 2})},
       {2},
       {31, 52}},
      {"y[i] := floor(x[i])", {F64({3}, {1.5, -1.5, 2})}, {3}, {1, -2, 2}},
      {"y[i] := ceil(x[i])", {F64({3}, {1.5, -1.5, 2})}, {3}, {2, -1, 2}},
      {"y[i] := fdiv(x[i], 2)", {F64({3}, {7, -7, 6})}, {3}, {3, -4, 3}},
      {"y[i] := cdiv(x[i], 2)", {F64({3}, {7, -7, 6})}, {3}, {4, -3, 3}},
      // casts truncate toward zero
      {"y[i] := i32(x[i]) + i64(2*x[i])", {F64({2}, {2.75, -2.75})}, {2}, {7, -7}},
      {"y[i] := f32(x[i]) - x[i]", {F64({1}, {0.1})}, {1}, {static_cast<double>(0.1f) - 0.1}},
      {"y[i] := f64(x[i]) * 2", {F64({1}, {0.25})}, {1}, {0.5}},
      // '/' is real division, also between index values and integer constants
      {"y[i] := x[i] / 2", {F64({2}, {7, -7})}, {2}, {3.5, -3.5}},
      {"y[i] := i / 2 + 0*x[i]", {F64({4}, {9, 9, 9, 9})}, {4}, {0, 0.5, 1, 1.5}},
      // '%' is fmod (sign of the dividend)
      {"y[i] := x[i] % 3", {F64({3}, {7, -7, 7.5})}, {3}, {1, -1, 1.5}},
      {"y[i] := i % 3 + 0*x[i]", {F64({5}, {9, 9, 9, 9, 9})}, {5}, {0, 1, 2, 0, 1}},
      // comparisons give 1/0; logical operators
      {"y[i] := (x[i] > 1) + 2*(x[i] == 2) + 4*!(x[i] < 3)", {F64({3}, {1, 2, 3})}, {3}, {0, 3, 5}},
      {"y[i] := (x[i] > 0 && x[i] < 3) || x[i] == 10",
       {F64({4}, {-1, 1, 3, 10})},
       {4},
       {0, 1, 0, 1}},
      {"y[i] := x[i] != 2 ? x[i] : -1", {F64({3}, {1, 2, 3})}, {3}, {1, -1, 3}},

      // ---- multi-statement programs ----------------------------------------------------------
      // bias after a contraction: t = W^T x, y = t + b
      {"t[i,j] := w[k,i]*x[k,j]; y[i,j] := t[i,j] + b[i]",
       {F64({2, 2}, {1, 2, 3, 4}), F64({2, 1}, {1, 1}), F64({2}, {100, 200})},
       {2, 1},
       {104, 206}},
      // the intermediate by name
      {"t[i,j] := w[k,i]*x[k,j]; y[i,j] := t[i,j] + b[i]",
       {F64({2, 2}, {1, 2, 3, 4}), F64({2, 1}, {1, 1}), F64({2}, {100, 200})},
       {2, 1},
       {4, 6},
       "t"},
      // newline-separated, centred rows
      {"(max) m[i] := x[i,j]\ny[i,j] := x[i,j] - m[i]",
       {F64({2, 2}, {1, 3, -2, -5})},
       {2, 2},
       {-2, 0, 0, -3}},

      // ---- in-place statements: every read sees the values from before the statement ------
      // reads of the written element only: in place
      {"x[i] = x[i]*2 + 1", {F64({3}, {1, 2, 3})}, {3}, {3, 5, 7}, "x"},
      {"x[i] += x[i]*x[i]", {F64({3}, {1, 2, 3})}, {3}, {2, 6, 12}, "x"},
      {"A[i,i] = A[i,i] + 1", {F64({2, 2}, {1, 2, 3, 4})}, {2, 2}, {2, 2, 3, 5}, "A"},
      {"x[i] = x[i]*x[i] where i in 1:3", {F64({4}, {1, 2, 3, 4})}, {4}, {1, 4, 9, 4}, "x"},
      // other reads: a snapshot (in place, ascending i, would give 1, 3, 6 twice)
      {"x[i] = x[i] + x[pad(i-1)]", {F64({3}, {1, 2, 3})}, {3}, {1, 3, 5}, "x"},
      {"x[i] += x[pad(i-1)]", {F64({3}, {1, 2, 3})}, {3}, {1, 3, 5}, "x"},
      {"x[2*i] = x[2*i] + x[2*i+1]", {F64({4}, {1, 2, 3, 4})}, {4}, {3, 2, 7, 4}, "x"},
      {"A[i,j] = A[j,i]",
       {F64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})},
       {3, 3},
       {1, 4, 7, 2, 5, 8, 3, 6, 9},
       "A"},
      {"A[i,j] += A[j,i]", {F64({2, 2}, {1, 2, 3, 4})}, {2, 2}, {2, 5, 5, 8}, "A"},
      // reductions over the written tensor: s = W s, x += sum(x), x = max(x, max(x))
      {"s[i] = s[j]*W[i,j]", {F64({2}, {1, 2}), F64({2, 2}, {1, 2, 3, 4})}, {2}, {5, 11}, "s"},
      {"x[i] += x[j]", {F64({3}, {1, 2, 3})}, {3}, {7, 8, 9}, "x"},
      {"(max) x[i] += x[j]", {F64({3}, {3, 1, 2})}, {3}, {3, 3, 3}, "x"},
      // the whole right-hand side is the summand: 3*10 + (1+2+3)
      {"s = s + x[i]", {F64({}, {10}), F64({3}, {1, 2, 3})}, {}, {36}, "s"},
      // gathers from and scatters into the written tensor
      {"x[i] = x[idx[i]]", {F64({3}, {10, 20, 30}), I64({3}, {2, 0, 1})}, {3}, {30, 10, 20}, "x"},
      {"x[idx[i]] += x[i]", {F64({3}, {1, 2, 3}), I64({3}, {1, 1, 0})}, {3}, {4, 5, 3}, "x"},
      // multi-statement: later statements see the updated tensors (SGD with momentum)
      {"v[i] = mu*v[i] + g[i]; p[i] = p[i] - lr*v[i]",
       {F64({2}, {1, 2}), F64({2}, {1, 1}), F64({2}, {10, 20}), 0.5, 0.1},
       {2},
       {9.85, 19.8},
       "p"},
      {"v[i] = mu*v[i] + g[i]; p[i] = p[i] - lr*v[i]",
       {F64({2}, {1, 2}), F64({2}, {1, 1}), F64({2}, {10, 20}), 0.5, 0.1},
       {2},
       {1.5, 2},
       "v"},
      // Adam, one step (bias corrections c1 = 1 - b1^t, c2 = 1 - b2^t passed in)
      {kAdam,
       {F64({3}, {0.1, -0.2, 0}), F64({3}, {0.5, 1, -2}), F64({3}, {0.01, 0.04, 0}),
        F64({3}, {1, 2, 3}), 0.9, 0.999, 0.01, 1 - 0.9 * 0.9, 1 - 0.999 * 0.999, 1e-8},
       {3},
       adamStep(),
       "p"},
  };
}

} // namespace einjit::test::interp
