#pragma once
// The fuzzer's one pass over the whole pipeline for an input (program text): parse -> check ->
// round trip through the printer -> bind on tiny shapes -> run on the reference interpreter and
// on the CPU JIT (lowering included) -> gradient -> the gradient program on both. Shared by the
// libFuzzer target (tests/fuzz/fuzz_pipeline.cpp) and the corpus replay in ctest
// (tests/fuzz/test_fuzz_replay.cpp), so a kept input replays exactly what the fuzzer ran.
//
// An einjit::Error anywhere is the expected answer to a bad input and ends the pass. A finding
// is anything else: another exception escapes (it is rethrown), a sanitizer report or a crash,
// or the interpreter and the JIT disagree (returned in Result::mismatch: one fails and the
// other does not, or a value differs).
#include "dsl/Parser.h"
#include "dsl/Printer.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"
#include "runtime/RandomInputs.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace einjit::fuzz {

// Inputs longer than this are skipped: long programs only repeat what short ones reach, and
// compile time grows with length (docs/RELIABILITY.md, limits).
constexpr std::size_t kMaxInputBytes = 2048;
// Programs whose bound iteration domains (forward or gradient, summed over statements) exceed
// this many points are not run: a `where i in 0:100000` is valid, only slow.
constexpr double kMaxWork = 20000;

struct Result {
  bool checked = false;     // compile() accepted it
  bool ran = false;         // the forward ran on both devices without an error
  bool gradientRan = false; // so did the gradient program
  std::string mismatch;     // non-empty: a finding
};

inline std::uint64_t hashOf(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

inline Options optionsFor(Device d) {
  Options o;
  o.device = d;
  o.defaultDType = DType::f64;
  o.maxVariants = 2;
  o.keepIntermediates = true; // every assigned tensor is compared
  return o;
}

// Points each statement iterates over (its box), summed; +inf when it does not bind.
inline double workOf(const dsl::Program& p, const dsl::BoundProgram& b) {
  double total = 0;
  for (const dsl::BoundStatement& st : b.stmts) {
    double n = 1;
    for (std::size_t v = 0; v < st.lo.size(); ++v)
      n *= static_cast<double>(std::max<std::int64_t>(0, st.hi[v] - st.lo[v]));
    total += n;
  }
  (void)p;
  return total;
}

// Differences in the last bits are not findings (the JIT may fuse a multiply-add); NaN against
// a number, or a different infinity, is.
inline std::string compareTensors(const std::string& name, const Tensor& jit, const Tensor& ref) {
  if (jit.shape() != ref.shape()) return "'" + name + "': shapes differ";
  std::vector<double> a = jit.toVector(), b = ref.toVector();
  double scale = 1;
  for (double v : b)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < a.size(); ++i) {
    bool bad = false;
    if (std::isnan(a[i]) || std::isnan(b[i]))
      bad = std::isnan(a[i]) != std::isnan(b[i]);
    else if (std::isinf(a[i]) || std::isinf(b[i]))
      bad = a[i] != b[i] && std::fabs(a[i] - b[i]) > 1e-6 * scale;
    else
      bad = std::fabs(a[i] - b[i]) > 1e-6 * scale;
    if (bad) {
      std::ostringstream o;
      o << "'" << name << "' element " << i << ": JIT " << a[i] << ", interpreter " << b[i];
      return o.str();
    }
  }
  return {};
}

struct Run {
  Outputs out;
  std::string error; // the einjit::Error's message, when the call failed
};

