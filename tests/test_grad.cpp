// Gradients: every row is checked two independent ways on random shapes — against central
// finite differences in float64 (einjit::gradcheck), and against the naive scatter-form
// reverse pass run by the same interpreter — and its gradient program must print, reparse
// and check.
#include "GradTable.h"
#include "TestSupport.h"

#include "codegen/Interpreter.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"
#include "grad/Differentiate.h"
#include "runtime/RandomInputs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

using einjit::DType;
using einjit::Shape;
using einjit::Tensor;

namespace {

using einjit::test::GradRow;
const std::vector<GradRow>& kRows = einjit::test::kGradRows;

std::map<std::string, Tensor> randomInputs(const einjit::dsl::Program& p, const GradRow& row,
                                           std::uint64_t seed) {
  std::map<std::string, Tensor> in;
  for (int id : p.arguments) {
    const auto& t = p.tensors[static_cast<std::size_t>(id)];
    const Shape& s = row.shapes.at(t.name);
    in[t.name] = t.readAsIndex ? Tensor::randomInt(s, 0, 2, DType::i64, ++seed)
                               : Tensor::random(s, DType::f64, ++seed);
  }
  return in;
}

} // namespace

TEST_CASE("gradients: central finite differences in float64") {
  REQUIRE(kRows.size() >= 45);
  for (const GradRow& row : kRows) {
    std::string program = row.program;
    CAPTURE(program);
    einjit::test::checkGradcheckPasses(
        [&] { return einjit::gradcheck(row.program, row.shapes, row.scalars, row.wrt, 7); });
  }
}

// Runs the gather-form gradient and the naive scatter form on the same random inputs.
void compareWithScatter(const GradRow& row, std::uint64_t seed) {
  einjit::Options opt;
  opt.defaultDType = DType::f64;
  einjit::Kernel fwd = einjit::compile(row.program, opt);
  const einjit::dsl::Program& p = fwd.program();
  auto gather = einjit::grad::differentiate(p, row.wrt);
  auto scatter = einjit::grad::differentiate(p, row.wrt, true);
  einjit::Kernel kg = einjit::compile(einjit::dsl::printProgram(gather.program), opt);
  einjit::Kernel ks = einjit::compile(einjit::dsl::printProgram(scatter.program), opt);
  auto in = randomInputs(p, row, seed);
  einjit::Outputs y = fwd.call(in, row.scalars);
  std::map<std::string, double> scalars = row.scalars;
  for (std::size_t i = 0; i < y.size(); ++i) {
    Tensor dy = Tensor::random(y[i].shape(), DType::f64, seed + 100 + i);
    if (y[i].rank() == 0)
      scalars[gather.outputGrads[i]] = dy.get({});
    else
      in[gather.outputGrads[i]] = dy;
  }
  auto pick = [&](const einjit::Kernel& k) {
    std::map<std::string, Tensor> t;
    for (const auto& n : k.tensorArguments()) t[n] = in.at(n);
    std::map<std::string, double> s;
    for (const auto& n : k.scalarArguments()) s[n] = scalars.at(n);
    return k.call(t, s);
  };
  einjit::Outputs a = pick(kg), b = pick(ks);
  for (const std::string& name : gather.inputGrads) {
    CAPTURE(name);
    std::vector<double> va = a[std::string_view(name)].toVector();
    std::vector<double> vb = b[std::string_view(name)].toVector();
    REQUIRE(va.size() == vb.size());
    for (std::size_t e = 0; e < va.size(); ++e)
      CHECK(va[e] == doctest::Approx(vb[e]).epsilon(1e-12).scale(1.0));
  }
}

TEST_CASE("gradients: the gather form equals the naive scatter form") {
  for (const GradRow& row : kRows) {
    std::string program = row.program;
    CAPTURE(program);
    try {
      compareWithScatter(row, 11);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << std::string(e.what()));
    }
  }
}

TEST_CASE("gradients: every gradient program prints, reparses and checks") {
  for (const GradRow& row : kRows) {
    std::string program = row.program;
    CAPTURE(program);
    einjit::dsl::Program p = einjit::dsl::check(row.program);
    auto g = einjit::grad::differentiate(p, row.wrt);
    std::string text = einjit::dsl::printProgram(g.program);
    CAPTURE(text);
    einjit::test::checkRoundTrip(text);
    CHECK_NOTHROW(einjit::dsl::check(text));
  }
}

