// The packed GEMM's task order (GemmPlan::batchFastest): where a cache line of the output holds
// several batch values (C[i,k,b], b fastest), a two-thread plan runs task t as batch value
// t mod B of chunk t / B. Against the interpreter at odd sizes (edge slivers on both sides,
// chunks of unequal sizes, K over several KC blocks), batch 1 to 5, f32 and f64, contiguous and
// strided views, planned for two threads and run on one and on two (the same bits); the plan by
// its `explain` text, which names the order (and, over several KC blocks, the staged output)
// where it applies, and not where a batch value's output is a line or more away (C[b,i,k]) or
// there is one value.
#include "GemmChecks.h"

#include "einjit/einjit.h"
#include "runtime/CpuBackend.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>


using namespace einjit::test;

TEST_CASE("gemm: tasks with batch values fastest (C[i,k,b]), batch 1-5, 1 and 2 threads") {
  struct Row {
    std::string program;
    std::int64_t m, k, n, b;
    bool fastest; // the two-thread plan orders its tasks batch value first
  };
  const std::string permuted = "C[i,k,b] := A[i,j,b] * B[b,k,j]";
  std::vector<Row> table;
  // 131 x 300 x 97: a last sliver of M and of N, two KC blocks; 67 x 200 x 70: one KC block.
  for (std::int64_t b = 1; b <= 5; ++b) {
    table.push_back({permuted, 131, 300, 97, b, b > 1});
    table.push_back({permuted, 67, 200, 70, b, b > 1});
  }
  // A batch value's output 67 x 70 elements away: the order stays.
  table.push_back({"C[b,i,k] := A[i,j,b] * B[b,k,j]", 67, 300, 70, 4, false});
  einjit::runtime::setCpuPlanThreads(2);
  struct Restore {
    ~Restore() { einjit::runtime::setCpuPlanThreads(0); }
  } restore;
  int fastestRows = 0;
  for (const Row& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(row.program << " M " << row.m << " K " << row.k << " N " << row.n << " batch "
                       << row.b << " " << einjit::dtypeName(dt));
      const std::map<std::string, Shape> shapes = {{"A", {row.m, row.k, row.b}},
                                                   {"B", {row.b, row.n, row.k}}};
      Kernel ref = einjit::compile(row.program, on(Device::reference(), dt));
      Kernel jit = einjit::compile(row.program, on(Device::cpu(), dt));
      auto in = randomArgs(ref.program(), shapes, dt, 17);
      const std::vector<Arg> refArgs = {in.at("A"), in.at("B")};
      const Outputs want = ref.call(refArgs);
      for (int view = 0; view < 2; ++view) {
        CAPTURE(view);
        const std::vector<Arg> args = {view == 0 ? in.at("A").clone() : strided(in.at("A")),
                                       view == 0 ? in.at("B").clone() : strided(in.at("B"))};
        const std::string text = jit.explain(args);
        INFO(text);
        CHECK(text.find("packed GEMM") != std::string::npos);
        CHECK(text.find("parallel groups") != std::string::npos);
        CHECK((text.find("(batch values fastest)") != std::string::npos) == row.fastest);
        // K 300 spans two KC blocks or more on every target (KC at most 256): with several
        // batch values in a line of C, the output is staged (GemmPlan::batchInLine).
        if (row.k == 300)
          CHECK((text.find("output staged in a contiguous partial") != std::string::npos) ==
                row.fastest);
        const Outputs got = jit.call(args);
        checkSame(got, want, assigned(ref), dt);
#if EINJIT_HAVE_TBB
        CHECK(oneThreadBits(jit, args) == bits(got));
#endif
      }
      fastestRows += row.fastest;
    }
  CHECK(fastestRows == 16);
  // A one-thread plan has a single group: no order to choose.
  einjit::runtime::setCpuPlanThreads(1);
  Kernel one = einjit::compile(permuted, on(Device::cpu(), DType::f32));
  const std::string text =
      one.explain({Tensor::random({131, 300, 4}, DType::f32, 1),
                   Tensor::random({4, 97, 300}, DType::f32, 2)});
  INFO(text);
  CHECK(text.find("one thread") != std::string::npos);
  CHECK(text.find("batch values fastest") == std::string::npos);
}
