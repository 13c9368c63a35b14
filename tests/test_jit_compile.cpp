// The CPU JIT's compile pipeline (runtime/Jit.cpp): the image of one object per module, the
// modules (one per optimized function, one for those compiled unoptimized), the choice between
// O3 and the explicit-code pipeline, functions compiled in parallel, and loops of one iteration
// emitted as bindings. Results are checked against values worked out by hand or
// against the reference interpreter.
#include "Compare.h"

#include "codegen/CodeGenLLVM.h"
#include "codegen/IR.h"
#include "codegen/passes/MergeVariants.h"
#include "einjit/Error.h"
#include "einjit/einjit.h"
#include "runtime/Jit.h"
#include "runtime/JitImage.h"
#include "runtime/JitPlan.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#if EINJIT_HAVE_TBB
#include <tbb/parallel_for.h>
#endif

using namespace einjit::test;
namespace ir = einjit::codegen::ir;

namespace {

// The attribute group line of entry point `name` (defined in `text`, the LLVM IR of a program:
// one module per function, each with its own attribute groups after its functions).
std::string attributesOf(const std::string& text, const std::string& name) {
  const auto at = text.find("_" + name + "(ptr");
  REQUIRE(at != std::string::npos);
  const std::string line = text.substr(at, text.find('\n', at) - at);
  const auto hash = line.rfind('#');
  REQUIRE(hash != std::string::npos);
  const std::string group = line.substr(hash, line.find(' ', hash) - hash);
  const auto attrs = text.find("attributes " + group + " = {", at);
  REQUIRE(attrs != std::string::npos);
  return text.substr(attrs, text.find('\n', attrs) - attrs);
}

bool explicitCode(const std::string& text, const std::string& name) {
  return attributesOf(text, name).find(einjit::codegen::kExplicitCodeAttr) != std::string::npos;
}

ir::Func func(const char* name, ir::Stmt body, bool explicitCode = false) {
  ir::Func f;
  f.name = name;
  f.buffers = {{"x", ir::Type::f32}, {"y", ir::Type::f32}};
  f.body = std::move(body);
  f.explicitCode = explicitCode;
  return f;
}

// Runs function `f` of the compiled code on buffers x and y (the order func() declares them);
// returns its status.
template <class Code>
std::int32_t runOn(const Code& code, std::size_t f, std::vector<float>& x, std::vector<float>& y) {
  void* bufs[] = {x.data(), y.data()};
  std::int32_t status = 0;
  code->fns[f](bufs, nullptr, 0, 0, &status);
  return status;
}
} // namespace

TEST_CASE("jit_compile: images pack objects and reject every malformed layout") {
  using einjit::runtime::packObjects;
  using einjit::runtime::unpackObjects;
  const std::vector<std::vector<std::string>> tables = {
      {}, {""}, {"one object"}, {"a", "", std::string(1000, '\0') + "b", "last"}};
  for (const auto& objects : tables) {
    CAPTURE(objects.size());
    const std::string image = packObjects(objects);
    const std::vector<std::string_view> back = unpackObjects(image);
    REQUIRE(back.size() == objects.size());
    for (std::size_t i = 0; i < objects.size(); ++i) CHECK(std::string(back[i]) == objects[i]);
  }
  const std::string good = packObjects({"abc", "defg"});
  std::string hugeCount = good;
  hugeCount[6] = '\x7f'; // the count's low byte: more objects than bytes
  std::string hugeLength = good;
  hugeLength[14] = '\x40'; // the first object's length: past the end
  const std::vector<std::pair<const char*, std::string>> bad = {
      {"empty", ""},
      {"a bare ELF object (the layout before one object per function)", "\x7f" "ELF\x02\x01\x01"},
      {"the magic only", "ejobjs"},
      {"truncated count", good.substr(0, 10)},
      {"truncated object", good.substr(0, good.size() - 1)},
      {"trailing bytes", good + "x"},
      {"count too large", hugeCount},
      {"length too large", hugeLength},
  };
  for (const auto& [what, image] : bad) {
    CAPTURE(what);
    CHECK_THROWS_WITH_AS(unpackObjects(image), doctest::Contains("compiled-code image is malformed"),
                         einjit::Error);
  }
}