TEST_CASE("gradients: gather form for affine reads, scatter only where it must be") {
  // Unit pivots solve these; none of them may fall back to a scatter.
  for (const char* prog :
       {"C[i,k] := A[i,j] * B[j,k]", "y[i] := x[i+k] * w[k]", "y[i] := x[2i+k] * w[k]",
        "y[i] := x[i+j-k] * w[j,k]", "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]", "s := A[i,i]",
        "y[i] := x[2i]", "y[i] := x[2i+2k] * w[k]", "y[i] := x[2i+3k] * w[k]",
        "y[i] := x[3i+2k] * w[k]", "y[n,o,h,w] := x[n,c,2h+3a,2w+3b] * k[o,c,a,b]",
        "y[i] := x[clamp(i+k-1)] * w[k] where i in 0:size(x,0)",
        "y[i] := x[clamp(2i+k-1), clamp(i-k)] * w[k] where i in 0:size(x,0)",
        "y[i] := x[wrap(i+k-1)] * w[k] where i in 0:size(x,0)",
        "y[i] := x[wrap(k-i)]^2 * w[k] where i in 0:size(x,0)",
        "y[i,j] := x[wrap(i+k-1), wrap(j+l-2)] * w[k,l] where i in 0:size(x,0), j in 0:size(x,1)",
        "y[n,i] := x[n,wrap(i+k-2)] * w[k] + x[n,i] where i in 0:size(x,1)"}) {
    std::string program = prog;
    CAPTURE(program);
    auto g = einjit::grad::differentiate(einjit::dsl::check(prog), {});
    CHECK(g.scatters.empty());
    CHECK(g.masked.empty());
  }
  // A circular convolution's input gradient is the circular correlation: t = wrap(i+k-1)
  // runs over one period, so i = wrap(t-k+1) and dy is read through wrap().
  auto circ = einjit::grad::differentiate(
      einjit::dsl::check("y[i] := x[wrap(i+k-1)] * w[k] where i in 0:size(x,0)"), {"x"});
  CHECK(einjit::dsl::printProgram(circ.program) ==
        "dx[i] := dy[wrap(i - k + 1)] * w[k] where i in 0:size(x, 0), k in 0:size(w, 0)");
  // Where the wrapped index does not run over exactly one period (a stride, a longer range,
  // another use of the index), the contribution is a masked gather: still one write per
  // element of dx, never a scatter.
  for (const char* prog : {"y[i] := x[wrap(2i+k)] * w[k] where i in 0:size(x,0)",
                           "y[i] := x[wrap(i-3)] * w[i] where i in 0:size(w,0)",
                           "y[i] := x[wrap(i+k)] * w[k] * g[i] where i in 0:size(x,0)"}) {
    std::string program = prog;
    CAPTURE(program);
    auto g = einjit::grad::differentiate(einjit::dsl::check(prog), {"x"});
    CHECK(g.scatters.empty());
    REQUIRE(g.masked.size() == 1);
    CHECK(einjit::dsl::printProgram(g.program).rfind("dx[u] := ", 0) == 0);
    einjit::Kernel back = einjit::compile(prog).gradient({"x"});
    CHECK(back.scatters().empty());
    CHECK(back.maskedGathers() == g.masked);
  }
  // E1: dx[u] = sum over k in max(0, u-N+1):min(K, u+1) of dy[u-k] w[k].
  auto e1 = einjit::grad::differentiate(einjit::dsl::check("y[i] := x[i+k] * w[k]"), {"x"});
  CHECK(einjit::dsl::printProgram(e1.program) ==
        "dx[u] := dy[u - k] * w[k] where u in 0:size(x, 0), k in max(u + size(w, 0) - size(x, 0), "
        "0):min(u + 1, size(w, 0))");
  // Matmul: the other operand's reduction index stays, with dA's indices outside.
  auto mm = einjit::grad::differentiate(einjit::dsl::check("C[i,k] := A[i,j] * B[j,k]"), {"A"});
  CHECK(einjit::dsl::printProgram(mm.program) ==
        "dA[i, j] := dC[i, k] * B[j, k] where i in 0:size(A, 0), j in 0:size(A, 1), k in "
        "0:size(B, 1)");
  // A gather's gradient is the one scatter by nature.
  auto emb = einjit::grad::differentiate(einjit::dsl::check("y[b,d] := E[tok[b], d]"), {"E"});
  REQUIRE(emb.scatters.size() == 1);
  CHECK(einjit::dsl::printProgram(emb.program).find("dE[tok[b], d] += dy[b, d]") !=
        std::string::npos);
}

TEST_CASE("gradients: calling a gradient twice gives identical results") {
  auto conv = einjit::compile("y[i] := x[2i+k] * w[k]");
  auto back = conv.gradient({"x", "w"});
  CHECK(back.gradientInputs() == std::vector<std::string>{"dy"});
  CHECK(back.gradientOutputs() == std::vector<std::string>{"dx", "dw"});
  Tensor x = Tensor::random({11}, DType::f32, 1), w = Tensor::random({3}, DType::f32, 2);
  Tensor dy = Tensor::random({5}, DType::f32, 3);
  std::map<std::string, Tensor> in{{"dy", dy}, {"x", x}, {"w", w}};
  einjit::Outputs a = back.call(in), b = back.call(in);
  CHECK(a["dx"].toVector() == b["dx"].toVector());
  CHECK(a["dw"].toVector() == b["dw"].toVector());
}

TEST_CASE("gradients: what cannot be differentiated is an error") {
  auto d = [](const char* prog, std::vector<std::string> wrt = {}) {
    return einjit::grad::differentiate(einjit::dsl::check(prog), wrt);
  };
  CHECK_THROWS_WITH_AS(d("y[i] := x[i]", {"q"}), doctest::Contains("not a tensor argument"),
                       einjit::Error);
  CHECK_THROWS_WITH_AS(d("y[b] := E[tok[b]]", {"tok"}), doctest::Contains("integer indices"),
                       einjit::Error);
  // Versions of a tensor changed in place that the gradient cannot name.
  auto fails = [&](const char* prog, const char* what, int line, int column) {
    std::string program = prog;
    CAPTURE(program);
    einjit::test::checkCaretError([&] { d(prog); }, what, line, column);
  };
  fails("t[i] := x[i]; t[i] = x[i]^2 where i in 0:2", "overwrites some of the values of 't'", 1,
        20);
  fails("(max) y[i] += x[i,j]", "with a (max) reduction", 1, 12);
  fails("y[i] = x[i]^2; z[i] := y[i]^2", "changes in place", 1, 1);
}

