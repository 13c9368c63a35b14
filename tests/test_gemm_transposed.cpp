// B packed as vectors transposed in registers (Lowerer::transposeWidth, the codegen's transposed
// stores, codegen/VectorTranspose.h): where B's lanes are far apart (a GEMM's B^T, a weight
// gradient's x or dy, the Linear layer's dw) and its innermost reduction index is contiguous or
// nearly, the packing reads a vector of positions per lane and stores a vector of lanes per
// position. Against the interpreter: lane counts that leave an edge sliver, reductions no
// multiple of the vector (the last chunk overlapping the one before) and shorter than one (a
// KC block packed a lane at a time), the strided view (positions two apart: shuffled loads),
// f32 and f64, 1 and 2 threads (the same bits); run under 32- and 64-byte vectors by the suite's
// two runs. Each row asserts through `explain` whether the transposed packing was taken.
#include "GemmChecks.h"

#include "einjit/einjit.h"
#include "runtime/CpuBackend.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>


using namespace einjit::test;

namespace {

struct TransposedRow {
  const char* program;
  std::map<std::string, Shape> shapes;
  bool transposed; // B's packing transposed in registers (contiguous arguments)
};

} // namespace

TEST_CASE("gemm: B's lanes far apart packed as vectors transposed in registers") {
  const std::vector<TransposedRow> table = {
      // B^T: 90 lanes (an edge sliver at either vector width), K 37 (no multiple of 8 or 16).
      {"C[i,k] := A[i,j] * B[k,j]", {{"A", {200, 37}}, {"B", {90, 37}}}, true},
      // Both transposed.
      {"C[i,k] := A[j,i] * B[k,j]", {{"A", {300, 100}}, {"B", {70, 300}}}, true},
      // '+=' into what the output holds.
      {"C[i,k] := D[i,k]\nC[i,k] += A[i,j] * B[k,j]",
       {{"D", {200, 90}}, {"A", {200, 120}}, {"B", {90, 120}}},
       true},
      // The Linear layer's weight gradient: dw[k,i] = x[k,j] * dy[i,j], j the batch (201).
      {"dw[k,i] := dy[i,j] * x[k,j]", {{"dy", {90, 201}}, {"x", {70, 201}}}, true},
      // A 1x1 weight gradient: B's lanes the 45 channels, 27 columns per row.
      {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+h,b+w] where a in 0:1, b in 0:1",
       {{"dy", {2, 72, 9, 27}}, {"x", {2, 45, 9, 27}}},
       true},
      // A 3x3 stride-2 weight gradient: dy is B (the transposed operand), 28 columns.
      {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+2h,b+2w] where a in 0:3, b in 0:3",
       {{"dy", {2, 33, 5, 28}}, {"x", {2, 40, 11, 57}}},
       true},
      // B packed per KC block: the reduction index is the blocks' own, its range a variable
      // (1999: a last block of another length).
      {"C[i,k] := A[i,j] * B[k,j]", {{"A", {40, 1999}}, {"B", {500, 1999}}}, true},
  };
  for (const TransposedRow& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(std::string(row.program) << " " << einjit::dtypeName(dt));
      Kernel ref = einjit::compile(row.program, on(Device::reference(), dt));
      Kernel jit = einjit::compile(row.program, on(Device::cpu(), dt));
      auto in = randomArgs(ref.program(), row.shapes, dt, 5);
      const std::vector<std::string> order = ref.tensorArguments();
      std::vector<Arg> args;
      for (const std::string& n : order) args.push_back(in.at(n));
      const std::string text = jit.explain(args);
      INFO(text);
      CHECK(text.find("packed GEMM") != std::string::npos);
      CHECK((text.find("vectorized for gemm.tv") != std::string::npos) == row.transposed);
      const Outputs r = ref.call(args);
      for (int view = 0; view < 2; ++view) {
        CAPTURE(view);
        std::vector<Arg> v;
        for (const std::string& n : order) v.push_back(view == 0 ? in.at(n).clone() : strided(in.at(n)));
        const Outputs got = jit.call(v);
        checkSame(got, r, assigned(ref), dt);
#if EINJIT_HAVE_TBB
        CHECK(oneThreadBits(jit, v) == bits(got));
#endif
      }
    }
}

// The transposed stores' code: shuffles between the loads and the stores, no scalar store of
// the panel (each element a load and a store of its own before). B^T 64 x 256, packed whole.
TEST_CASE("gemm: the transposed packing is shuffles of whole vectors in LLVM IR") {
  Kernel jit = einjit::compile("C[i,k] := A[i,j] * B[k,j]");
  const std::vector<Arg> args{Tensor::random({64, 256}, DType::f32, 1),
                              Tensor::random({64, 256}, DType::f32, 2)};
  const std::string ir = jit.explain(args, true);
  const std::int64_t lanes = einjit::runtime::hostTarget().vectorBytes / 4;
  const std::string vec = "<" + std::to_string(lanes) + " x float>";
  const std::size_t packB = ir.find("_s0_packB(");
  REQUIRE(packB != std::string::npos);
  const std::string body = ir.substr(packB, ir.find("\n}\n", packB) - packB);
  INFO(body);
  CHECK(body.find("shufflevector " + vec) != std::string::npos);
  CHECK(body.find("store " + vec) != std::string::npos);
  CHECK(body.find("store float") == std::string::npos);
}

// Where 512-bit operations run in halves, a lane-major A (the 1x1 weight gradient's dy, packed
// per KC block) prefetches each lane's next block while it packs one: the same values, and the
// prefetches in the plan only there.
TEST_CASE("gemm: a lane-major A prefetches its next KC block where 512-bit operations run in halves") {
  const char* program = "dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+h,b+w] where a in 0:1, b in 0:1";
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(einjit::dtypeName(dt));
    Kernel ref = einjit::compile(program, on(Device::reference(), dt));
    Kernel jit = einjit::compile(program, on(Device::cpu(), dt));
    auto in = randomArgs(ref.program(), {{"dy", {4, 96, 28, 28}}, {"x", {4, 32, 28, 28}}}, dt, 9);
    std::vector<Arg> args;
    for (const std::string& n : ref.tensorArguments()) args.push_back(in.at(n));
    const std::string text = jit.explain(args);
    INFO(text);
    CHECK(text.find("A packed per block") != std::string::npos);
    if (dt == DType::f32)
      CHECK((text.find("prefetch.ahead dy[") != std::string::npos) ==
            einjit::runtime::hostTarget().halvedVectors);
    checkSame(jit.call(args), ref.call(args), assigned(ref), dt);
  }
}
