// A custom layer from one line of index notation: a strided 3x3 convolution followed by a bias
// and a ReLU, as a two-statement program. Build: part of the default CMake build; run:
// ./build/examples/example_conv_layer
#include "einjit/einjit.h"

#include <iostream>

int main() {
  try {
    // t is an intermediate; y, the program's output, is what no later statement reads.
    auto layer = einjit::compile(R"(
      t[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]
      y[n,o,h,w] := relu(t[n,o,h,w] + bias[o])
    )");
    std::cout << layer.source() << "\n\n" << layer.ranges() << '\n';

    einjit::Tensor x = einjit::Tensor::random({1, 3, 9, 9}, einjit::DType::f32, 1);
    einjit::Tensor k = einjit::Tensor::random({4, 3, 3, 3}, einjit::DType::f32, 2);
    einjit::Tensor bias = einjit::Tensor::random({4}, einjit::DType::f32, 3);
    einjit::Tensor y = layer(x, k, bias); // arguments in order of first appearance
    std::cout << "y has shape " << y.shapeString() << "; y[0,0,0,0] = " << y.get({0, 0, 0, 0})
              << '\n';

    // Mistakes are errors with a caret under the offending part of the program.
    einjit::Tensor wrong = einjit::Tensor::random({4, 5, 3, 3}, einjit::DType::f32, 2);
    layer(x, wrong, bias);
  } catch (const einjit::Error& e) {
    std::cout << "\nas expected, a mismatched shape is reported:\n" << e.what() << '\n';
  }
  return 0;
}
