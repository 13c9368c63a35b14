// The packed GEMM path on the CPU JIT (schedule/GemmPlan.h, lower/CpuGemm.cpp) against the
// reference interpreter: the four transpositions and a permuted batched product at sizes that
// leave every kind of edge (M and N not multiples of MR and NR, K over several KC blocks,
// dimensions below MR or NR that keep the register tiles), f32 and f64, contiguous, strided
// (every other element) and offset views, 1 and 2 oneTBB threads (bit-identical), and the
// Linear layer forward and all its gradients. Each row asserts, through `explain`, whether the
// packed path was taken.
#include "GemmChecks.h"

#include "einjit/einjit.h"
#include "runtime/CpuBackend.h"
#include "runtime/Jit.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>


using namespace einjit::test;

namespace {

// How many statements of a row's forward and gradient programs take the packed path.
struct Packs {
  std::size_t fwd = 0, grad = 0;
};

struct GemmRow {
  std::string program;
  std::map<std::string, Shape> shapes;
  bool packed;               // some statement takes the packed path, given M >= MR and N >= NR:
  std::int64_t m = 0, n = 0; // M and N where the tile decides (0: it does not)
};

std::vector<GemmRow> rows() {
  struct Form {
    const char* program;
    bool transA, transB; // A stored (K, M); B stored (N, K)
  };
  const Form forms[] = {{"C[i,k] := A[i,j] * B[j,k]", false, false},
                        {"C[i,k] := A[i,j] * B[k,j]", false, true},
                        {"C[i,k] := A[j,i] * B[j,k]", true, false},
                        {"C[i,k] := A[j,i] * B[k,j]", true, true}};
  struct Size {
    std::int64_t m, k, n;
    bool packed;
  };
  // 1000 = 166 x 6 + 4 = 62 x 16 + 8; 257 = 42 x 6 + 5 = 16 x 16 + 1 and one past a KC block
  // of 256; 17 = 2 x 6 + 5 = 16 + 1; 120 x 256 x 64: whole tiles, one whole KC block, no edge.
  // A last sliver of one or two columns (257, 17, 34 = 2 x 16 + 2) runs the columns kernel
  // (f32): 1000 x 300 x 34 over several MC blocks and two KC blocks.
  // 44 x 400 x 49 and 45 x 300 x 88: a last sliver of 17 or 24 of 32 columns, 1 or 8 of 16
  // (where 512-bit operations run in halves, one-vector tiles with their last columns in half
  // vectors; M 44 = 2 x 22 and 45 = 2 x 23 - 1 rows); 28 x 800 x 25, the same for f64 (9 of 16
  // lanes, 1 of 8: a 28 x 8 tile, its last 4 columns in half vectors).
  const Size sizes[] = {{1000, 17, 257, true}, {257, 1000, 17, true}, {17, 257, 1000, true},
                        {120, 256, 64, true},  {3, 257, 1000, false}, {257, 1000, 1, false},
                        {1000, 300, 34, true}, {44, 400, 49, true},   {45, 300, 88, true},
                        {28, 800, 25, true}};
  std::vector<GemmRow> out;
  for (const Form& f : forms)
    for (const Size& s : sizes) {
      Shape a = f.transA ? Shape{s.k, s.m} : Shape{s.m, s.k};
      Shape b = f.transB ? Shape{s.n, s.k} : Shape{s.k, s.n};
      out.push_back({f.program, {{"A", a}, {"B", b}}, s.packed, s.m, s.n});
    }
  out.push_back(
      {"C[i,k,b] := A[i,j,b] * B[b,k,j]", {{"A", {67, 45, 4}}, {"B", {4, 70, 45}}}, true});
  out.push_back(
      {"C[i,k,b] := A[i,j,b] * B[b,k,j]", {{"A", {15, 300, 5}}, {"B", {5, 33, 300}}}, true});
  // A task's chunk of M over several MC blocks (KC 256, MC at most 42 slivers: on 2 threads
  // 350 slivers in 8 chunks of 43-44, each in two blocks; on 1 thread nine blocks of 39).
  out.push_back({"C[i,k] := A[i,j] * B[k,j]", {{"A", {2100, 256}}, {"B", {17, 256}}}, true});
  // Two reduction indices (flattened in the slivers, the last fastest).
  out.push_back(
      {"C[i,k] := A[i,j,l] * B[j,l,k]", {{"A", {50, 20, 31}}, {"B", {20, 31, 41}}}, true});
  // '+=': every KC block adds to what the output holds.
  out.push_back({"C[i,k] := D[i,k]\nC[i,k] += A[i,j] * B[k,j]",
                 {{"D", {101, 37}}, {"A", {101, 300}}, {"B", {37, 300}}},
                 true});
  out.push_back({"t[n,o] := x[n,i] * w[o,i]\ny[n,o] := t[n,o] + b[o]",
                 {{"x", {200, 70}}, {"w", {90, 70}}, {"b", {90}}},
                 true});
  // The epilogue after the columns kernel's tiles (17 = 16 + 1 columns; two KC blocks; on 2
  // threads MC blocks of 13 slivers: groups of 8 and 5).
  out.push_back({"t[n,o] := x[n,i] * w[o,i]\ny[n,o] := t[n,o] + b[o]",
                 {{"x", {600, 300}}, {"w", {17, 300}}, {"b", {17}}},
                 true});
  return out;
}

} // namespace

