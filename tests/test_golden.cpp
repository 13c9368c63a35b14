// Golden lowered IR and generated CUDA for representative programs: every CPU schedule family
// (register, dot-product and strided tiles, generic loops, split reductions, core/border
// splits), and every GPU family (threads, scatters, split reductions, the f32 tile, mma.sync
// and wgmma tiles, masked tiles and residue phases, relayouts), forward and gradient. The text
// comes from fixed targets (tests/GeneratedDump.h), so it is the same on every machine. A
// change to generated code shows here as a diff; EINJIT_ACCEPT=1 rewrites the files after it
// has been checked (and measured) on purpose.
#include "CudaTables.h"
#include "GeneratedDump.h"
#include "TestSupport.h"

#include <doctest/doctest.h>

using namespace einjit::test;
using namespace einjit::test::generated;

namespace {

struct GoldenRow {
  const char* name; // tests/golden/lower/NAME.cpu.txt and NAME.cuda.txt
  Case c;
  bool gradient = false; // the gradient program of c (all inputs) instead of c
};

const Shapes kMatmul{{"A", {64, 64}}, {"B", {64, 64}}};
const Shapes kLinear{{"w", {24, 40}}, {"x", {24, 36}}, {"b", {40}}};

std::vector<GoldenRow> rows() {
  const char* conv1 = "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]";
  const char* conv2 = "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]";
  const ConvCase& s2 = kConvGrads[4]; // stride 2, 20 output channels
  const WarpgroupCase& wg = kWarpgroupTiles[0];
  const OddTile& odd = kOddTiles[0];
  return {
      {"matmul_nn", {"C[i,k] := A[i,j] * B[j,k]", kMatmul, {}, DType::f32}},
      {"matmul_tn", {"C[i,k] := A[j,i] * B[j,k]", kMatmul, {}, DType::f32}},
      {"matmul_nt", {"C[i,k] := A[i,j] * B[k,j]", kMatmul, {}, DType::f32}},
      {"matmul_tt", {"C[i,k] := A[j,i] * B[k,j]", kMatmul, {}, DType::f32}},
      {"matmul_odd_tile", {odd.program, odd.shapes, {}, DType::f32, false, true}},
      {"matmul_bf16_wgmma", {wg.program, wg.shapes, {}, DType::bf16, false, true}},
      {"permuted_batched",
       {"C[i,k,b] := A[i,j,b] * B[b,k,j]",
        {{"A", {40, 24, 3}}, {"B", {3, 36, 24}}},
        {},
        DType::f32}},
      {"linear_gradient",
       {"t[i,j] := w[k,i] * x[k,j]\ny[i,j] := t[i,j] + b[i]", kLinear, {}, DType::f32},
       true},
      {"distance_gradient", {"y[i,j] := (w[k,i] - x[k,j]) ^ 2", kLinear, {}, DType::f32}, true},
      {"conv_s1", {conv1, {{"x", {2, 8, 12, 12}}, {"k", {16, 8, 3, 3}}}, {}, DType::f32}},
      {"conv_s2_gradient", {conv2, {{"x", s2.x}, {"k", s2.k}}, {}, DType::f32}, true},
      {"conv_s2_gradient_bf16",
       {conv2, {{"x", s2.x}, {"k", s2.k}}, {}, DType::bf16, false, true},
       true},
      {"conv1d_stride_gradient",
       {"y[i] := x[2i+k] * w[k]", {{"x", {100}}, {"w", {5}}}, {}, DType::f64},
       true},
      {"conv_same_padding",
       {"y[i] := x[pad(i+k-1)] * w[k] where i in 0:size(x,0)",
        {{"x", {50}}, {"w", {3}}},
        {},
        DType::f32},
       true},
      {"dot_split", {"s := x[i] * y[i]", {{"x", {1 << 16}}, {"y", {1 << 16}}}, {}, DType::f32}},
      {"maxpool_gradient",
       {"(max) y[i,j] := x[2i+a, 2j+b] where a in 0:2, b in 0:2",
        {{"x", {10, 12}}},
        {},
        DType::f32},
       true},
      {"embedding_gradient",
       {"y[b,d] := E[tok[b], d]", {{"E", {30, 16}}, {"tok", {7}}}, {}, DType::f32},
       true},
      {"softmax_gradient",
       {"(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\ns[i] := e[i,j]\n"
        "y[i,j] := e[i,j] / s[i]",
        {{"x", {6, 20}}},
        {},
        DType::f32},
       true},
      {"layernorm",
       {"mu[i] := x[i,j] / size(x,1)\nv[i] := (x[i,j] - mu[i]) ^ 2 / size(x,1)\n"
        "y[i,j] := (x[i,j] - mu[i]) / sqrt(v[i] + 0.00001)",
        {{"x", {6, 20}}},
        {},
        DType::f32}},
      {"elementwise_long", {"y[i] := x[i] * 2 + 1", {{"x", {100000}}}, {}, DType::f32}},
  };
}

} // namespace

TEST_CASE("golden: lowered IR and generated CUDA of representative programs") {
  const std::string dir = std::string(EINJIT_TEST_DIR) + "/golden/lower/";
  for (const GoldenRow& row : rows()) {
    CAPTURE(row.name);
    const Case c = row.gradient ? gradientCase(row.c, {}) : row.c;
    const std::string cpu = dump(c, Part::cpu);
    CHECK(cpu.find("\nerror: ") == std::string::npos);
    if (c.cpu && c.dtype != DType::bf16) checkGolden(dir + row.name + ".cpu.txt", cpu);
#if EINJIT_HAVE_CUDA
    const std::string cuda = dump(c, Part::cuda);
    CHECK(cuda.find("\nerror: ") == std::string::npos);
    if (c.gpu && c.dtype != DType::f64) checkGolden(dir + row.name + ".cuda.txt", cuda);
#endif
  }
}
