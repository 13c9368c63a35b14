// The CPU JIT against the reference interpreter: every program of the interpreter's and the
// gradients' tables (forward and gradient, f32 and f64, contiguous and strided arguments,
// grown shapes), sizes 1/7/33/257, 300 random programs, concurrency, the kernel cache, and
// that the emitted code is vectorized.
#include "Compare.h"
#include "InterpreterTable.h"

#include "codegen/IR.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"
#include "runtime/Jit.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <unistd.h>

using namespace einjit::test;

TEST_CASE("jit: every interpreter-table row equals the interpreter (f64, f32, strided views)") {
  compareInterpreterTable(Device::cpu());
}

TEST_CASE("jit: every gradient-table program, forward and gradient, f64 and f32, grown shapes") {
  const int grownRan = compareGradTable(Device::cpu());
  MESSAGE("programs run on grown shapes: " << grownRan << " of " << kGradRows.size());
  CHECK(grownRan >= 40);
}

TEST_CASE("jit: sizes 1, 7, 33 and 257 (tiles, vector tails, parallel loops)") {
  struct Case {
    const char* program;
    std::function<std::map<std::string, Shape>(std::int64_t)> shapes;
  };
  const std::vector<Case> cases = {
      {"C[i,k] := A[i,j] * B[j,k]",
       [](std::int64_t n) {
         return std::map<std::string, Shape>{{"A", {n, n}}, {"B", {n, n}}};
       }},
      {"C[i,k] := A[j,i] * B[k,j]",
       [](std::int64_t n) {
         return std::map<std::string, Shape>{{"A", {n, n}}, {"B", {n, n}}};
       }},
      {"C[i,k,b] := A[i,j,b] * B[b,k,j]",
       [](std::int64_t n) {
         return std::map<std::string, Shape>{{"A", {n, 5, 3}}, {"B", {3, n, 5}}};
       }},
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       [](std::int64_t n) {
         return std::map<std::string, Shape>{{"x", {2, 3, n + 2, n + 2}}, {"k", {4, 3, 3, 3}}};
       }},
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       [](std::int64_t n) {
         return std::map<std::string, Shape>{{"x", {1, 2, 2 * n + 1, 2 * n + 1}},
                                             {"k", {3, 2, 3, 3}}};
       }},
      {"y[i,j] := (w[k,i] - x[k,j]) ^ 2",
       [](std::int64_t n) {
         return std::map<std::string, Shape>{{"w", {5, n}}, {"x", {5, n}}};
       }},
      {"y[i] := exp(x[i]) * 2 + tanh(x[i])",
       [](std::int64_t n) {
         return std::map<std::string, Shape>{{"x", {n * 7}}};
       }},
      {"s := x[i] * x[i]",
       [](std::int64_t n) {
         return std::map<std::string, Shape>{{"x", {n * 13}}};
       }},
      {"(max) y[i,j] := x[2i+a, 2j+b] where a in 0:2, b in 0:2",
       [](std::int64_t n) {
         return std::map<std::string, Shape>{{"x", {2 * n, 2 * n + 1}}};
       }},
  };
  for (const Case& c : cases)
    for (std::int64_t n : {1, 7, 33, 257}) {
      if (n == 257 && std::string(c.program).find("o,h,w") != std::string::npos) continue;
      INFO(c.program << " n=" << n);
      try {
        compareProgram(c.program, c.shapes(n), {}, {}, DType::f32, static_cast<std::uint64_t>(n));
      } catch (const std::exception& e) {
        FAIL_CHECK("threw: " << e.what());
      }
    }
}

TEST_CASE("jit: bf16 activations with f32 weights, forward and gradient") {
  for (const auto& row : einjit::test::kMixedRows) {
    INFO(std::string(row.program));
    try {
      compareMixed(row.program, row.shapes, row.f32, 29);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << std::string(e.what()));
    }
  }
}

