#pragma once
// Runs programs on a device and on the reference interpreter with the same inputs and compares
// every assigned tensor (forward and gradient programs): shared by the CPU JIT and CUDA tests.
#include "GradTable.h"
#include "InterpreterTable.h"

#include "dsl/Program.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace einjit::test {

using einjit::Arg;
using einjit::Device;
using einjit::DType;
using einjit::Kernel;
using einjit::Outputs;
using einjit::Shape;
using einjit::Tensor;

inline einjit::Options on(Device d, DType def = DType::f64) {
  einjit::Options o;
  o.device = d;
  o.defaultDType = def;
  // The tables compare every assigned tensor, intermediates included.
  o.keepIntermediates = true;
  return o;
}

// bf16: each stored result is rounded to 8 significant bits (the 1e-2 for bf16 inputs).
inline double tolerance(DType t) {
  return t == DType::f32 ? 2e-4 : t == DType::bf16 ? 1e-2 : 1e-10;
}

// max |a - b| / max(1, max |b|), NaN where they disagree on NaN-ness.
inline double relativeError(const Tensor& a, const Tensor& b) {
  std::vector<double> va = a.toVector(), vb = b.toVector();
  if (va.size() != vb.size()) return INFINITY;
  double num = 0, den = 1;
  for (std::size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i]) || std::isnan(vb[i])) {
      if (std::isnan(va[i]) != std::isnan(vb[i])) return NAN;
      continue;
    }
    if (std::isinf(vb[i]) || std::isinf(va[i])) {
      if (va[i] != vb[i]) return INFINITY;
      continue;
    }
    num = std::max(num, std::fabs(va[i] - vb[i]));
    den = std::max(den, std::fabs(vb[i]));
  }
  return num / den;
}

// Every tensor the program assigns, on both devices.
inline void checkSame(const Outputs& jit, const Outputs& ref, const std::vector<std::string>& names,
                      DType dtype) {
  for (const std::string& n : names) {
    CAPTURE(n);
    const Tensor& a = jit[std::string_view(n)];
    const Tensor& b = ref[std::string_view(n)];
    REQUIRE(a.shape() == b.shape());
    CHECK(a.dtype() == b.dtype());
    double err = relativeError(a, b);
    CHECK(err <= tolerance(dtype));
  }
}

inline std::vector<std::string> assigned(const Kernel& k) {
  std::vector<std::string> v;
  for (const auto& t : k.program().tensors)
    if (!t.writtenBy.empty()) v.push_back(t.name);
  return v;
}

// Copies src's values into dst (same shape, any strides; host tensors).
inline void setValues(const Tensor& dst, const Tensor& src) {
  Tensor d = dst;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(src.rank()), 0);
  for (double x : src.toVector()) {
    d.set(idx, x);
    for (std::size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < src.shape()[k]) break;
      idx[k] = 0;
    }
  }
}

// A view of a copy of t whose last dimension has stride 2 (every other element of a buffer).
inline Tensor strided(const Tensor& t) {
  if (t.rank() == 0) return t;
  Shape big = t.shape();
  big.back() = big.back() * 2;
  Tensor b = Tensor::full(big, 7.0, t.dtype());
  Tensor v = b.slice(t.rank() - 1, 0, big.back(), 2);
  setValues(v, t);
  return v;
}

inline Tensor converted(const Tensor& t, DType to) {
  if (!einjit::isFloat(t.dtype())) return t.clone();
  return t.to(to);
}

// A kernel's arguments in its order: tensors by name, then scalars by name.
inline std::vector<Arg> argsOf(const Kernel& k, const std::map<std::string, Tensor>& tensors,
                               const std::map<std::string, double>& scalars) {
  std::vector<Arg> a;
  for (const auto& t : k.tensorArguments()) a.emplace_back(tensors.at(t));
  for (const auto& s : k.scalarArguments()) a.emplace_back(scalars.at(s));
  return a;
}

// Two independent copies of `args` converted to dtype: one for the reference, one for the
// device under test (strided views when asked). Scalars are passed as they are.
inline std::pair<std::vector<Arg>, std::vector<Arg>> copiedArgs(const std::vector<Arg>& args,
                                                                DType dtype, bool strideArgs) {
  std::vector<Arg> a1, a2;
  for (const Arg& a : args) {
    if (!a.isTensor()) {
      a1.push_back(a);
      a2.push_back(a);
      continue;
    }
    Tensor t = converted(a.tensor(), dtype);
    a1.push_back(t.clone());
    a2.push_back(strideArgs ? strided(t) : t.clone());
  }
  return {std::move(a1), std::move(a2)};
}