TEST_CASE("gemm: four transpositions, batched, odd sizes, views, 1 and 2 threads vs interpreter") {
  int packedRows = 0;
  for (const GemmRow& row : rows()) {
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(row.program << " " << einjit::dtypeName(dt));
      for (const auto& [n, s] : row.shapes) INFO(n << ": " << s.size());
      Kernel ref = einjit::compile(row.program, on(Device::reference(), dt));
      Kernel jit = einjit::compile(row.program, on(Device::cpu(), dt));
      auto in = randomArgs(ref.program(), row.shapes, dt, 7);
      std::vector<std::string> order = ref.tensorArguments();
      std::vector<Arg> refArgs;
      for (const std::string& n : order) refArgs.push_back(in.at(n));
      const Outputs r = ref.call(refArgs);
      // MR x NR: 6 rows x 2 vectors (AVX2); 14 x 2 vectors or, where N is shorter, 28 x 1
      // (AVX-512). With M < MR the plan may still take the other operand's side as M: it must
      // not.
      const std::int64_t lanes =
          einjit::runtime::hostTarget().vectorBytes / (dt == DType::f32 ? 4 : 8);
      auto fits = [&](std::int64_t mr, std::int64_t nr) { return row.m >= mr && row.n >= nr; };
      const bool tile = row.m == 0 || (wideVectors() ? fits(14, 2 * lanes) || fits(28, lanes)
                                                     : fits(6, 2 * lanes));
      const bool packed = row.packed && tile;
      checkViews(jit, in, order, r, assigned(ref), dt, packed);
      packedRows += packed;
    }
  }
  CHECK(packedRows >= 34);
}

TEST_CASE("gemm: a Linear layer forward and every gradient through the packed path") {
  const std::string program = "t[n,o] := x[n,i] * w[o,i]\ny[n,o] := t[n,o] + b[o]";
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(einjit::dtypeName(dt));
    Kernel ref = einjit::compile(program, on(Device::reference(), dt));
    Kernel jit = einjit::compile(program, on(Device::cpu(), dt));
    auto in = randomArgs(ref.program(), {{"x", {200, 70}}, {"w", {90, 70}}, {"b", {90}}}, dt, 3);
    std::size_t count = 0;
    CHECK(takesPacked(jit, {in["x"], in["w"], in["b"]}, &count));
    CHECK(count == 1);
    const Outputs r = ref.call(in);
    checkSame(jit.call(in), r, assigned(ref), dt);
    Kernel gref = ref.gradient({"x", "w", "b"});
    Kernel gjit = einjit::compile(gref.source(), on(Device::cpu(), dt));
    std::map<std::string, Tensor> gin;
    for (const auto& n : gref.tensorArguments())
      gin[n] = n == "dy" ? Tensor::random({200, 90}, dt, 11) : in.at(n);
    std::vector<Arg> gargs;
    for (const auto& n : gref.tensorArguments()) gargs.push_back(gin.at(n));
    INFO("gradient program:\n" << gref.source());
    takesPacked(gjit, gargs, &count);
    CHECK(count == 2); // dx and dw
    const Outputs gr = gref.call(gargs);
    checkViews(gjit, gin, gref.tensorArguments(), gr, assigned(gref), dt, true);
  }
}

