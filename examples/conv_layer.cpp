// A custom layer from index notation: a strided 3x3 convolution followed by a bias and a ReLU,
// as a two-statement program; its result against plain loops, its gradients against finite
// differences, and what a mismatched shape looks like.
// Run: ./build/examples/example_conv_layer
#include "Check.h"

#include <algorithm>
#include <iostream>

int main() {
  // t is an intermediate; y, the program's output, is what no later statement reads.
  const std::string source = R"(
    t[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]
    y[n,o,h,w] := relu(t[n,o,h,w] + bias[o]))";
  auto layer = einjit::compile(source);
  std::cout << layer.source() << "\n\n" << layer.ranges() << '\n';

  const int batch = 2, in = 3, out = 4, size = 9, taps = 3, outSize = (size - taps) / 2 + 1;
  auto x = einjit::Tensor::random({batch, in, size, size}, einjit::DType::f32, 1);
  auto k = einjit::Tensor::random({out, in, taps, taps}, einjit::DType::f32, 2);
  auto bias = einjit::Tensor::random({out}, einjit::DType::f32, 3);
  einjit::Tensor y = layer(x, k, bias); // arguments in order of first appearance
  std::cout << "y has shape " << y.shapeString() << '\n';

  std::vector<double> want;
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < out; ++o)
      for (int h = 0; h < outSize; ++h)
        for (int w = 0; w < outSize; ++w) {
          double t = bias.get({o});
          for (int c = 0; c < in; ++c)
            for (int a = 0; a < taps; ++a)
              for (int b = 0; b < taps; ++b)
                t += x.get({n, c, 2 * h + a, 2 * w + b}) * k.get({o, c, a, b});
          want.push_back(std::max(t, 0.0));
        }
  example::expectClose("conv + bias + relu", y, want);
  example::expectGradient(
      "conv + bias + relu", source,
      {{"x", {batch, in, size, size}}, {"k", {out, in, taps, taps}}, {"bias", {out}}});

  // Mistakes are errors with a caret under the offending part of the program.
  auto wrong = einjit::Tensor::random({out, in + 2, taps, taps}, einjit::DType::f32, 2);
  try {
    layer(x, wrong, bias);
    std::printf("FAIL a kernel with 5 input channels for an input of 3 was accepted\n");
    ++example::failures;
  } catch (const einjit::Error& e) {
    std::cout << "as expected, a mismatched shape is reported:\n" << e.what() << '\n';
  }
  return example::result();
}
