// In-place statements ('=' and '+=' reading the tensor they write): which run in place and
// which read a snapshot, large calls on the CPU JIT against hand-written loops (several
// threads, strided views), aliasing between arguments, gradients through such statements
// (finite differences in float64, and the errors where they need overwritten values), and the
// optimizer programs through NVRTC. The small hand-worked rows are in InterpreterTable.h and
// run on every device.
#include "examples/Optimizers.h"

#include "dsl/InPlace.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"

#if EINJIT_HAVE_CUDA
#include "CudaCompile.h"
#endif

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

using einjit::Device;
using einjit::DType;
using einjit::Kernel;
using einjit::Tensor;

namespace {

einjit::Options onDevice(Device d) {
  einjit::Options o;
  o.device = d;
  return o;
}

// Equal up to the rounding of one fused multiply-add (the JIT contracts a*b + c).
void checkNear(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(got[i] - want[i]) <= 1e-12 * std::max(1.0, std::fabs(want[i])));
  }
}

struct FormRow {
  const char* program;
  std::vector<bool> inPlace; // per statement of the checked program (snapshots included):
                             // reads its own output, and runs in place
  std::vector<std::string> snapshots; // "copy of" per inserted snapshot
};

// Runs call, which must throw an einjit::Error with this message at this line and column and
// a caret under it.
template <class F>
void expectCaretError(F&& call, const char* message, int line, int column) {
  try {
    call();
    FAIL("expected an error");
  } catch (const einjit::Error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find(std::string("error: ") + message) != std::string::npos);
    CHECK(e.line() == line);
    CHECK(e.column() == column);
    CHECK(what.find('^') != std::string::npos);
  }
}

} // namespace

TEST_CASE("inplace: which statements run in place and which read a snapshot") {
  const std::vector<FormRow> rows = {
      // only the written element: in place, no copy
      {"x[i] = x[i]*2", {true}, {}},
      {"x[i] += x[i]", {true}, {}},
      {"A[i,i] = A[i,i] + 1", {true}, {}},
      {"x[i] = x[i]*x[i] where i in 1:3", {true}, {}},
      {"m[i] = b1*m[i] + g[i]; p[i] = p[i] - m[i]", {true, true}, {}},
      // other elements, reductions, gathers, scatters: a snapshot before the statement
      {"x[i] = x[pad(i-1)]", {false, false}, {"x_old:x"}},
      {"A[i,j] = A[j,i]", {false, false}, {"A_old:A"}},
      {"x[i] += x[j]", {false, false}, {"x_old:x"}},
      {"s = s + x[i]", {false, false}, {"s_old:s"}},
      {"x[i] = x[idx[i]]", {false, false}, {"x_old:x"}},
      {"x[idx[i]] += x[i]", {false, false}, {"x_old:x"}},
      // the same element, but the left-hand side reaches it from several (i, j)
      {"y[i+j] += y[i+j]*w[j]", {false, false}, {"y_old:y"}},
      // a snapshot's name never collides with the program's names
      {"x_old[i] := y[i]; x[i] = x[pad(i-1)] + x_old[i]", {false, false, false}, {"x_old_1:x"}},
      // one snapshot per statement that needs one
      {"x[i] = x[pad(i+1)]; x[i] = x[pad(i+1)]", {false, false, false, false},
       {"x_old:x", "x_old_1:x"}},
  };
  for (const FormRow& row : rows) {
    CAPTURE(std::string(row.program));
    const einjit::dsl::Program p = einjit::dsl::check(row.program);
    REQUIRE(p.stmts.size() == row.inPlace.size());
    for (std::size_t k = 0; k < p.stmts.size(); ++k) {
      CAPTURE(k);
      CHECK(einjit::dsl::readsOwnOutput(p, k) == row.inPlace[k]);
      if (row.inPlace[k]) CHECK(einjit::dsl::runsInPlace(p, k));
    }
    std::vector<std::string> snaps;
    for (const auto& t : p.tensors)
      if (t.snapshotOf >= 0)
        snaps.push_back(t.name + ":" + p.tensors[static_cast<std::size_t>(t.snapshotOf)].name);
    CHECK(snaps == row.snapshots);
    // A snapshot is an intermediate, never an output.
    for (int o : p.outputs) CHECK(p.tensors[static_cast<std::size_t>(o)].snapshotOf < 0);
  }
}