TEST_CASE("gradients: '=' and '+=' into tensors passed in") {
  // The old values of a tensor the program changes in place carry no gradient; each writer
  // passes dY on for the elements it covers.
  struct Row {
    const char* program;
    std::map<std::string, Shape> shapes;
  };
  const Row rows[] = {
      {"y[i] = x[i] * 2", {{"x", {5}}, {"y", {5}}}},
      {"y[i] += x[i,j] * w[j]; y[i] += w[i]^2", {{"x", {4, 4}}, {"w", {4}}, {"y", {4}}}},
      {"y[2i+1] = x[i]^2 where i in 0:size(x,0)", {{"x", {4}}, {"y", {9}}}},
      {"(max) y[i] = x[i,j]", {{"x", {3, 4}}, {"y", {3}}}},
      {"y[i] = x[i]; y[i] += x[i]^3; z[i] := y[i] * 2 + w[i]",
       {{"x", {4}}, {"y", {4}}, {"w", {4}}}},
  };
  for (const Row& row : rows) {
    std::string program = row.program;
    CAPTURE(program);
    for (einjit::Device dev : {einjit::Device::reference(), einjit::Device::cpu()}) {
      einjit::GradCheckResult r = einjit::gradcheck(row.program, row.shapes, {}, {}, 5, 1e-6, dev);
      CHECK(r.passed);
      CHECK(!r.inputs.empty());
    }
    compareWithScatter({row.program, row.shapes}, 3);
  }
  // By hand: y = y_old + x w + w^2, and y_old carries no gradient: dx[i,j] = dy[i] w[j].
  auto g = einjit::grad::differentiate(einjit::dsl::check("y[i] += x[i,j] * w[j]; y[i] += w[i]^2"),
                                       {"x"});
  CHECK(einjit::dsl::printProgram(g.program) ==
        "dx[i, j] := dy[i] * w[j] where i in 0:size(x, 0), j in 0:size(x, 1)");
}

TEST_CASE("gradients: the simplifier folds constants, powers and equal terms") {
  auto text = [](const char* prog, std::vector<std::string> wrt) {
    return einjit::dsl::printProgram(
        einjit::grad::differentiate(einjit::dsl::check(prog), wrt).program);
  };
  // Two reads of the same element are one statement; x^1 -> x; constants combined.
  CHECK(text("s := x[i,j] * x[i,j]", {}) ==
        "dx[i, j] := ds * (2 * x[i, j]) where i in 0:size(x, 0), j in 0:size(x, 1)");
  CHECK(text("y[i] := x[i]^2 - 3 + x[i]", {}) ==
        "dx[i] := dy[i] * (2 * x[i] + 1) where i in 0:size(x, 0)");
  CHECK(text("y[i] := x[i]^3 + x[i]*x[i]*w[i]", {"x"}) ==
        "dx[i] := dy[i] * (3 * x[i]^2 + 2 * (x[i] * w[i])) where i in 0:size(x, 0)");
  // Equal terms that cancel leave nothing: the gradient is a zero fill.
  CHECK(text("y[i] := x[i] * w[i] - w[i] * 0 - x[i] * w[i] + w[i]", {"x"}) ==
        "dx[u0] := 0 where u0 in 0:size(x, 0)");
}

TEST_CASE("gradients: exp, tanh, sigmoid, sqrt read the value their ':=' statement stored") {
  auto text = [](const char* prog) {
    return einjit::dsl::printProgram(
        einjit::grad::differentiate(einjit::dsl::check(prog), {}).program);
  };
  // Softmax: exp(x - m) once, in the recomputed forward; its derivative is e.
  const std::string softmax = text("(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := "
                                   "e[i,j]\ny[i,j] := e[i,j] / z[i]");
  CAPTURE(softmax);
  CHECK(softmax.find("dx[i, j] := de[i, j] * e[i, j]") != std::string::npos);
  CHECK(softmax.find("exp(") == softmax.rfind("exp("));
  // The row maximum carries no gradient (shift invariance: the next test case).
  CHECK(softmax.find("dm[i]") == std::string::npos);
  // Where m is read otherwise (log-sum-exp), the (max) path: dm moves into the selection (0 for
  // the elements not selected).
  const std::string lse = text("(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := "
                               "e[i,j]\ny[i] := log(z[i]) + m[i]");
  CAPTURE(lse);
  CHECK(lse.find("dm[i] += de[i, j] * -e[i, j]") != std::string::npos);
  CHECK(lse.find("dx[i, j] += j == first_m[i] ? dm[i] : 0") != std::string::npos);
  CHECK(text("t[i] := tanh(x[i])\ny[i] := t[i] * 2") ==
        "t[i] := tanh(x[i])\n"
        "dt[i] := dy[i] * 2 where i in 0:size(x, 0)\n"
        "dx[i] := dt[i] * (-(t[i] * t[i]) + 1) where i in 0:size(x, 0)");
  // Not where the tensor holds something else: a second writer, a reduction.
  CHECK(text("e[i] := exp(x[i])\ne[i] += x[i]\ny[i] := e[i] * 3").find("* exp(x[i])") !=
        std::string::npos);
  CHECK(text("s[i] := exp(x[i,j])\ny[i] := s[i] * 3").find("* exp(x[i, j])") != std::string::npos);
}