// An '=' output keeps its own dtype: a bf16 tensor written by a program that computes in f32
// gets each f32 result rounded to bf16.
TEST_CASE("jit: a bf16 output written by an f32 program is rounded to bf16") {
  const Tensor x = Tensor::random({300}, DType::f32, 5), w = Tensor::random({300}, DType::bf16, 6);
  std::vector<double> xs = x.toVector(), ws = w.toVector();
  for (Device d : {Device::reference(), Device::cpu()}) {
    CAPTURE(d.name());
    Tensor y = Tensor::zeros({300}, DType::bf16);
    einjit::compile("y[i] = x[i] * w[i] + 1", on(d, DType::f32))(y, x, w);
    CHECK(y.dtype() == DType::bf16);
    std::vector<double> ys = y.toVector();
    for (std::size_t i = 0; i < ys.size(); ++i) {
      const double want = Tensor::full({}, xs[i] * ws[i] + 1, DType::bf16).get({});
      // One bf16 unit apart at most: the JIT rounds the f32 result, the interpreter the exact one.
      CHECK(std::fabs(ys[i] - want) <= std::fabs(want) * 0x1p-8);
    }
  }
}

TEST_CASE("jit: bf16 programs, forward and gradient, against the interpreter") {
  for (const auto& row : einjit::test::kBf16Rows) {
    INFO(std::string(row.program));
    try {
      compareProgram(row.program, row.shapes, {}, {}, DType::bf16, 23);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << std::string(e.what()));
    }
  }
}

TEST_CASE("jit: 300 random programs, forward and gradient, against the interpreter") {
  CHECK(compareRandomPrograms(Device::cpu(), 300) == 300);
}

TEST_CASE("jit: 8 threads compiling and calling different and identical kernels") {
  const std::vector<std::string> programs = {
      "C[i,k] := A[i,j] * B[j,k]", "y[i] := exp(A[i,j]) * B[j,i]", "(max) y[i] := A[i,j] + B[j,i]",
      "y[i,j] := (A[k,i] - B[k,j]) ^ 2"};
  Tensor A = Tensor::random({40, 40}, DType::f32, 1), B = Tensor::random({40, 40}, DType::f32, 2);
  std::vector<std::vector<double>> want;
  for (const auto& p : programs)
    want.push_back(einjit::compile(p).call({{"A", A}, {"B", B}})[std::size_t{0}].toVector());
  einjit::runtime::jitClearMemoryCache();
  std::vector<std::thread> threads;
  std::vector<int> bad(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 6; ++rep) {
        std::size_t which = static_cast<std::size_t>((t + rep) % 4);
        Kernel k = einjit::compile(programs[which]);
        auto got = k.call({{"A", A}, {"B", B}})[std::size_t{0}].toVector();
        if (got != want[which]) ++bad[static_cast<std::size_t>(t)];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) CHECK(bad[static_cast<std::size_t>(t)] == 0);
  // One kernel object shared by all threads.
  Kernel shared = einjit::compile(programs[0]);
  threads.clear();
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 10; ++rep)
        if (shared.call({{"A", A}, {"B", B}})[std::size_t{0}].toVector() != want[0])
          ++bad[static_cast<std::size_t>(t)];
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) CHECK(bad[static_cast<std::size_t>(t)] == 0);
}

TEST_CASE("jit: a kernel called twice gives bit-identical results (parallel loops included)") {
  Kernel k = einjit::compile("y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]");
  Tensor x = Tensor::random({4, 8, 34, 34}, DType::f32, 3),
         w = Tensor::random({16, 8, 3, 3}, DType::f32, 4);
  auto a = k(x, w)[std::size_t{0}].toVector();
  auto b = k(x, w)[std::size_t{0}].toVector();
  CHECK(a == b);
  Kernel g = k.gradient();
  Tensor dy = Tensor::random({4, 16, 32, 32}, DType::f32, 5);
  auto g1 = g.call({{"dy", dy}, {"x", x}, {"k", w}});
  auto g2 = g.call({{"dy", dy}, {"x", x}, {"k", w}});
  CHECK(g1[std::size_t{0}].toVector() == g2[std::size_t{0}].toVector());
  CHECK(g1[std::size_t{1}].toVector() == g2[std::size_t{1}].toVector());
}

TEST_CASE("jit: a gather out of bounds is the interpreter's error, and nothing is written") {
  Kernel k = einjit::compile("y[b,d] += E[tok[b], d]");
  Tensor E = Tensor::random({4, 3}, DType::f32, 1);
  Tensor tok = Tensor::fromValues({3}, {0, 5, 1}, DType::i64);
  Tensor y = Tensor::full({3, 3}, 2.0, DType::f32);
  CHECK_THROWS_WITH_AS(k(y, E, tok), doctest::Contains("gather index 5 is out of bounds"),
                       einjit::Error);
  for (double v : y.toVector()) CHECK(v == 2.0);
  Tensor ok = Tensor::fromValues({3}, {0, 3, 1}, DType::i64);
  k(y, E, ok);
  CHECK(y.get({1, 2}) == doctest::Approx(2.0 + E.get({3, 2})));
}

