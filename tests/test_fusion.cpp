// Fusion of consecutive element-wise statements into one loop (codegen/schedule/Fusion.h): the
// decision as `explain` prints it, and the fused programs on the CPU JIT against the reference
// interpreter (in place and out of place, contiguous and strided views, odd sizes, one and
// several threads), with the rows that must not fuse because a statement reads or writes
// another element than the one being updated. The CUDA rows check the generated launches
// (NVRTC, no GPU needed).
#include "Compare.h"
#include "examples/Optimizers.h"

#if EINJIT_HAVE_CUDA
#include "CudaCompile.h"
#endif

#include <doctest/doctest.h>

#include <string>
#include <vector>

using einjit::Arg;
using einjit::Device;
using einjit::DType;
using einjit::Kernel;
using einjit::Shape;
using einjit::Tensor;
using einjit::test::argsOf;

namespace {

struct FusionRow {
  const char* program;
  std::map<std::string, Shape> shapes; // at size n; `grown` rows scale with n
  std::map<std::string, double> scalars;
  // Per statement of the checked program (snapshots included): the 1-based statement whose
  // loop it runs in (itself when not fused).
  std::vector<int> group;
  const char* why = nullptr; // a part of the "not fused" note, when one is expected
};

std::vector<FusionRow> rows(std::int64_t n) {
  const std::map<std::string, double> adam = {{"b1", 0.9},  {"b2", 0.999}, {"lr", 1e-3},
                                              {"c1", 0.19}, {"c2", 0.002}, {"eps", 1e-8}};
  const Shape v = {n};
  return {
      // in place: the optimizer steps, one loop each
      {einjit::examples::kAdam, {{"m", v}, {"g", v}, {"v", v}, {"p", v}}, adam, {1, 1, 1}},
      {einjit::examples::kSgdMomentum, {{"b", v}, {"g", v}, {"p", v}}, {{"mu", 0.9}, {"lr", 0.1}},
       {1, 1}},
      // out of place, a later statement reading an earlier one's element, and 2-D
      {"y[i] := x[i]*2; z[i] := y[i] + x[i]*y[i]", {{"x", v}}, {}, {1, 1}},
      {"B[i,j] := A[i,j]*2; C[i,j] := B[i,j] - A[i,j]; A[i,j] = C[i,j]*B[i,j]",
       {{"A", {7, n / 7}}}, {}, {1, 1, 1}},
      // one tensor written twice at the same element
      {"y[i] := x[i] + 1; y[i] = y[i]*y[i]", {{"x", v}}, {}, {1, 1}},
      // a later statement reads a neighbour of what an earlier one wrote: not fused
      {"y[i] := x[i]*2; z[i] := y[pad(i+1)] + x[i]", {{"x", v}}, {}, {1, 2},
       "statement 2 reads 'y' at another element than statement 1 writes"},
      {"m[i] = m[i]*2; p[i] = p[i] + m[clamp(i-1)]", {{"m", v}, {"p", v}}, {}, {1, 2},
       "statement 2 reads 'm' at another element than statement 1 writes"},
      // an earlier statement reads a neighbour of what a later one overwrites: not fused
      {"y[i] := x[pad(i+1)]*2 where i in 0:size(x,0); x[i] = x[i] + 1", {{"x", v}}, {}, {1, 2},
       "statement 1 reads 'x' at another element than statement 2 writes"},
      // a snapshot (x_old[i] := x[i]) and the statement reading its neighbour: not fused
      {"x[i] = x[pad(i-1)] + x[i]", {{"x", v}}, {}, {1, 2},
       "statement 2 reads 'x' at another element than statement 1 writes"},
      // other ranges, and a reduction between two element-wise statements
      {"y[i] := x[i]*2; z[i] := x[i] where i in 0:3", {{"x", v}}, {}, {1, 2},
       "other indices or ranges"},
      {"y[i] := x[i]*2; s[i] := A[i,j]; z[i] := y[i] + s[i]", {{"x", {8}}, {"A", {8, n / 8}}}, {},
       {1, 2, 3}},
      // the group restarts after a statement that cannot join it
      {"a[i] := x[i]; b[i] := a[pad(i+1)] where i in 0:size(a,0); c[i] := b[i]*a[i]", {{"x", v}}, {}, {1, 2, 2},
       "statement 2 reads 'a' at another element than statement 1 writes"},
  };
}

// The 1-based statement whose loop each statement runs in, read off `explain`'s notes.
std::vector<int> groupsOf(const std::string& text, std::size_t statements) {
  std::vector<int> g;
  for (std::size_t k = 1; k <= statements; ++k) {
    const std::string head = "# statement " + std::to_string(k) + ": ";
    const auto at = text.find(head);
    REQUIRE(at != std::string::npos);
    const std::string note = text.substr(at + head.size(), text.find('\n', at) - at - head.size());
    const std::string into = "fused into statement ";
    const auto f = note.find(into);
    g.push_back(f == std::string::npos ? static_cast<int>(k)
                                       : std::stoi(note.substr(f + into.size())));
  }
  return g;
}

} // namespace