// Convolutions as implicit GEMMs: the packing reads the input through its window subscripts
// (no im2col tensor), an image's other indices are looped around the GEMM; the input
// gradient's filter taps run over their hull with zeros where a tap does not reach (masked
// packing), or with dy read in place, the taps bounded per row and masked per column; a
// strided one as residue phases (CpuGemmPhases.cpp), padded reads are zero
// outside. Every gradient of each layer too, against the
// interpreter, in three views and 1 and 2 threads.
TEST_CASE("gemm: convolutions forward and every gradient (stride, padding, dilation, 1x1)") {
  struct ConvRow {
    const char* program;
    std::map<std::string, Shape> shapes;
    std::size_t gradPacked; // gradient statements that take the packed path (32-byte vectors)
    Packs f32Wide, f64Wide; // forward and gradient statements packed with 64-byte vectors
  };
  // With 64-byte vectors every row takes the packed path as well: where two vectors of columns
  // (NR = 32 f32 lanes) are too wide for the image, one vector and a tile of up to 28 rows (as
  // short as M where the channels are fewer) are.
  const std::vector<ConvRow> table = {
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 20, 21}}, {"k", {24, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // The README demo: the weight gradient's taps inside its KC blocks in 2 groups (3 chunks
      // of M for 2 threads: 6 tasks, each a chunk and a group of taps).
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {4, 16, 33, 33}}, {"k", {32, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // The benchmark's image width: the forward's 54 columns and the input gradient's 56
      // (where 512-bit operations run in halves, one-vector tiles, their last 8 columns in half
      // vectors: x read in place with masked loads, dy packed), 45 = 2 x 23 - 1 rows.
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {1, 8, 10, 56}}, {"k", {45, 8, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // Odd channel counts: edge slivers on both sides of every GEMM (the weight gradient's
      // taps inside its KC blocks, its lanes, the channels, far apart).
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {3, 13, 17, 19}}, {"k", {23, 13, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // Channel counts just past the tallest tile (AVX-512): the forward's 33 output channels
      // two equal one-vector tiles of 17 rows (the last 16), the weight gradient's 15 input
      // channels two of 8 rows x 2 vectors (the last 7) over 33 output channels (a last sliver
      // of one), 20 output columns (a one-vector sliver and an edge of 4).
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {2, 15, 21, 41}}, {"k", {33, 15, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // More input than output channels: the weight gradient's x is operand B (lanes the
      // channels), packed per block for each tap, 24 = 16 + 8 channels (an edge sliver).
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 24, 16, 19}}, {"k", {8, 24, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // The strided input gradients run as residue phases (4, 9), each packed.
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 41, 43}}, {"k", {24, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // Even sizes: every phase has the same extents, so the phases run one merged copy of
      // their code (passes::mergeVariants), the tap ranges, strides and offsets variables.
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 40, 42}}, {"k", {24, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // The weight gradient's x packed lane-major (each channel's run along the KC block, its
      // 16 output columns in vectors): 13 channels, a last sliver of one channel and zeros.
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 13, 10, 18}}, {"k", {20, 13, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // Weight gradients with as many input channels as output channels or more: x, read at
      // the taps, is A (packed lane-major per block), dy is B. Its runs along the columns (27
      // and 28 of them, no multiple of a vector) end in a vector that overlaps the one before.
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 9, 29}}, {"k", {16, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {2, 20, 11, 57}}, {"k", {16, 20, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // Phases 18 and 17 columns wide, 7 and 6 rows: the columns kernel on a last sliver of
      // two columns and of one, with the taps that reach an image's first and last columns
      // missing (the packing's choice per run: all of the columns, none, or lane by lane).
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 13, 35}}, {"k", {24, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // Phases 29 and 28 columns wide: the last sliver's tile (13 or 12 columns) stored by its
      // own row body (the columns unrolled; with 64-byte vectors one vector with the lanes past
      // the last column off), the channels' last tile (4 rows) by the general code (with 64-byte
      // vectors by the same row body over the rows it has).
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 23, 57}}, {"k", {24, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // 47 input channels in 24-row tiles (with 64-byte vectors; no tile of 16 rows or more
      // divides 47, so Zen 4's phases keep them too): the phases' last tile of channels has 23
      // rows and their last slivers 13 or 12 of 16 columns, every row stored as spread vectors
      // with the rows and lanes past the edges left out.
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {1, 47, 9, 57}}, {"k", {16, 47, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // Stride 4: 16 phases of 18 and 19 columns, each tile row stored 4 elements apart (with
      // 64-byte vectors: spread over four vectors by masked stores).
      {"y[n,o,h,w] := x[n,c,4h+a,4w+b] * k[o,c,a,b]",
       {{"x", {1, 16, 70, 75}}, {"k", {20, 16, 4, 4}}},
       2,
       {1, 2},
       {1, 2}},
      {"y[n,o,h,w] := x[n,c,3h+a,3w+b] * k[o,c,a,b]",
       {{"x", {1, 8, 50, 50}}, {"k", {24, 8, 5, 5}}},
       2,
       {1, 2},
       {1, 2}},
      {"y[n,o,h,w] := x[n,c,pad(h+a-1),pad(w+b-1)] * k[o,c,a,b] where h in 0:size(x,2), w in "
       "0:size(x,3)",
       {{"x", {2, 16, 20, 21}}, {"k", {24, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      {"y[n,o,h,w] := x[n,c,h+2a,w+2b] * k[o,c,a,b]",
       {{"x", {2, 16, 22, 23}}, {"k", {24, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // The forward reads x in place (GemmPlan::bInPlace): 32 columns, no partial sliver (f32);
      // 27 = 16 + 11, a partial last sliver wider than half (masked loads in a full-width
      // kernel); 5 x 7 taps. (16 channels: every gradient packed too.)
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 12, 34}}, {"k", {20, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 12, 29}}, {"k", {20, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 14, 40}}, {"k", {13, 16, 5, 7}}},
       2,
       {1, 2},
       {1, 2}},
      {"y[n,o,h,w] := x[n,c,h,w] * k[o,c]",
       {{"x", {4, 16, 20, 21}}, {"k", {24, 16}}},
       2,
       {1, 2},
       {1, 2}},
      // A 1x1 filter in the 3x3 layer's program (bench_cpu's BM_ConvAlt1x1): 24 columns, a
      // last half-width sliver whose 8 columns fill it (stored as vectors), 22 output channels
      // (an edge of M in the forward), 32 input channels (one in the input gradient).
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {4, 32, 12, 24}}, {"k", {22, 32, 1, 1}}},
       2,
       {1, 2},
       {1, 2}},
      // ... with more input channels than output channels and a reduction long against its
      // output: the weight gradient transposes the shorter dy (B, N o) and packs x lane-major
      // (A, M c; 336 columns, no multiple of a vector).
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 48, 14, 24}}, {"k", {32, 48, 1, 1}}},
       2,
       {1, 2},
       {1, 2}},
      // 21 output columns, 32 output channels: with 64-byte vectors the 28 x 16 tile (one
      // vector of columns) takes the stride-2 forward, whose columns two vectors would not fit.
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 41, 43}}, {"k", {32, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // Input gradients whose dy is read in place (56 and 50 columns: most slivers have
      // every tap b; the first and last read with masked loads, the last of 50 half-width),
      // the taps a bounded per row.
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 9, 56}}, {"k", {20, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 16, 7, 50}}, {"k", {20, 16, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // The weight gradient's taps inside its KC blocks: chunks of N (32 channels) and groups
      // of taps as tasks.
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 32, 14, 20}}, {"k", {16, 32, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
      // Wide enough for 64-byte f32 tiles too: 38 output columns, 36 channels.
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {2, 36, 12, 40}}, {"k", {20, 36, 3, 3}}},
       2,
       {1, 2},
       {1, 2}},
  };
  for (const ConvRow& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(std::string(row.program) << " " << einjit::dtypeName(dt));
      const Packs want = !wideVectors()     ? Packs{1, row.gradPacked}
                         : dt == DType::f32 ? row.f32Wide
                                            : row.f64Wide;
      Kernel ref = einjit::compile(row.program, on(Device::reference(), dt));
      Kernel jit = einjit::compile(row.program, on(Device::cpu(), dt));
      auto in = randomArgs(ref.program(), row.shapes, dt, 5);
      const std::vector<std::string> order = ref.tensorArguments();
      std::vector<Arg> args;
      for (const std::string& n : order) args.push_back(in.at(n));
      const Outputs y = ref.call(args);
      std::size_t count = 0;
      takesPacked(jit, args, &count);
      CHECK(count == want.fwd);
      checkViews(jit, in, order, y, assigned(ref), dt, want.fwd > 0);

      Kernel gref = ref.gradient();
      Kernel gjit = einjit::compile(gref.source(), on(Device::cpu(), dt));
      std::map<std::string, Tensor> gin = in;
      gin["dy"] = Tensor::random(y[std::size_t{0}].shape(), dt, 13);
      std::vector<Arg> gargs;
      for (const auto& n : gref.tensorArguments()) gargs.push_back(gin.at(n));
      INFO("gradient program:\n" << gref.source());
      takesPacked(gjit, gargs, &count);
      CHECK(count == want.grad);
      checkViews(gjit, gin, gref.tensorArguments(), gref.call(gargs), assigned(gref), dt,
                 want.grad > 0);
    }
}