TEST_CASE("gradients: a softmax's row maximum carries no gradient (shift invariance)") {
  // grad/ShiftInvariance.h: m enters only as exp(A - m), and the exponentials only in sums over
  // their row and in ratios to such a sum of the same row: the outputs do not depend on m, so
  // the gradient has no dm, no first_m and no one-hot sum. Where m, e or z is read in any other
  // way, dm stays. Every row is checked against central finite differences in float64.
  struct ShiftRow {
    const char* program;
    std::map<std::string, Shape> shapes;
    bool invariant;
  };
  const std::vector<ShiftRow> rows = {
      {"(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\n"
       "y[i,j] := e[i,j] / z[i]",
       {{"x", {5, 7}}}, true},
      // rows of two indices, the row last in e, the maximum of a scaled input, two ratios
      {"(max) m[b,i] := x[b,i,j] * 2\ne[j,b,i] := exp(x[b,i,j] * 2 - m[b,i])\n"
       "z[b,i] := e[j,b,i]\ny[b,i,j] := e[j,b,i] / z[b,i] * w[j] + (e[j,b,i] / z[b,i])^2",
       {{"x", {2, 3, 6}}, {"w", {6}}}, true},
      // a (min) works as well: any m, however computed
      {"(min) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\n"
       "y[i,j] := e[i,j] / z[i]",
       {{"x", {4, 5}}}, true},
      // m read outside exp(x - m): log-sum-exp
      {"(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\n"
       "y[i] := log(z[i]) + m[i]",
       {{"x", {5, 7}}}, false},
      // z read outside a ratio
      {"(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\n"
       "y[i,j] := e[i,j] / z[i] + z[i]",
       {{"x", {5, 7}}}, false},
      // e read outside a ratio
      {"(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\n"
       "y[i,j] := e[i,j] / z[i] + e[i,j]",
       {{"x", {5, 7}}}, false},
      // a sum over the rows (columns of e), and a ratio of another row
      {"(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[j] := e[i,j]\n"
       "y[i,j] := e[i,j] / z[j]",
       {{"x", {5, 5}}}, false},
      {"(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\n"
       "y[i,j] := e[i,j] / z[j]",
       {{"x", {5, 5}}}, false},
      // the shift through a second statement: n is the pattern's tensor, and m reaches the
      // outputs only through n, so neither carries gradient
      {"(max) m[i] := x[i,j]\nn[i] := m[i] + 1\ne[i,j] := exp(x[i,j] - n[i])\nz[i] := e[i,j]\n"
       "y[i,j] := e[i,j] / z[i]",
       {{"x", {5, 7}}}, true},
  };
  for (const ShiftRow& row : rows) {
    CAPTURE(std::string(row.program));
    std::string text;
    try {
      text = einjit::dsl::printProgram(
          einjit::grad::differentiate(einjit::dsl::check(row.program), {}).program);
    } catch (const std::exception& e) {
      FAIL("threw: " << std::string(e.what()));
    }
    CAPTURE(text);
    CHECK((text.find("dm[") == std::string::npos) == row.invariant);
    CHECK((text.find("first_m[") == std::string::npos) == row.invariant);
    for (std::uint64_t seed : {3, 4}) {
      einjit::GradCheckResult r = einjit::gradcheck(row.program, row.shapes, {}, {}, seed);
      for (std::size_t i = 0; i < r.inputs.size(); ++i) {
        CAPTURE(r.inputs[i]);
        CHECK(r.maxRelativeError[i] <= 1e-6);
      }
      CHECK_MESSAGE(r.passed, r.why);
    }
  }
}

TEST_CASE("gradients: f32() passes the gradient through unchanged") {
  // Finite differences cannot see this (f32 rounding is coarser than any usable step).
  auto g = einjit::grad::differentiate(einjit::dsl::check("y[i] := f32(x[i]) * 2"), {});
  CHECK(einjit::dsl::printProgram(g.program) == "dx[i] := dy[i] * 2 where i in 0:size(x, 0)");
}

TEST_CASE("gradients: residue phases (G3) and Euclid steps (G2c) instead of scatters") {
  // E8: x[2i+2k] reaches only even elements: the odd phase stays zero, the even one is dense.
  auto e8 = einjit::grad::differentiate(einjit::dsl::check("y[i] := x[2i+2k] * w[k]"), {"x"});
  CHECK(einjit::dsl::printProgram(e8.program) ==
        "dx[u0] := 0 where u0 in 0:size(x, 0)\n"
        "dx[2u] += dy[u - k] * w[k] where u in 0:fdiv(size(x, 0) - 1, 2) + 1, k in max(u - "
        "fdiv(size(x, 0) - 2 * size(w, 0) + 1, 2), 0):min(u + 1, size(w, 0))");
  // E2c: stride 2, dilation 3: a unimodular change of indices, strided reads, no modulo.
  auto e2c = einjit::grad::differentiate(einjit::dsl::check("y[i] := x[2i+3k] * w[k]"), {"x"});
  std::string text = einjit::dsl::printProgram(e2c.program);
  CHECK(text.find("dy[-u - 3m] * w[u + 2m]") != std::string::npos);
  CHECK(text.find('%') == std::string::npos);
}

