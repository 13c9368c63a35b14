// Row blocks (codegen/schedule/RowBlocks.h), two decisions of the plan: the stores left out
// (RowRun::forwarded: a scratch tensor's last write that only the later statements of its own
// element loop read) and blocks of one row (Zen 4, short rows that fit L1) — as the plan and
// `explain` give them, and the programs on the CPU JIT against the reference interpreter, f32
// and f64, one and two threads.
#include "Compare.h"
#include "RowPrograms.h"

#include "codegen/schedule/RowBlocks.h"
#include "dsl/Binding.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

using namespace einjit::test;

namespace {

// t += s[i] is read by w and u in its row loop (statements 3-5) and by nothing after it: its
// store is left out. The second program reads t after the loop: stored.
const char* kLoopOnly = "t[i,j] := x[i,j] * 2\ns[i] := t[i,j]\nt[i,j] += s[i]\n"
                        "w[i,j] := t[i,j] * 3\nu[i] := w[i,j] + t[i,j]\ny[i,j] := w[i,j] * u[i]";
const char* kReadAfter = "t[i,j] := x[i,j] * 2\ns[i] := t[i,j]\nt[i,j] += s[i]\n"
                         "w[i,j] := t[i,j] * 3\nu[i] := w[i,j] + t[i,j]\n"
                         "y[i,j] := w[i,j] * u[i] + t[i,j]";

// The row plan of `program` for x (and dy) of rows x cols, g and b of cols, on target t.
einjit::codegen::RowPlan rowPlan(const std::string& program, std::int64_t rows, std::int64_t cols,
                                 DType dt, const einjit::codegen::Target& t) {
  const einjit::dsl::Program p = einjit::dsl::check(program);
  std::vector<einjit::dsl::ArgSpec> args;
  for (int id : p.arguments) {
    const std::string& n = p.tensors[static_cast<std::size_t>(id)].name;
    const bool row = n == "g" || n == "b";
    args.push_back({dt, row ? std::vector<std::int64_t>{cols} : std::vector<std::int64_t>{rows, cols}});
  }
  std::vector<double> scalars(p.params.size(), 1e-5);
  const einjit::dsl::BoundProgram b = einjit::dsl::bind(p, args, scalars, dt);
  einjit::codegen::Strides strides(p.tensors.size());
  for (std::size_t u = 0; u < p.tensors.size(); ++u) {
    const auto& shape = b.tensors[u].shape;
    strides[u].assign(shape.size(), 1);
    for (std::size_t d = shape.size(); d-- > 1;) strides[u][d - 1] = strides[u][d] * shape[d];
  }
  return einjit::codegen::planRows(p, b, strides, t);
}

// The 1-based statements whose store the plan leaves out, over its runs.
std::vector<std::size_t> forwarded(const einjit::codegen::RowPlan& plan) {
  std::vector<std::size_t> out;
  for (const auto& run : plan.runs)
    for (std::size_t k : run.forwarded) out.push_back(k + 1);
  return out;
}

// The lines of `text` that begin (after spaces) with `prefix`: stores to that buffer in an
// explained IR.
int storeLines(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(' ') != std::string::npos &&
        line.compare(line.find_first_not_of(' '), prefix.size(), prefix) == 0)
      ++n;
  return n;
}

// The lines of `text` that hold both `a` and `b`.
int linesWith(const std::string& text, const std::string& a, const std::string& b) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    n += line.find(a) != std::string::npos && line.find(b) != std::string::npos;
  return n;
}

std::string gradientOf(const char* program) { return einjit::compile(program).gradient().source(); }

// The 1-based number of the first statement of `source` that begins with `prefix`.
std::size_t statementOf(const std::string& source, const std::string& prefix) {
  std::istringstream in(source);
  std::size_t k = 0;
  for (std::string line; std::getline(in, line);) {
    ++k;
    if (line.rfind(prefix, 0) == 0) return k;
  }
  return 0;
}

// Target::halvedVectors with a 32 KiB L1 and a 1 MiB L2: the Zen 4 of the measurements.
einjit::codegen::Target zen4Target() {
  einjit::codegen::Target t;
  t.vectorBytes = 64;
  t.halvedVectors = true;
  t.l1Bytes = 32 << 10;
  t.l2Bytes = 1 << 20;
  return t;
}