TEST_CASE("jit: checks that read only inputs run first, and written arguments are used in place") {
  checkHoistedChecks(Device::cpu(), [](const Tensor& t) { return t; });
}

TEST_CASE("jit: the emitted code is vectorized and multithreaded where it should be") {
  Kernel mm = einjit::compile("C[i,k] := A[i,j] * B[j,k]");
  Tensor A = Tensor::random({64, 64}, DType::f32, 1), B = Tensor::random({64, 64}, DType::f32, 2);
  std::string text = mm.explain({A, B}, true);
  CAPTURE(text);
  CHECK(text.find("register tile") != std::string::npos);
  CHECK(text.find("vectorized for") != std::string::npos);
  // Explicit vectors in the optimized LLVM IR: <16 x float> with AVX-512, <8 x float> with AVX.
  CHECK((text.find("<16 x float>") != std::string::npos ||
         text.find("<8 x float>") != std::string::npos ||
         text.find("<4 x float>") != std::string::npos));
  // An elementwise loop: vectorized by LLVM's loop vectorizer from the loop hint.
  Kernel ew = einjit::compile("y[i] := x[i] * 3 + w[i]");
  Tensor x = Tensor::random({1000}, DType::f32, 3);
  std::string t2 = ew.explain({x, x.clone()}, true);
  CHECK((t2.find("x float>") != std::string::npos));
  // Big work is split among threads; tiny work is not.
  Tensor big = Tensor::random({512, 512}, DType::f32, 4);
  std::string t3 = mm.explain({big, big}, false);
  if (einjit::runtime::hostTarget().threads > 1)
    CHECK(t3.find("parallel for") != std::string::npos);
  Tensor tiny = Tensor::random({8, 8}, DType::f32, 5);
  CHECK(mm.explain({tiny, tiny}).find("parallel for") == std::string::npos); // one thread
}

TEST_CASE("jit: the on-disk cache serves a second load and rebuilds a corrupted entry") {
  namespace fs = std::filesystem;
  const std::string saved = einjit::runtime::jitCacheDirectory();
  const fs::path dir =
      fs::temp_directory_path() / ("einjit-cache-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  einjit::runtime::jitSetCacheDirectory(dir.string());
  einjit::runtime::jitClearMemoryCache();
  // A program no other test compiles, so its entry is new.
  const std::string program = "y[i] := x[i] * 1.25 + x[i] ^ 3 - 0.5";
  Tensor x = Tensor::random({77}, DType::f64, 9);
  auto before = einjit::runtime::jitStats();
  std::vector<double> first =
      einjit::compile(program, on(Device::cpu())).call({x})[std::size_t{0}].toVector();
  einjit::runtime::jitClearMemoryCache();
  std::vector<double> second =
      einjit::compile(program, on(Device::cpu())).call({x})[std::size_t{0}].toVector();
  auto after = einjit::runtime::jitStats();
  CHECK(first == second);
  CHECK(after.diskHits >= before.diskHits + 1);
  // Truncate the entry: detected, rejected and rebuilt.
  int corrupted = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".o") continue; // not the secret key
    fs::resize_file(e.path(), fs::file_size(e.path()) / 2);
    ++corrupted;
  }
  REQUIRE(corrupted >= 1);
  einjit::runtime::jitClearMemoryCache();
  std::vector<double> third =
      einjit::compile(program, on(Device::cpu())).call({x})[std::size_t{0}].toVector();
  auto last = einjit::runtime::jitStats();
  CHECK(third == first);
  CHECK(last.diskRejected >= after.diskRejected + 1);
  CHECK(last.compiled >= after.compiled + 1);
  // A flipped byte in the object is caught by the MAC.
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".o") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x5a');
  }
  einjit::runtime::jitClearMemoryCache();
  std::vector<double> fourth =
      einjit::compile(program, on(Device::cpu())).call({x})[std::size_t{0}].toVector();
  CHECK(fourth == first);
  CHECK(einjit::runtime::jitStats().diskRejected >= last.diskRejected + 1);
  einjit::runtime::jitSetCacheDirectory(saved);
  fs::remove_all(dir);
}