TEST_CASE("fusion: explain prints the decision, and fused programs equal the interpreter") {
  // 1003: odd, not a multiple of any vector width (LLVM's vectorizer from a hint); 4096: whole
  // vectors (explicit vector code); 100003: over the parallel-work threshold.
  for (std::int64_t n : {std::int64_t{1003}, std::int64_t{4096}, std::int64_t{100003}}) {
    for (const FusionRow& row : rows(n)) {
      CAPTURE(std::string(row.program));
      CAPTURE(n);
      for (DType dt : {DType::f64, DType::f32}) {
        CAPTURE(einjit::dtypeName(dt));
        Kernel k = einjit::compile(row.program, einjit::test::on(Device::cpu(), dt));
        auto in = einjit::test::randomArgs(k.program(), row.shapes, dt, 11);
        const std::vector<Arg> args = argsOf(k, in, row.scalars);
        const std::string text = k.explain(args);
        CAPTURE(text);
        CHECK(groupsOf(text, k.program().stmts.size()) == row.group);
        if (row.why) CHECK(text.find(std::string("not fused with statement")) != std::string::npos);
        if (row.why) CHECK(text.find(row.why) != std::string::npos);
        for (bool strided : {false, true})
          einjit::test::compareCall(row.program, args, dt, strided);
      }
    }
  }
}

TEST_CASE("fusion: the fused Adam step runs in one function over every element") {
  const std::int64_t n = 100003;
  Kernel k = einjit::compile(einjit::examples::kAdam, einjit::test::on(Device::cpu(), DType::f32));
  std::map<std::string, Tensor> in;
  for (const char* t : {"m", "g", "v", "p"}) in[t] = Tensor::random({n}, DType::f32, 3);
  const std::string text =
      k.explain(argsOf(k, in, {{"b1", 0.9}, {"b2", 0.999}, {"lr", 1e-3}, {"c1", 0.1},
                               {"c2", 0.001}, {"eps", 1e-8}}),
                true);
  CAPTURE(text);
  CHECK(text.find("fused with statements 2-3 (element-wise, one loop") != std::string::npos);
  CHECK(text.find("parallel over i") != std::string::npos);
  // One entry point (the three statements' stores in one loop body).
  std::size_t entries = 0;
  for (auto at = text.find("\ndefine "); at != std::string::npos; at = text.find("\ndefine ", at + 1))
    ++entries;
  CHECK(entries == 1);
  CHECK(text.find("_s0(") != std::string::npos);
}

