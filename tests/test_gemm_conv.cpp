// The packed GEMM path's convolution plans on the CPU JIT against the reference interpreter
// (test_gemm.cpp holds the table of every convolution and its gradients): x read in place by a
// stride-2 forward with 64-byte vectors, stride-1 tiles whose rows divide M where 512-bit
// operations run in halves, and 1x1 convolutions as one GEMM per image (merged indices).
#include "GemmChecks.h"

#include "einjit/einjit.h"
#include "runtime/CpuBackend.h"
#include "runtime/Jit.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

using namespace einjit::test;

// A stride-2 forward's x read in place, its lanes two apart (GemmPlan::bInPlace), with 64-byte
// vectors (each vector two loads, the second masked, and a permute; a partial last sliver's
// lanes masked): 27 columns (16 + 11, the benchmark's width), 30 (16 + 14) with odd channel
// counts (29 rows: an edge of M), K over several KC blocks (64 channels), and 20 columns
// (16 + 4) at full width. Where 512-bit operations run in halves (Zen 4), a half-width tail
// would run there (20 columns; f64's 27 = 3 x 8 + 3) and x stays packed; where the tile is two
// vectors wide (f64's 30 and 20 columns), on every such target. Against the interpreter in
// three views (the strided view's lanes four apart: packed), f32 and f64, 1 and 2 threads (the
// Xeon's rows on an AVX-512 host under EINJIT_JIT_CPU=rocketlake).
TEST_CASE("gemm: a stride-2 forward reads x in place with 64-byte vectors") {
  struct Row {
    std::map<std::string, Shape> shapes;
    bool f32InPlace, f64InPlace;             // at full width (the Xeon)
    bool f32InPlaceHalved, f64InPlaceHalved; // in halves (Zen 4)
  };
  const Row table[] = {
      {{{"x", {2, 16, 56, 56}}, {"k", {20, 16, 3, 3}}}, true, false, true, false},
      {{{"x", {1, 13, 15, 61}}, {"k", {29, 13, 3, 3}}}, true, false, true, false},
      {{{"x", {1, 64, 7, 56}}, {"k", {24, 64, 3, 3}}}, true, true, true, false},
      {{{"x", {2, 16, 19, 41}}, {"k", {20, 16, 3, 3}}}, true, false, false, false},
  };
  const char* program = "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]";
  const einjit::codegen::Target host = einjit::runtime::hostTarget();
  const bool wide = host.vectorBytes >= 64, halved = host.halvedVectors;
  for (const Row& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(row.shapes.at("x")[3] << " columns in, " << einjit::dtypeName(dt));
      Kernel ref = einjit::compile(program, on(Device::reference(), dt));
      Kernel jit = einjit::compile(program, on(Device::cpu(), dt));
      auto in = randomArgs(ref.program(), row.shapes, dt, 5);
      const std::vector<std::string> order = ref.tensorArguments();
      std::vector<Arg> args;
      for (const std::string& n : order) args.push_back(in.at(n));
      const std::string text = jit.explain(args);
      CAPTURE(text);
      const bool inPlace =
          wide && (dt == DType::f32 ? (halved ? row.f32InPlaceHalved : row.f32InPlace)
                                    : (halved ? row.f64InPlaceHalved : row.f64InPlace));
      CHECK((text.find("B read in place") != std::string::npos) == inPlace);
      checkViews(jit, in, order, ref.call(args), assigned(ref), dt, true);
    }
}

