// Gradients of programs that write a tensor with several statements (a ':=' then '+=' / '=',
// an argument updated in place): each write makes a version, and a read of an earlier version
// needs that version's gradient (docs/GRADIENTS.md, "Versions"). Every row is checked against
// central finite differences in float64 on the interpreter and the CPU JIT, its gradient
// program differentiated again against finite differences of it, and the forms that are not
// differentiated are errors with a caret.
#include "TestSupport.h"
#include "dsl/Printer.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"
#include "grad/Differentiate.h"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

using einjit::DType;
using einjit::Shape;
using einjit::Tensor;

namespace {

struct Row {
  const char* program;
  std::map<std::string, Shape> shapes;
  std::vector<std::string> wrt = {};
};

const std::vector<Row>& rows() {
  static const std::vector<Row> r = {
      // The output e is read before its last write: de (passed in) reaches exp(x) through
      // the '+= 0' and through y.
      {"e[i] := exp(x[i])\ny[i] := e[i]*2\ne[i] += 0", {{"x", {5}}}},
      {"e[i] := exp(x[i])\ny[i] := e[i]*2\ne[i] += x[i]", {{"x", {5}}}},
      // '+=' of an expression of x that reads the old value in place.
      {"e[i] := exp(x[i])\ny[i] := e[i]*e[i]\ne[i] += x[i]*e[i]", {{"x", {5}}}},
      // '=' over every element, reading the old value (in place, and through a snapshot).
      {"e[i] := exp(x[i])\ny[i] := e[i]*e[i]\ne[i] = sin(e[i]) + x[i]", {{"x", {5}}}},
      {"e[i] := exp(x[i])\ny[i] := e[i]*2\ne[i] = e[pad(i-1)] * x[i]", {{"x", {6}}}},
      {"A[i,j] := sin(x[i,j])\ny[i] := A[i,j]*A[i,j]\nA[i,j] = A[j,i]*x[i,j]", {{"x", {4, 4}}}},
      // '=' that reads nothing of the old value: the old version's gradient is y's only.
      {"e[i] := exp(x[i])\ny[i] := e[i]*w[i]\ne[i] = x[i]*x[i]", {{"x", {5}}, {"w", {5}}}},
      // '+=' reading the old value through a snapshot (a reduction over it).
      {"e[i] := sin(x[i])\ny[i] := e[i]*2\ne[i] += e[j]*e[i]", {{"x", {5}}}},
      // Two reads before the update, and a read after it.
      {"e[i] := exp(x[i])\na[i] := e[i]*3\nb[i] := e[i]*e[i]\ne[i] += x[i]\n"
       "z[i] := e[i] * a[i] + b[i]",
       {{"x", {5}}}},
      // Three versions, the middle one read (a copy of it in the gradient program), the last
      // one read too.
      {"e[i] := exp(x[i])\ny[i] := e[i]*2\ne[i] += x[i]\ne[i] += e[i]*x[i]\nz[i] := e[i]*e[i]",
       {{"x", {5}}}},
      {"e[i] := exp(x[i])\ny[i] := e[i]*2\ne[i] += x[i]\nq[i] := e[i]*e[i]\ne[i] = e[i]*x[i]",
       {{"x", {5}}}},
      // A (max) '=' over every element reading the old value (a snapshot and stored summands),
      // a '+=' reducing over the old value with a read after it, a strided '+=' on some
      // elements (the others pass the gradient on unchanged).
      {"e[i] := x[i]*2\ny[i] := e[i]*e[i]\n(max) e[i] = A[i,j]*e[i]",
       {{"x", {4}}, {"A", {4, 3}}}},
      {"e[i] := x[i]*2\ny[i] := e[i]*e[i]\ne[i] += A[i,j]*e[j]\nz[i] := e[i]*x[i]",
       {{"x", {4}}, {"A", {4, 4}}}},
      {"e[i] := x[i]*2\ny[i] := e[i]*e[i]\ne[2i] += x[i]*e[2i] where i in 0:2", {{"x", {4}}}},
      // A scalar.
      {"s := x[i]*x[i]\ny := s*2\ns += x[i]", {{"x", {5}}}},
      // Arguments updated in place after a read: p's first value carries no gradient, the
      // versions the program computes do.
      {"p[i] += x[i]\ny[i] := p[i]*2\np[i] += x[i]*3", {{"x", {5}}, {"p", {5}}}, {"x"}},
      {"y[i] := x[i]*2 + p[i]\np[i] = p[i]*0.5 + y[i]", {{"x", {5}}, {"p", {5}}}, {"x"}},
      {"p[i] += x[i]\ny[i] := p[i]*2\np[i] = p[i]*0.5 + y[i]", {{"x", {5}}, {"p", {5}}}, {"x"}},
      // 2-D with reductions: a row sum read between two versions, a column sum after.
      {"e[i,j] := x[i,j]*w[j]\ns[i] := e[i,j]\ne[i,j] += s[i]*x[i,j]\nt[j] := e[i,j]",
       {{"x", {3, 4}}, {"w", {4}}}},
      {"e[i,j] := x[i,j]*w[j]\ns[i] := e[i,j]*e[i,j]\ne[i,j] = e[i,j]*s[i]\nt[j] := e[i,j]",
       {{"x", {3, 4}}, {"w", {4}}}},
      // A (max) over an earlier version: its first maximum found on that version.
      {"e[i,j] := x[i,j]*w[j]\n(max) m[i] := e[i,j]\ne[i,j] += m[i]\nt[j] := e[i,j]*e[i,j]",
       {{"x", {3, 4}}, {"w", {4}}}},
  };
  return r;
}

} // namespace