using einjit::test::randomStatement;

TEST_CASE("gradients: 500 random statements against finite differences and the scatter form") {
  std::mt19937_64 rng(2026);
  int checked = 0, masked = 0;
  for (int n = 0; n < 500; ++n) {
    std::map<std::string, Shape> shapes;
    std::string program = randomStatement(rng, shapes);
    CAPTURE(program);
    einjit::GradCheckResult r;
    try {
      r = einjit::gradcheck(program, shapes, {}, {}, static_cast<std::uint64_t>(n));
    } catch (const einjit::Error& e) {
      std::string what = e.what();
      CAPTURE(what);
      CHECK_MESSAGE(false, "a random statement failed to differentiate or run");
      continue;
    }
    for (std::size_t i = 0; i < r.inputs.size(); ++i) {
      CAPTURE(r.inputs[i]);
      CHECK(r.maxRelativeError[i] <= 1e-6);
    }
    // The gather form against the scatter form.
    try {
      compareWithScatter({program.c_str(), shapes}, static_cast<std::uint64_t>(n) + 1000);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << std::string(e.what()));
    }
    einjit::dsl::Program p = einjit::dsl::check(program);
    auto g = einjit::grad::differentiate(p, {});
    CHECK(g.scatters.empty()); // only a gather's gradient may scatter
    masked += g.masked.empty() ? 0 : 1;
    ++checked;
  }
  CHECK(checked == 500);
  // wrap() reads whose index does not run over one period are masked gathers.
  MESSAGE("random statements with a masked gather: " << masked << " of 500");
}

TEST_CASE("gradients: (max) sends the gradient to the first maximum, also with many ties") {
  // Max-pool 2x2 and 3x3 (overlapping windows), stride 2, over values drawn from {0, 1}: most
  // windows tie; an element that is the first maximum of two windows gets both gradients.
  for (std::int64_t K : {2, 3}) {
    CAPTURE(K);
    std::string prog = "(max) y[i,j] := x[2i+a, 2j+b] where a in 0:" + std::to_string(K) +
                       ", b in 0:" + std::to_string(K);
    auto back = einjit::compile(prog).gradient({"x"});
    const std::int64_t H = 7, W = 9, OH = (H - K) / 2 + 1, OW = (W - K) / 2 + 1;
    Tensor x = Tensor::randomInt({H, W}, 0, 2, DType::i64, 5).to(DType::f64);
    Tensor dy = Tensor::random({OH, OW}, DType::f64, 6);
    Tensor dx = back.call({{"dy", dy}, {"x", x}})["dx"];
    std::vector<double> want(static_cast<std::size_t>(H * W), 0.0);
    for (std::int64_t i = 0; i < OH; ++i)
      for (std::int64_t j = 0; j < OW; ++j) {
        // The first maximum in the order a, then b.
        std::int64_t ba = 0, bb = 0;
        for (std::int64_t a = 0; a < K; ++a)
          for (std::int64_t b = 0; b < K; ++b)
            if (x.get({2 * i + a, 2 * j + b}) > x.get({2 * i + ba, 2 * j + bb})) ba = a, bb = b;
        want[static_cast<std::size_t>((2 * i + ba) * W + 2 * j + bb)] += dy.get({i, j});
      }
    CHECK(dx.toVector() == want);
  }
  // (min) likewise: the first of two equal minima gets everything.
  auto mn = einjit::compile("(min) y[i] := x[i,j]").gradient();
  Tensor xm = Tensor::fromValues({1, 4}, {3, 1, 1, 2}, DType::f64);
  Tensor g = mn.call({{"dy", Tensor::fromValues({1}, {5}, DType::f64)}, {"x", xm}})["dx"];
  CHECK(g.toVector() == std::vector<double>{0, 5, 0, 0});
}

