// The GPU tile decisions (codegen/schedule/GpuTileSchedule.h) as tables: extents and a Target
// in, the decision out, each expected value worked out by hand from the rule (comments show
// the arithmetic); the layout copies around a tile from a program, its shapes and its layouts.
// And the printer of the tile's schedule value (codegen/schedule/GpuTile.h),
// the only writer of a tile's `einjit explain` note, for the shapes the generated-code goldens
// do not reach (a core/border split on the GPU), and of the GPU statements without a tile.
#include "codegen/schedule/GpuTileSchedule.h"

#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

using namespace einjit::codegen;
namespace gs = einjit::codegen::gpuschedule;

namespace {

Target gpu(int arch) {
  Target t;
  t.gpu = true;
  t.gpuArch = arch;
  return t; // 132 SMs, 96 KiB pipelines: the defaults
}

} // namespace

TEST_CASE("simt cells per thread") {
  struct Row {
    std::int64_t ext, cells;
  };
  const Row rows[] = {
      {1, 1},    // halves while 16 t / 2 >= ext: 64, 32, 16 >= 1, down to 1
      {20, 2},   // 64 >= 20, 32 >= 20, 16 < 20
      {64, 4},   // 64 >= 64, 32 < 64
      {100, 7},  // 8: 128; 7: 112 (< 128, 20 * 112 <= 19 * 128); 6: 192
      {576, 6},  // 8: 640; 7: 672; 6: 576 (< 640, 11520 <= 12160)
      {784, 7},  // 8: 896; 7: 784 (15680 <= 17024); 6: 864 (not < 784)
      {4096, 8}, // 8: 4096; 7: 4144; 6: 4128
  };
  for (const Row& r : rows) {
    CAPTURE(r.ext);
    CHECK(gs::simtCells(r.ext) == r.cells);
  }
}

TEST_CASE("worth a tile") {
  struct Row {
    std::int64_t i, j, k;
    bool phase, worth;
  };
  const Row rows[] = {
      {64, 64, 16, false, true},    // 65536 multiply-adds
      {64, 64, 15, false, false},   // 61440
      {8, 8, 8, true, true},        // a residue phase: weighed as a whole
      {1000, 1000, 7, true, false}, // a reduction below 8
  };
  for (const Row& r : rows) {
    CAPTURE(r.i);
    CAPTURE(r.k);
    CHECK(gs::worthTile(r.i, r.j, r.k, r.phase) == r.worth);
  }
}

TEST_CASE("tensor-core family and warps") {
  struct Row {
    int arch;
    bool copied;
    std::int64_t i, j, k;
    GpuTileKind kind;
    bool sideBySide;
    std::int64_t WM, WN;
  };
  const Row rows[] = {
      {90, true, 4096, 4096, 4096, GpuTileKind::Wgmma, false, 2, 4},
      {90, false, 4096, 4096, 4096, GpuTileKind::MmaSync, false, 2, 4}, // an operand in registers
      {90, true, 4096, 4096, 64, GpuTileKind::MmaSync, false, 2, 4},    // one slice of 64
      {90, true, 64, 256, 576, GpuTileKind::Wgmma, true, 1, 8},         // 64 rows: side by side
      {90, true, 100, 256, 576, GpuTileKind::MmaSync, false, 2, 4},     // 100 rows: neither
      {80, true, 64, 256, 576, GpuTileKind::MmaSync, false, 1, 8},      // 64 x 256 warps
      {80, true, 64, 128, 576, GpuTileKind::MmaSync, false, 2, 4},
  };
  for (const Row& r : rows) {
    CAPTURE(r.arch);
    CAPTURE(r.i);
    CAPTURE(r.j);
    CAPTURE(r.k);
    const gs::TensorCoreShape s = gs::tensorCoreShape(gpu(r.arch), r.copied, r.i, r.j, r.k);
    CHECK(s.kind == r.kind);
    CHECK(s.sideBySide == r.sideBySide);
    CHECK(s.WM == r.WM);
    CHECK(s.WN == r.WN);
  }
}

