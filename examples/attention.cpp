// Scaled dot-product attention, softmax(Q K^T / sqrt(d)) V, as one einjit program, and its
// gradients with respect to Q, K and V. Build: part of the default CMake build; run:
// ./build/examples/example_attention
#include "Check.h"

#include <cmath>

int main() {
  const std::string source = R"(
    s[i,j] := q[i,d] * k[j,d] / sqrt(size(q,1))
    (max) m[i] := s[i,j]
    e[i,j] := exp(s[i,j] - m[i])
    z[i] := e[i,j]
    y[i,c] := e[i,j] * v[j,c] / z[i])";
  auto attention = einjit::compile(source);
  const int n = 6, m = 9, d = 8, c = 5;
  auto q = einjit::Tensor::random({n, d}, einjit::DType::f32, 1);
  auto k = einjit::Tensor::random({m, d}, einjit::DType::f32, 2);
  auto v = einjit::Tensor::random({m, c}, einjit::DType::f32, 3);
  einjit::Tensor y = attention(q, k, v);

  // Reference: the same formula with plain loops in double precision.
  std::vector<double> want(n * c, 0.0);
  for (int i = 0; i < n; ++i) {
    std::vector<double> p(m);
    double top = -INFINITY, sum = 0;
    for (int j = 0; j < m; ++j) {
      double s = 0;
      for (int t = 0; t < d; ++t) s += q.get({i, t}) * k.get({j, t});
      p[j] = s / std::sqrt(double(d));
      top = std::max(top, p[j]);
    }
    for (int j = 0; j < m; ++j) sum += (p[j] = std::exp(p[j] - top));
    for (int j = 0; j < m; ++j)
      for (int t = 0; t < c; ++t) want[i * c + t] += p[j] / sum * v.get({j, t});
  }
  example::expectClose("attention", y, want);

  // The backward pass is a program too: dq, dk, dv from dy and the inputs.
  auto backward = attention.gradient({"q", "k", "v"});
  std::printf("%s\n", backward.source().c_str());
  auto dy = einjit::Tensor::random({n, c}, einjit::DType::f32, 4);
  auto grads = backward.call({{"dy", dy}, {"q", q}, {"k", k}, {"v", v}});
  std::printf("dq %s, dk %s, dv %s\n", grads["dq"].shapeString().c_str(),
              grads["dk"].shapeString().c_str(), grads["dv"].shapeString().c_str());
  example::expectGradient("attention", source, {{"q", {n, d}}, {"k", {m, d}}, {"v", {m, c}}});
  return example::result();
}