// Where 512-bit operations run in halves (Zen 4), a product's one-vector tile whose rows do not
// divide M takes the tallest of at least 16 rows that does (GemmPlan.cpp, planGemm): the 3x3
// stride-1 forward and input gradient of 64 channels in four 16-row tiles (three of 22 padded
// them to 66), 80 in four of 20, the input gradient's dy then read in place where it is not
// packed whole (its first sliver masked: GemmPlan.cpp, planTile); 29 (prime) and 24 (one tile) keep the rule's tile. Odd
// columns (a half-vector tail and a masked one), padding, K over several KC blocks, f32 and
// f64, forward and input gradient against the interpreter in three views, 1 and 2 threads.
TEST_CASE("gemm: stride-1 convolutions in tiles whose rows divide M where 512-bit ops run in halves") {
  struct Row {
    const char* program;
    std::map<std::string, Shape> shapes;
    const char* f32Tile; // the forward's f32 micro-kernel on such a target ("": not checked)
    bool dxInPlace;      // the input gradient's dy read in place there (f32)
  };
  const char* const conv = "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]";
  const char* const padded = "y[n,o,h,w] := x[n,c,pad(h+a-1),pad(w+b-1)] * k[o,c,a,b] where h in "
                             "0:size(x,2), w in 0:size(x,3)";
  const Row table[] = {
      {conv, {{"x", {2, 64, 9, 56}}, {"k", {64, 64, 3, 3}}}, "micro-kernel 16x16 (", true},
      {conv, {{"x", {1, 80, 6, 27}}, {"k", {80, 80, 3, 3}}}, "micro-kernel 20x16,", false},
      {conv, {{"x", {2, 29, 7, 41}}, {"k", {29, 29, 3, 3}}}, "", false},
      {padded, {{"x", {1, 64, 5, 54}}, {"k", {64, 64, 3, 3}}}, "micro-kernel 16x16 (", false},
      {padded, {{"x", {2, 24, 6, 30}}, {"k", {24, 24, 3, 3}}}, "", false},
  };
  const bool halved = einjit::runtime::hostTarget().halvedVectors;
  for (const Row& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(row.program << ", " << row.shapes.at("k")[0] << " channels, "
                       << row.shapes.at("x")[3] << " columns, " << einjit::dtypeName(dt));
      Kernel ref = einjit::compile(row.program, on(Device::reference(), dt));
      Kernel jit = einjit::compile(row.program, on(Device::cpu(), dt));
      auto in = randomArgs(ref.program(), row.shapes, dt, 5);
      const std::vector<std::string> order = ref.tensorArguments();
      std::vector<Arg> args;
      for (const std::string& n : order) args.push_back(in.at(n));
      const std::string text = jit.explain(args);
      CAPTURE(text);
      if (halved && dt == DType::f32 && *row.f32Tile)
        CHECK(text.find(row.f32Tile) != std::string::npos);
      const Outputs y = ref.call(args);
      checkViews(jit, in, order, y, assigned(ref), dt, true);

      Kernel gref = ref.gradient({"x"});
      Kernel gjit = einjit::compile(gref.source(), on(Device::cpu(), dt));
      std::map<std::string, Tensor> gin = in;
      gin["dy"] = Tensor::random(y[std::size_t{0}].shape(), dt, 13);
      std::vector<Arg> gargs;
      for (const auto& n : gref.tensorArguments()) gargs.push_back(gin.at(n));
      INFO("gradient program:\n" << gref.source());
      const std::string gtext = gjit.explain(gargs);
      CAPTURE(gtext);
      if (halved && dt == DType::f32 && *row.f32Tile) {
        CHECK(gtext.find(row.f32Tile) != std::string::npos);
        // dy read in place, its first sliver's lanes masked where a tap is missing (the
        // smaller rows pack it whole, once per call).
        CHECK((gtext.find("B read in place, ranges of a,b") != std::string::npos) ==
              row.dxInPlace);
      }
      checkViews(gjit, gin, gref.tensorArguments(), gref.call(gargs), assigned(gref), dt, true);
    }
}