TEST_CASE("gradients: (max)/(min) over ranges that depend on other indices, with ties") {
  // Triangular windows: a in 0:min(3, N-i), b in 0:a+1. No box to number the iterations in,
  // so the first maximum is found one reduction index at a time; checked by hand with ties.
  const char* prog =
      "(max) y[i] := x[i+a, b] where i in 0:size(x,0), a in 0:min(3, size(x,0)-i), b in 0:a+1";
  for (einjit::Device dev : {einjit::Device::reference(), einjit::Device::cpu()}) {
    einjit::Options opt;
    opt.device = dev;
    auto back = einjit::compile(prog, opt).gradient({"x"});
    const std::int64_t n = 7, m = 4;
    Tensor x = Tensor::randomInt({n, m}, 0, 2, DType::i64, 8).to(DType::f64);
    Tensor dy = Tensor::random({n}, DType::f64, 9);
    Tensor dx = back.call({{"dy", dy}, {"x", x}})["dx"];
    std::vector<double> want(static_cast<std::size_t>(n * m), 0.0);
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t ba = -1, bb = -1;
      for (std::int64_t a = 0; a < std::min<std::int64_t>(3, n - i); ++a)
        for (std::int64_t b = 0; b <= a; ++b)
          if (ba < 0 || x.get({i + a, b}) > x.get({i + ba, bb})) ba = a, bb = b;
      want[static_cast<std::size_t>((i + ba) * m + bb)] += dy.get({i});
    }
    CHECK(dx.toVector() == want);
  }
  // (min) over k in i:N, values with ties: element k gets dy[i] for every i whose first
  // minimum it is.
  auto mn =
      einjit::compile("(min) y[i] := x[k] where i in 0:size(x,0), k in i:size(x,0)").gradient();
  Tensor xm = Tensor::fromValues({5}, {2, 1, 3, 1, 4}, DType::f64);
  Tensor dym = Tensor::fromValues({5}, {1, 10, 100, 1000, 10000}, DType::f64);
  Tensor g = mn.call({{"dy", dym}, {"x", xm}})["dx"];
  CHECK(g.toVector() == std::vector<double>{0, 11, 0, 1100, 10000});
  einjit::GradCheckResult r = einjit::gradcheck(prog, {{"x", {6, 3}}});
  CHECK(r.passed);
}

TEST_CASE("gradients: (*) is exact with zeros (products of the other factors)") {
  auto back = einjit::compile("(*) y[i] := x[i,j]").gradient();
  Tensor x = Tensor::fromValues({3, 3}, {2, 3, 4, 0, 5, 6, 0, 7, 0}, DType::f64);
  Tensor dy = Tensor::fromValues({3}, {1, 1, 1}, DType::f64);
  Tensor dx = back.call({{"dy", dy}, {"x", x}})["dx"];
  // Row 0: no zero; row 1: one zero gets 5*6, the others 0; row 2: two zeros, all 0.
  CHECK(dx.toVector() == std::vector<double>{12, 8, 6, 30, 0, 0, 0, 0, 0});
}

TEST_CASE("gradients: gather-form statements write each element once (safe to run in parallel)") {
  for (const GradRow& row : kRows) {
    std::string program = row.program;
    CAPTURE(program);
    einjit::Options opt;
    opt.defaultDType = DType::f64;
    einjit::Kernel fwd = einjit::compile(row.program, opt);
    auto in = randomInputs(fwd.program(), row, 3);
    einjit::Outputs y = fwd.call(in, row.scalars);
    auto g = einjit::grad::differentiate(fwd.program(), row.wrt);
    einjit::dsl::Program gp = einjit::dsl::check(einjit::dsl::printProgram(g.program));
    std::map<std::string, double> scalars = row.scalars;
    for (std::size_t i = 0; i < y.size(); ++i) {
      if (y[i].rank() == 0)
        scalars[g.outputGrads[i]] = 0.5;
      else
        in[g.outputGrads[i]] = Tensor::random(y[i].shape(), DType::f64, 9);
    }
    std::vector<einjit::dsl::ArgSpec> specs;
    for (int id : gp.arguments) {
      const Tensor& t = in.at(gp.tensors[static_cast<std::size_t>(id)].name);
      specs.push_back({t.dtype(), t.shape()});
    }
    std::vector<double> params;
    for (const auto& prm : gp.params) params.push_back(scalars.at(prm.name));
    einjit::dsl::BoundProgram b = einjit::dsl::bind(gp, specs, params, DType::f64);
    std::vector<Tensor> all(gp.tensors.size());
    for (std::size_t id = 0; id < gp.tensors.size(); ++id)
      all[id] = gp.tensors[id].isArgument ? in.at(gp.tensors[id].name)
                                          : Tensor::empty(b.tensors[id].shape, b.tensors[id].dtype);
    std::vector<einjit::codegen::HostBuffer> bufs;
    for (const Tensor& t : all) bufs.push_back({t.dtype(), t.data(), t.shape(), t.strides()});
    std::vector<std::vector<std::int64_t>> counts;
    einjit::codegen::interpret(gp, b, bufs, &counts);
    for (std::size_t k = 0; k < gp.stmts.size(); ++k) {
      const auto& st = gp.stmts[k];
      std::string text = einjit::dsl::printStmt(st.ast);
      CAPTURE(text);
      if (st.scatter || k >= counts.size()) continue;
      std::int64_t most = 0, least = counts[k].empty() ? 0 : counts[k][0];
      for (std::int64_t c : counts[k]) most = std::max(most, c), least = std::min(least, c);
      CHECK(most <= 1);
      // A ':=' gradient statement covers all of dX.
      const std::string& out = gp.tensors[static_cast<std::size_t>(st.output)].name;
      bool isGrad = std::find(g.inputGrads.begin(), g.inputGrads.end(), out) != g.inputGrads.end();
      if (isGrad && st.assign == einjit::dsl::Assign::Define) CHECK(least == 1);
    }
  }
}