inline Run call(const Kernel& k, const std::map<std::string, Tensor>& tensors,
                const std::map<std::string, double>& scalars) {
  std::map<std::string, Tensor> copies; // '=' and '+=' arguments are written in place
  for (const auto& [n, t] : tensors) copies[n] = t.clone();
  Run r;
  try {
    r.out = k.call(copies, scalars);
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

// The same call on the interpreter and the JIT; a mismatch is returned, both failing is not one.
inline std::string compareRuns(const Kernel& ref, const Kernel& jit,
                               const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, double>& scalars, Run& refRun,
                               bool& bothRan) {
  refRun = call(ref, tensors, scalars);
  Run jitRun = call(jit, tensors, scalars);
  bothRan = false;
  if (refRun.error.empty() != jitRun.error.empty())
    return refRun.error.empty() ? "the JIT fails, the interpreter does not: " + jitRun.error
                                : "the interpreter fails, the JIT does not: " + refRun.error;
  if (!refRun.error.empty()) return {};
  bothRan = true;
  for (const dsl::TensorInfo& t : ref.program().tensors) {
    if (t.writtenBy.empty()) continue;
    std::string m = compareTensors(t.name, jitRun.out[std::string_view(t.name)],
                                   refRun.out[std::string_view(t.name)]);
    if (!m.empty()) return m;
  }
  return {};
}

// Arguments for program `p` with every dimension of extent n, scalars = 1 + n % 2; index
// tensors hold valid indices where any exist. Empty when the shapes do not bind or the
// program's domain exceeds kMaxWork.
inline bool makeArguments(const dsl::Program& p, std::int64_t n, std::uint64_t seed,
                          std::map<std::string, Tensor>& tensors,
                          std::map<std::string, double>& scalars,
                          const std::map<std::string, Shape>& fixed = {}) {
  std::map<std::string, Shape> shapes = fixed;
  for (int id : p.arguments) {
    const dsl::TensorInfo& t = p.tensors[static_cast<std::size_t>(id)];
    if (!shapes.count(t.name))
      shapes[t.name] = Shape(static_cast<std::size_t>(std::max(t.rank, 0)), n);
  }
  for (const dsl::ParamInfo& q : p.params)
    if (!scalars.count(q.name)) scalars[q.name] = static_cast<double>(1 + n % 2);
  dsl::BoundProgram b;
  try {
    b = bindShapes(p, shapes, scalars, DType::f64);
  } catch (const Error&) {
    return false;
  }
  if (workOf(p, b) > kMaxWork) return false;
  for (int id : p.arguments) {
    const dsl::TensorInfo& t = p.tensors[static_cast<std::size_t>(id)];
    if (tensors.count(t.name)) continue;
    tensors[t.name] = t.readAsIndex ? randomIndices(p, b, id, shapes[t.name], ++seed)
                                    : Tensor::random(shapes[t.name], DType::f64, ++seed);
  }
  return true;
}

// Shapes an input may fix in a first comment line, "#! x=0,3 w=2" (a comment to the language):
// a kept regression reproduces an exact binding, zero-size dimensions included.
inline std::map<std::string, Shape> shapeHeader(const std::string& text) {
  std::map<std::string, Shape> shapes;
  if (text.rfind("#!", 0) != 0) return shapes;
  std::istringstream line(text.substr(2, text.find('\n') - 2));
  std::string item;
  while (line >> item) {
    std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    Shape s;
    std::istringstream dims(item.substr(eq + 1));
    std::string d;
    while (std::getline(dims, d, ','))
      if (!d.empty() && d.size() < 3 && d.find_first_not_of("0123456789") == std::string::npos)
        s.push_back(std::stoll(d));
    shapes[item.substr(0, eq)] = s;
  }
  return shapes;
}

inline Result runPipeline(std::string_view input) {
  Result res;
  if (input.size() > kMaxInputBytes) return res;
  const std::string text(input);
  Kernel ref;
  try {
    ref = compile(text, optionsFor(Device::reference()));
  } catch (const Error&) {
    return res;
  }
  res.checked = true;
  // What checks prints to a text that parses back to the same tree.
  {
    dsl::ProgramAst a = dsl::parse(text);
    std::string printed = dsl::printProgram(a);
    if (!dsl::sameProgram(a, dsl::parse(printed)) ||
        dsl::printProgram(dsl::parse(printed)) != printed)
    {
      res.mismatch = "the printed program does not parse back to the same tree:\n" + printed;
      return res;
    }
  }
  Kernel jit = compile(text, optionsFor(Device::cpu()));
  const std::uint64_t seed = hashOf(text);
  const std::int64_t n = 1 + static_cast<std::int64_t>(seed % 3);
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> scalars;
  std::map<std::string, Shape> fixed = shapeHeader(text);
  // One input in eight gives its first argument an empty first dimension.
  const dsl::Program& p = ref.program();
  if (fixed.empty() && seed % 8 == 0 && !p.arguments.empty()) {
    const dsl::TensorInfo& t = p.tensors[static_cast<std::size_t>(p.arguments[0])];
    if (t.rank > 0) {
      fixed[t.name] = Shape(static_cast<std::size_t>(t.rank), n);
      fixed[t.name][0] = 0;
    }
  }
  if (!makeArguments(p, n, seed, tensors, scalars, fixed)) return res;
  Run fwd;
  bool ran = false;
  res.mismatch = compareRuns(ref, jit, tensors, scalars, fwd, ran);
  if (!res.mismatch.empty()) {
    res.mismatch = "forward: " + res.mismatch;
    return res;
  }
  res.ran = ran;
  Kernel gref;
  try {
    gref = ref.gradient();
  } catch (const Error&) {
    return res;
  }
  if (!ran) return res;
  // The gradient program takes d<Y> for each output and the forward inputs.
  std::vector<std::string> dys = gref.gradientInputs();
  fixed.clear();
  std::map<std::string, Tensor> gtensors;
  std::map<std::string, double> gscalars;
  for (std::size_t i = 0; i < fwd.out.size() && i < dys.size(); ++i) {
    if (fwd.out[i].rank() == 0)
      gscalars[dys[i]] = 0.5;
    else
      gtensors[dys[i]] = Tensor::random(fwd.out[i].shape(), DType::f64, seed + 7 + i);
  }
  for (const auto& [name, t] : tensors) {
    gtensors[name] = t;
    fixed[name] = t.shape();
  }
  for (const auto& [name, v] : scalars) gscalars[name] = v;
  Kernel gjit;
  try {
    gjit = compile(gref.source(), optionsFor(Device::cpu()));
  } catch (const Error& e) {
    res.mismatch = std::string("the gradient's source does not compile: ") + e.what();
    return res;
  }
  std::map<std::string, Tensor> gargs;
  for (const std::string& name : gref.tensorArguments()) {
    auto it = gtensors.find(name);
    if (it != gtensors.end()) gargs[name] = it->second;
  }
  std::map<std::string, double> gs;
  for (const std::string& name : gref.scalarArguments()) {
    auto it = gscalars.find(name);
    if (it != gscalars.end()) gs[name] = it->second;
  }
  for (const auto& [name, t] : gargs) fixed[name] = t.shape();
  if (!makeArguments(gref.program(), n, seed + 99, gargs, gs, fixed)) return res;
  Run back;
  bool gran = false;
  res.mismatch = compareRuns(gref, gjit, gargs, gs, back, gran);
  if (!res.mismatch.empty()) res.mismatch = "gradient: " + res.mismatch;
  res.gradientRan = gran;
  return res;
}

} // namespace einjit::fuzz
