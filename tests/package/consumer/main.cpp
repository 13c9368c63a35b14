// A user's program against the public headers only: a matrix product, its gradient and a caret
// diagnostic, each checked against values worked out by hand.
#include <einjit/einjit.h>

// einjit::einjit must not push its private include paths onto its users.
#if __has_include(<llvm/Config/llvm-config.h>)
#error "LLVM's include directory leaked into a user of einjit::einjit"
#endif
#if __has_include("dsl/Parser.h")
#error "einjit's source root leaked into a user of einjit::einjit"
#endif

#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

namespace {
int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}
} // namespace

int main() try {
  auto mm = einjit::compile("c[i,j] += a[i,k] * b[k,j]");
  // a = [[1,2],[3,4]], b = [[5,6],[7,8]]: c = [[19,22],[43,50]].
  auto a = einjit::Tensor::fromValues({2, 2}, {1, 2, 3, 4});
  auto b = einjit::Tensor::fromValues({2, 2}, {5, 6, 7, 8});
  auto c = einjit::Tensor::zeros({2, 2});
  mm(c, a, b); // tensors in order of first appearance: c first
  const double want[] = {19, 22, 43, 50};
  auto got = c.toVector();
  for (int i = 0; i < 4; ++i) expect(got[i] == want[i], "c = a b"); // false on NaN

  // dA = dC b^T with dC all ones: [[11,15],[11,15]].
  auto grad = mm.gradient({"a"});
  einjit::Tensor da = grad.call(
      {{"dc", einjit::Tensor::full({2, 2}, 1.0)}, {"a", a}, {"b", b}, {"c", c}});
  auto gotGrad = da.toVector();
  const double wantGrad[] = {11, 15, 11, 15};
  for (int i = 0; i < 4; ++i) expect(gotGrad[i] == wantGrad[i], "da = dc b^T");

  try {
    einjit::compile("y[i] := x[i] +* 2");
    expect(false, "a syntax error throws");
  } catch (const einjit::Error& e) {
    std::string text = e.what();
    expect(e.line() == 1 && e.column() > 0, "the error has a position");
    expect(text.find('^') != std::string::npos, "the error text has a caret");
  }
  std::printf(failures == 0 ? "consumer: ok\n" : "consumer: %d failures\n", failures);
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::printf("FAILED: %s\n", e.what());
  return 1;
}