// The reduction split across tasks (GemmPlan::kParts), planned for two threads whatever the
// machine: a small output over a long reduction, each part's KC blocks summed into its own
// partial output and the partials added in order by a last pass. Weight gradients of stride 1
// and 2 and with padding, odd sizes (edge slivers on both sides, a count of KC blocks that two
// parts do not share equally; reductions long enough for four KC blocks where AVX-512's
// blocks are twice as long), a plain product, '+=' (the last pass adds to the output) and an
// epilogue (run by the last pass), f32 and f64, against the interpreter in three views, the
// same bits on one thread and two.

TEST_CASE("gemm: the reduction split across tasks (weight gradients, '+=', an epilogue)") {
  struct SplitRow {
    const char* program;
    std::map<std::string, Shape> shapes;
    std::vector<std::string> wrt; // the gradient program's (none: the program itself)
  };
  const char* const conv1 = "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]";
  const std::vector<SplitRow> table = {
      {conv1, {{"x", {5, 36, 12, 40}}, {"k", {20, 36, 3, 3}}}, {"k"}},
      {conv1, {{"x", {5, 19, 15, 37}}, {"k", {23, 19, 3, 3}}}, {"k"}},
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {9, 17, 33, 35}}, {"k", {19, 17, 3, 3}}},
       {"k"}},
      {"y[n,o,h,w] := x[n,c,pad(h+a-1),pad(w+b-1)] * k[o,c,a,b] where h in 0:size(x,2), w in "
       "0:size(x,3)",
       {{"x", {5, 20, 14, 33}}, {"k", {24, 20, 3, 3}}},
       {"k"}},
      {"C[i,k] := A[i,j] * B[j,k]", {{"A", {29, 3001}}, {"B", {3001, 37}}}, {}},
      {"C[i,k] := D[i,k]\nC[i,k] += A[i,j] * B[k,j]",
       {{"D", {30, 40}}, {"A", {30, 2500}}, {"B", {40, 2500}}},
       {}},
      {"t[n,o] := x[n,i] * w[o,i]\ny[n,o] := t[n,o] + b[o]",
       {{"x", {30, 2000}}, {"w", {40, 2000}}, {"b", {40}}},
       {}},
  };
  einjit::runtime::setCpuPlanThreads(2);
  struct Restore {
    ~Restore() { einjit::runtime::setCpuPlanThreads(0); }
  } restore;
  for (const SplitRow& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(std::string(row.program) << " " << einjit::dtypeName(dt));
      auto [ref, in] = referenceRow(row.program, row.shapes, row.wrt, dt);
      Kernel jit = einjit::compile(ref.source(), on(Device::cpu(), dt));
      std::vector<Arg> args;
      for (const std::string& n : ref.tensorArguments()) args.push_back(in.at(n));
      const std::string text = jit.explain(args);
      INFO(text);
      CHECK(text.find("the reduction split in 2 parts") != std::string::npos);
      if (row.program[0] == 't') CHECK(text.find("epilogue") != std::string::npos);
      checkViews(jit, in, ref.tensorArguments(), ref.call(args), assigned(ref), dt, true);
    }
}