// Runs a program on both devices with the same (copied) arguments and compares.
inline void compareCall(const std::string& program, const std::vector<Arg>& args, DType dtype,
                        bool strideArgs, Device device = Device::cpu()) {
  Kernel ref = einjit::compile(program, on(Device::reference(), dtype));
  Kernel jit = einjit::compile(program, on(device, dtype));
  auto [a1, a2] = copiedArgs(args, dtype, strideArgs);
  Outputs r = ref.call(a1);
  Outputs j = jit.call(a2);
  checkSame(j, r, assigned(ref), dtype);
}

// Random arguments: index tensors i64 in 0..2, the others of dtypeOf(their name).
inline std::map<std::string, Tensor>
randomArgs(const einjit::dsl::Program& p, const std::map<std::string, Shape>& shapes,
           const std::function<DType(const std::string&)>& dtypeOf, std::uint64_t seed) {
  std::map<std::string, Tensor> in;
  for (int id : p.arguments) {
    const auto& t = p.tensors[static_cast<std::size_t>(id)];
    const Shape& s = shapes.at(t.name);
    in[t.name] = t.readAsIndex ? Tensor::randomInt(s, 0, 2, DType::i64, ++seed)
                               : Tensor::random(s, dtypeOf(t.name), ++seed);
  }
  return in;
}

inline std::map<std::string, Tensor> randomArgs(const einjit::dsl::Program& p,
                                                const std::map<std::string, Shape>& shapes,
                                                DType dtype, std::uint64_t seed) {
  return randomArgs(
      p, shapes, [dtype](const std::string&) { return dtype; }, seed);
}

// Forward and gradient of a program on both devices, on random inputs.
inline void compareProgram(const std::string& program, const std::map<std::string, Shape>& shapes,
                           const std::map<std::string, double>& scalars,
                           const std::vector<std::string>& wrt, DType dtype, std::uint64_t seed,
                           Device device = Device::cpu()) {
  Kernel ref = einjit::compile(program, on(Device::reference(), dtype));
  Kernel jit = einjit::compile(program, on(device, dtype));
  auto in = randomArgs(ref.program(), shapes, dtype, seed);
  Outputs r = ref.call(in, scalars);
  Outputs j = jit.call(in, scalars);
  {
    INFO("forward");
    checkSame(j, r, assigned(ref), dtype);
  }
  Kernel gref = ref.gradient(wrt);
  Kernel gjit = einjit::compile(gref.source(), on(device, dtype));
  std::map<std::string, double> s = scalars;
  std::vector<std::string> dys = gref.gradientInputs();
  for (std::size_t i = 0; i < r.size(); ++i) {
    Tensor dy = Tensor::random(r[i].shape(), dtype, seed + 50 + i);
    if (r[i].rank() == 0)
      s[dys[i]] = dy.get({});
    else
      in[dys[i]] = dy;
  }
  std::map<std::string, Tensor> gin;
  for (const auto& n : gref.tensorArguments()) gin[n] = in.at(n);
  std::map<std::string, double> gs;
  for (const auto& n : gref.scalarArguments()) gs[n] = s.at(n);
  INFO("gradient program:\n" << gref.source());
  Outputs gr = gref.call(gin, gs);
  Outputs gj = gjit.call(gin, gs);
  checkSame(gj, gr, assigned(gref), dtype);
}

