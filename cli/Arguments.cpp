#include "Arguments.h"

#include "einjit/Error.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace einjit::cli {

namespace {

Shape parseShape(const std::string& name, const std::string& text) {
  Shape s;
  if (text.empty() || text == "scalar") return s;
  std::size_t i = 0;
  while (i <= text.size()) {
    std::size_t j = text.find('x', i);
    if (j == std::string::npos) j = text.size();
    std::string part = text.substr(i, j - i);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0 || errno == ERANGE || part[0] == '+')
      throw Error("--shape " + name + "=" + text +
                  ": extents are non-negative integers joined by 'x' (4x5x6)");
    s.push_back(v);
    i = j + 1;
  }
  return s;
}

// A decimal count in 0..max: digits only (no sign, no spaces), no overflow.
std::uint64_t parseCount(const std::string& flag, const std::string& text, std::uint64_t max) {
  auto fail = [&] {
    throw Error(flag + " takes an integer from 0 to " + std::to_string(max) + ", got '" + text +
                "'");
  };
  if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos)
    fail();
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v > max) fail();
  return v;
}

} // namespace

Options Arguments::options() const {
  Options opt;
  opt.defaultDType = dtype;
  opt.device = device;
  return opt;
}

Arguments parseArguments(const Words& args) {
  Arguments p;
  bool haveProgram = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= args.size()) throw Error(std::string(flag) + " needs a value");
      return args[++i];
    };
    auto splitEq = [&](const std::string& v, const char* flag) {
      auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        throw Error(std::string(flag) + " takes NAME=VALUE, got '" + v + "'");
      return std::pair{v.substr(0, eq), v.substr(eq + 1)};
    };
    if (a == "--shape") {
      auto [n, v] = splitEq(value("--shape"), "--shape");
      p.shapes[n] = parseShape(n, v);
    } else if (a == "--scalar") {
      auto [n, v] = splitEq(value("--scalar"), "--scalar");
      char* end = nullptr;
      errno = 0;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') throw Error("--scalar " + n + "=" + v + ": not a number");
      if (errno == ERANGE && std::isinf(d))
        throw Error("--scalar " + n + "=" + v + ": out of the range of a double");
      p.scalars[n] = d;
    } else if (a == "--wrt") {
      std::string list = value("--wrt");
      for (std::size_t b = 0; b <= list.size();) {
        std::size_t e = list.find(',', b);
        if (e == std::string::npos) e = list.size();
        if (e > b) p.wrt.push_back(list.substr(b, e - b));
        b = e + 1;
      }
    } else if (a == "--seed") {
      p.seed = parseCount("--seed", value("--seed"), std::numeric_limits<std::uint64_t>::max());
    } else if (a == "--dtype") {
      std::string d = value("--dtype");
      auto t = parseDType(d);
      if (!t || !isFloat(*t)) throw Error("--dtype takes f32, f64 or bf16, got '" + d + "'");
      p.dtype = *t;
      p.dtypeGiven = true;
    } else if (a == "--device") {
      std::string d = value("--device");
      if (d == "reference")
        p.device = Device::reference();
      else if (d == "cpu")
        p.device = Device::cpu();
      else if (d == "cuda")
        p.device = Device::cuda(0);
      else if (d.rfind("cuda:", 0) == 0)
        p.device = Device::cuda(static_cast<int>(parseCount("--device cuda:N", d.substr(5), 4095)));
      else
        throw Error("--device takes reference, cpu or cuda[:N], got '" + d + "'");
    } else if (a == "--input") {
      auto [n, v] = splitEq(value("--input"), "--input");
      if (v.empty()) throw Error("--input " + n + "= needs a file name");
      p.inputs[n] = v;
    } else if (a == "--save") {
      p.saveDir = value("--save");
      if (p.saveDir.empty()) throw Error("--save needs a directory");
    } else if (a == "--check") {
      p.check = true;
    } else if (a == "--cuda") {
      p.device = Device::cuda(0);
    } else if (a == "--ir") {
      p.ir = true;
    } else if (a == "--llvm") {
      p.llvm = true;
    } else if (a == "--grad") {
      p.grad = true;
    } else if (a == "--reps") {
      std::string v = value("--reps");
      p.reps = static_cast<int>(parseCount("--reps", v, 1000000));
      if (p.reps < 1) throw Error("--reps takes a positive count, got '" + v + "'");
    } else if (a.size() > 1 && a[0] == '-' && a[1] == '-') {
      throw Error("unknown option '" + a + "'");
    } else if (!haveProgram) {
      p.program = a;
      haveProgram = true;
    } else {
      throw Error("unexpected argument '" + a + "' (quote the program as one argument)");
    }
  }
  if (!haveProgram) throw Error("missing the program text");
  return p;
}

} // namespace einjit::cli