// A one-thread plan's output not contiguous along N (a weight gradient's dk[o,c,a,b], channels
// 9 apart) over several KC blocks, staged (GemmPlan::staged): the tiles summed into a
// contiguous partial, one pass into the output. Weight gradients of stride 1 and 2 and with
// padding, odd sizes, '+=' (the pass adds to the output), an epilogue (run by the pass), a
// product with its batch outside the GEMM (tasks of batch values), f32 and f64, against the
// interpreter in three views. One and two oneTBB threads give the same bits (the plan's); a
// two-thread plan (the reduction split in 2 parts) adds its partials in another order.
TEST_CASE("gemm: a one-thread plan's output staged in a contiguous partial") {
  struct StagedRow {
    std::string program;
    std::map<std::string, Shape> shapes;
    std::vector<std::string> wrt; // the gradient program's (none: the program itself)
  };
  const char* const conv1 = "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]";
  const char* const dk = "dy[n,o,h,w] * x[n,c,a+h,b+w]";
  const std::vector<StagedRow> table = {
      {conv1, {{"x", {3, 36, 12, 40}}, {"k", {20, 36, 3, 3}}}, {"k"}},
      {conv1, {{"x", {3, 19, 15, 37}}, {"k", {23, 19, 3, 3}}}, {"k"}},
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
       {{"x", {4, 17, 33, 35}}, {"k", {19, 17, 3, 3}}},
       {"k"}},
      {"y[n,o,h,w] := x[n,c,pad(h+a-1),pad(w+b-1)] * k[o,c,a,b] where h in 0:size(x,2), w in "
       "0:size(x,3)",
       {{"x", {3, 20, 14, 33}}, {"k", {24, 20, 3, 3}}},
       {"k"}},
      {std::string("dk[o,c,a,b] := k[o,c,a,b]\ndk[o,c,a,b] += ") + dk,
       {{"k", {20, 36, 3, 3}}, {"dy", {3, 20, 10, 38}}, {"x", {3, 36, 12, 40}}},
       {}},
      {std::string("t[o,c,a,b] := ") + dk +
           " where a in 0:3, b in 0:3\ndk[o,c,a,b] := t[o,c,a,b] * 0.5 + k[o,c,a,b]",
       {{"k", {20, 36, 3, 3}}, {"dy", {3, 20, 10, 38}}, {"x", {3, 36, 12, 40}}},
       {}},
      {"C[i,k,r] := A[i,j,r] * B[j,k]", {{"A", {29, 3001, 2}}, {"B", {3001, 37}}}, {}},
  };
  einjit::runtime::setCpuPlanThreads(1);
  struct Restore {
    ~Restore() { einjit::runtime::setCpuPlanThreads(0); }
  } restore;
  for (const StagedRow& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(row.program << " " << einjit::dtypeName(dt));
      auto [ref, in] = referenceRow(row.program, row.shapes, row.wrt, dt);
      Kernel jit = einjit::compile(ref.source(), on(Device::cpu(), dt));
      std::vector<Arg> args;
      for (const std::string& n : ref.tensorArguments()) args.push_back(in.at(n));
      const std::string text = jit.explain(args);
      INFO(text);
      if (!std::getenv("EINJIT_GEMM_STAGE")) // (the experiment knob that turns staging off)
        CHECK(text.find("output staged in a contiguous partial") != std::string::npos);
      if (row.program[0] == 't') CHECK(text.find("epilogue") != std::string::npos);
      checkViews(jit, in, ref.tensorArguments(), ref.call(args), assigned(ref), dt, true);
    }
}