// A packed GEMM's epilogue (schedule/Fusion.h, planEpilogue): the element-wise statements
// after a contraction run in its tile stores, once the last KC block has completed a tile.
TEST_CASE("fusion: element-wise statements after a packed GEMM run in its tile stores") {
  struct EpilogueRow {
    const char* program;
    std::map<std::string, Shape> shapes;
    int last; // the epilogue's last statement (1-based); 0: no epilogue
  };
  const std::vector<EpilogueRow> table = {
      // Linear + bias; with an activation and a second member reading the first's output and
      // the product's; in place on the product's output
      {"t[i,j] := w[k,i] * x[k,j]; y[i,j] := t[i,j] + b[i]",
       {{"w", {150, 61}}, {"x", {150, 77}}, {"b", {61}}},
       2},
      {"t[i,j] := w[k,i] * x[k,j]; y[i,j] := t[i,j] + b[i]; z[i,j] := relu(y[i,j]) * t[i,j]",
       {{"w", {150, 61}}, {"x", {150, 77}}, {"b", {61}}},
       3},
      {"t[i,j] := w[k,i] * x[k,j]; t[i,j] = relu(t[i,j] + b[i])",
       {{"w", {150, 61}}, {"x", {150, 77}}, {"b", {61}}},
       2},
      // several KC blocks (a long reduction), a batch index
      {"t[n,i,j] := w[n,k,i] * x[n,k,j]; y[n,i,j] := exp(t[n,i,j] / 64) * b[i]",
       {{"w", {2, 1500, 29}}, {"x", {2, 1500, 35}}, {"b", {29}}},
       2},
      // a convolution with bias and ReLU
      {"t[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]; y[n,o,h,w] := relu(t[n,o,h,w] + bias[o])",
       {{"x", {2, 16, 13, 19}}, {"k", {18, 16, 3, 3}}, {"bias", {18}}},
       2},
      // not an epilogue: a neighbour of the product's element, a write of what the product
      // reads, a reduction, other ranges
      {"t[i,j] := w[k,i] * x[k,j]; y[i,j] := t[i,j+1] + b[i] where j in 0:76",
       {{"w", {150, 61}}, {"x", {150, 77}}, {"b", {61}}},
       0},
      {"t[i,j] := A[i,k] * B[k,j]; A[i,j] = t[i,j] * 2", {{"A", {100, 100}}, {"B", {100, 100}}}, 0},
      {"t[i,j] := w[k,i] * x[k,j]; s[i] := t[i,j]", {{"w", {150, 61}}, {"x", {150, 77}}}, 0},
      {"t[i,j] := w[k,i] * x[k,j]; y[i,j] := t[i,j] + b[i] where i in 0:60",
       {{"w", {150, 61}}, {"x", {150, 77}}, {"b", {61}}},
       0},
  };
  for (const EpilogueRow& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      CAPTURE(std::string(row.program));
      CAPTURE(einjit::dtypeName(dt));
      Kernel k = einjit::compile(row.program, einjit::test::on(Device::cpu(), dt));
      auto in = einjit::test::randomArgs(k.program(), row.shapes, dt, 5);
      const std::vector<Arg> args = argsOf(k, in, {});
      const std::string text = k.explain(args);
      CAPTURE(text);
      CHECK(text.find("# statement 1: packed ") != std::string::npos);
      const bool some = text.find("'s tile stores (an epilogue)") != std::string::npos;
      CHECK(some == (row.last > 0));
      if (row.last > 0)
        CHECK(text.find("# statement " + std::to_string(row.last) +
                        ": in statement 1's tile stores (an epilogue)") != std::string::npos);
      for (bool strided : {false, true}) einjit::test::compareCall(row.program, args, dt, strided);
    }
}

#if EINJIT_HAVE_CUDA
TEST_CASE("fusion: on CUDA the fused statements are one launch of a thread per element") {
  const std::int64_t n = 1000003;
  for (DType dt : {DType::f32, DType::bf16}) {
    CAPTURE(einjit::dtypeName(dt));
    Kernel k = einjit::compile(einjit::examples::kAdam, einjit::test::on(Device::cuda(), dt));
    std::map<std::string, Tensor> in;
    for (const char* t : {"m", "g", "v", "p"}) in[t] = Tensor::zeros({n}, dt);
    const std::map<std::string, double> s = {{"b1", 0.9},  {"b2", 0.999}, {"lr", 1e-3},
                                             {"c1", 0.1},  {"c2", 0.001}, {"eps", 1e-8}};
    auto cp = einjit::test::cudaFor(k, in, s, dt, 90);
    REQUIRE(cp.cuda.kernels.size() == 1);
    CHECK(cp.cuda.kernels[0].grid * cp.cuda.kernels[0].block >= n);
    CHECK(cp.lowered.notes[0].find("; fused with statements 2-3 (element-wise, one loop") !=
          std::string::npos);
    CHECK(cp.lowered.notes[1] == "fused into statement 1's loop");
    einjit::test::compileCall(k, in, s, dt);
  }
  // Not fused (a neighbour read): still a thread per element for each statement, in place.
  Kernel k = einjit::compile("m[i] = m[i]*2; p[i] = p[i] + m[clamp(i-1)]",
                             einjit::test::on(Device::cuda(), DType::f32));
  auto cp = einjit::test::cudaFor(
      k, {{"m", Tensor::zeros({n}, DType::f32)}, {"p", Tensor::zeros({n}, DType::f32)}}, {},
      DType::f32, 90);
  REQUIRE(cp.cuda.kernels.size() == 2);
  for (const auto& kernel : cp.cuda.kernels) CHECK(kernel.grid * kernel.block >= n);
}
#endif
