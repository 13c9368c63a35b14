// An embedding bag: each row of y is the sum of the embedding rows its bag of token ids picks
// (a gather), and the gradient with respect to the table is a scatter (dE[tok[b,j], d] += ...).
// Run: ./build/examples/example_embedding_bag
#include "Check.h"

int main() {
  const std::string source = "y[b,d] := E[tok[b,j], d]";
  auto bag = einjit::compile(source);
  const int vocab = 20, dim = 6, bags = 5, perBag = 4;
  auto E = einjit::Tensor::random({vocab, dim}, einjit::DType::f32, 1);
  auto tok = einjit::Tensor::randomInt({bags, perBag}, 0, vocab, einjit::DType::i64, 2);
  einjit::Tensor y = bag(E, tok);

  std::vector<double> want(bags * dim, 0.0);
  for (int b = 0; b < bags; ++b)
    for (int j = 0; j < perBag; ++j)
      for (int d = 0; d < dim; ++d)
        want[b * dim + d] += E.get({static_cast<std::int64_t>(tok.get({b, j})), d});
  example::expectClose("embedding bag", y, want);

  auto backward = bag.gradient({"E"});
  std::printf("%s  (scatters: %zu)\n", backward.source().c_str(), backward.scatters().size());
  example::expectGradient("embedding bag", source, {{"E", {vocab, dim}}, {"tok", {bags, perBag}}});
  return example::result();
}