// `program` (a row program reading x of rows x cols, and g, b of cols for the layernorm) and
// its gradient on the CPU JIT against the reference interpreter, y and dx, one and two threads;
// the random inputs from `seed` (x) and seed + 1 (dy).
void checkRows(const char* program, std::int64_t rows, std::int64_t cols, DType dt,
               std::uint64_t seed) {
  INFO(program << "\n" << rows << " x " << cols << (dt == DType::f32 ? ", f32" : ", f64"));
  const bool ln = program == kLayernorm;
  std::map<std::string, Shape> shapes{{"x", {rows, cols}}};
  if (ln) shapes["g"] = shapes["b"] = {cols};
  const std::map<std::string, double> scalars =
      ln ? std::map<std::string, double>{{"eps", 1e-5}} : std::map<std::string, double>{};
  Kernel ref = einjit::compile(program, on(Device::reference(), dt));
  Kernel refBack = ref.gradient();
  auto in = randomArgs(ref.program(), shapes, dt, seed);
  in["dy"] = Tensor::random({rows, cols}, dt, seed + 1);
  Kernel fwd = einjit::compile(program, cpu(dt));
  Kernel back = einjit::compile(refBack.source(), cpu(dt));
  for (int threads : {1, 2})
    withThreads(threads, [&] {
      CAPTURE(threads);
      checkSame(fwd.call(argsOf(fwd, in, scalars)), ref.call(argsOf(ref, in, scalars)), {"y"}, dt);
      checkSame(back.call(argsOf(back, in, scalars)), refBack.call(argsOf(refBack, in, scalars)),
                {"dx"}, dt);
    });
}

} // namespace

TEST_CASE("row plans: which stores are left out") {
  const einjit::codegen::Target t;
  // Softmax gradient: de += dz is read only by dx := de * e in its element-wise group; the
  // layernorm gradient: dd += ... only in its row loop (dx := dd, dmu := -dd). The forwards
  // write nothing of the kind.
  const std::string smBack = gradientOf(kSoftmax), lnBack = gradientOf(kLayernorm);
  REQUIRE(statementOf(smBack, "de[i, j] += ") > 0);
  REQUIRE(statementOf(lnBack, "dd[i, j] += ") > 0);
  CHECK(forwarded(rowPlan(smBack, 67, 300, DType::f32, t)) ==
        std::vector<std::size_t>{statementOf(smBack, "de[i, j] += ")});
  CHECK(forwarded(rowPlan(lnBack, 67, 300, DType::f32, t)) ==
        std::vector<std::size_t>{statementOf(lnBack, "dd[i, j] += ")});
  CHECK(forwarded(rowPlan(kSoftmax, 67, 300, DType::f32, t)).empty());
  CHECK(forwarded(rowPlan(kLayernorm, 67, 300, DType::f32, t)).empty());
  CHECK(forwarded(rowPlan(kLoopOnly, 67, 300, DType::f32, t)) == std::vector<std::size_t>{3});
  CHECK(forwarded(rowPlan(kReadAfter, 67, 300, DType::f32, t)).empty());
  // Intermediates kept in full (no scratch): every store stays.
  einjit::codegen::Target full;
  full.rowScratch = false;
  CHECK(forwarded(rowPlan(gradientOf(kSoftmax), 67, 300, DType::f32, full)).empty());

  // explain: the note, and the code.
  Kernel fwd = einjit::compile(kSoftmax, cpu(DType::f32));
  Kernel back = einjit::compile(fwd.gradient().source(), cpu(DType::f32));
  std::map<std::string, Tensor> in{{"x", Tensor::random({67, 300}, DType::f32, 1)},
                                   {"dy", Tensor::random({67, 300}, DType::f32, 2)}};
  const std::string text = back.explain(argsOf(back, in, {}), true);
  CHECK(text.find("no store: its element loop's later statements take the value") !=
        std::string::npos);
  // de += dz stores nothing: dx's store reads de and adds dz itself.
  CHECK(storeLines(text, "rows0.de[") > 0); // (de := dy * (1 / z))
  CHECK(storeLines(text, "rows0.de[") == linesWith(text, "rows0.de[", "= (dy["));
  CHECK(linesWith(text, "dx[", "rows0.dz[") == 1);
}

TEST_CASE("row plans: stores left out, against the interpreter") {
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {{67, 300}, {300, 77}, {5, 3}};
  for (const char* program : {kSoftmax, kLayernorm, kLoopOnly, kReadAfter})
    for (auto [rows, cols] : sizes)
      for (DType dt : {DType::f32, DType::f64}) checkRows(program, rows, cols, dt, 11);
}