TEST_CASE("gradients: second order — every gradient program differentiates again (HVPs)") {
  // The gradient program is a program like any other: its own gradient, checked against
  // finite differences of it, is the Hessian-vector product of the original.
  int checked = 0;
  for (const GradRow& row : kRows) {
    std::string program = row.program;
    CAPTURE(program);
    try {
      einjit::Options opt;
      opt.defaultDType = DType::f64;
      einjit::Kernel fwd = einjit::compile(row.program, opt);
      auto in = randomInputs(fwd.program(), row, 5);
      einjit::Outputs y = fwd.call(in, row.scalars);
      einjit::Kernel back = fwd.gradient(row.wrt);
      std::map<std::string, Shape> shapes = row.shapes;
      std::map<std::string, double> scalars = row.scalars;
      for (std::size_t i = 0; i < y.size(); ++i) {
        if (y[i].rank() == 0)
          scalars[back.gradientInputs()[i]] = 0.7;
        else
          shapes[back.gradientInputs()[i]] = y[i].shape();
      }
      std::map<std::string, Shape> used;
      for (const auto& n : back.tensorArguments()) used[n] = shapes.at(n);
      if (program == "s := A[i,i]") {
        // dA = ds * [i == u] reads A only for its shape: there is nothing to differentiate.
        CHECK_THROWS_WITH_AS(einjit::gradcheck(back.source(), used, scalars),
                             doctest::Contains("nothing to differentiate"), einjit::Error);
        ++checked;
        continue;
      }
      einjit::GradCheckResult r = einjit::gradcheck(back.source(), used, scalars, {}, 13);
      for (std::size_t i = 0; i < r.inputs.size(); ++i) {
        CAPTURE(r.inputs[i]);
        CHECK(r.maxRelativeError[i] <= 1e-6);
      }
      ++checked;
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << std::string(e.what()));
    }
  }
  CHECK(checked == static_cast<int>(kRows.size()));
}

TEST_CASE("gradients: second order of a strided, dilated read with a 'where' index") {
  // The first gradient's ranges are maxima and minima of several pieces each; Fourier-Motzkin
  // paired every lower bound with every upper bound at each elimination and did not finish in
  // minutes. It now drops constraints that another implies, and stops at a bound (the site is
  // then a masked gather, still exact). The timing is a row of bench/RESULTS.md.
  const std::string forward = "y[h,w] := T[5h+3a, 2w+3q+3a] * k[a] where q in 0:3";
  einjit::Options opt;
  opt.defaultDType = DType::f64;
  einjit::Kernel fwd = einjit::compile(forward, opt);
  const std::map<std::string, Shape> shapes = {{"T", {14, 16}}, {"k", {2}}};
  einjit::GradCheckResult first = einjit::gradcheck(forward, shapes);
  CHECK_MESSAGE(first.passed, first.why);
  einjit::Kernel back = fwd.gradient();
  // y: h in 0:fdiv(14 - 6 + 2, 5) + 1, w in 0:fdiv(16 - 6 - 4, 2) + 1.
  std::map<std::string, Shape> backShapes = shapes;
  backShapes["dy"] = {3, 4};
  einjit::GradCheckResult second = einjit::gradcheck(back.source(), backShapes, {}, {}, 13);
  CHECK_MESSAGE(second.passed, second.why);
  for (std::size_t i = 0; i < second.inputs.size(); ++i) {
    CAPTURE(second.inputs[i]);
    CHECK(second.maxRelativeError[i] <= 1e-6);
  }
  CHECK(second.inputs.size() == 3);
}

TEST_CASE("gradients: a sub-lattice such as A[i,i] is written directly, not masked (E6)") {
  auto e6 = einjit::grad::differentiate(einjit::dsl::check("y[i] := A[i,i]"), {});
  CHECK(einjit::dsl::printProgram(e6.program) ==
        "dA[u0, u1] := 0 where u0 in 0:size(A, 0), u1 in 0:size(A, 1)\n"
        "dA[u, u] += dy[u] where u in 0:size(A, 1)");
  auto t = einjit::grad::differentiate(einjit::dsl::check("y[i,j] := T[i,j,i]"), {});
  CHECK(einjit::dsl::printProgram(t.program).find("dT[u, j, u] += dy[u, j]") != std::string::npos);
}

// gradcheck is an oracle: it must be able to fail. One row per way it used to pass blindly.
TEST_CASE("gradcheck fails on NaN and infinities and does not pass on an empty comparison") {
  struct Row {
    const char* program;
    std::map<std::string, Shape> shapes;
    const char* why; // a part of GradCheckResult::why
  };
  const std::vector<Row> rows = {
      // The loss is NaN: every finite difference is NaN, the gradient program finite.
      {"y[i] := log(x[i] - 2)",
       {{"x", {4}}},
       "dx element 0: finite differences give nan, the gradient program "},
      // NaN on both sides everywhere compares nothing.
      {"y[i] := sqrt(x[i] - 2) * sqrt(x[i] - 2)", {{"x", {3}}}, "every value is NaN"},
      // An infinite analytic gradient against NaN finite differences.
      {"y[i] := x[i] / 0", {{"x", {3}}}, "the gradient program -inf"},
      {"y[i] := x[i+k] * w[k]",
       {{"x", {2}}, {"w", {5}}},
       "nothing to compare: every output is empty"},
      {"y[i] := x[i] * 2", {{"x", {0}}}, "nothing to compare: every output is empty"},
      {"y[b] := E[tok[b]] * 2",
       {{"E", {0}}, {"tok", {0}}},
       "nothing to compare: every output is empty"},
  };
  for (const Row& row : rows) {
    std::string program = row.program;
    CAPTURE(program);
    einjit::GradCheckResult r = einjit::gradcheck(row.program, row.shapes);
    CAPTURE(r.why);
    CHECK(!r.passed);
    CHECK(r.why.find(row.why) != std::string::npos);
  }
}

