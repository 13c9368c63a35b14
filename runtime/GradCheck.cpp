// gradcheck(): a gradient program against central finite differences in float64.
#include "einjit/einjit.h"

#include "dsl/Program.h"
#include "runtime/RandomInputs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace einjit {

namespace {

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

} // namespace

GradCheckResult gradcheck(const std::string& source, const std::map<std::string, Shape>& shapes,
                          const std::map<std::string, double>& scalars,
                          const std::vector<std::string>& wrt, std::uint64_t seed, double tolerance,
                          Device device) {
  Options opt;
  opt.defaultDType = DType::f64;
  opt.device = device;
  Kernel fwd = compile(source, opt);
  Kernel back = fwd.gradient(wrt);
  const dsl::Program& p = fwd.program();

  std::map<std::string, Tensor> inputs;
  bool gathers = false;
  for (int id : p.arguments) {
    const auto& t = p.tensors[static_cast<std::size_t>(id)];
    if (!shapes.count(t.name))
      dsl::fail(*p.source, t.firstUse, "gradcheck needs a shape for '" + t.name + "'");
    gathers = gathers || t.readAsIndex;
  }
  dsl::BoundProgram bound;
  if (gathers) bound = bindShapes(p, shapes, scalars, DType::f64);
  for (int id : p.arguments) {
    const auto& t = p.tensors[static_cast<std::size_t>(id)];
    const Shape& shape = shapes.at(t.name);
    inputs[t.name] = t.readAsIndex ? randomIndices(p, bound, id, shape, ++seed)
                                   : Tensor::random(shape, DType::f64, ++seed);
  }
  // Tensors the program changes in place ('='/'+=' outputs) start from the same values in
  // every forward call.
  std::map<std::string, Tensor> initial;
  for (int id : p.arguments) {
    const auto& t = p.tensors[static_cast<std::size_t>(id)];
    if (!t.writtenBy.empty()) initial[t.name] = inputs.at(t.name).clone();
  }
  auto forward = [&] {
    for (auto& [name, t] : initial) inputs[name] = t.clone();
    return fwd.call(inputs, scalars);
  };
  Outputs y = forward();
  std::vector<Tensor> dys;
  std::map<std::string, Tensor> backTensors;
  std::map<std::string, double> backScalars = scalars;
  std::vector<std::string> dyNames = back.gradientInputs();
  for (std::size_t i = 0; i < y.size(); ++i) {
    Tensor dy = Tensor::random(y[i].shape(), DType::f64, ++seed);
    dys.push_back(dy);
    if (y[i].rank() == 0)
      backScalars[dyNames[i]] = dy.get({});
    else
      backTensors[dyNames[i]] = dy;
  }
  // The gradient program's arguments are the output gradients, the forward's inputs and its
  // scalars; any other name would be a bug in the gradient, reported as such (not as a lookup
  // failure of the standard library).
  auto find = [](const auto& map, const std::string& n, const char* what) {
    auto it = map.find(n);
    if (it == map.end())
      throw InternalError("gradcheck: the gradient program takes " + std::string(what) + " '" +
                          n + "', which the forward program does not have");
    return it->second;
  };
  std::map<std::string, Tensor> tin;
  for (const std::string& n : back.tensorArguments())
    tin[n] = backTensors.count(n) ? backTensors.at(n) : find(inputs, n, "a tensor");
  std::map<std::string, double> sin;
  for (const std::string& n : back.scalarArguments()) sin[n] = find(backScalars, n, "a scalar");
  Outputs grads = back.call(tin, sin);

  auto loss = [&] {
    Outputs r = forward();
    double l = 0;
    for (std::size_t i = 0; i < r.size(); ++i) {
      std::vector<double> yv = r[i].toVector(), dv = dys[i].toVector();
      for (std::size_t j = 0; j < yv.size(); ++j) l += yv[j] * dv[j];
    }
    return l;
  };

  GradCheckResult res;
  // Each input once, in the order given (the gradient program has one output per input, however
  // often `wrt` names it).
  std::vector<std::string> xs;
  for (const std::string& n : wrt)
    if (std::find(xs.begin(), xs.end(), n) == xs.end()) xs.push_back(n);
  if (xs.empty())
    for (int id : p.arguments) {
      const auto& t = p.tensors[static_cast<std::size_t>(id)];
      if (t.readAsValue && !t.readAsIndex && t.writtenBy.empty()) xs.push_back(t.name);
    }
  std::int64_t outputElements = 0;
  for (std::size_t i = 0; i < y.size(); ++i) outputElements += y[i].numel();
  std::vector<std::string> gnames = back.gradientOutputs();
  if (gnames.size() != xs.size())
    throw InternalError("gradcheck: " + std::to_string(xs.size()) + " inputs to differentiate but " +
                        std::to_string(gnames.size()) + " gradients");
  std::int64_t comparedAll = 0;
  bool ok = true;
  auto failWith = [&](const std::string& why) {
    if (ok) res.why = why;
    ok = false;
  };
  for (std::size_t w = 0; w < xs.size(); ++w) {
    Tensor x = inputs.at(xs[w]);
    std::vector<double> analytic = grads[std::string_view(gnames[w])].toVector();
    double maxErr = 0, scale = 0;
    std::int64_t bothNaN = 0, bad = 0;
    const double h = 1e-6;
    std::vector<std::int64_t> idx(static_cast<std::size_t>(x.rank()), 0);
    for (std::int64_t e = 0; e < x.numel(); ++e) {
      double orig = x.get(idx);
      x.set(idx, orig + h);
      double lp = loss();
      x.set(idx, orig - h);
      double lm = loss();
      x.set(idx, orig);
      double fd = (lp - lm) / (2 * h);
      double an = analytic[static_cast<std::size_t>(e)];
      if (std::isfinite(fd) && std::isfinite(an)) {
        maxErr = std::max(maxErr, std::fabs(fd - an));
        scale = std::max(scale, std::fabs(fd));
      } else if (std::isnan(fd) && std::isnan(an)) {
        ++bothNaN;
      } else if (fd != an) { // one finite and one not, NaN against a number, or inf vs -inf
        ++bad;
        failWith("d" + xs[w] + " element " + std::to_string(e) + ": finite differences give " +
                 number(fd) + ", the gradient program " + number(an));
      }
      for (std::size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < x.dim(static_cast<int>(d))) break;
        idx[d] = 0;
      }
    }
    double rel = maxErr / std::max(1.0, scale);
    if (bad > 0) rel = INFINITY;
    if (x.numel() > 0 && bothNaN == x.numel()) {
      rel = INFINITY;
      failWith("d" + xs[w] + ": every value is NaN, in the finite differences and the gradient");
    }
    if (rel > tolerance && ok) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "d%s: max relative error %.3g above the tolerance %.0e",
                    xs[w].c_str(), rel, tolerance);
      failWith(buf);
    }
    res.inputs.push_back(xs[w]);
    res.maxRelativeError.push_back(rel);
    res.compared.push_back(x.numel());
    comparedAll += x.numel();
  }
  if (xs.empty())
    failWith("nothing to compare: the program has no input to differentiate");
  else if (outputElements == 0)
    failWith("nothing to compare: every output is empty");
  else if (comparedAll == 0)
    failWith("nothing to compare: every differentiated input is empty");
  res.passed = ok;
  return res;
}

} // namespace einjit
