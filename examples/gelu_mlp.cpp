// A transformer MLP block: y = W2 GELU(W1 x + b1) + b2 (GELU with erf), and its gradients.
// Run: ./build/examples/example_gelu_mlp
#include "Check.h"

#include <cmath>

int main() {
  const std::string source = R"(
    t[b,h] := x[b,i] * w1[h,i]
    a[b,h] := 0.5 * (t[b,h] + b1[h]) * (1 + erf((t[b,h] + b1[h]) / sqrt(2)))
    u[b,o] := a[b,h] * w2[o,h]
    y[b,o] := u[b,o] + b2[o])";
  auto mlp = einjit::compile(source);
  const int batch = 3, in = 8, hidden = 16, out = 8;
  auto x = einjit::Tensor::random({batch, in}, einjit::DType::f32, 1);
  auto w1 = einjit::Tensor::random({hidden, in}, einjit::DType::f32, 2);
  auto b1 = einjit::Tensor::random({hidden}, einjit::DType::f32, 3);
  auto w2 = einjit::Tensor::random({out, hidden}, einjit::DType::f32, 4);
  auto b2 = einjit::Tensor::random({out}, einjit::DType::f32, 5);
  einjit::Tensor y = mlp(x, w1, b1, w2, b2);

  std::vector<double> want;
  for (int b = 0; b < batch; ++b) {
    std::vector<double> a(hidden);
    for (int h = 0; h < hidden; ++h) {
      double t = b1.get({h});
      for (int i = 0; i < in; ++i) t += x.get({b, i}) * w1.get({h, i});
      a[h] = 0.5 * t * (1 + std::erf(t / std::sqrt(2.0)));
    }
    for (int o = 0; o < out; ++o) {
      double u = b2.get({o});
      for (int h = 0; h < hidden; ++h) u += a[h] * w2.get({o, h});
      want.push_back(u);
    }
  }
  example::expectClose("GELU MLP", y, want);
  example::expectGradient("GELU MLP", source,
                          {{"x", {batch, in}}, {"w1", {hidden, in}}, {"b1", {hidden}},
                           {"w2", {out, hidden}}, {"b2", {out}}});
  return example::result();
}