// A caller's mistake in gradcheck's arguments is an einjit::Error, with a caret where the
// program has a place for it; never std::out_of_range from a lookup, never a crash (an input
// named twice in `wrt` read past the gradient's outputs).
TEST_CASE("gradcheck: mistakes in its arguments are einjit::Error with a caret") {
  struct Row {
    const char* program;
    std::map<std::string, Shape> shapes;
    std::map<std::string, double> scalars;
    std::vector<std::string> wrt;
    const char* message; // a part of the error
    int column;          // of the caret; 0: the mistake has no place in the program
  };
  const std::vector<Row> rows = {
      {"y[i] := x[i] * w[i]", {{"x", {3}}}, {}, {}, "gradcheck needs a shape for 'w'", 16},
      {"y[i] := x[i] * s", {{"x", {3}}}, {}, {}, "missing scalar argument 's'", 16},
      {"y[i] := x[i] * 2", {{"x", {3, 2}}}, {}, {}, "'x' has rank 1 in the program", 9},
      {"y[i] := x[i] * 2", {{"x", {3}}}, {}, {"z"},
       "cannot differentiate with respect to 'z': it is not a tensor argument", 0},
      {"y[i] := x[t[i]] * 2", {{"x", {3}}, {"t", {3}}}, {}, {"t"}, "it holds integer indices", 11},
      {"z[i] = x[i] * 2", {{"x", {3}}, {"z", {3}}}, {}, {"z"}, "the program writes it", 1},
  };
  for (const Row& row : rows) {
    std::string program = row.program;
    CAPTURE(program);
    try {
      einjit::gradcheck(row.program, row.shapes, row.scalars, row.wrt);
      FAIL_CHECK("no error");
    } catch (const einjit::Error& e) {
      const std::string message = e.what();
      CAPTURE(message);
      CHECK(message.find(row.message) != std::string::npos);
      CHECK(e.column() == row.column);
      if (row.column > 0) CHECK(e.line() == 1);
    }
  }
  // An input named twice is differentiated and compared once.
  einjit::GradCheckResult r = einjit::gradcheck("y[i] := x[i] * w[i]", {{"x", {3}}, {"w", {3}}},
                                                {}, {"x", "w", "x"});
  CHECK(r.passed);
  CHECK(r.inputs == std::vector<std::string>{"x", "w"});
}

// Gather indices made up for gradcheck and `einjit run` cover the whole valid range: both
// ends, a repeat (the gradient is a scatter that must accumulate), and nothing outside.
TEST_CASE("gradcheck draws gather indices over the whole valid range, ends and repeats included") {
  struct Row {
    const char* program;
    std::map<std::string, Shape> shapes;
    std::int64_t lo, hi; // valid values of tok, inclusive, worked out by hand
  };
  const std::vector<Row> rows = {
      {"y[b,d] := E[tok[b], d] * s[b]", {{"E", {7, 3}}, {"tok", {40}}, {"s", {40}}}, 0, 6},
      // tok + 1 in 0:5 -> tok in -1:3; tok - i with i in 0:2 (bare in s) -> tok in 1:4.
      {"y[b] := E[tok[b] + 1] * s[b]", {{"E", {5}}, {"tok", {30}}, {"s", {30}}}, -1, 3},
      {"y[b] := E[tok[b] - i] * s[b] * w[i]",
       {{"E", {5}}, {"tok", {30}}, {"s", {30}}, {"w", {2}}},
       1,
       4},
      // Two gathers through one index tensor: the intersection.
      {"y[b] := E[tok[b]] * F[tok[b]]", {{"E", {9}}, {"F", {4}}, {"tok", {30}}}, 0, 3},
  };
  for (const Row& row : rows) {
    std::string program = row.program;
    CAPTURE(program);
    einjit::dsl::Program p = einjit::dsl::check(row.program);
    einjit::dsl::BoundProgram b = einjit::bindShapes(p, row.shapes, {}, DType::f64);
    int tok = p.findTensor("tok");
    CHECK(einjit::dsl::gatherValueRange(p, b, tok) == std::make_pair(row.lo, row.hi));
    std::vector<double> v = einjit::randomIndices(p, b, tok, row.shapes.at("tok"), 3).toVector();
    CHECK(*std::min_element(v.begin(), v.end()) == static_cast<double>(row.lo));
    CHECK(*std::max_element(v.begin(), v.end()) == static_cast<double>(row.hi));
    std::sort(v.begin(), v.end());
    CHECK(std::adjacent_find(v.begin(), v.end()) != v.end()); // a repeated index
    einjit::GradCheckResult r = einjit::gradcheck(row.program, row.shapes);
    CHECK_MESSAGE(r.passed, r.why);
  }
}