TEST_CASE("row plans: blocks of one row on Zen 4") {
  // Target::halvedVectors with a 32 KiB L1 and a 1 MiB L2 (the Zen 4 of the measurements):
  // rows of 1024 f32 (a page each) run one row per block — the softmax forward and gradient,
  // the layernorm forward; not rows of 4096 f32 (16 KiB a row) or 1024 f64 (8 KiB), not the
  // layernorm gradient (column sums), not on a target without halved vectors.
  const einjit::codegen::Target zen4 = zen4Target();
  einjit::codegen::Target other = zen4;
  other.halvedVectors = false;
  auto blockRows = [](const einjit::codegen::RowPlan& plan) {
    REQUIRE(plan.runs.size() == 1);
    return plan.runs[0].blockRows;
  };
  for (const std::string& program : {std::string(kSoftmax), gradientOf(kSoftmax), std::string(kLayernorm)}) {
    CAPTURE(program);
    CHECK(blockRows(rowPlan(program, 4096, 1024, DType::f32, zen4)) == 1);
    CHECK(blockRows(rowPlan(program, 4096, 1024, DType::f32, other)) > 1);
    CHECK(blockRows(rowPlan(program, 1024, 4096, DType::f32, zen4)) > 1);
    CHECK(blockRows(rowPlan(program, 4096, 1024, DType::f64, zen4)) > 1);
  }
  CHECK(blockRows(rowPlan(gradientOf(kLayernorm), 4096, 1024, DType::f32, zen4)) > 1);
}

TEST_CASE("row plans: the CPU's row blocks at rows of 1024, against the interpreter") {
  // Whatever this CPU plans (blocks of one row on Zen 4): softmax and layernorm, forward and
  // gradient, 300 x 1024 (a partial group of blocks), f32 and f64, one and two threads.
  for (const char* program : {kSoftmax, kLayernorm})
    for (DType dt : {DType::f32, DType::f64}) checkRows(program, 300, 1024, dt, 13);
}

TEST_CASE("row plans: the layernorm gradient fetches x and dy one block ahead on Zen 4") {
  // A run with column sums (dg, db): on Zen 4 its first row loop (d, dd, dvar) hints the next
  // block's x and dy where they exceed L2; not without halved vectors, not where they fit.
  const einjit::codegen::Target zen4 = zen4Target();
  einjit::codegen::Target other = zen4;
  other.halvedVectors = false;
  const std::string back = gradientOf(kLayernorm);
  auto ahead = [&](const einjit::codegen::Target& t, std::int64_t rows) {
    const einjit::codegen::RowPlan plan = rowPlan(back, rows, 1024, DType::f32, t);
    REQUIRE(plan.runs.size() == 1);
    REQUIRE(!plan.runs[0].sums.empty());
    std::vector<int> ids;
    for (const auto& l : plan.runs[0].loops) ids.insert(ids.end(), l.ahead.begin(), l.ahead.end());
    return ids.size();
  };
  CHECK(ahead(zen4, 4096) == 2); // x and dy, in the first loop only
  CHECK(ahead(other, 4096) == 0);
  CHECK(ahead(zen4, 64) == 0); // 256 KiB: within L2
  // The forward (no column sums) gets none, on Zen 4 too.
  const einjit::codegen::RowPlan fwd = rowPlan(kLayernorm, 4096, 1024, DType::f32, zen4);
  REQUIRE(fwd.runs.size() == 1);
  for (const auto& l : fwd.runs[0].loops) CHECK(l.ahead.empty());
}

TEST_CASE("row plans: the layernorm gradient at 2048 x 1030, against the interpreter") {
  // Larger than L2 (8 MiB of f32): on Zen 4 the plan of the case above; f32 and f64, 2 and 1
  // threads.
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dt == DType::f32);
    std::map<std::string, Shape> shapes{{"x", {2048, 1030}}, {"g", {1030}}, {"b", {1030}}};
    const std::map<std::string, double> scalars{{"eps", 1e-5}};
    Kernel ref = einjit::compile(kLayernorm, on(Device::reference(), dt));
    Kernel refBack = ref.gradient();
    auto in = randomArgs(ref.program(), shapes, dt, 15);
    in["dy"] = Tensor::random({2048, 1030}, dt, 16);
    Kernel back = einjit::compile(refBack.source(), cpu(dt));
    const Outputs want = refBack.call(argsOf(refBack, in, scalars));
    for (int threads : {2, 1})
      withThreads(threads, [&] {
        CAPTURE(threads);
        checkSame(back.call(argsOf(back, in, scalars)), want, {"dx", "dg", "db"}, dt);
      });
  }
}