// Element-wise summands through the packed path (GemmOperands): the distance layer and its
// gradients (a read of output indices only, a power-of-two scale taken out of the sum),
// repeated reads, a scale that is not a power of two, padding (zero outside, as the read
// gives), and forms that stay off the path (an input gradient's dependent tap ranges: a
// packed zero is no zero term of such a summand).
const char* const kThreeTiles = "y[i,j] := (w[k,i] - x[k,j]) * (P[i,j] + Q[i,j] * R[i,j])";

// A micro-kernel with fewer accumulator chains than the FMA pipes keep busy (Target::fmaChains)
// adds terms into two accumulator sets in turn; the element-wise table checks the values.
TEST_CASE("gemm: a tile short of FMA chains takes two accumulator sets") {
  Kernel jit = einjit::compile(kThreeTiles);
  std::vector<Arg> args;
  for (const Shape& sh : std::vector<Shape>{{131, 64}, {131, 61}, {64, 61}, {64, 61}, {64, 61}})
    args.push_back(Tensor::random(sh, DType::f32, 3));
  const std::string text = jit.explain(args);
  CHECK(text.find("packed contraction") != std::string::npos);
  CHECK(text.find("(2 accumulator sets)") != std::string::npos);
}

TEST_CASE("gemm: element-wise summands (the distance layer) forward and every gradient") {
  struct SummandRow {
    const char* program;
    std::map<std::string, Shape> shapes;
    std::size_t packed, gradPacked; // statements that take the packed path
    std::optional<Packs> f32Wide = {}; // where f32 with 64-byte vectors differs
  };
  // Each statement above the packed path's size floor (kGemmMinFlops: 10^6 flops).
  const std::vector<SummandRow> table = {
      {"y[i,j] := (w[k,i] - x[k,j]) ^ 2", {{"w", {150, 64}}, {"x", {150, 61}}}, 1, 2},
      {"y[i,j] := (w[k,i] - x[k,j]) * (w[k,i] - x[k,j])",
       {{"w", {129, 50}}, {"x", {129, 83}}},
       1,
       2},
      {"y[i,j] := 3 * exp(-(w[i,k] - x[j,k]) ^ 2 / 8)", {{"w", {50, 141}}, {"x", {77, 141}}}, 1, 2},
      {"y[i,j] := A[i,k] * B[k,j] * 0.5 * S[i,j]",
       {{"A", {63, 140}}, {"B", {140, 75}}, {"S", {63, 75}}},
       1,
       1}, // dA and dB read three tensors along their reductions
      {"y[n,o,h,w] := (x[n,c,pad(h+a-1),pad(w+b-1)] - k[o,c,a,b]) ^ 2 where h in 0:size(x,2), w "
       "in 0:size(x,3)",
       {{"x", {2, 8, 13, 19}}, {"k", {18, 8, 3, 3}}},
       1,
       1,
       Packs{1, 0}}, // with 64-byte vectors the forward's 18 channels are one 18-row tile
      // Three tile reads leave room for a few accumulators only: two sets along the reduction
      // (an odd reduction extent, so the block's last term goes to the first set alone).
      {kThreeTiles,
       {{"w", {131, 64}}, {"x", {131, 61}}, {"P", {64, 61}}, {"Q", {64, 61}}, {"R", {64, 61}}},
       1,
       3},
  };
  for (const SummandRow& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(std::string(row.program) << " " << einjit::dtypeName(dt));
      Kernel ref = einjit::compile(row.program, on(Device::reference(), dt));
      Kernel jit = einjit::compile(row.program, on(Device::cpu(), dt));
      auto in = randomArgs(ref.program(), row.shapes, dt, 7);
      const std::vector<std::string> order = ref.tensorArguments();
      std::vector<Arg> args;
      for (const std::string& n : order) args.push_back(in.at(n));
      const Packs want = wideVectors() && dt == DType::f32 && row.f32Wide
                             ? *row.f32Wide
                             : Packs{row.packed, row.gradPacked};
      std::size_t count = 0;
      takesPacked(jit, args, &count);
      CHECK(count == want.fwd);
      const Outputs y = ref.call(args);
      checkViews(jit, in, order, y, assigned(ref), dt, want.fwd > 0);

      Kernel gref = ref.gradient();
      Kernel gjit = einjit::compile(gref.source(), on(Device::cpu(), dt));
      std::map<std::string, Tensor> gin = in;
      gin["dy"] = Tensor::random(y[std::size_t{0}].shape(), dt, 17);
      std::vector<Arg> gargs;
      for (const auto& n : gref.tensorArguments()) gargs.push_back(gin.at(n));
      INFO("gradient program:\n" << gref.source());
      takesPacked(gjit, gargs, &count);
      CHECK(count == want.grad);
      checkViews(gjit, gin, gref.tensorArguments(), gref.call(gargs), assigned(gref), dt,
                 want.grad > 0);
    }
}