// Indices merged into one GEMM index (GemmPlan::merged, schedule/GemmBinding.h): a 1x1
// convolution's pixels (N h*w, batch n) forward and input gradient (whose tap ranges are their
// whole hulls), its weight gradient (K n,h,w: not merged), 7 x 9 pixels (63: an edge sliver at every
// width), '+=', an epilogue, a plain GEMM over x[c,i,j] (N i*j); and forms that must not
// merge: padding, stride 2, a view whose rows are not W columns apart (a slice of wider rows).
// f32 and f64 against the interpreter in three views (the every-other-element view still
// merges: its rows are W x 2 apart), the same bits on one thread and two.
TEST_CASE("gemm: indices merged into one (1x1 convolutions as one GEMM per image)") {
  struct MergeRow {
    const char* program;
    std::map<std::string, Shape> shapes;
    std::vector<std::string> wrt; // the gradient program's (none: the program itself)
    const char* merged;           // the merged index in the note (null: none)
  };
  const char* const conv1 = "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]";
  const std::map<std::string, Shape> odd = {{"x", {4, 64, 7, 9}}, {"k", {40, 64, 1, 1}}};
  const std::vector<MergeRow> table = {
      {conv1, odd, {}, "N h*w"},
      {conv1, odd, {"x"}, "N u*v"},
      {conv1, odd, {"k"}, nullptr}, // reduction indices stay apart (GemmBinding.h)
      {conv1, {{"x", {3, 72, 7, 9}}, {"k", {44, 72, 1, 1}}}, {"x"}, "N u*v"},
      {"y[n,o,h,w] := d[n,o,h,w]\ny[n,o,h,w] += x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"d", {4, 40, 7, 9}}, {"x", {4, 64, 7, 9}}, {"k", {40, 64, 1, 1}}},
       {},
       "N h*w"},
      {"t[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]\ny[n,o,h,w] := t[n,o,h,w] + bias[o]",
       {{"x", {4, 64, 7, 9}}, {"k", {40, 64, 1, 1}}, {"bias", {40}}},
       {},
       "N h*w"},
      {"y[o,i,j] := w[o,c] * x[c,i,j]", {{"w", {72, 64}}, {"x", {64, 11, 13}}}, {}, "N i*j"},
      {"y[n,o,h,w] := x[n,c,pad(h+a),pad(w+b)] * k[o,c,a,b] where h in 0:size(x,2), w in "
       "0:size(x,3)",
       {{"x", {4, 64, 7, 21}}, {"k", {40, 64, 1, 1}}},
       {},
       nullptr},
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {4, 64, 13, 41}}, {"k", {40, 64, 1, 1}}},
       {},
       nullptr},
  };
  for (const MergeRow& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(std::string(row.program) << " " << einjit::dtypeName(dt));
      auto [ref, in] = referenceRow(row.program, row.shapes, row.wrt, dt);
      Kernel jit = einjit::compile(ref.source(), on(Device::cpu(), dt));
      std::vector<Arg> args;
      for (const std::string& n : ref.tensorArguments()) args.push_back(in.at(n));
      const std::string text = jit.explain(args);
      INFO(text);
      CHECK(takesPacked(jit, args));
      if (row.merged)
        CHECK(text.find(row.merged) != std::string::npos);
      else
        CHECK(text.find("h*w") == std::string::npos);
      if (row.program[0] == 't') CHECK(text.find("epilogue") != std::string::npos);
      checkViews(jit, in, ref.tensorArguments(), ref.call(args), assigned(ref), dt, true);
    }
  // A slice of wider rows: x's rows 24 columns apart, 21 of them read; not merged, the same
  // values as the contiguous copy. (Rows unmerged: N is 21 columns, wide enough for a tile.)
  for (DType dt : {DType::f32, DType::f64}) {
    Kernel ref = einjit::compile(conv1, on(Device::reference(), dt));
    Kernel jit = einjit::compile(conv1, on(Device::cpu(), dt));
    const Tensor wide = Tensor::random({4, 64, 7, 24}, dt, 3);
    const Tensor x = wide.slice(3, 0, 21), k = Tensor::random({40, 64, 1, 1}, dt, 4);
    const std::vector<Arg> args{x, k};
    const std::string text = jit.explain(args);
    INFO(text);
    CHECK(takesPacked(jit, args));
    CHECK(text.find("h*w") == std::string::npos);
    checkSame(jit.call(args), ref.call(std::vector<Arg>{x.contiguous(), k}), assigned(ref), dt);
  }
}