TEST_CASE("jit: the generated code does not grow with the shape (compile time stays flat)") {
  // Long constant-trip vector loops stay loops: the optimized LLVM IR of a 10^4-element
  // kernel is about as long as that of a 2000-element one, forward and gradient (both small
  // enough to run on one thread, where the whole loop has constant bounds).
  const char* programs[] = {"y[i] := x[i] * 2", "y[i] := x[i+k] * w[k]"};
  for (const std::string program : programs) {
    CAPTURE(program);
    Kernel k = einjit::compile(program);
    Kernel g = k.gradient();
    std::size_t sizes[2][2];
    const std::int64_t ns[2] = {2000, 10000};
    for (int s = 0; s < 2; ++s) {
      Tensor x = Tensor::random({ns[s]}, DType::f32, 1);
      Tensor w = Tensor::random({3}, DType::f32, 2);
      std::vector<einjit::Arg> args{x};
      if (k.tensorArguments().size() == 2) args.push_back(w);
      sizes[s][0] = k.explain(args, true).size();
      Tensor y = k.call(args)[std::size_t{0}];
      std::map<std::string, Tensor> in{{"dy", Tensor::random(y.shape(), DType::f32, 3)}, {"x", x}};
      if (k.tensorArguments().size() == 2) in["w"] = w;
      std::vector<einjit::Arg> gargs;
      for (const auto& name : g.tensorArguments()) gargs.push_back(in.at(name));
      sizes[s][1] = g.explain(gargs, true).size();
    }
    CHECK(sizes[1][0] < sizes[0][0] * 3 / 2);
    CHECK(sizes[1][1] < sizes[0][1] * 3 / 2);
  }
}

// A plain subscript into a dimension of extent 0 reads nothing; where the interpreter evaluates
// it, that is an out-of-bounds error, and the JIT reports the same error (it used to read 0 and
// drop the check). Also kept as fuzzer regressions (tests/fuzz/regressions/empty-plain-*).
TEST_CASE("jit: a plain read or write of an empty dimension is the interpreter's error") {
  struct Row {
    const char* program;
    Shape z;
    const char* message;
  };
  const Row rows[] = {
      {"y[i] := x[i] * z[j] where j in 0:i", {0},
       "subscript 'j' goes out of bounds: it reaches 0 but 'z' has extent 0 there"},
      {"z[i,j] = x[i] where j in 0:i", {3, 0},
       "subscript 'j' goes out of bounds: it reaches 0 but 'z' has extent 0 there"},
  };
  const Tensor x = Tensor::random({3}, DType::f64, 1);
  for (const Row& r : rows) {
    INFO(r.program);
    for (Device d : {Device::reference(), Device::cpu()}) {
      CAPTURE(d.name());
      Kernel k = einjit::compile(r.program, on(d));
      Tensor z = Tensor::zeros(r.z, DType::f64);
      CHECK_THROWS_WITH_AS(k.call({{"x", x}, {"z", z}}), doctest::Contains(r.message),
                           einjit::Error);
    }
  }
  // With j's range empty at every i (i < 1), nothing is read: both give y = 0.
  for (Device d : {Device::reference(), Device::cpu()}) {
    Tensor y = einjit::compile("y[i] := x[i] * z[j] where i in 0:1, j in 0:i", on(d))
                   .call({{"x", x}, {"z", Tensor::zeros({0}, DType::f64)}})[0];
    CHECK(y.toVector() == std::vector<double>{0.0});
  }
}