// A program over bf16 and f32 tensors (docs/LANGUAGE.md "dtypes": it computes in f32): the
// tensors named in `f32` are f32, the other floating-point ones bf16. Forward and gradient on
// `device` against the interpreter, and against the same program over f32 tensors holding the
// same (bf16-representable) values, which must agree to f32 rounding (on the interpreter,
// exactly): a mixed program reads each tensor in its own dtype and computes nothing in bf16.
// Every ':=' result is f32. The rows assign with ':=' only.
inline void compareMixed(const std::string& program, const std::map<std::string, Shape>& shapes,
                         const std::set<std::string>& f32, std::uint64_t seed,
                         Device device = Device::cpu()) {
  Kernel ref = einjit::compile(program, on(Device::reference(), DType::f32));
  Kernel jit = einjit::compile(program, on(device, DType::f32));
  std::map<std::string, Tensor> in = randomArgs(
      ref.program(), shapes,
      [&](const std::string& n) { return f32.count(n) ? DType::f32 : DType::bf16; }, seed);
  std::map<std::string, Tensor> wide;
  for (const auto& [n, a] : in) wide[n] = converted(a, DType::f32); // index tensors: copies
  seed += in.size();
  Outputs r = ref.call(in, {});
  Outputs j = jit.call(in, {});
  Outputs w = einjit::compile(program, on(device, DType::f32)).call(wide, {});
  Outputs rw = ref.call(wide, {});
  {
    INFO("forward");
    checkSame(j, r, assigned(ref), DType::f32);
    checkSame(j, w, assigned(ref), DType::f32);
    checkSame(r, rw, assigned(ref), DType::f64); // the interpreter reads bf16 exactly
    for (const std::string& n : assigned(ref)) {
      CAPTURE(n);
      CHECK(j[std::string_view(n)].dtype() == DType::f32);
    }
  }
  Kernel gref = ref.gradient({});
  Kernel gjit = einjit::compile(gref.source(), on(device, DType::f32));
  std::vector<std::string> dys = gref.gradientInputs();
  for (std::size_t i = 0; i < r.size(); ++i)
    in[dys[i]] = Tensor::random(r[i].shape(), DType::f32, seed + 50 + i);
  std::map<std::string, Tensor> gin;
  for (const auto& n : gref.tensorArguments()) gin[n] = in.at(n);
  INFO("gradient program:\n" << gref.source());
  Outputs gr = gref.call(gin, {});
  Outputs gj = gjit.call(gin, {});
  checkSame(gj, gr, assigned(gref), DType::f32);
}

// Shapes grown to d*2+1 (odd sizes, more than one vector/tile); empty when they do not bind.
inline std::map<std::string, Shape> grown(const std::map<std::string, Shape>& shapes) {
  std::map<std::string, Shape> g;
  for (const auto& [n, s] : shapes) {
    Shape t = s;
    for (auto& e : t) e = e * 2 + 1;
    g[n] = t;
  }
  return g;
}

// Every interpreter-table row on `device` against the interpreter: f64 and f32, contiguous and
// strided arguments.
inline void compareInterpreterTable(Device device) {
  auto table = interp::rows();
  REQUIRE(table.size() >= 45);
  for (std::size_t n = 0; n < table.size(); ++n) {
    const auto& row = table[n];
    INFO("row " << n << ": " << row.program);
    for (DType dt : {DType::f64, DType::f32})
      for (bool stride : {false, true}) {
        CAPTURE(stride);
        try {
          compareCall(row.program, row.args, dt, stride, device);
        } catch (const std::exception& e) {
          FAIL_CHECK("threw: " << std::string(e.what()));
        }
      }
  }
}

// Every gradient-table program, forward and gradient, f64 and f32, on its shapes and on grown
// shapes where those bind. Returns how many programs ran on grown shapes.
inline int compareGradTable(Device device) {
  int grownRan = 0;
  for (const auto& row : kGradRows) {
    INFO("program: " << std::string(row.program));
    for (DType dt : {DType::f64, DType::f32}) {
      try {
        compareProgram(row.program, row.shapes, row.scalars, row.wrt, dt, 11, device);
      } catch (const std::exception& e) {
        FAIL_CHECK("threw: " << std::string(e.what()));
      }
      auto g = grown(row.shapes);
      try {
        Kernel probe = einjit::compile(row.program, on(Device::reference(), dt));
        probe.call(randomArgs(probe.program(), g, dt, 3), row.scalars);
      } catch (const einjit::Error&) {
        continue; // these shapes do not fit the program (a square matrix, a fixed size)
      }
      ++grownRan;
      try {
        compareProgram(row.program, g, row.scalars, row.wrt, dt, 12, device);
      } catch (const std::exception& e) {
        FAIL_CHECK("grown shapes threw: " << std::string(e.what()));
      }
    }
  }
  return grownRan / 2;
}

