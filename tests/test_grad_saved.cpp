// Options::saved: the forward keeps the named tensors and its gradient program reads them
// instead of recomputing them (docs/LANGUAGE.md, "Gradients"). Each row is a program and the
// tensors it saves; the gradient that reads them must match central finite differences in
// float64 and the recomputing gradient on the interpreter, on the JIT (row blocks with and
// without scratch) and on the interpreter itself.
#include "dsl/Printer.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using einjit::Device;
using einjit::DType;
using einjit::Kernel;
using einjit::Options;
using einjit::Outputs;
using einjit::Shape;
using einjit::Tensor;

namespace {

const char* kSoftmax = "(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\nz[i] := e[i,j]\n"
                       "y[i,j] := e[i,j] / z[i]";
const char* kLayernorm = "mu[i] := x[i,j] / size(x,1)\nd[i,j] := x[i,j] - mu[i]\n"
                         "var[i] := d[i,j]^2 / size(x,1)\n"
                         "y[i,j] := d[i,j] / sqrt(var[i] + eps) * g[j] + b[j]";

struct SavedRow {
  const char* program;
  std::map<std::string, Shape> shapes;
  std::vector<std::string> saved;
  // Forward statements the gradient program no longer contains (their left-hand side as
  // printed), and the names it takes as arguments besides the forward's inputs and dY.
  std::vector<std::string> gone;
  std::map<std::string, double> scalars = {};
};

const std::vector<SavedRow>& savedRows() {
  static const std::vector<SavedRow> rows = {
      // Softmax: the row maximum and sum read back, the exponential recomputed.
      {kSoftmax, {{"x", {5, 7}}}, {"m", "z"}, {"(max) m[i] :=", "z[i] :="}},
      // ... or the exponential read back too (then x is read only for the maximum's position).
      {kSoftmax, {{"x", {5, 7}}}, {"m", "e", "z"}, {"(max) m[i] :=", "e[i, j] :=", "z[i] :="}},
      // An output saved: nothing reads y, nothing changes.
      {kSoftmax, {{"x", {3, 9}}}, {"y", "z"}, {"z[i] :="}},
      // Layernorm: mean and variance read back, the centred row recomputed.
      {kLayernorm, {{"x", {6, 8}}, {"g", {8}}, {"b", {8}}}, {"mu", "var"},
       {"mu[i] :=", "var[i] :="}, {{"eps", 1e-5}}},
      {kLayernorm, {{"x", {6, 8}}, {"g", {8}}, {"b", {8}}}, {"d", "var"},
       {"d[i, j] :=", "var[i] :="}, {{"eps", 1e-5}}},
      // tanh's derivative reads its saved output instead of the recomputed one.
      {"t[i] := x[i,j] * w[j]\ny[i] := tanh(t[i])", {{"x", {4, 6}}, {"w", {6}}}, {"y"},
       {"y[i] :="}},
      // A strided convolution saved; the exponential after it recomputed from it.
      {"t[i] := x[2i+k] * w[k]\ny[i] := exp(t[i]) * t[i]", {{"x", {11}}, {"w", {3}}}, {"t"},
       {"t[i] :="}},
      // A (max) whose summand computes: its position is found among stored summands.
      {"(max) y[i] := x[i,j] * w[j]\ns[i] := y[i] * y[i] + x[i,0]", {{"x", {4, 5}}, {"w", {5}}},
       {"y"}, {"(max) y[i] :="}},
      // A rank-0 saved tensor is a scalar parameter of the gradient program.
      {"s := x[i] * x[i]\ny[i] := x[i] / s", {{"x", {6}}}, {"s"}, {"s :="}},
  };
  return rows;
}

Options options(Device device, bool keep, const std::vector<std::string>& saved) {
  Options o;
  o.device = device;
  o.defaultDType = DType::f64;
  o.keepIntermediates = keep;
  o.saved = saved;
  return o;
}

// The gradient kernel's arguments: dY from `dys`, the forward's inputs, the saved tensors from
// the forward call (a rank-0 one as a scalar).
struct BackArgs {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> scalars;
};
BackArgs backArgs(const Kernel& back, const std::map<std::string, Tensor>& in,
                  const std::map<std::string, double>& scalars, const Outputs& fwd,
                  const std::map<std::string, Tensor>& dys) {
  BackArgs a;
  for (const std::string& n : back.tensorArguments())
    a.tensors[n] = in.count(n) ? in.at(n) : dys.count(n) ? dys.at(n) : fwd[std::string_view(n)];
  for (const std::string& n : back.scalarArguments())
    a.scalars[n] = scalars.count(n) ? scalars.at(n) : fwd[std::string_view(n)].get({});
  return a;
}

double maxRelative(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return NAN;
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / den;
}

} // namespace