// The right-hand side runs only where every dependent range is non-empty, so a read there may
// leave the box's hull of its indices and still stay inside the tensor: a gradient program
// 'da0[u] := dy[u-2k] * a1[u]' reads a1[u] only for the u where k's range is not empty.
// Binding proves such reads point by point on small domains and leaves larger ones to the
// checks made while running; a read that is evaluated out of bounds stays an error.
TEST_CASE("jit: a read guarded by a dependent range is checked only where it is evaluated") {
  const Tensor x = Tensor::fromValues({3}, {2, 3, 5}, DType::f64);
  const Tensor z = Tensor::fromValues({3}, {1, 10, 100}, DType::f64);
  for (Device d : {Device::reference(), Device::cpu()}) {
    CAPTURE(d.name());
    // k in 0:3-u is empty for u >= 3, where x[u] would leave x.
    Tensor y = einjit::compile("y[u] := x[u] * z[k] where u in 0:5, k in 0:3-u", on(d))
                   .call({{"x", x}, {"z", z}})[0];
    CHECK(y.toVector() == std::vector<double>{2 * 111, 3 * 11, 5 * 1, 0, 0});
    // k in 0:4-u is not empty at u = 3: an error when binding.
    CHECK_THROWS_WITH_AS(
        einjit::compile("y[u] := x[u] * z[k] where u in 0:5, k in 0:4-u", on(d))
            .call({{"x", x}, {"z", z}}),
        doctest::Contains("subscript 'u' goes out of bounds: it reaches 3 but dimension 0 of "
                          "'x' has extent 3"),
        einjit::Error);
    // A left-hand side is written at every point of its box, empty sums included.
    Tensor out = Tensor::full({3}, 7, DType::f64);
    CHECK_THROWS_WITH_AS(
        einjit::compile("y[u] = z[k] where u in 0:5, k in 0:3-u", on(d))
            .call({{"y", out}, {"z", z}}),
        doctest::Contains("subscript 'u' goes out of bounds: it reaches 4"), einjit::Error);
    CHECK(out.toVector() == std::vector<double>{7, 7, 7});
    // 301 x 400 points are more than Binding enumerates: the call finds a[300] where it is
    // read (k's range is never empty) and writes nothing.
    const Tensor a = Tensor::random({300}, DType::f64, 3);
    const Tensor c = Tensor::random({400}, DType::f64, 4);
    Tensor big = Tensor::full({301, 400}, 7, DType::f64);
    CHECK_THROWS_WITH_AS(
        einjit::compile("y[u,v] = a[u] * c[k] where u in 0:size(a,0)+1, v in 0:400, k in 0:v+1",
                        on(d))
            .call({{"y", big}, {"a", a}, {"c", c}}),
        doctest::Contains("subscript 'u' goes out of bounds: it reaches 300 but 'a' has extent "
                          "300 there"),
        einjit::Error);
    std::vector<double> kept = big.toVector();
    CHECK(std::all_of(kept.begin(), kept.end(), [](double v) { return v == 7; }));
  }
}

TEST_CASE("jit: iterationBound bounds a statement's stores through its loops' bounds") {
  namespace ir = einjit::codegen::ir;
  using ir::BinOp;
  using ir::ForKind;
  const ir::Stmt one = ir::store("y", ir::var("i"), ir::floatImm(ir::Type::f32, 1));
  auto loop = [](const char* v, ir::Expr lo, ir::Expr hi, ir::Stmt body) {
    return ir::forLoop(v, std::move(lo), std::move(hi), ForKind::Serial, std::move(body));
  };
  struct Row {
    const char* what;
    ir::Stmt stmt;
    std::optional<double> bound;
  };
  const ir::Expr k = ir::var("k"), u = ir::var("u");
  const std::vector<Row> rows = {
      {"one store", one, 1},
      {"0:64", loop("i", ir::intImm(0), ir::intImm(64), one), 64},
      {"an empty loop", loop("i", ir::intImm(5), ir::intImm(5), one), 0},
      {"3 x 64, and a second store",
       loop("k", ir::intImm(0), ir::intImm(3),
            ir::block({loop("c", ir::intImm(0), ir::intImm(64), one), one})),
       3 * 65},
      // a border: u in 0:2, k in max(u - 9, 0):min(u + 1, 3): k's range spans at most 0:2
      // (3 stores in all; the bound counts 2 per u)
      {"dependent min/max bounds",
       loop("u", ir::intImm(0), ir::intImm(2),
            loop("k", ir::binary(BinOp::Max, ir::sub(u, ir::intImm(9)), ir::intImm(0)),
                 ir::binary(BinOp::Min, ir::add(u, ir::intImm(1)), ir::intImm(3)), one)),
       2 * 2},
      {"a bound read from memory", loop("i", ir::intImm(0), ir::load(ir::Type::i64, "n", ir::intImm(0)), one),
       std::nullopt},
  };
  for (const Row& row : rows) {
    CAPTURE(std::string(row.what));
    CHECK(ir::iterationBound(row.stmt) == row.bound);
  }
}

