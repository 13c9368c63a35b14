// Layer normalisation over the last dimension with a gain and a bias, and its gradients.
// Run: ./build/examples/example_layernorm
#include "Check.h"

#include <cmath>

int main() {
  const std::string source = R"(
    mu[i] := x[i,j] / size(x,1)
    d[i,j] := x[i,j] - mu[i]
    var[i] := d[i,j]^2 / size(x,1)
    y[i,j] := d[i,j] / sqrt(var[i] + eps) * g[j] + b[j])";
  auto layernorm = einjit::compile(source);
  const int rows = 4, cols = 10;
  const double eps = 1e-5;
  auto x = einjit::Tensor::random({rows, cols}, einjit::DType::f32, 1);
  auto g = einjit::Tensor::random({cols}, einjit::DType::f32, 2);
  auto b = einjit::Tensor::random({cols}, einjit::DType::f32, 3);
  einjit::Tensor y = layernorm(x, g, b, eps); // tensors, then the scalar eps

  std::vector<double> want;
  for (int i = 0; i < rows; ++i) {
    double mu = 0, var = 0;
    for (int j = 0; j < cols; ++j) mu += x.get({i, j}) / cols;
    for (int j = 0; j < cols; ++j) var += std::pow(x.get({i, j}) - mu, 2) / cols;
    for (int j = 0; j < cols; ++j)
      want.push_back((x.get({i, j}) - mu) / std::sqrt(var + eps) * g.get({j}) + b.get({j}));
  }
  example::expectClose("layernorm", y, want);
  example::expectGradient("layernorm", source, {{"x", {rows, cols}}, {"g", {cols}}, {"b", {cols}}},
                          {{"eps", eps}});
  return example::result();
}