// A squared difference and a gradient's difference written in either order give the same bits
// (a difference rounds symmetrically; a product, an FMA, a sum of negated terms and the scale
// carry the sign exactly): where 512-bit operations are split (Zen 4) the plan rewrites the
// distance layer's `w - x` as `x - w` so that w's broadcast folds into the subtraction
// (schedule/GemmSummand.h), and every other target runs both forms as written. Equal elements
// (w = x, the difference zero) and an odd shape (edge tiles along both outputs and a partial
// last KC block) included; f32 and f64, 1 and 2 threads through checkViews.
TEST_CASE("gemm: a difference in either order gives the same bits (the distance layer)") {
  struct OrderRow {
    const char* program;
    const char* swapped;
    std::map<std::string, Shape> shapes;
  };
  const std::vector<OrderRow> table = {
      {"y[i,j] := (w[k,i] - x[k,j]) ^ 2", "y[i,j] := (x[k,j] - w[k,i]) ^ 2",
       {{"w", {403, 61}}, {"x", {403, 77}}}},
      {"dw[k,i] := dy[i,j] * (2 * (w[k,i] - x[k,j]))", "dw[k,i] := dy[i,j] * (-2 * (x[k,j] - w[k,i]))",
       {{"dy", {45, 523}}, {"w", {67, 45}}, {"x", {67, 523}}}},
      {"dx[k,j] := dy[i,j] * -(2 * (w[k,i] - x[k,j]))", "dx[k,j] := dy[i,j] * (2 * (x[k,j] - w[k,i]))",
       {{"dy", {301, 83}}, {"w", {59, 301}}, {"x", {59, 83}}}},
  };
  for (const OrderRow& row : table)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(row.program << " " << einjit::dtypeName(dt));
      Kernel ref = einjit::compile(row.program, on(Device::reference(), dt));
      Kernel jit = einjit::compile(row.program, on(Device::cpu(), dt));
      Kernel swapped = einjit::compile(row.swapped, on(Device::cpu(), dt));
      auto in = randomArgs(ref.program(), row.shapes, dt, 11);
      // A few columns of x equal to w's first column: zero differences.
      const Tensor& w = in.at("w");
      const Shape xs = in.at("x").shape();
      const std::vector<double> wv = w.toVector();
      std::vector<double> xv = in.at("x").toVector();
      for (std::int64_t k = 0; k < xs[0]; ++k)
        for (std::int64_t j = 0; j < xs[1]; j += 7)
          xv[static_cast<std::size_t>(k * xs[1] + j)] = wv[static_cast<std::size_t>(k * w.shape()[1])];
      in["x"] = Tensor::fromValues(xs, xv, dt);
      const std::vector<std::string> order = ref.tensorArguments();
      std::vector<Arg> args;
      for (const std::string& n : order) args.push_back(in.at(n));
      std::vector<Arg> swappedArgs; // (its arguments in their own order of first appearance)
      for (const std::string& n : swapped.tensorArguments()) swappedArgs.push_back(in.at(n));
      CHECK(takesPacked(jit, args));
      CHECK(takesPacked(swapped, swappedArgs));
      const Outputs got = jit.call(args);
      CHECK(bits(got) == bits(swapped.call(swappedArgs)));
      checkViews(jit, in, order, ref.call(args), assigned(ref), dt, true);
    }
}

// The packing loops are ForKind::Rolled: LLVM keeps them rolled (loop metadata that disables
// unrolling survives into the optimized module); code without such loops carries none.
TEST_CASE("gemm: the packing loops reach LLVM marked to stay rolled") {
  const std::string program = "C[i,k] := A[i,j] * B[k,j]";
  Kernel jit = einjit::compile(program);
  auto llvmText = [&](Shape a, Shape b) {
    return jit.explain({Tensor::random(a, DType::f32, 1), Tensor::random(b, DType::f32, 2)}, true);
  };
  const std::string packed = llvmText({200, 70}, {90, 70});
  CHECK(packed.find("packed GEMM") != std::string::npos);
  CHECK(packed.find("llvm.loop.unroll.disable") != std::string::npos);
  const std::string tiled = llvmText({20, 7}, {9, 7});
  CHECK(tiled.find("packed GEMM") == std::string::npos);
  // (Rolled loops carry both flags; a loop around a vectorizer-hinted one, which the tiled
  // path has, carries unroll.disable alone.)
  CHECK(tiled.find("!\"llvm.loop.vectorize.enable\", i1 false") == std::string::npos);
  CHECK(packed.find("!\"llvm.loop.vectorize.enable\", i1 false") != std::string::npos);
}