TEST_CASE("inplace: large calls on the CPU JIT equal hand-written loops (threads, views)") {
  const std::int64_t n = 100003;
  {
    // A neighbour read: a snapshot; in place in any order would differ.
    Tensor x = Tensor::random({n}, DType::f64, 1);
    std::vector<double> old = x.toVector(), want(old.size());
    for (std::size_t i = 0; i < old.size(); ++i) want[i] = old[i] + (i > 0 ? 3 * old[i - 1] : 0);
    einjit::compile("x[i] = x[i] + 3*x[pad(i-1)]", onDevice(Device::cpu()))(x);
    checkNear(x.toVector(), want);
  }
  {
    // A transpose on a square matrix: each (i, j) reads the element another iteration writes.
    const std::int64_t d = 301;
    Tensor A = Tensor::random({d, d}, DType::f64, 2);
    std::vector<double> old = A.toVector(), want(old.size());
    for (std::int64_t i = 0; i < d; ++i)
      for (std::int64_t j = 0; j < d; ++j)
        want[static_cast<std::size_t>(i * d + j)] =
            old[static_cast<std::size_t>(j * d + i)] + 0.5 * old[static_cast<std::size_t>(i * d + j)];
    einjit::compile("A[i,j] = A[j,i] + 0.5*A[i,j]", onDevice(Device::cpu()))(A);
    checkNear(A.toVector(), want);
  }
  {
    // In place through a strided view: every other element changes, the others stay.
    Tensor buf = Tensor::random({2 * n}, DType::f64, 3);
    std::vector<double> old = buf.toVector(), want = old;
    for (std::size_t i = 0; i < want.size(); i += 2) want[i] = old[i] * old[i] + 1;
    einjit::compile("x[i] = x[i]*x[i] + 1", onDevice(Device::cpu()))(buf.slice(0, 0, 2 * n, 2));
    checkNear(buf.toVector(), want);
  }
  {
    // A reduction over the written tensor, on a transposed view: x = W x.
    const std::int64_t d = 257;
    Tensor W = Tensor::random({d, d}, DType::f64, 4);
    Tensor x2 = Tensor::random({d, 2}, DType::f64, 5);
    Tensor x = x2.transpose(0, 1).slice(0, 1, 2).transpose(0, 1); // column 1 of x2: stride 2
    std::vector<double> w = W.toVector(), old = x2.toVector(), want = old;
    for (std::int64_t i = 0; i < d; ++i) {
      double s = 0;
      for (std::int64_t j = 0; j < d; ++j)
        s += w[static_cast<std::size_t>(i * d + j)] * old[static_cast<std::size_t>(j * 2 + 1)];
      want[static_cast<std::size_t>(i * 2 + 1)] = s;
    }
    einjit::compile("s[i,c] = W[i,j]*s[j,c]", onDevice(Device::cpu()))(x, W);
    checkNear(x2.toVector(), want);
  }
}

TEST_CASE("inplace: errors in a statement that reads a snapshot name the tensor written") {
  struct Row {
    const char* program;
    std::vector<Tensor> args;
    const char* message;
    int line, column;
  };
  const std::vector<Row> rows = {
      {"x[i] = x[i] + x[i+1]", {Tensor::zeros({5})},
       "subscript 'i+1' goes out of bounds: it reaches 5 but dimension 0 of 'x' has extent 5", 1,
       17},
      {"x[i] = x[j] + y[i]", {Tensor::zeros({5}), Tensor::zeros({4})},
       "index 'i' ranges over 4 (dimension 0 of 'y') here but over 5 (dimension 0 of 'x') "
       "elsewhere", 1, 17},
      {"x[i] = x[j] + y[j]", {Tensor::zeros({5}), Tensor::zeros({4})},
       "index 'j' ranges over 4 (dimension 0 of 'y') here but over 5 (dimension 0 of 'x') "
       "elsewhere", 1, 17},
      // a gather from the written tensor, checked while running (the interpreter's message)
      {"x[i] = x[idx[i]]", {Tensor::zeros({3}), Tensor::fromValues({3}, {0, 3, 1}, DType::i64)},
       "gather index 3 is out of bounds for 'x' (extent 3)", 1, 10},
  };
  for (const Row& row : rows) {
    CAPTURE(std::string(row.program));
    Kernel k = einjit::compile(row.program);
    std::vector<einjit::Arg> args(row.args.begin(), row.args.end());
    expectCaretError([&] { k.call(args); }, row.message, row.line, row.column);
  }
}