TEST_CASE("saved tensors: the gradient reads them, equal to finite differences and the "
          "recomputing gradient") {
  for (const SavedRow& row : savedRows()) {
    CAPTURE(row.program);
    CAPTURE(row.saved.size());
    std::map<std::string, Tensor> in;
    std::uint64_t seed = 11;
    for (const auto& [n, s] : row.shapes) in[n] = Tensor::random(s, DType::f64, seed++);

    // The reference: the recomputing gradient on the interpreter.
    Kernel refFwd = einjit::compile(row.program, options(Device::reference(), true, {}));
    Kernel refBack = refFwd.gradient();
    Outputs refY = refFwd.call(in, row.scalars);
    std::map<std::string, Tensor> dys;
    for (std::size_t i = 0; i < refY.size(); ++i)
      if (refY[i].rank() > 0)
        dys[refBack.gradientInputs()[i]] = Tensor::random(refY[i].shape(), DType::f64, seed++);
    std::map<std::string, double> backScalars = row.scalars;
    for (std::size_t i = 0; i < refY.size(); ++i)
      if (refY[i].rank() == 0) backScalars[refBack.gradientInputs()[i]] = 0.75;
    BackArgs ra = backArgs(refBack, in, backScalars, refY, dys);
    Outputs refGrads = refBack.call(ra.tensors, ra.scalars);

    // Central finite differences of loss = sum <dY, Y> for every input element.
    auto loss = [&](const std::map<std::string, Tensor>& args) {
      Outputs y = refFwd.call(args, row.scalars);
      double l = 0;
      for (std::size_t i = 0; i < y.size(); ++i) {
        std::vector<double> yv = y[i].toVector();
        if (y[i].rank() == 0) {
          l += yv[0] * backScalars.at(refBack.gradientInputs()[i]);
          continue;
        }
        std::vector<double> dv = dys.at(refBack.gradientInputs()[i]).toVector();
        for (std::size_t j = 0; j < yv.size(); ++j) l += yv[j] * dv[j];
      }
      return l;
    };

    for (Device device : {Device::cpu(), Device::reference()})
      for (bool keep : {false, true}) {
        CAPTURE(device.name());
        CAPTURE(keep);
        Kernel fwd = einjit::compile(row.program, options(device, keep, row.saved));
        Kernel back = fwd.gradient();
        CHECK(back.options().saved.empty());
        const std::string text = back.source();
        CAPTURE(text);
        for (const std::string& g : row.gone) CHECK(("\n" + text).find("\n" + g) == std::string::npos);
        Outputs y = fwd.call(in, row.scalars);
        for (const std::string& n : row.saved) CHECK(y[std::string_view(n)].defined());
        BackArgs a = backArgs(back, in, backScalars, y, dys);
        Outputs grads = back.call(a.tensors, a.scalars);
        REQUIRE(grads.size() == refGrads.size());
        for (const std::string& n : back.gradientOutputs()) {
          CAPTURE(n);
          CHECK(maxRelative(grads[std::string_view(n)].toVector(),
                            refGrads[std::string_view(n)].toVector()) <= 1e-12);
        }
        if (device.kind != Device::Kind::cpu || keep) continue;
        // Finite differences (once per row: the JIT's gradient, scratch on).
        const std::vector<std::string> inputs = back.gradientOutputs();
        for (std::size_t w = 0; w < inputs.size(); ++w) {
          const std::string x = inputs[w].substr(1);
          std::vector<double> analytic = grads[std::string_view(inputs[w])].toVector(), numeric;
          const std::vector<double> x0 = in.at(x).toVector();
          const double h = 1e-6;
          for (std::size_t e = 0; e < x0.size(); ++e) {
            auto at = [&](double delta) {
              std::vector<double> v = x0;
              v[e] += delta;
              std::map<std::string, Tensor> args = in;
              args[x] = Tensor::fromValues(in.at(x).shape(), v, DType::f64);
              return loss(args);
            };
            numeric.push_back((at(h) - at(-h)) / (2 * h));
          }
          CAPTURE(x);
          CHECK(maxRelative(analytic, numeric) <= 1e-6);
        }
      }
  }
}

