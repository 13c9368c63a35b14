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
// the reference interpreter; prints the largest relative error per input and fails above 1e-6.
int gradcheck(const Words& words, std::ostream& out, std::ostream&) {
  GradArgs a = parse(words);
  GradCheckResult r = einjit::gradcheck(a.program, a.shapes, a.scalars, a.wrt, a.seed);
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "d%s: max relative error %.3g\n", r.inputs[i].c_str(),
                  r.maxRelativeError[i]);
    out << buf;
  }
  out << (r.passed ? "gradcheck: PASS\n" : "gradcheck: FAIL\n");
  return r.passed ? 0 : 1;
}

} // namespace einjit::cli