// n random statements (fixed seed), forward and gradient; returns how many ran without
// throwing.
inline int compareRandomPrograms(Device device, int n) {
  std::mt19937_64 rng(4242);
  int ran = 0;
  for (int k = 0; k < n; ++k) {
    std::map<std::string, Shape> shapes;
    std::string program = randomStatement(rng, shapes);
    INFO(program);
    try {
      compareProgram(program, shapes, {}, {}, k % 3 == 0 ? DType::f32 : DType::f64,
                     static_cast<std::uint64_t>(k), device);
      ++ran;
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << std::string(e.what()));
    }
  }
  return ran;
}

// Run-time checks hoisted ahead of a program (codegen/Lower.h): on `device` (with tensors
// moved there by `place`), an embedding's gradient checks its tokens first and adds into the
// caller's table in place; a bad token is the interpreter's error with the table untouched; a
// hoisted check that fails at a point the program never reaches (j's range empty at i = 0)
// falls back to the interpreter and the result is exact; a gather of a computed index is not
// hoisted.
inline void checkHoistedChecks(Device device, const std::function<Tensor(const Tensor&)>& place) {
  auto run = [&](const char* program, Device d, std::vector<Tensor> args) {
    for (Tensor& a : args) a = d.kind == Device::Kind::reference ? a : place(a);
    std::vector<Arg> in(args.begin(), args.end());
    einjit::compile(program, on(d, DType::f64)).call(in);
    return args[0].device() == einjit::DeviceKind::cpu ? args[0] : args[0].cpu();
  };
  const char* emb = "dE[tok[b], d] += dy[b, d]";
  const Tensor tok = Tensor::fromValues({5}, {2, 0, 2, 3, 2}, DType::i64);
  const Tensor dy = Tensor::random({5, 6}, DType::f64, 1),
               E0 = Tensor::random({4, 6}, DType::f64, 2);
  const std::string text = einjit::compile(emb, on(device, DType::f64))
                               .explain({Arg(place(E0)), Arg(place(tok)), Arg(place(dy))});
  CHECK(text.find("checked at run time (gathers or unproven subscripts), by 1 function(s) run "
                  "first: written arguments are used in place") != std::string::npos);
  CHECK(relativeError(run(emb, device, {E0.clone(), tok, dy}),
                      run(emb, Device::reference(), {E0.clone(), tok, dy})) < 1e-12);
  // In place: the caller's tensor holds the sum.
  Tensor table = place(E0.clone());
  einjit::compile(emb, on(device, DType::f64))(table, place(tok), place(dy));
  CHECK(table.cpu().get({2, 1}) ==
        doctest::Approx(E0.get({2, 1}) + dy.get({0, 1}) + dy.get({2, 1}) + dy.get({4, 1})));
  const Tensor bad = Tensor::fromValues({5}, {2, 0, 4, 3, 2}, DType::i64);
  Tensor kept = place(E0.clone());
  CHECK_THROWS_WITH_AS(einjit::compile(emb, on(device, DType::f64))(kept, place(bad), place(dy)),
                       doctest::Contains("gather index 4 is out of bounds for 'dE' (extent 4)"),
                       einjit::Error);
  CHECK(kept.cpu().toVector() == E0.toVector());
  const char* tri = "y[i] += x[idx[i]] * w[j] where j in 0:i";
  const Tensor idx = Tensor::fromValues({4}, {9, 1, 4, 0}, DType::i64); // x[9]: never read
  const Tensor x = Tensor::random({5}, DType::f64, 3), w = Tensor::random({4}, DType::f64, 4);
  const Tensor y0 = Tensor::random({4}, DType::f64, 5);
  CHECK(einjit::compile(tri, on(device, DType::f64))
            .explain({Arg(place(y0)), Arg(place(x)), Arg(place(idx)), Arg(place(w))})
            .find("run first") != std::string::npos);
  const Tensor got = run(tri, device, {y0.clone(), x, idx, w});
  CHECK(got.toVector() == run(tri, Device::reference(), {y0.clone(), x, idx, w}).toVector());
  CHECK(got.get({0}) == y0.get({0}));
  const std::string computed = einjit::compile("t[i] := x[i]\ny[i] += E[t[i]]", on(device))
                                   .explain({Arg(place(w)), Arg(place(y0)), Arg(place(x))});
  CHECK(computed.find("checked at run time") != std::string::npos);
  CHECK(computed.find("run first") == std::string::npos);
}

} // namespace einjit::test