TEST_CASE("jit: functions of a few iterations are compiled without optimization, the rest with O3") {
  // The conv1d gradient at 10^5: the chunks of dw's split reduction and dx's core tile run
  // long; the core's edge tiles, the borders and the combine of the partials run a few times.
  Kernel k = einjit::compile("y[i] := x[i+k] * w[k]");
  Kernel g = k.gradient();
  std::map<std::string, Tensor> in{{"dy", Tensor::random({100000}, DType::f32, 3)},
                                   {"x", Tensor::random({100002}, DType::f32, 1)},
                                   {"w", Tensor::random({3}, DType::f32, 2)}};
  std::vector<einjit::Arg> args;
  for (const auto& name : g.tensorArguments()) args.push_back(in.at(name));
  const std::string text = g.explain(args, true);
  CAPTURE(text);
  // Whether entry point `name` carries optnone (its attribute group says so).
  auto optnone = [&](const std::string& name) {
    const auto at = text.find("_" + name + "(ptr");
    REQUIRE(at != std::string::npos);
    const std::string line = text.substr(at, text.find('\n', at) - at);
    const auto hash = line.rfind('#');
    REQUIRE(hash != std::string::npos);
    const std::string group = line.substr(hash, line.find(' ', hash) - hash);
    const auto attrs = text.find("attributes " + group + " = {", at); // its module's groups
    REQUIRE(attrs != std::string::npos);
    return text.substr(attrs, text.find('\n', attrs) - attrs).find("optnone") != std::string::npos;
  };
  CHECK(!optnone("s0_core"));
  CHECK(!optnone("s1"));
  CHECK(optnone("s1_combine"));
  CHECK(optnone("s0_border0lo"));
  CHECK(optnone("s0_border0hi"));
  // And the results are the interpreter's (every table test runs such functions too).
  Kernel ref = einjit::compile(g.source(), on(Device::reference(), DType::f32));
  checkSame(g.call(args), ref.call(args), assigned(ref), DType::f32);
}

// IR the CPU code generator is given directly: masked loads (a lane whose mask is false reads
// nothing and is 0) in vector, gather and scalar form, and an outlined loop (a function of its
// own, not inlined, with the same results).
TEST_CASE("jit: masked loads and outlined loops, as IR") {
  namespace ir = einjit::codegen::ir;
  using ir::BinOp;
  using ir::ForKind;
  using ir::Type;
  const ir::Expr l = ir::var("l");
  auto func = [](const char* name, ir::Stmt body) {
    ir::Func f;
    f.name = name;
    f.buffers = {{"x", Type::f32}, {"y", Type::f32}};
    f.body = std::move(body);
    return f;
  };
  // y[l] = x[at(l)] where mask(l), else 0, over 16 lanes.
  auto masked = [&](ForKind kind, ir::Expr at, ir::Expr mask) {
    ir::Stmt s = ir::store("y", l, ir::maskedLoad(Type::f32, "x", std::move(at), std::move(mask)));
    return ir::forLoop("l", ir::intImm(0), ir::intImm(16), kind, s, kind == ForKind::Vectorized ? 8 : 1);
  };
  const ir::Expr lt6 = ir::binary(BinOp::Lt, l, ir::intImm(6));
  const ir::Expr even = ir::binary(BinOp::Eq, ir::binary(BinOp::Mod, l, ir::intImm(2)), ir::intImm(0));
  std::vector<ir::Func> funcs = {
      func("contiguous", masked(ForKind::Vectorized, ir::add(l, ir::intImm(10)), lt6)),
      func("gather", masked(ForKind::Vectorized, ir::mul(l, ir::intImm(2)),
                            ir::binary(BinOp::And, even, lt6))),
      func("scalar", masked(ForKind::Serial, ir::add(l, ir::intImm(10)), lt6)),
      func("outlined",
           ir::forLoop("l", ir::intImm(0), ir::intImm(16), ForKind::Outlined,
                       ir::store("y", l, ir::mul(ir::load(Type::f32, "x", l),
                                                 ir::floatImm(Type::f32, 2))))),
  };
  auto code = einjit::runtime::jitCompile(funcs, true);
  REQUIRE(code->fns.size() == funcs.size());
  // x holds 16 values: lanes 6..15 of "contiguous" and "scalar" would read past it.
  std::vector<float> x(16), y(16);
  for (int i = 0; i < 16; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i + 1);
  void* bufs[] = {x.data(), y.data()};
  std::int32_t status = 0;
  auto run = [&](std::size_t f) {
    std::fill(y.begin(), y.end(), -1.0f);
    code->fns[f](bufs, nullptr, 0, 0, &status);
  };
  run(0);
  for (int i = 0; i < 16; ++i) CHECK(y[static_cast<std::size_t>(i)] == (i < 6 ? static_cast<float>(i + 11) : 0.0f));
  run(1);
  for (int i = 0; i < 16; ++i)
    CHECK(y[static_cast<std::size_t>(i)] == (i < 6 && i % 2 == 0 ? static_cast<float>(2 * i + 1) : 0.0f));
  run(2);
  for (int i = 0; i < 16; ++i) CHECK(y[static_cast<std::size_t>(i)] == (i < 6 ? static_cast<float>(i + 11) : 0.0f));
  run(3);
  for (int i = 0; i < 16; ++i) CHECK(y[static_cast<std::size_t>(i)] == static_cast<float>(2 * (i + 1)));
  CHECK(status == 0);
  // The outlined loop is a function of its own, marked noinline, called by its entry point.
  CAPTURE(code->llvmIR);
  const std::string& text = code->llvmIR;
  // (A function this small is compiled unoptimized: no calling convention of LLVM's choosing.)
  auto lineWith = [&](const std::string& start, const std::string& part) {
    for (std::size_t at = text.find(start); at != std::string::npos; at = text.find(start, at + 1)) {
      const std::string line = text.substr(at, text.find('\n', at) - at);
      if (line.find(part) != std::string::npos) return true;
    }
    return false;
  };
  CHECK(lineWith("define internal void @", "_outlined.body.l("));
  CHECK(lineWith("call void @", "_outlined.body.l("));
}