TEST_CASE("inplace: a written argument may not share memory with another argument") {
  // One tensor under two names is two arguments: the result would depend on the order in
  // which elements are computed, so it is an error and nothing is written. Reading the
  // written tensor is spelled with its own name.
  Kernel k = einjit::compile("x[i] = x[i] + y[pad(i-1)]");
  Tensor x = Tensor::fromValues({3}, {1, 2, 3});
  try {
    k(x, x);
    FAIL("expected an error");
  } catch (const einjit::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("<program>:1:1: error: output 'x' shares memory with argument 'y'; pass "
                    "separate memory for outputs") == 0);
  }
  Tensor buf = Tensor::fromValues({4}, {1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(k(buf.slice(0, 1, 4), buf.slice(0, 0, 3)),
                       doctest::Contains("output 'x' shares memory with argument 'y'"),
                       einjit::Error);
  CHECK(x.toVector() == std::vector<double>{1, 2, 3});
  CHECK(buf.toVector() == std::vector<double>{1, 2, 3, 4});
  // The same values through the one name: x[i] + x_old[i-1].
  einjit::compile("x[i] = x[i] + x[pad(i-1)]")(x);
  CHECK(x.toVector() == std::vector<double>{1, 3, 5});
}

TEST_CASE("inplace: gradients through in-place statements against finite differences (f64)") {
  struct Row {
    const char* program;
    std::map<std::string, einjit::Shape> shapes;
    std::map<std::string, double> scalars;
    std::vector<std::string> wrt;
  };
  const std::vector<Row> rows = {
      // linear in the old m: the gradient needs no overwritten value
      {"m[i] = b1*m[i] + g[i]", {{"m", {5}}, {"g", {5}}}, {{"b1", 0.9}}, {"g"}},
      {"m[i] += g[i]*w[i]", {{"m", {5}}, {"g", {5}}, {"w", {5}}}, {}, {"g", "w"}},
      // later statements read the updated tensor
      {"m[i] = b*m[i] + g[i]*w[i]; y[i] := m[i]*u[i]",
       {{"m", {5}}, {"g", {5}}, {"w", {5}}, {"u", {5}}},
       {{"b", 0.9}},
       {"g", "w"}},
      {"v[i] = mu*v[i] + g[i]; p[i] = p[i] - lr*v[i]",
       {{"v", {6}}, {"g", {6}}, {"p", {6}}},
       {{"mu", 0.9}, {"lr", 0.1}},
       {"g"}},
      // a snapshot read, linear in it
      {"x[i] = x[pad(i-1)] + g[i]*g[i]", {{"x", {5}}, {"g", {5}}}, {}, {"g"}},
      {"A[i,j] = A[j,i] + B[i,k]*C[k,j]",
       {{"A", {3, 3}}, {"B", {3, 4}}, {"C", {4, 3}}},
       {},
       {"B", "C"}},
  };
  for (const Row& row : rows) {
    CAPTURE(std::string(row.program));
    auto r = einjit::gradcheck(row.program, row.shapes, row.scalars, row.wrt);
    CAPTURE(r.why);
    CHECK(r.passed);
    REQUIRE(r.inputs.size() == row.wrt.size());
    for (std::size_t i = 0; i < r.inputs.size(); ++i) {
      CAPTURE(r.inputs[i]);
      CHECK(r.compared[i] > 0);
      CHECK(r.maxRelativeError[i] <= 1e-6);
    }
  }
}

TEST_CASE("inplace: a gradient that needs overwritten values is a caret error") {
  struct Row {
    const char* program;
    std::vector<std::string> wrt;
    const char* message;
    int line, column;
  };
  const char* const needs = "cannot differentiate this program: its gradient needs the values "
                            "of 'x', which the program changes in place (compute the result "
                            "into a new tensor with ':=')";
  const std::vector<Row> rows = {
      {"x[i] = x[i]*w[i]", {"w"}, needs, 1, 1},
      {"x[i] = x[pad(i-1)]*w[i]", {"w"}, needs, 1, 1},
      {"y[i] := w[i]*2\nx[i] += x[j]*y[i]", {"w"}, needs, 2, 1},
      {"m[i] = b*m[i] + g[i]", {"m"}, "cannot differentiate with respect to 'm': the program "
                                      "writes it", 1, 1},
  };
  for (const Row& row : rows) {
    CAPTURE(std::string(row.program));
    Kernel k = einjit::compile(row.program);
    expectCaretError([&] { k.gradient(row.wrt); }, row.message, row.line, row.column);
  }
}

#if EINJIT_HAVE_CUDA
TEST_CASE("inplace: the optimizer programs compile for CUDA through NVRTC (no GPU needed)") {
  std::string why;
  REQUIRE_MESSAGE(einjit::runtime::nvrtc::available(&why), why);
  namespace ex = einjit::examples;
  const std::int64_t n = 10000000;
  auto t = [&] { return Tensor::zeros({n}); };
  for (DType dt : {DType::f32, DType::bf16}) {
    Kernel sgd = einjit::compile(ex::kSgdMomentum, einjit::test::on(Device::cuda(), dt));
    einjit::test::compileCall(sgd, {{"b", t()}, {"g", t()}, {"p", t()}}, {{"mu", 0.9}, {"lr", 0.1}},
                              dt);
    for (const char* prog : {ex::kAdam, ex::kAdamW}) {
      CAPTURE(std::string(prog));
      Kernel k = einjit::compile(prog, einjit::test::on(Device::cuda(), dt));
      std::map<std::string, double> s = {{"b1", 0.9}, {"b2", 0.999}, {"lr", 1e-3},
                                         {"c1", 0.1}, {"c2", 0.001}, {"eps", 1e-8}, {"wd", 0.01}};
      if (prog == ex::kAdam) s.erase("wd");
      einjit::test::compileCall(k, {{"m", t()}, {"g", t()}, {"v", t()}, {"p", t()}}, s, dt);
    }
  }
}
#endif