TEST_CASE("jit_compile: functions marked explicit get the short pipeline unless a loop needs O3") {
  using ir::ForKind;
  const ir::Expr l = ir::var("l");
  // y[l] = 2 x[l] over 16 elements, in the loop kind given.
  auto twice = [&](ForKind kind, std::int64_t hi) {
    return ir::forLoop("l", ir::intImm(0), ir::intImm(hi), kind,
                       ir::store("y", l, ir::mul(ir::load(ir::Type::f32, "x", l),
                                                 ir::floatImm(ir::Type::f32, 2))),
                       kind == ForKind::Vectorized ? 8 : 1);
  };
  // A vectorized loop of 12 elements is not a multiple of 8 lanes: a hinted scalar loop.
  auto hinted = twice(ForKind::Vectorized, 12);
  // An explicit vector loop inside a serial loop of 2: the serial loop is not innermost.
  const ir::Expr r = ir::var("r");
  auto nested = ir::forLoop(
      "r", ir::intImm(0), ir::intImm(2), ForKind::Serial,
      ir::forLoop("l", ir::intImm(0), ir::intImm(8), ForKind::Vectorized,
                  ir::store("y", ir::add(ir::mul(r, ir::intImm(8)), l),
                            ir::mul(ir::load(ir::Type::f32, "x", ir::add(ir::mul(r, ir::intImm(8)), l)),
                                    ir::floatImm(ir::Type::f32, 2))),
                  8));
  struct Row {
    const char* name;
    ir::Stmt body;
    int elements;      // how many of y the function sets to 2 x
    bool marked;       // ir::Func::explicitCode, as the packed GEMM's lowering sets it
    bool explicitCode; // compiled with the explicit-code pipeline
  };
  // Each body repeated by a serial loop of 300, so that no function is bounded to 256 stores
  // or fewer (those are `optnone`, compiled without either pipeline).
  const std::vector<Row> rows = {
      {"vector", twice(ForKind::Vectorized, 16), 16, true, true},
      {"rolled", twice(ForKind::Rolled, 16), 16, true, true},
      {"nested", nested, 16, true, true},
      {"scalar", twice(ForKind::Serial, 16), 16, true, false},
      {"hinted", hinted, 12, true, false},
      {"unmarked", twice(ForKind::Vectorized, 16), 16, false, false},
  };
  std::vector<ir::Func> funcs;
  for (const Row& row : rows)
    funcs.push_back(func(row.name,
                         ir::forLoop("rep", ir::intImm(0), ir::intImm(300), ForKind::Serial, row.body),
                         row.marked));
  auto code = einjit::runtime::jitCompile(funcs, true);
  REQUIRE(code->fns.size() == rows.size());
  CAPTURE(code->llvmIR);
  std::vector<float> x(16), y(16);
  for (int i = 0; i < 16; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i) - 5.5f;
  void* bufs[] = {x.data(), y.data()};
  for (std::size_t f = 0; f < rows.size(); ++f) {
    CAPTURE(rows[f].name);
    CHECK(explicitCode(code->llvmIR, rows[f].name) == rows[f].explicitCode);
    std::fill(y.begin(), y.end(), -1.0f);
    std::int32_t status = 0;
    code->fns[f](bufs, nullptr, 0, 0, &status);
    CHECK(status == 0);
    for (int i = 0; i < 16; ++i)
      CHECK(y[static_cast<std::size_t>(i)] ==
            (i < rows[f].elements ? 2 * x[static_cast<std::size_t>(i)] : -1.0f));
  }
}

