// einjit grad and einjit gradcheck.
#include "Commands.h"

#include "dsl/Parser.h"
#include "dsl/Printer.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"
#include "grad/Differentiate.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>

namespace einjit::cli {

namespace {

struct GradArgs {
  std::string program;
  std::vector<std::string> wrt;
  std::map<std::string, Shape> shapes;
  std::map<std::string, double> scalars;
  std::uint64_t seed = 1;
};

std::vector<std::string> splitComma(const std::string& s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i <= s.size()) {
    std::size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

Shape shapeOf(const std::string& name, const std::string& text) {
  Shape s;
  if (text.empty() || text == "scalar") return s;
  for (const std::string& part : splitComma(std::string(text).replace(0, 0, ""))) (void)part;
  std::size_t i = 0;
  while (i <= text.size()) {
    std::size_t j = text.find('x', i);
    if (j == std::string::npos) j = text.size();
    std::string part = text.substr(i, j - i);
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0)
      throw Error("--shape " + name + "=" + text +
                  ": extents are non-negative integers joined by 'x'");
    s.push_back(v);
    i = j + 1;
  }
  return s;
}

GradArgs parse(const Words& words) {
  GradArgs a;
  bool have = false;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= words.size()) throw Error(std::string(flag) + " needs a value");
      return words[++i];
    };
    auto kv = [&](const std::string& v, const char* flag) {
      auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0) throw Error(std::string(flag) + " takes NAME=VALUE");
      return std::pair{v.substr(0, eq), v.substr(eq + 1)};
    };
    if (w == "--wrt")
      a.wrt = splitComma(value("--wrt"));
    else if (w == "--shape") {
      auto [n, v] = kv(value("--shape"), "--shape");
      a.shapes[n] = shapeOf(n, v);
    } else if (w == "--scalar") {
      auto [n, v] = kv(value("--scalar"), "--scalar");
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') throw Error("--scalar " + n + "=" + v + ": not a number");
      a.scalars[n] = d;
    } else if (w == "--seed")
      a.seed = std::strtoull(value("--seed").c_str(), nullptr, 10);
    else if (w.rfind("--", 0) == 0)
      throw Error("unknown option '" + w + "'");
    else if (!have) {
      a.program = w;
      have = true;
    } else
      throw Error("unexpected argument '" + w + "'");
  }
  if (!have) throw Error("missing the program text");
  return a;
}

} // namespace

int grad(const Words& words, std::ostream& out, std::ostream&) {
  GradArgs a = parse(words);
  dsl::Program p = dsl::check(a.program);
  grad::Gradient g = grad::differentiate(p, a.wrt);
  out << dsl::printProgram(g.program) << '\n';
  for (const std::string& s : g.scatters) out << "# scatter: " << s << '\n';
  return 0;
}

// Central finite differences in float64 on random inputs against the gradient program run by
// the reference interpreter, with a random output gradient; prints the largest relative error
// per input and fails above 1e-6.
int gradcheck(const Words& words, std::ostream& out, std::ostream&) {
  GradArgs a = parse(words);
  Options opt;
  opt.defaultDType = DType::f64;
  Kernel fwd = compile(a.program, opt);
  const dsl::Program& p = fwd.program();
  grad::Gradient g = grad::differentiate(p, a.wrt);
  Kernel back = compile(dsl::printProgram(g.program), opt);

  std::map<std::string, Tensor> inputs;
  std::uint64_t seed = a.seed;
  for (int id : p.arguments) {
    const auto& t = p.tensors[static_cast<std::size_t>(id)];
    auto it = a.shapes.find(t.name);
    if (it == a.shapes.end())
      dsl::fail(*p.source, t.firstUse, "missing --shape " + t.name + "=...");
    inputs[t.name] = t.readAsIndex ? Tensor::randomInt(it->second, 0, 2, DType::i64, ++seed)
                                   : Tensor::random(it->second, DType::f64, ++seed);
  }
  Outputs y = fwd.call(inputs, a.scalars);
  // Loss = sum over outputs of <dY, Y> with random dY.
  std::map<std::string, Tensor> backIn = inputs;
  std::map<std::string, double> backScalars = a.scalars;
  std::vector<Tensor> dys;
  for (std::size_t i = 0; i < y.size(); ++i) {
    Tensor dy = Tensor::random(y[i].shape(), DType::f64, ++seed);
    dys.push_back(dy);
    if (y[i].rank() == 0)
      backScalars[g.outputGrads[i]] = dy.get({});
    else
      backIn[g.outputGrads[i]] = dy;
  }
  // Only what the gradient program takes.
  std::map<std::string, Tensor> tensorsIn;
  for (const std::string& n : back.tensorArguments()) tensorsIn[n] = backIn.at(n);
  std::map<std::string, double> scalarsIn;
  for (const std::string& n : back.scalarArguments()) scalarsIn[n] = backScalars.at(n);
  Outputs grads = back.call(tensorsIn, scalarsIn);

  auto loss = [&]() {
    Outputs r = fwd.call(inputs, a.scalars);
    double l = 0;
    for (std::size_t i = 0; i < r.size(); ++i) {
      std::vector<double> yv = r[i].toVector(), dv = dys[i].toVector();
      for (std::size_t j = 0; j < yv.size(); ++j) l += yv[j] * dv[j];
    }
    return l;
  };
  bool ok = true;
  for (std::size_t w = 0; w < g.inputGrads.size(); ++w) {
    const std::string& name = g.inputGrads[w];
    const std::string xname =
        p.tensors[static_cast<std::size_t>(p.findTensor(a.wrt.empty() ? name.substr(1) : a.wrt[w]))]
            .name;
    Tensor x = inputs.at(xname);
    Tensor gx = grads[std::string_view(name)];
    std::vector<double> analytic = gx.toVector();
    double maxErr = 0, scale = 0;
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
      maxErr = std::max(maxErr, std::fabs(fd - analytic[static_cast<std::size_t>(e)]));
      scale = std::max(scale, std::fabs(fd));
      for (std::size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < x.dim(static_cast<int>(d))) break;
        idx[d] = 0;
      }
    }
    double rel = maxErr / std::max(1.0, scale);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: max relative error %.3g (%lld elements)\n", name.c_str(),
                  rel, static_cast<long long>(x.numel()));
    out << buf;
    ok = ok && rel <= 1e-6;
  }
  out << (ok ? "gradcheck: PASS\n" : "gradcheck: FAIL\n");
  return ok ? 0 : 1;
}

} // namespace einjit::cli