TEST_CASE("saved tensors: the gradient program takes them as arguments, the forward keeps them") {
  Options o = options(Device::cpu(), false, {"m", "z"});
  Kernel fwd = einjit::compile(kSoftmax, o);
  Kernel back = fwd.gradient();
  CAPTURE(back.tensorArguments());
  CHECK(back.tensorArguments() == std::vector<std::string>{"x", "m", "dy", "z"});
  const std::string text = back.source();
  CAPTURE(text);
  CHECK(text.rfind("e[i, j] := exp(x[i, j] - m[i])", 0) == 0);
  // Without the option the same gradient recomputes m and z.
  CHECK(einjit::compile(kSoftmax).gradient().source().rfind("(max) m[i] := x[i, j]", 0) == 0);
  // Saved tensors are readable without keepIntermediates; the others are not.
  Tensor x = Tensor::random({4, 64}, DType::f32, 3);
  Outputs y = fwd(x);
  CHECK(y["m"].shape() == Shape{4});
  CHECK(y["z"].shape() == Shape{4});
  CHECK_THROWS_WITH_AS(y["e"], doctest::Contains("not kept after the call"), einjit::Error);
  // The run keeps only e in scratch: m and z are written in full (row blocks are the CPU JIT's;
  // without LLVM the CPU device is the interpreter, which has no plan to show).
#if EINJIT_HAVE_LLVM
  const std::string plan = fwd.explain({x});
  CAPTURE(plan);
  CHECK(plan.find("scratch: e)") != std::string::npos);
#endif
}

TEST_CASE("saved tensors: what cannot be saved is an einjit::Error with a caret") {
  struct Row {
    const char* program;
    const char* name;
    const char* message;
    int line, column; // 0, 0: no place in the program
  };
  const Row rows[] = {
      {"t[i] := x[i] * 2\ny[i] := t[i] + 1", "q",
       "cannot save 'q' for the gradient: the program assigns no tensor of that name (it "
       "assigns: t, y)",
       0, 0},
      {"t[i] := x[i] * 2\ny[i] := t[i] + 1", "x",
       "cannot save 'x' for the gradient: it is an argument of the program, which the gradient "
       "program takes anyway",
       1, 9},
      {"y[i] = y[i] * x[i]", "y", "the program changes this argument in place", 1, 1},
      {"t[i] := x[i] * 2\nt[i] += x[i]\ny[i] := t[i] + 1", "t",
       "cannot save 't' for the gradient: this statement writes it again after its ':='", 2, 1},
  };
  for (const Row& r : rows) {
    CAPTURE(r.program);
    Options o;
    o.saved = {r.name};
    std::string what;
    try {
      einjit::compile(r.program, o);
    } catch (const einjit::Error& e) {
      what = e.what();
    }
    CAPTURE(what);
    CHECK(what.find(r.message) != std::string::npos);
    if (r.line > 0)
      CHECK(what.rfind("<program>:" + std::to_string(r.line) + ":" + std::to_string(r.column) +
                           ": error:",
                       0) == 0);
  }
}