TEST_CASE("gradient versions: central finite differences in float64") {
  for (const Row& row : rows()) {
    std::string program = row.program;
    CAPTURE(program);
    for (einjit::Device dev : {einjit::Device::reference(), einjit::Device::cpu()}) {
      CAPTURE(dev.name());
      einjit::test::checkGradcheckPasses(
          [&] { return einjit::gradcheck(row.program, row.shapes, {}, row.wrt, 7, 1e-6, dev); });
    }
  }
}

TEST_CASE("gradient versions: the gradient programs differentiate again (HVPs)") {
  for (const Row& row : rows()) {
    std::string program = row.program;
    CAPTURE(program);
    try {
      einjit::Options opt;
      opt.defaultDType = DType::f64;
      einjit::Kernel fwd = einjit::compile(row.program, opt);
      std::map<std::string, Tensor> in;
      std::uint64_t seed = 3;
      for (const auto& [n, s] : row.shapes) in[n] = Tensor::random(s, DType::f64, ++seed);
      einjit::Outputs y = fwd.call(in, {});
      einjit::Kernel back = fwd.gradient(row.wrt);
      std::map<std::string, Shape> shapes;
      std::map<std::string, double> scalars;
      for (std::size_t i = 0; i < y.size(); ++i) {
        if (y[i].rank() == 0)
          scalars[back.gradientInputs()[i]] = 0.7;
        else
          shapes[back.gradientInputs()[i]] = y[i].shape();
      }
      for (const auto& n : back.tensorArguments())
        if (!shapes.count(n)) shapes[n] = row.shapes.at(n);
      einjit::GradCheckResult r = einjit::gradcheck(back.source(), shapes, scalars, {}, 13);
      for (std::size_t i = 0; i < r.inputs.size(); ++i) {
        CAPTURE(r.inputs[i]);
        CHECK(r.maxRelativeError[i] <= 1e-6);
      }
      CHECK_MESSAGE(r.passed, r.why);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << std::string(e.what()));
    }
  }
}

TEST_CASE("gradient versions: a passed-in output gradient is copied, not written") {
  auto g = einjit::grad::differentiate(
      einjit::dsl::check("e[i] := exp(x[i])\ny[i] := e[i]*2\ne[i] += 0"), {"x"});
  CHECK(einjit::dsl::printProgram(g.program) ==
        "de_1[u0] := de[u0] where u0 in 0:size(x, 0)\n"
        "de_1[i] += dy[i] * 2 where i in 0:size(x, 0)\n"
        "dx[i] := de_1[i] * exp(x[i]) where i in 0:size(x, 0)");
  // By hand: y = 2 e1, e2 = e1 + x, e1 = exp(x): dx = de + (de + 2 dy) exp(x).
  einjit::Options opt;
  opt.defaultDType = DType::f64;
  einjit::Kernel back =
      einjit::compile("e[i] := exp(x[i])\ny[i] := e[i]*2\ne[i] += x[i]", opt).gradient({"x"});
  Tensor x = Tensor::fromValues({2}, {0.5, -1.0}, DType::f64);
  Tensor dy = Tensor::fromValues({2}, {1.0, 2.0}, DType::f64);
  Tensor de = Tensor::fromValues({2}, {3.0, -1.0}, DType::f64);
  std::vector<double> de0 = de.toVector();
  einjit::Outputs out = back.call({{"x", x}, {"dy", dy}, {"de", de}}, {});
  std::vector<double> dx = out[std::string_view("dx")].toVector();
  REQUIRE(dx.size() == 2);
  CHECK(dx[0] == doctest::Approx(3.0 + (3.0 + 2.0) * std::exp(0.5)));
  CHECK(dx[1] == doctest::Approx(-1.0 + (-1.0 + 4.0) * std::exp(-1.0)));
  CHECK(de.toVector() == de0); // the caller's gradient is unchanged
}

TEST_CASE("gradient versions: what is not differentiated is an error with a caret") {
  auto fails = [](const char* prog, const char* what, int line, int column) {
    std::string program = prog;
    CAPTURE(program);
    einjit::test::checkCaretError([&] { einjit::grad::differentiate(einjit::dsl::check(prog), {}); }, what, line, column);
  };
  // An '=' that keeps some old elements: their gradient would be dY with the others zeroed.
  fails("e[i] := exp(x[i])\ny[i] := e[i]*2\ne[i] = 0 where i in 0:2", "overwrites some of the", 3,
        6);
  fails("e[i] := exp(x[i])\ny[i] := e[i]*2\ne[2i] = x[2i] where i in 0:2",
        "overwrites some of the", 3, 7);
  // (max) '+=' loses the value it combines with, also when only the old version needs it.
  fails("e[i] := exp(x[i])\ny[i] := e[i]*2\n(max) e[i] += 1", "with a (max) reduction", 3, 12);
  // The gradient needs a version of an argument, which the gradient program does not have.
  fails("p[i] += x[i]\ny[i] := p[i]*p[i]\np[i] += x[i]*3", "changes in place", 1, 1);
}
