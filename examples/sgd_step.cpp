// An optimizer step: SGD with momentum and weight decay over a parameter tensor,
//   v' = mu v + (g + wd w),  w' = w - lr v'.
// The step writes new tensors (w' and v' are ':=' outputs): in-place optimizer statements are
// not in the language yet; a training loop swaps the new tensors in for the old ones.
// Run: ./build/examples/example_sgd_step
#include "Check.h"

int main() {
  // vn is read by the second statement, so it is an intermediate, not an output: kept so that
  // the call's results hold it too.
  einjit::Options keep;
  keep.keepIntermediates = true;
  auto step = einjit::compile(R"(
    vn[i,j] := mu * v[i,j] + g[i,j] + wd * w[i,j]
    wn[i,j] := w[i,j] - lr * vn[i,j])",
                              keep);
  const int rows = 7, cols = 5;
  const double mu = 0.9, wd = 1e-4, lr = 0.05;
  auto w = einjit::Tensor::random({rows, cols}, einjit::DType::f32, 1);
  auto v = einjit::Tensor::random({rows, cols}, einjit::DType::f32, 2);
  auto g = einjit::Tensor::random({rows, cols}, einjit::DType::f32, 3);
  std::printf("arguments: tensors");
  for (const auto& n : step.tensorArguments()) std::printf(" %s", n.c_str());
  std::printf(", scalars");
  for (const auto& n : step.scalarArguments()) std::printf(" %s", n.c_str());
  std::printf("\n");
  auto r = step.call({{"w", w}, {"v", v}, {"g", g}}, {{"mu", mu}, {"wd", wd}, {"lr", lr}});

  std::vector<double> wantV, wantW;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      double vn = mu * v.get({i, j}) + g.get({i, j}) + wd * w.get({i, j});
      wantV.push_back(vn);
      wantW.push_back(w.get({i, j}) - lr * vn);
    }
  example::expectClose("momentum", r["vn"], wantV);
  example::expectClose("parameters", r["wn"], wantW);
  return example::result();
}
