// The differential tester: random well-typed programs (tests/diff/ProgramGenerator.h) run on
// the reference interpreter and the CPU JIT, forward (the two must agree) and gradient (each
// against float64 central finite differences, einjit::gradcheck); in builds with CUDA, every
// tenth program's forward and gradient CUDA C is also compiled by NVRTC (no GPU needed).
//
// Seeded and reproducible: program n of seed S is generated from S and n alone.
//   EINJIT_DIFF_SEED=S       another seed (printed by every run; default 27)
//   EINJIT_DIFF_PROGRAMS=N   programs per test case (4 cases; default 250, 50 under sanitizers)
//   EINJIT_DIFF_ONLY=n       only program n (with its text and shapes printed)
// A disagreement is reduced to a minimal program (parts deleted while it still disagrees),
// which is printed; once fixed it joins the regression table at the end of this file.
#include "Compare.h"
#include "diff/ProgramGenerator.h"
#include "fuzz/Pipeline.h"

#ifdef EINJIT_HAVE_CUDA
#include "CudaCompile.h"
#endif

#include <doctest/doctest.h>

#include <cstdlib>
#include <sstream>

namespace {

using einjit::Device;
using einjit::DType;
using einjit::Kernel;
using einjit::Shape;
using einjit::Tensor;
using einjit::diff::GenProgram;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kDefaultPrograms = 50;
#else
constexpr int kDefaultPrograms = 250;
#endif

std::int64_t envInt(const char* name, std::int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  return *end ? fallback : x;
}

std::string shapesText(const std::map<std::string, Shape>& shapes) {
  std::ostringstream o;
  for (const auto& [n, s] : shapes) {
    o << n << "{";
    for (std::size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
    o << "} ";
  }
  return o.str();
}

struct Counts {
  int programs = 0, rejected = 0, forward = 0, gradients = 0, cuda = 0, inPlace = 0;
};

struct Verdict {
  std::string failure;  // a disagreement (a finding)
  std::string rejected; // the program did not check or bind: a generator mistake
};

einjit::Options on(Device d) {
  einjit::Options o;
  o.device = d;
  o.defaultDType = DType::f64;
  o.keepIntermediates = true; // every assigned tensor is compared
  return o;
}

#ifdef EINJIT_HAVE_CUDA
// NVRTC compiles the CUDA C of the call (sm_90); an error from the code generator or NVRTC is
// a finding.
std::string cudaCompiles(const Kernel& k, const std::map<std::string, Tensor>& tensors,
                         const std::map<std::string, double>& scalars) {
  try {
    auto cp = einjit::test::cudaFor(k, tensors, scalars, DType::f64, 90);
    auto c = einjit::runtime::nvrtc::compile(cp.cuda.source, 90, cp.cuda.archSpecific);
    if (c.image.empty()) return "NVRTC produced no code";
  } catch (const std::exception& e) {
    return std::string("CUDA: ") + e.what();
  }
  return {};
}
#endif

Verdict judge(const std::string& text, const std::map<std::string, Shape>& shapes,
              std::uint64_t seed, bool cuda, Counts* counts) {
  Verdict v;
  auto fail = [&v](std::string why) {
    v.failure = std::move(why);
    return v;
  };
  Kernel ref, jit;
  std::map<std::string, Tensor> tensors;
  try {
    ref = einjit::compile(text, on(Device::reference()));
    jit = einjit::compile(text, on(Device::cpu()));
    const einjit::dsl::Program& p = ref.program();
    einjit::dsl::BoundProgram b = einjit::bindShapes(p, shapes, {}, DType::f64);
    for (int id : p.arguments) {
      const auto& t = p.tensors[static_cast<std::size_t>(id)];
      tensors[t.name] = t.readAsIndex
                            ? einjit::randomIndices(p, b, id, shapes.at(t.name), seed + 1 + id)
                            : Tensor::random(shapes.at(t.name), DType::f64, seed + 1 + id);
    }
  } catch (const einjit::Error& e) {
    v.rejected = e.what();
    return v;
  }
  einjit::fuzz::Run fwd;
  bool ran = false;
  std::string m = einjit::fuzz::compareRuns(ref, jit, tensors, {}, fwd, ran);
  if (!m.empty()) return fail("forward, interpreter against JIT: " + m);
  if (!ran) {
    v.rejected = "the forward fails on both: " + fwd.error;
    return v;
  }
  if (counts) ++counts->forward;
  for (Device d : {Device::reference(), Device::cpu()}) {
    einjit::GradCheckResult g;
    try {
      g = einjit::gradcheck(text, shapes, {}, {}, seed, 1e-5, d);
    } catch (const einjit::Error& e) {
      return fail("gradient on " + d.name() + ": " + e.what());
    }
    if (!g.passed && g.why.rfind("nothing to compare", 0) != 0)
      return fail("gradient on " + d.name() + " against finite differences: " + g.why);
  }
  if (counts) ++counts->gradients;
#ifdef EINJIT_HAVE_CUDA
  if (cuda) {
    std::string c = cudaCompiles(ref, tensors, {});
    if (c.empty()) {
      Kernel g = ref.gradient();
      std::map<std::string, Tensor> gt;
      std::map<std::string, double> gs;
      std::vector<std::string> dys = g.gradientInputs();
      for (std::size_t i = 0; i < fwd.out.size() && i < dys.size(); ++i) {
        if (fwd.out[i].rank() == 0)
          gs[dys[i]] = 1;
        else
          gt[dys[i]] = Tensor::random(fwd.out[i].shape(), DType::f64, seed + 9);
      }
      for (const std::string& n : g.tensorArguments())
        if (!gt.count(n)) gt[n] = tensors.at(n);
      c = cudaCompiles(g, gt, gs);
    }
    if (!c.empty()) return fail(c);
    if (counts) ++counts->cuda;
  }
#else
  (void)cuda;
#endif
  return v;
}

std::uint64_t programSeed(std::uint64_t seed, std::int64_t n) {
  return seed * 1000003ull + static_cast<std::uint64_t>(n);
}

// Programs [first, first + count) of the run's seed.
void runPrograms(std::int64_t first, std::int64_t count) {
  const auto seed = static_cast<std::uint64_t>(envInt("EINJIT_DIFF_SEED", 27));
  const std::int64_t only = envInt("EINJIT_DIFF_ONLY", -1);
  Counts c;
  std::vector<std::string> rejected;
  for (std::int64_t n = first; n < first + count; ++n) {
    if (only >= 0 && n != only) continue;
    einjit::diff::Generator gen(programSeed(seed, n));
    GenProgram g = gen.program();
    const std::string text = g.text();
    if (only >= 0)
      MESSAGE("program " << n << ":\n" << text << "\nshapes " << shapesText(g.usedShapes()));
    ++c.programs;
    if (g.stmts.back().assign != ":=") ++c.inPlace;
    Verdict v;
    try {
      v = judge(text, g.usedShapes(), programSeed(seed, n), n % 10 == 0, &c);
    } catch (const std::exception& e) {
      v.failure = std::string("an exception other than einjit::Error: ") + e.what();
    }
    if (!v.rejected.empty()) {
      ++c.rejected;
      if (rejected.size() < 3) rejected.push_back(text + "\n  -> " + v.rejected);
      continue;
    }
    if (v.failure.empty()) continue;
    GenProgram small = einjit::diff::reduce(g, [&](const GenProgram& cand) {
      try {
        return !judge(cand.text(), cand.usedShapes(), programSeed(seed, n), n % 10 == 0, nullptr)
                    .failure.empty();
      } catch (const std::exception&) {
        return true;
      }
    });
    FAIL_CHECK("seed " << seed << ", program " << n << " disagrees: " << v.failure << "\nprogram:\n"
                       << text << "\nreduced to:\n"
                       << small.text() << "\nshapes: " << shapesText(small.usedShapes()));
  }
  MESSAGE("differential, seed " << seed << ", programs [" << first << ", " << first + count
                                << "): " << c.programs << " generated (" << c.inPlace
                                << " ending in an in-place update), " << c.forward
                                << " forward compared, " << c.gradients
                                << " gradients checked on both devices, " << c.cuda
                                << " compiled by NVRTC, " << c.rejected << " rejected");
  for (const std::string& r : rejected) MESSAGE("rejected: " << r);
  // The generator builds valid programs: nearly all must check, bind and run.
  if (only < 0) CHECK(c.rejected * 50 <= c.programs);
}

} // namespace

TEST_CASE("differential: random programs, part 1") {
  runPrograms(0, envInt("EINJIT_DIFF_PROGRAMS", kDefaultPrograms));
}
TEST_CASE("differential: random programs, part 2") {
  std::int64_t n = envInt("EINJIT_DIFF_PROGRAMS", kDefaultPrograms);
  runPrograms(n, n);
}
TEST_CASE("differential: random programs, part 3") {
  std::int64_t n = envInt("EINJIT_DIFF_PROGRAMS", kDefaultPrograms);
  runPrograms(2 * n, n);
}
TEST_CASE("differential: random programs, part 4") {
  std::int64_t n = envInt("EINJIT_DIFF_PROGRAMS", kDefaultPrograms);
  runPrograms(3 * n, n);
}

// Disagreements the tester found, reduced, each kept once fixed: the program and its shapes.
TEST_CASE("differential: regressions") {
  struct Row {
    const char* program;
    std::map<std::string, Shape> shapes;
  };
  const std::vector<Row> rows = {
      // A clamp edge's condition named the forward index the diagonal had renamed (the
      // gradient program read an undefined 'l': a missing scalar, map::at in gradcheck).
      {"y := a[l,l,clamp(2l-2)]", {{"a", {3, 3, 5}}}},
      {"t0[i] := a0[l,l,clamp(2l-2)] where i in 0:3\ny[i,j] := t0[k] * a3[3j+2k,i]",
       {{"a0", {3, 3, 5}}, {"a3", {14, 2}}}},
      // ... and so did a mask kept before the diagonal renamed its index ('3l - u == 0').
      {"y := a[l,3l,l]", {{"a", {3, 8, 3}}}},
      {"t0 := a2[l,3l,l]\nt1 := t0 * a4[pad(k+2),3l,l] where k in 0:4\ny[i] := t1 where i in 0:1",
       {{"a2", {3, 8, 3}}, {"a4", {1, 5, 2}}}},
  };
  for (const Row& r : rows) {
    INFO(r.program);
    Counts c;
    Verdict v = judge(r.program, r.shapes, 5, true, &c);
    CHECK_MESSAGE(v.failure.empty(), v.failure);
    CHECK_MESSAGE(v.rejected.empty(), v.rejected);
    CHECK(c.gradients == 1);
  }
}