// A vector load whose lanes are 2 to 4 elements apart reads the run from the first lane to the
// last and picks the lanes out of it (shufflevector), never past the last lane; farther apart
// it is a gather.
TEST_CASE("jit: strided vector loads read one run and shuffle, as IR") {
  namespace ir = einjit::codegen::ir;
  using ir::ForKind;
  using ir::Type;
  const ir::Expr l = ir::var("l");
  std::vector<ir::Func> funcs;
  for (std::int64_t s = 2; s <= 5; ++s) {
    ir::Func f;
    f.name = "stride" + std::to_string(s);
    f.buffers = {{"x", Type::f32}, {"y", Type::f32}};
    // y[l] = x[s*l + 1], 8 lanes
    f.body = ir::forLoop("l", ir::intImm(0), ir::intImm(8), ForKind::Vectorized,
                         ir::store("y", l, ir::load(Type::f32, "x", ir::add(ir::mul(l, ir::intImm(s)), ir::intImm(1)))),
                         8);
    funcs.push_back(std::move(f));
  }
  auto code = einjit::runtime::jitCompile(funcs, true);
  REQUIRE(code->fns.size() == funcs.size());
  for (std::size_t f = 0; f < funcs.size(); ++f) {
    const auto s = static_cast<std::size_t>(f + 2);
    CAPTURE(s);
    // Exactly up to the last lane's element: a read past it is a heap overflow under ASan.
    std::vector<float> x(7 * s + 2), y(8, -1.0f);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
    void* bufs[] = {x.data(), y.data()};
    std::int32_t status = 0;
    code->fns[f](bufs, nullptr, 0, 0, &status);
    CHECK(status == 0);
    for (std::size_t i = 0; i < 8; ++i) CHECK(y[i] == static_cast<float>(s * i + 1) * 0.5f);
  }
  const std::string& text = code->llvmIR;
  CAPTURE(text);
  auto body = [&](const std::string& name) {
    const auto at = text.find("_" + name + ".body(");
    REQUIRE(at != std::string::npos);
    return text.substr(at, text.find("\n}", at) - at);
  };
  for (int s = 2; s <= 4; ++s) {
    CHECK(body("stride" + std::to_string(s)).find("shufflevector") != std::string::npos);
    CHECK(body("stride" + std::to_string(s)).find("masked.gather") == std::string::npos);
  }
  CHECK(body("stride5").find("masked.gather") != std::string::npos);
}