TEST_CASE("warpgroup shape") {
  struct Row {
    bool sideBySide;
    std::int64_t tilesI, extJ, extB, BN;
    int stages, inFlight;
  };
  const Row rows[] = {
      {false, 32, 4096, 1, 256, 4, 1}, // 4096^3: 32 x 16 = 512 tiles of 256 >= 132 SMs
      {false, 16, 2048, 1, 128, 3, 0}, // 16 x 8 = 128 of 256 < 132; 16 x 16 = 256 of 128
      {false, 8, 1024, 1, 64, 4, 0},   // 1024^3: 32 of 256, 64 of 128
      {false, 8, 1024, 4, 128, 3, 0},  // 4 batches: 256 tiles of 128
      {true, 32, 4096, 1, 64, 4, 0},   // side by side: 64 columns a warpgroup, whatever the size
  };
  for (const Row& r : rows) {
    CAPTURE(r.sideBySide);
    CAPTURE(r.tilesI);
    CAPTURE(r.extJ);
    const gs::WarpgroupShape s =
        gs::warpgroupShape(gpu(90), r.sideBySide, r.tilesI, r.extJ, r.extB);
    CHECK(s.BN == r.BN);
    CHECK(s.stages == r.stages);
    CHECK(s.inFlight == r.inFlight);
  }
}

TEST_CASE("split-K") {
  const Target t = gpu(90);
  // Warpgroup tiles: fewer than half the SMs (18 < 66) aim at all 264 blocks.
  CHECK(gs::tensorCoreBlocksWanted(t, GpuTileKind::Wgmma, 18) == 264);
  CHECK(gs::tensorCoreBlocksWanted(t, GpuTileKind::Wgmma, 128) == 66);
  CHECK(gs::tensorCoreBlocksWanted(t, GpuTileKind::MmaSync, 128) == 264);
  struct Row {
    std::int64_t tiles, slices, BK, wanted;
    double cellFlops, outputBytes;
    std::int64_t splits, perSplit;
  };
  const Row rows[] = {
      // Doubling (at least 8 slices a range): 18 x 16 = 288 >= 264 blocks; 365 / 16 -> 23 each.
      {18, 365, 64, 264, 0, 0, 16, 23},
      {128, 16, 64, 66, 0, 0, 1, 16}, // enough tiles already
      // f32 model, one tile: every s up to 1024 / 32 keeps one block per SM, so the fewest
      // slices per range win (32 of 32), the partials' (2s + 1) x 64 KiB costing far less.
      {1, 1024, 16, 0, 2.0 * 128 * 128 * 16, 128.0 * 128 * 4, 32, 32},
      // 264 tiles: two ranges (least 32 slices) would double the busiest SM's blocks.
      {264, 64, 16, 0, 2.0 * 128 * 128 * 16, 4096.0 * 4096 * 4, 1, 64},
  };
  for (const Row& r : rows) {
    CAPTURE(r.tiles);
    CAPTURE(r.slices);
    const gs::SplitK k =
        gs::splitK(t, r.tiles, r.slices, r.BK, r.outputBytes, r.wanted, r.cellFlops);
    CHECK(k.splits == r.splits);
    CHECK(k.perSplit == r.perSplit);
  }
}

TEST_CASE("pipeline stages") {
  const Target t = gpu(80);
  CHECK(gs::pipelineStages(t, false, 1024) == 2);   // registers: one slice ahead
  CHECK(gs::pipelineStages(t, true, 24576) == 4);   // 98304 / 24576
  CHECK(gs::pipelineStages(t, true, 40000) == 2);   // 2.46 slices
  CHECK(gs::pipelineStages(t, true, 10000) == 4);   // 9, at most 4
  CHECK(gs::pipelineStages(t, true, 1 << 20) == 2); // at least 2
  Target small = t;
  small.gpuPipelineShared = 3 * 24576;
  CHECK(gs::pipelineStages(small, true, 24576) == 3); // the Target's budget
}