TEST_CASE("jit_compile: a loop of one iteration binds its variable (constant and symbolic bounds)") {
  using ir::ForKind;
  // for r in 0:2 { for s in (3r + 1):(3r + 1) + 1 { y[s] = x[s] + r } }: y[1] = x[1], y[4] = x[4] + 1.
  const ir::Expr r = ir::var("r"), s = ir::var("s");
  const ir::Expr lo = ir::add(ir::mul(r, ir::intImm(3)), ir::intImm(1));
  auto body = ir::store("y", s, ir::add(ir::load(ir::Type::f32, "x", s), ir::cast(ir::Type::f32, r)));
  // The same binding with constant bounds (5:6), and a loop of two iterations (7:9) that is not one.
  const ir::Expr t = ir::var("t");
  auto constant = ir::forLoop("t", ir::intImm(5), ir::intImm(6), ForKind::Serial,
                              ir::store("y", t, ir::load(ir::Type::f32, "x", t)));
  auto two = ir::forLoop("t", ir::intImm(7), ir::intImm(9), ForKind::Serial,
                         ir::store("y", t, ir::load(ir::Type::f32, "x", t)));
  std::vector<ir::Func> funcs = {
      func("symbolic", ir::forLoop("r", ir::intImm(0), ir::intImm(2), ForKind::Serial,
                                   ir::forLoop("s", lo, ir::add(lo, ir::intImm(1)), ForKind::Serial, body))),
      func("constant", ir::block({constant, two}))};
  auto code = einjit::runtime::jitCompile(funcs, false);
  std::vector<float> x(16), y(16);
  for (int i = 0; i < 16; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(10 * i);
  void* bufs[] = {x.data(), y.data()};
  std::int32_t status = 0;
  std::fill(y.begin(), y.end(), -1.0f);
  code->fns[0](bufs, nullptr, 0, 0, &status);
  for (int i = 0; i < 16; ++i)
    CHECK(y[static_cast<std::size_t>(i)] == (i == 1 ? 10.0f : i == 4 ? 41.0f : -1.0f));
  std::fill(y.begin(), y.end(), -1.0f);
  code->fns[1](bufs, nullptr, 0, 0, &status);
  for (int i = 0; i < 16; ++i)
    CHECK(y[static_cast<std::size_t>(i)] == (i == 5 || i == 7 || i == 8 ? 10.0f * i : -1.0f));
  CHECK(status == 0);
}

TEST_CASE("jit_compile: packed GEMM kernels compile as explicit code, in several modules") {
  // A 192 x 160 x 200 GEMM and its transposed forms take the packed path (packing functions
  // and the micro-kernel's function); each is explicit code and the results are the
  // interpreter's. Its functions compile in parallel (the micro-kernel's module apart from the
  // packings', which only move data and share one).
  const char* programs[] = {"C[i,k] := A[i,j] * B[j,k]", "C[i,k] := A[j,i] * B[k,j]"};
  for (const char* program : programs) {
    CAPTURE(program);
    Kernel k = einjit::compile(program, on(Device::cpu(), DType::f32));
    const bool transposed = std::string(program).find("A[j,i]") != std::string::npos;
    Tensor A = Tensor::random(transposed ? einjit::Shape{200, 192} : einjit::Shape{192, 200},
                              DType::f32, 1);
    Tensor B = Tensor::random(transposed ? einjit::Shape{160, 200} : einjit::Shape{200, 160},
                              DType::f32, 2);
    const std::string text = k.explain({A, B}, true);
    CAPTURE(text);
    REQUIRE(text.find("packed GEMM") != std::string::npos);
    std::size_t functions = 0;
    for (auto at = text.find("\nfunc "); at != std::string::npos; at = text.find("\nfunc ", at + 1)) {
      const auto open = text.find('(', at);
      const std::string name = text.substr(at + 6, open - at - 6);
      CAPTURE(name);
      CHECK(explicitCode(text, name));
      ++functions;
    }
    CHECK(functions >= 1);
    Kernel ref = einjit::compile(program, on(Device::reference(), DType::f32));
    const std::vector<einjit::Arg> args{A, B};
    checkSame(k.call(args), ref.call(args), assigned(ref), DType::f32);
  }
}

TEST_CASE("jit_compile: the modules that only move data group to even out the threads") {
  using einjit::runtime::groupMovers;
  using einjit::runtime::listScheduleMs;
  using Groups = std::vector<std::vector<std::size_t>>;
  // The JIT's order: each free thread takes the costliest module left.
  CHECK(listScheduleMs({2, 3, 2, 3, 2}, 2) == doctest::Approx(7)); // 3+2+2 and 3+2
  CHECK(listScheduleMs({2, 3, 2, 3, 2}, 1) == doctest::Approx(12));
  CHECK(listScheduleMs({5, 1}, 4) == doctest::Approx(5));
  // Two products of equal cost and four equal packings on 2 threads: one module of all four
  // would start on one thread after its product; two of two each end with the other.
  CHECK(groupMovers({30, 30}, {140, 140, 140, 140}, 2, 600) == Groups{{0, 2}, {1, 3}});
  // One thread: one module (each more pays the fixed cost again).
  CHECK(groupMovers({30, 30}, {140, 140, 140, 140}, 1, 600) == Groups{{0, 1, 2, 3}});
  // A GEMM: one product as long as both packings together, on 2 threads: they go together.
  CHECK(groupMovers({25}, {200, 200}, 2, 600) == Groups{{0, 1}});
  // The cap on a module's instructions, on one thread: 400 + 400 does not fit 600.
  CHECK(groupMovers({}, {400, 400}, 1, 600) == Groups{{0}, {1}});
  // A mover above the cap alone stays alone; the small ones go together.
  CHECK(groupMovers({}, {900, 100, 100}, 1, 600) == Groups{{0}, {1, 2}});
  CHECK(groupMovers({30}, {}, 2, 600).empty());
}

#if EINJIT_HAVE_TBB
TEST_CASE("jit_compile: kernels compiled by the tasks of a oneTBB parallel loop") {
  // Each task compiles a program of several functions (a packed GEMM: packing and product),
  // whose compile runs a parallel loop of its own while it holds the cache's lock: that loop
  // is isolated, so a thread waiting in it never takes another task's compile (which would
  // wait for the lock it holds). The results are the interpreter's.
  constexpr int kPrograms = 4;
  Tensor A = Tensor::random({192, 200}, DType::f32, 1), B = Tensor::random({200, 160}, DType::f32, 2);
  const std::vector<einjit::Arg> args{A, B};
  std::vector<std::string> programs;
  for (int p = 0; p < kPrograms; ++p)
    programs.push_back("C[i,k] := A[i,j] * B[j,k] * " + std::to_string(1.25 + 0.5 * p));
  std::vector<Outputs> got(kPrograms);
  tbb::parallel_for(0, kPrograms, [&](int p) {
    got[static_cast<std::size_t>(p)] =
        einjit::compile(programs[static_cast<std::size_t>(p)], on(Device::cpu(), DType::f32)).call(args);
  });
  for (int p = 0; p < kPrograms; ++p) {
    CAPTURE(programs[static_cast<std::size_t>(p)]);
    Kernel ref = einjit::compile(programs[static_cast<std::size_t>(p)], on(Device::reference(), DType::f32));
    checkSame(got[static_cast<std::size_t>(p)], ref.call(args), assigned(ref), DType::f32);
  }
}
#endif

// The short pipeline's instcombine runs without LLVM's fixpoint check: with it, one iteration
// that left work for a second aborted the process ("Instruction Combining did not reach a
// fixpoint"), as the one-thread plan of this weight gradient did. The plan is one thread's
// where the process has one CPU: ctest also runs this case under `taskset -c 0`.
TEST_CASE("jit_compile: the short pipeline never aborts on instcombine's fixpoint check") {
  einjit::Kernel conv = einjit::compile("y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]");
  einjit::Kernel wgrad = conv.gradient({"k"});
  Tensor x = Tensor::random({8, 64, 56, 56}, DType::f32, 1);
  Tensor dy = Tensor::random({8, 64, 54, 54}, DType::f32, 2);
  Tensor k = Tensor::random({64, 64, 3, 3}, DType::f32, 3); // its shape sets dk's
  Tensor dk = wgrad.call({{"x", x}, {"dy", dy}, {"k", k}})[std::size_t{0}];
  // One element worked out directly: dk[o,c,a,b] = sum over n,h,w of dy[n,o,h,w] x[n,c,h+a,w+b].
  double want = 0;
  for (std::int64_t n = 0; n < 8; ++n)
    for (std::int64_t h = 0; h < 54; ++h)
      for (std::int64_t w = 0; w < 54; ++w)
        want += dy.get({n, 3, h, w}) * x.get({n, 5, h + 1, w + 2});
  CHECK(dk.get({3, 5, 1, 2}) == doctest::Approx(want).epsilon(1e-4));
}

namespace {

// The conv1d gradient at 10^5 elements, its arguments and its LLVM IR as `explain` prints it.
struct Conv1dGradient {
  Kernel g;
  std::vector<einjit::Arg> args;
  std::string text;
};
Conv1dGradient conv1dGradient() {
  Conv1dGradient c{einjit::compile("y[i] := x[i+k] * w[k]").gradient(), {}, {}};
  std::map<std::string, Tensor> in{{"dy", Tensor::random({100000}, DType::f32, 3)},
                                   {"x", Tensor::random({100002}, DType::f32, 1)},
                                   {"w", Tensor::random({3}, DType::f32, 2)}};
  c.args = argsOf(c.g, in, {});
  c.text = c.g.explain(c.args, true);
  return c;
}

} // namespace

// Each function that is optimized is a module of its own (compiled in parallel); those that
// CodeGenLLVM emits `optnone` (a few iterations each) share one module, which gets no middle
// end and LLVM's fast code generation. The conv1d gradient at 10^5 has two of the first kind
// (dx's core tile, dw's split-reduction chunks) and three of the second.
TEST_CASE("jit_compile: functions compiled unoptimized share one module") {
  const Conv1dGradient c = conv1dGradient();
  const Kernel& g = c.g;
  const std::vector<einjit::Arg>& args = c.args;
  const std::string& text = c.text;
  CAPTURE(text);
  // The module (counted from 1 in the printed IR) that defines entry point `name`.
  auto moduleOf = [&](const std::string& name) {
    const auto at = text.find("_" + name + "(ptr ");
    REQUIRE(at != std::string::npos);
    REQUIRE(text.rfind("define void @", at) > text.rfind('\n', at));
    std::size_t module = 0;
    for (auto m = text.find("; ModuleID"); m < at; m = text.find("; ModuleID", m + 1)) ++module;
    return module;
  };
  std::size_t modules = 0;
  for (auto m = text.find("; ModuleID"); m != std::string::npos; m = text.find("; ModuleID", m + 1))
    ++modules;
  CHECK(modules == 3);
  const std::size_t core = moduleOf("s0_core"), chunks = moduleOf("s1");
  const std::size_t unoptimized = moduleOf("s1_combine");
  CHECK(core != chunks);
  CHECK(unoptimized != core);
  CHECK(unoptimized != chunks);
  CHECK(moduleOf("s0_border0lo") == unoptimized);
  CHECK(moduleOf("s0_border0hi") == unoptimized);
  Kernel ref = einjit::compile(g.source(), on(Device::reference(), DType::f32));
  checkSame(g.call(args), ref.call(args), assigned(ref), DType::f32);
}

// A serial loop around a loop hinted to LLVM's vectorizer is not unrolled: dw's chunk function
// of the conv1d gradient (for k in 0:3 around the vectorized sum over i) gets one vectorized
// copy of the sum, where unrolling k gave three (three times the function's compile time).
TEST_CASE("jit_compile: a loop around a vectorizer-hinted loop is not unrolled") {
  const Conv1dGradient c = conv1dGradient();
  const Kernel& g = c.g;
  const std::vector<einjit::Arg>& args = c.args;
  const std::string& text = c.text;
  // The module that defines s1 (dw's chunks): from its "; ModuleID" line to the next.
  const auto at = text.find("_s1(ptr ");
  REQUIRE(at != std::string::npos);
  const auto from = text.rfind("; ModuleID", at);
  REQUIRE(from != std::string::npos);
  const std::string module = text.substr(from, text.find("; ModuleID", at) - from);
  CAPTURE(module);
  // Vectorized loops that load (the sum's); with AVX-512, LLVM also turns the three-element
  // zeroing loop over k into one masked scatter block, also named vector.body.
  std::size_t vectorBodies = 0;
  for (auto b = module.find("\nvector.body"); b != std::string::npos;
       b = module.find("\nvector.body", b + 1))
    if (module.substr(b, module.find("\n\n", b) - b).find(" load <") != std::string::npos)
      ++vectorBodies;
  CHECK(vectorBodies == 1);
  Kernel ref = einjit::compile(g.source(), on(Device::reference(), DType::f32));
  checkSame(g.call(args), ref.call(args), assigned(ref), DType::f32);
}

// The stride-2 input gradient of a convolution runs as four residue phases, each a packed GEMM,
// in one function whose tasks run the phases in turn; the phase's part of a task is an
// outlined function compiled as a module of its own (codegen::separateParts). Where the phases
// differ only in constants (an even image: the same extents in every phase), one copy of their
// code runs every phase (passes::mergeVariants): one product part and one packing part in
// place of one each per phase; otherwise (an odd image) each phase has its own. In f32 and
// f64, the results are the interpreter's.
TEST_CASE("jit_compile: a strided gradient's residue phases compile apart") {
  Kernel g = einjit::compile("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]").gradient({"x"});
  for (bool even : {false, true})
    for (DType dt : {DType::f32, DType::f64}) {
      const char* dtype = dt == DType::f32 ? "f32" : "f64";
      CAPTURE(dtype);
      CAPTURE(even);
      const std::int64_t h = even ? 40 : 41, w = even ? 42 : 43;
      std::map<std::string, Tensor> in{{"x", Tensor::random({2, 16, h, w}, dt, 1)},
                                       {"k", Tensor::random({24, 16, 3, 3}, dt, 2)},
                                       {"dy", Tensor::random({2, 24, (h - 1) / 2, (w - 1) / 2}, dt, 3)}};
      const std::vector<einjit::Arg> args = argsOf(g, in, {});
      const std::string text = g.explain(args, true);
      CAPTURE(text);
      REQUIRE(text.find("4 residue phases, each a packed GEMM") != std::string::npos);
      CHECK((text.find("one copy of the phases' code") != std::string::npos) == even);
      // Each part (the phases' products and packing loops) defined with external linkage in
      // a module of its own, beside the entry point's.
      std::set<std::size_t> definedIn;
      std::size_t module = 0, parts = 0;
      for (auto at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 1)) {
        const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
        if (line.rfind("; ModuleID", 0) == 0) ++module;
        if (line.rfind("define void @", 0) == 0 && line.find("_s0_phases.part") != std::string::npos) {
          ++parts;
          definedIn.insert(module);
        }
      }
      if (even)
        CHECK(parts == 2);
      else
        CHECK(parts >= 4);
      CHECK(definedIn.size() == parts);
      Kernel ref = einjit::compile(g.source(), on(Device::reference(), dt));
      checkSame(g.call(args), ref.call(args), assigned(ref), dt);
    }
}