TEST_CASE("GPU tile notes") {
  GpuTileSchedule s;
  GpuTilePlan& t = s.tile;
  t.kind = GpuTileKind::Simt;
  t.BM = 128;
  t.BN = 112;
  t.BK = 16;
  t.TM = 8;
  t.TN = 7;
  t.I = "o";
  t.J = "n,h,w";
  t.K = "c,a,b";
  t.stages = 2;
  t.operands = {{"tile.L", 0, GpuOperandPlan::Index::RowOffsets, ""},
                {"tile.R", 16, GpuOperandPlan::Index::Decomposed, "a,b"}};
  s.coreBorder = true;
  CHECK(describe(s) ==
        "core/border split; core: GPU tile 128x112 over (o) x (n,h,w), 8x7 per thread, "
        "shared-memory slices of 16 along (c,a,b), 2 slices in flight; tile.L through registers "
        "(row offsets from a table), tile.R by 16-byte asynchronous copies (over the hull of "
        "(a,b), masked to their ranges); borders: one thread each");

  GpuTileSchedule w;
  GpuTilePlan& g = w.tile;
  g.kind = GpuTileKind::Wgmma;
  g.BM = 128;
  g.BN = 256;
  g.BK = 64;
  g.WBN = 256;
  g.inFlight = 1;
  g.I = "i";
  g.J = "j";
  g.K = "k";
  g.B = "b";
  g.stages = 4;
  g.operands = {{"tile.A", 16, GpuOperandPlan::Index::Decomposed, ""},
                {"tile.B", 16, GpuOperandPlan::Index::Decomposed, ""}};
  g.vectoredOutput = true;
  g.splits = 4;
  g.perSplit = 10;
  w.phases = GpuPhasesPlan{.count = 4, .splits = {{"u", "h", 2, 1}}, .merged = true};
  w.relayout = GpuRelayoutPlan{};
  w.relayout->tensors = "x, k";
  w.relayout->channel = "c";
  CHECK(describe(w) ==
        "4 residue phases (u = 2q + r, h = q + m), each: GPU tensor cores (wgmma m64n256k16 bf16, "
        "sm_90a, f32 accumulators, 128-byte swizzled operands): tile 128x256 over (i) x (j), 2 "
        "warpgroups of 64x256, shared-memory slices of 64 along (k), one tile row per (b), 4 "
        "slices in flight; tile.A by 16-byte asynchronous copies, tile.B by 16-byte asynchronous "
        "copies, the products of one slice running while the next is issued, the output stored "
        "16 bytes at a time, split-K: 4 ranges of 10 slices, partials added in order; the phases "
        "in one launch; x, k copied first to layouts with c fastest, the reduction run with c "
        "last (whole 16-byte vectors)");
  // Two strided reductions, one of them with a coefficient on q: each split printed in turn.
  w.phases = GpuPhasesPlan{.count = 9, .splits = {{"u", "h", 3, 1}, {"v", "w", 3, 2}}};
  w.relayout.reset();
  CHECK(describe(w).rfind("9 residue phases (u = 3q + r, h = q + m, v = 3q + r, w = 2q + m), "
                          "each: GPU tensor cores",
                          0) == 0);
}

TEST_CASE("layout copies around a tile") {
  using Copies = std::map<std::string, std::vector<std::int64_t>>; // tensor -> its copy's strides
  struct Row {
    const char* program;
    std::vector<std::vector<std::int64_t>> shapes; // per argument (first appearance), row-major
    einjit::DType dtype;
    bool outputCovered;
    bool copies; // any copy at all
    Copies inputs;
    std::string output; // "": none
    std::vector<std::int64_t> outputStrides;
    bool outputIn;
    std::string tensors, channel; // the printed names; channel "" when batch-outermost
  };
  const Row rows[] = {
      // b is a batch index (every factor and the output use it) and A, C have it fastest: both
      // copied batch-outermost, the others in stride order. A[65,40,3]: b outermost (65*40),
      // then i (40), j (1). C[65,70,3]: b (65*70), i (70), k (1). B[3,70,40] is fast along j.
      {"C[i,k,b] := A[i,j,b] * B[b,k,j]",
       {{65, 40, 3}, {3, 70, 40}},
       einjit::DType::f32,
       true,
       true,
       {{"A", {40, 1, 2600}}},
       "C",
       {70, 1, 4550},
       false, // ':=' covers C: its copy starts empty
       "A, C",
       ""},
      // '+=' reads C: its copy is filled first.
      {"C[i,k,b] += A[i,j,b] * B[b,k,j]",
       {{65, 70, 3}, {65, 40, 3}, {3, 70, 40}}, // C is read: the first argument
       einjit::DType::f32,
       true,
       true,
       {{"A", {40, 1, 2600}}},
       "C",
       {70, 1, 4550},
       true,
       "A, C",
       ""},
      // The batch index already outermost: no copies.
      {"C[b,i,k] := A[b,i,j] * B[b,j,k]",
       {{3, 70, 33}, {3, 33, 90}},
       einjit::DType::f32,
       true,
       false,
       {},
       "",
       {},
       false,
       "",
       ""},
      // bf16 convolution: x is contiguous along (a,b) for b's 3 values only (< 8), c has 64
      // values: x[4,64,20,20] and k[64,64,3,3] copied with c fastest, the rest in their order:
      // x: c 1, w 64, h 64*20, n 64*20*20; k: c 1, b 64, a 64*3, o 64*9.
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{4, 64, 20, 20}, {64, 64, 3, 3}},
       einjit::DType::bf16,
       true,
       true,
       {{"x", {25600, 1, 1280, 64}}, {"k", {576, 1, 192, 64}}},
       "",
       {},
       false,
       "x, k",
       "c"},
      // f32 tiles keep a convolution's inputs.
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{4, 64, 20, 20}, {64, 64, 3, 3}},
       einjit::DType::f32,
       true,
       false,
       {},
       "",
       {},
       false,
       "",
       ""},
  };
  for (const Row& r : rows) {
    const std::string program = r.program;
    CAPTURE(program);
    CAPTURE(static_cast<int>(r.dtype));
    const einjit::dsl::Program p = einjit::dsl::check(r.program);
    REQUIRE(p.arguments.size() == r.shapes.size());
    std::vector<einjit::dsl::ArgSpec> args;
    for (const auto& s : r.shapes) args.push_back({r.dtype, s});
    const einjit::dsl::BoundProgram b = einjit::dsl::bind(p, args, {}, r.dtype);
    Strides strides(p.tensors.size());
    for (std::size_t t = 0; t < p.tensors.size(); ++t) {
      const auto& shape = b.tensors[t].shape;
      strides[t].assign(shape.size(), 1);
      for (std::size_t d = shape.size(); d-- > 1;) strides[t][d - 1] = strides[t][d] * shape[d];
    }
    const std::optional<GpuRelayoutPlan> plan =
        gs::relayoutPlan(p, b, p.stmts[0], b.stmts[0], strides, r.outputCovered);
    REQUIRE(plan.has_value() == r.copies);
    if (!plan) continue;
    auto name = [&](int t) { return p.tensors[static_cast<std::size_t>(t)].name; };
    Copies inputs;
    for (const GpuRelayoutCopy& c : plan->inputs) inputs[name(c.tensor)] = c.strides;
    CHECK(inputs == r.inputs);
    CHECK(plan->inputs.size() == r.inputs.size()); // each tensor once
    REQUIRE(plan->output.has_value() == !r.output.empty());
    if (plan->output) {
      CHECK(name(plan->output->tensor) == r.output);
      CHECK(plan->output->strides == r.outputStrides);
      CHECK(plan->outputIn == r.outputIn);
    }
    CHECK(plan->tensors == r.tensors);
    CHECK(plan->channel == r.channel);
    // The channel is the reduction index the tile runs last.
    if (r.channel.empty())
      CHECK(plan->kLast == -1);
    else
      CHECK((plan->kLast >= p.stmts[0].numOutputVars() &&
             p.stmts[0].vars[static_cast<std::size_t>(plan->kLast)].name == r.channel));
  }
}

TEST_CASE("relayout copy tile") {
  struct Row {
    std::int64_t extS, extD, TS, TD;
  };
  const Row rows[] = {
      {64, 100, 32, 32},    // TS: min(64, 32); TD: min(100, max(32, 1024 / 32 = 32))
      {8, 1000, 8, 128},    // TD: min(1000, max(32, 1024 / 8 = 128))
      {3, 50, 3, 50},       // TD: min(50, max(32, 341))
      {1000, 1000, 32, 32}, // a 32 x 32 tile
  };
  for (const Row& r : rows) {
    CAPTURE(r.extS);
    CAPTURE(r.extD);
    const gs::RelayoutTile t = gs::relayoutTile(r.extS, r.extD);
    CHECK(t.TS == r.TS);
    CHECK(t.TD == r.TD);
  }
}

TEST_CASE("GPU thread notes") {
  CHECK(describe(GpuThreadsPlan{GpuThreadsPlan::Kind::InPlace}) ==
        "one GPU thread per element, in place");
  CHECK(describe(GpuThreadsPlan{GpuThreadsPlan::Kind::Atomic, "i,j", "y", false}) ==
        "one GPU thread per element of (i,j), atomic adds into y (several land on one element: "
        "their order, and the sum's last bits, vary between runs)");
  CHECK(describe(GpuThreadsPlan{GpuThreadsPlan::Kind::Atomic, "i", "dx", true}) ==
        "one GPU thread per element of (i), atomic adds into an f32 copy of dx, rounded to bf16 "
        "once at the end (several land on one element: their order, and the sum's last bits, "
        "vary between runs)");
  GpuThreadsPlan one{GpuThreadsPlan::Kind::OneThread};
  CHECK(describe(one) == "one GPU thread: output elements are not independent (left-hand side)");
  one.scatter = true;
  CHECK(describe(one) == "one GPU thread: output elements are not independent (scatter)");
}