// passes::mergeVariants: three loops that differ only in integer constants, some of which the
// IR's constructors folded away (r * 1, r + 0, r * 0 + 0), merged into one loop over the
// variant, each differing constant a variable bound per variant; y's accesses moved by each
// variant's offset (as the residue phases' scratch buffers). Run by the JIT, y holds what each
// variant writes, worked out by hand. A variant with another shape does not merge.
TEST_CASE("jit_compile: variants that differ in constants merge into one loop") {
  using ir::ForKind;
  const ir::Type f32 = ir::Type::f32;
  const ir::Expr r = ir::var("r");
  // for r in lo:hi { y[r * s + o] = 2 x[r + c] }
  auto variant = [&](std::int64_t lo, std::int64_t hi, std::int64_t s, std::int64_t o,
                     std::int64_t c) {
    return ir::forLoop(
        "r", ir::intImm(lo), ir::intImm(hi), ForKind::Serial,
        ir::store("y", ir::add(ir::mul(r, ir::intImm(s)), ir::intImm(o)),
                  ir::mul(ir::load(f32, "x", ir::add(r, ir::intImm(c))), ir::floatImm(f32, 2))));
  };
  const std::vector<ir::Stmt> variants{variant(0, 4, 1, 0, 0), variant(1, 5, 2, 1, 3),
                                       variant(0, 3, 0, 0, 2)};
  const std::int64_t offsets[] = {0, 8, 20};
  const einjit::codegen::passes::BufferRename rename = [&](std::size_t v, const std::string& b) {
    return b == "y" ? std::optional<einjit::codegen::passes::MergedBuffer>({"y", offsets[v]})
                    : std::nullopt;
  };
  std::vector<std::pair<std::string, ir::Expr>> lets;
  const std::optional<ir::Stmt> merged =
      einjit::codegen::passes::mergeVariants(variants, "sel", rename, &lets);
  REQUIRE(merged);
  CHECK(!lets.empty());
  ir::Stmt body = *merged;
  for (std::size_t k = lets.size(); k-- > 0;)
    body = ir::forLoop(lets[k].first, lets[k].second, ir::add(lets[k].second, ir::intImm(1)),
                       ForKind::Serial, body);
  body = ir::forLoop("sel", ir::intImm(0), ir::intImm(3), ForKind::Serial, body);
  CAPTURE(ir::print(body));
  auto code = einjit::runtime::jitCompile({func("variants", body)}, false);
  std::vector<float> x(24), y(32, -1.0f);
  for (int i = 0; i < 24; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(5 * i) - 11.0f;
  CHECK(runOn(code, 0, x, y) == 0);
  std::vector<float> want(32, -1.0f);
  for (int i = 0; i < 4; ++i) want[static_cast<std::size_t>(i)] = 2 * x[static_cast<std::size_t>(i)];
  for (int i = 1; i < 5; ++i)
    want[static_cast<std::size_t>(8 + 2 * i + 1)] = 2 * x[static_cast<std::size_t>(i + 3)];
  want[20] = 2 * x[4]; // every r writes y[20]: the last one stays
  for (std::size_t k = 0; k < y.size(); ++k) {
    CAPTURE(k);
    CHECK(y[k] == want[k]);
  }
  // One more statement in one variant: not merged.
  std::vector<ir::Stmt> other = variants;
  other[1] = ir::block({variants[1], variants[1]});
  CHECK(!einjit::codegen::passes::mergeVariants(other, "sel", rename, &lets));
}

// EINJIT_PERF_MAP=1 writes every loaded JIT function to /tmp/perf-PID.map (address, size,
// name) for perf: the parts, whose objects have no entry point, included (each object is
// placed by one of its own global functions). The merged residue phases' entry point, product
// part and packing part, and the packing's checked loop inside it.
TEST_CASE("jit_compile: the perf map names every function, the parts' too") {
  const std::string map = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  std::remove(map.c_str());
  REQUIRE(setenv("EINJIT_PERF_MAP", "1", 1) == 0);
  einjit::clearCaches();
  Kernel g = einjit::compile("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]").gradient({"x"});
  std::map<std::string, Tensor> in{{"x", Tensor::random({2, 16, 40, 42}, DType::f32, 1)},
                                   {"k", Tensor::random({24, 16, 3, 3}, DType::f32, 2)},
                                   {"dy", Tensor::random({2, 24, 19, 20}, DType::f32, 3)}};
  const std::vector<einjit::Arg> args = argsOf(g, in, {});
  const einjit::Outputs out = g.call(args);
  CHECK(out.size() == 1);
  unsetenv("EINJIT_PERF_MAP");
  std::ifstream f(map);
  REQUIRE(f.good());
  std::set<std::string> names;
  for (std::string line; std::getline(f, line);) {
    std::istringstream words(line);
    std::string at, size, name;
    words >> std::hex >> at >> size >> name;
    CHECK(std::stoull(at, nullptr, 16) != 0);
    CHECK(std::stoull(size, nullptr, 16) != 0);
    const auto cut = name.find("_s0_");
    if (cut != std::string::npos) names.insert(name.substr(cut + 1));
  }
  f.close();
  std::remove(map.c_str());
  // The objects written beside the map (/tmp/perf-PID-SYMBOL.o).
  const std::string objects = "perf-" + std::to_string(getpid()) + "-";
  for (const auto& e : std::filesystem::directory_iterator("/tmp")) {
    const std::string file = e.path().filename().string();
    if (file.rfind(objects, 0) == 0 && file.size() > 2 && file.substr(file.size() - 2) == ".o")
      std::filesystem::remove(e.path());
  }
  for (const char* want : {"s0_phases", "s0_phases_packA", "s0_phases.part1", "s0_phases.part2",
                           "s0_phases.part2.gemm.l"})
    CHECK(names.count(want) == 1);
  einjit::clearCaches();
}

// Outlined loops that do enough work compile as modules of their own (codegen::separateParts):
// the entry point calls each through an external declaration, and the part's module defines
// it, with the local buffers and loop variables it uses as arguments (here a local buffer, an
// enclosing loop's variable and, for the nested part, the outer part's). An outlined loop that
// a shared subtree emits twice, or that sits inside an unrolled loop, stays in its caller's
// module. The results are worked out by hand.
TEST_CASE("jit_compile: outlined loops compile apart, as modules of their own") {
  using ir::ForKind;
  const ir::Type f32 = ir::Type::f32;
  const ir::Expr r = ir::var("r"), q = ir::var("q"), u = ir::var("u");
  const ir::Expr eight = ir::intImm(8);
  // Twelve stores of t[j] = x[8 row + j] + c (24 accesses): enough for a part.
  auto copies = [&](const ir::Expr& row, const ir::Expr& c) {
    std::vector<ir::Stmt> s;
    for (int j = 0; j < 12; ++j)
      s.push_back(ir::store("t", ir::intImm(j),
                            ir::add(ir::load(f32, "x", ir::add(ir::mul(row, eight), ir::intImm(j))),
                                    ir::cast(f32, c))));
    return ir::block(std::move(s));
  };
  // Part 1 (q in 0:1) holds part 2 (u in 0:1), which adds r + 1 to t[0..12) over copies of x.
  auto inner = ir::forLoop("u", q, ir::add(q, ir::intImm(1)), ForKind::Outlined,
                           copies(r, ir::add(ir::add(r, u), ir::intImm(1))));
  auto outer = ir::forLoop("q", ir::intImm(0), ir::intImm(1), ForKind::Outlined,
                           ir::block({copies(r, r), inner}));
  // A small outlined loop (two accesses): not a part.
  const ir::Expr v = ir::var("v");
  auto small = ir::forLoop("v", ir::intImm(12), ir::intImm(16), ForKind::Outlined,
                           ir::store("t", v, ir::floatImm(f32, 0)));
  // y[8r + j] = 2 t[j], for j in 0:8.
  const ir::Expr j = ir::var("j");
  auto out = ir::forLoop("j", ir::intImm(0), ir::intImm(8), ForKind::Serial,
                         ir::store("y", ir::add(ir::mul(r, eight), j),
                                   ir::mul(ir::load(f32, "t", j), ir::floatImm(f32, 2))));
  auto body = ir::allocate("t", f32, 16,
                           ir::forLoop("r", ir::intImm(0), ir::intImm(2), ForKind::Serial,
                                       ir::block({outer, small, out})));
  std::vector<ir::Func> funcs{func("parts", ir::forLoop("rep", ir::intImm(0), ir::intImm(300),
                                                        ForKind::Serial, body))};
  REQUIRE(einjit::codegen::separateParts(funcs[0]) == 2);
  // The same outlined loop twice (a shared subtree), and one inside an unrolled loop: no parts.
  const ir::Expr w = ir::var("w");
  auto once = ir::forLoop("q", ir::intImm(0), ir::intImm(1), ForKind::Outlined, copies(w, w));
  // (Each in a serial loop of enough iterations that the function is optimized.)
  auto repeat = [&](ir::Stmt b) {
    return ir::allocate("t", f32, 16,
                        ir::forLoop("rep", ir::intImm(0), ir::intImm(300), ForKind::Serial, std::move(b)));
  };
  auto twice = ir::forLoop("w", ir::intImm(0), ir::intImm(2), ForKind::Serial, ir::block({once, once}));
  CHECK(einjit::codegen::separateParts(func("shared", repeat(twice))) == 0);
  auto unrolled = ir::forLoop("w", ir::intImm(0), ir::intImm(2), ForKind::Unrolled, once);
  CHECK(einjit::codegen::separateParts(func("unrolled", repeat(unrolled))) == 0);
  auto serial = ir::forLoop("w", ir::intImm(0), ir::intImm(2), ForKind::Serial, once);
  CHECK(einjit::codegen::separateParts(func("serial", repeat(serial))) == 1);

  auto code = einjit::runtime::jitCompile(funcs, true);
  const std::string& text = code->llvmIR;
  CAPTURE(text);
  // Three modules: the entry point's, and one defining each part.
  std::size_t modules = 0;
  for (auto m = text.find("; ModuleID"); m != std::string::npos; m = text.find("; ModuleID", m + 1))
    ++modules;
  CHECK(modules == 3);
  auto moduleDefining = [&](const std::string& name) {
    std::size_t module = 0, found = 0;
    for (auto m = text.find("; ModuleID"); m != std::string::npos; m = text.find("; ModuleID", m + 1)) {
      ++module;
      const auto next = text.find("; ModuleID", m + 1);
      const std::string mod = text.substr(m, next == std::string::npos ? std::string::npos : next - m);
      for (auto d = mod.find("define "); d != std::string::npos; d = mod.find("define ", d + 1)) {
        const std::string line = mod.substr(d, mod.find('\n', d) - d);
        if (line.find("_" + name + "(") != std::string::npos) found = module;
      }
    }
    return found;
  };
  const std::size_t entry = moduleDefining("parts"), part1 = moduleDefining("parts.part1"),
                    part2 = moduleDefining("parts.part2");
  CHECK(entry != 0);
  CHECK(part1 != 0);
  CHECK(part2 != 0);
  CHECK(entry != part1);
  CHECK(entry != part2);
  CHECK(part1 != part2);

  std::vector<float> x(24), y(16, -1.0f);
  for (int i = 0; i < 24; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(3 * i) - 7.0f;
  CHECK(runOn(code, 0, x, y) == 0);
  // Row r: t[j] = x[8r + j] + r + 1 (part 2 overwrites part 1's copies).
  for (int row = 0; row < 2; ++row)
    for (int col = 0; col < 8; ++col) {
      const auto at = static_cast<std::size_t>(8 * row + col);
      CAPTURE(at);
      CHECK(y[at] == 2 * (x[at] + static_cast<float>(row + 1)));
    }
}

// In explicit code, the serial loops that each hold a register tile of their own (a local buffer
// allocated directly in the loop: a packed product's core and edge tile variants) compile
// apart where a function has two or more, each part with the way to its loop (the enclosing
// loops' ranges and the branch taken), which its code reads here (the edge variant adds the
// column t, which is 0 or 3 there). A single tile loop, and code that is not explicit, keep
// one module. An outlined loop counts the accesses its code writes out: an unrolled loop's
// body once per copy. The results are worked out by hand.
TEST_CASE("jit_compile: a function's register-tile loops compile apart, each knowing its way") {
  using ir::ForKind;
  const ir::Type f32 = ir::Type::f32;
  const ir::Expr t = ir::var("t"), s = ir::var("s"), j = ir::var("j");
  // acc[j] = f(x[8 (2t + s) + j]) for j in 0:8, then y[8 (2t + s) + j] = acc[j].
  auto tile = [&](bool edge) {
    const ir::Expr at = ir::add(ir::mul(ir::add(ir::mul(t, ir::intImm(2)), s), ir::intImm(8)), j);
    const ir::Expr x = ir::load(f32, "x", at);
    const ir::Expr value = edge ? ir::add(x, ir::cast(f32, t)) : ir::mul(x, ir::floatImm(f32, 2));
    auto set = ir::store("acc", j, value);
    auto fill = ir::forLoop("j", ir::intImm(0), ir::intImm(8), ForKind::Unrolled, set);
    auto out = ir::forLoop("j", ir::intImm(0), ir::intImm(8), ForKind::Unrolled,
                           ir::store("y", at, ir::load(f32, "acc", j)));
    return ir::forLoop("s", ir::intImm(0), ir::intImm(2), ForKind::Serial,
                       ir::allocate("acc", f32, 8, ir::block({fill, out})));
  };
  const ir::Expr core = ir::binary(ir::BinOp::And, ir::binary(ir::BinOp::Ge, t, ir::intImm(1)),
                                   ir::binary(ir::BinOp::Lt, t, ir::intImm(3)));
  auto nest = [&](ir::Stmt inner) {
    return ir::forLoop("rep", ir::intImm(0), ir::intImm(300), ForKind::Serial,
                       ir::forLoop("t", ir::intImm(0), ir::intImm(4), ForKind::Serial,
                                   std::move(inner)));
  };
  const ir::Func tiles = func("tiles", nest(ir::ifThen(core, tile(false), tile(true))), true);
  CHECK(einjit::codegen::separateParts(tiles) == 2);
  const ir::Stmt variants = ir::ifThen(core, tile(false), tile(true));
  CHECK(einjit::codegen::separateParts(func("implicit", nest(variants))) == 0);
  CHECK(einjit::codegen::separateParts(func("one", nest(tile(false)), true)) == 0);
  // Six unrolled copies of a load and a store (12 accesses written out): a part.
  const ir::Expr l = ir::var("l");
  auto copy = ir::forLoop("q", ir::intImm(0), ir::intImm(1), ForKind::Outlined,
                          ir::forLoop("l", ir::intImm(0), ir::intImm(6), ForKind::Unrolled,
                                      ir::store("y", l, ir::load(f32, "x", l))));
  CHECK(einjit::codegen::separateParts(func("copy", nest(copy))) == 1);

  auto code = einjit::runtime::jitCompile({tiles}, true);
  const std::string& text = code->llvmIR;
  CAPTURE(text);
  std::size_t modules = 0;
  for (auto m = text.find("; ModuleID"); m != std::string::npos; m = text.find("; ModuleID", m + 1))
    ++modules;
  CHECK(modules == 3);
  CHECK(text.find(einjit::codegen::kTilePartAttr) != std::string::npos);
  std::vector<float> x(64), y(64, -1.0f);
  for (int i = 0; i < 64; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(5 * i) - 100.0f;
  CHECK(runOn(code, 0, x, y) == 0);
  for (int col = 0; col < 4; ++col)
    for (int e = 0; e < 16; ++e) {
      const auto at = static_cast<std::size_t>(16 * col + e);
      CAPTURE(at);
      CHECK(y[at] == (col >= 1 && col < 3 ? 2 * x[at] : x[at] + static_cast<float>(col)));
    }
}

// In explicit code with a single register-tile loop, the rolled loops that copy its edge tile out
// (they read a buffer allocated in the tile loop and write only the function's buffers) compile
// apart (codegen::separateParts, kEdgePartAttr), the first k-block's copy and the accumulating
// one alike; a rolled loop that writes the tile's own buffer stays, and so do the copies of a
// function whose tile loops are parts already. Worked by hand: x[i] = i - 10, acc = 2x + 1; the
// core tiles (s < 2) store acc, the edge tile (s = 2) its first 5 elements, 300 times over.
TEST_CASE("jit_compile: a single tile loop's edge copies compile apart, with the movers") {
  using ir::ForKind;
  const ir::Type f32 = ir::Type::f32;
  const ir::Expr s = ir::var("s"), j = ir::var("j"), rep = ir::var("rep");
  auto edgeTile = [&](const char* tileVar) {
    const ir::Expr v = ir::var(tileVar);
    const ir::Expr at = ir::add(ir::mul(v, ir::intImm(8)), j);
    auto fill =
        ir::forLoop("j", ir::intImm(0), ir::intImm(8), ForKind::Unrolled,
                    ir::store("acc", j, ir::mul(ir::load(f32, "x", at), ir::floatImm(f32, 2))));
    auto plusOne =
        ir::forLoop("j", ir::intImm(0), ir::intImm(8), ForKind::Rolled,
                    ir::store("acc", j, ir::add(ir::load(f32, "acc", j), ir::floatImm(f32, 1))));
    auto core = ir::forLoop("j", ir::intImm(0), ir::intImm(8), ForKind::Unrolled,
                            ir::store("y", at, ir::load(f32, "acc", j)));
    auto spill = ir::forLoop("j", ir::intImm(0), ir::intImm(8), ForKind::Unrolled,
                             ir::store("edge", j, ir::load(f32, "acc", j)));
    auto first = ir::forLoop("j", ir::intImm(0), ir::intImm(5), ForKind::Rolled,
                             ir::store("y", at, ir::load(f32, "edge", j)));
    auto more =
        ir::forLoop("j", ir::intImm(0), ir::intImm(5), ForKind::Rolled,
                    ir::store("y", at, ir::add(ir::load(f32, "y", at), ir::load(f32, "edge", j))));
    auto edge =
        ir::block({spill, ir::ifThen(ir::binary(ir::BinOp::Eq, rep, ir::intImm(0)), first, more)});
    auto body = ir::block(
        {fill, plusOne, ir::ifThen(ir::binary(ir::BinOp::Lt, v, ir::intImm(2)), core, edge)});
    return ir::forLoop(tileVar, ir::intImm(0), ir::intImm(3), ForKind::Serial,
                       ir::allocate("acc", f32, 8, ir::allocate("edge", f32, 8, body)));
  };
  auto repeat = [&](ir::Stmt inner) {
    return ir::forLoop("rep", ir::intImm(0), ir::intImm(300), ForKind::Serial, std::move(inner));
  };
  const ir::Func one = func("edges", repeat(edgeTile("s")), true);
  REQUIRE(einjit::codegen::edgeParts()); // EINJIT_JIT_EDGE_PARTS unset
  CHECK(einjit::codegen::separateParts(one) == 2);
  CHECK(einjit::codegen::separateParts(func("implicit", repeat(edgeTile("s")))) == 0);
  // Two tile loops: each is a part, its copies with it.
  const ir::Func two = func("two", repeat(ir::block({edgeTile("s"), edgeTile("u")})), true);
  CHECK(einjit::codegen::separateParts(two) == 2);

  auto code = einjit::runtime::jitCompile({one}, true);
  const std::string& text = code->llvmIR;
  CAPTURE(text);
  CHECK(text.find(einjit::codegen::kEdgePartAttr) != std::string::npos);
  std::vector<float> x(24), y(24, -1.0f);
  for (int i = 0; i < 24; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i - 10);
  CHECK(runOn(code, 0, x, y) == 0);
  for (int i = 0; i < 24; ++i) {
    CAPTURE(i);
    const float a = 2 * x[static_cast<std::size_t>(i)] + 1;
    CHECK(y[static_cast<std::size_t>(i)] == (i < 16 ? a : i < 21 ? 300 * a : -1.0f));
  }
}

// A loop around an explicit vector loop of more than a few steps is not unrolled either (a row
// block's copy of 8 rows of 4,096 elements: O3 unrolled the rows into 8 copies of the vector
// loop, 1,092 LLVM instructions against 393): the outer loop keeps llvm.loop.unroll.disable
// through O3. y[i, j] = 2 x[i, j] over 8 rows of 128, checked element by element.
TEST_CASE("jit_compile: a loop around an explicit vector loop is not unrolled") {
  using ir::ForKind;
  const ir::Expr i = ir::var("i"), j = ir::var("j");
  const ir::Expr at = ir::add(ir::mul(i, ir::intImm(128)), j);
  auto body = ir::forLoop(
      "i", ir::intImm(0), ir::intImm(8), ForKind::Serial,
      ir::forLoop("j", ir::intImm(0), ir::intImm(128), ForKind::Vectorized,
                  ir::store("y", at, ir::mul(ir::load(ir::Type::f32, "x", at), ir::floatImm(ir::Type::f32, 2))),
                  8));
  auto code = einjit::runtime::jitCompile({func("rows", body)}, true);
  CAPTURE(code->llvmIR);
  CHECK(code->llvmIR.find("llvm.loop.unroll.disable") != std::string::npos);
  std::vector<float> x(1024), y(1024, -1.0f);
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k % 97) - 40.5f;
  CHECK(runOn(code, 0, x, y) == 0);
  for (std::size_t k = 0; k < x.size(); ++k) {
    CAPTURE(k);
    CHECK(y[k] == 2 * x[k]);
  }
}

// A non-temporal store (ir::Store::nonTemporal, row blocks' streamed outputs): each vector is
// stored with !nontemporal where its address is aligned to the vector and by an ordinary store
// where not, and the function fences before it returns. y[i, j] = 2 x[i, j] over 4 rows of 64,
// y at offsets 0 (every vector aligned) and 1 float (none aligned), checked element by element.
TEST_CASE("jit_compile: non-temporal stores, aligned or not, and their fence") {
  using ir::ForKind;
  const ir::Expr i = ir::var("i"), j = ir::var("j");
  const ir::Expr at = ir::add(ir::mul(i, ir::intImm(64)), j);
  auto body = ir::forLoop("i", ir::intImm(0), ir::intImm(4), ForKind::Serial,
                          ir::forLoop("j", ir::intImm(0), ir::intImm(64), ForKind::Vectorized,
                                      ir::streamStore("y", at,
                                                      ir::mul(ir::load(ir::Type::f32, "x", at),
                                                              ir::floatImm(ir::Type::f32, 2))),
                                      8));
  CHECK(ir::print(func("rows", body)).find("stream y[") != std::string::npos);
  auto code = einjit::runtime::jitCompile({func("rows", body)}, true);
  CAPTURE(code->llvmIR);
  CHECK(code->llvmIR.find("!nontemporal") != std::string::npos);
  CHECK(code->llvmIR.find("fence seq_cst") != std::string::npos);
  alignas(64) static float x[256], y[264];
  for (std::size_t k = 0; k < 256; ++k) x[k] = static_cast<float>(k % 97) - 40.5f;
  for (std::size_t offset : {0u, 1u}) {
    CAPTURE(offset);
    std::fill(std::begin(y), std::end(y), -1.0f);
    void* bufs[] = {x, y + offset};
    std::int32_t status = 0;
    code->fns[0](bufs, nullptr, 0, 0, &status);
    CHECK(status == 0);
    for (std::size_t k = 0; k < 264; ++k) {
      CAPTURE(k);
      CHECK(y[k] == (k >= offset && k < offset + 256 ? 2 * x[k - offset] : -1.0f));
    }
  }
}
