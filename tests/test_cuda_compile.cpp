// The CUDA backend without a GPU (runs in CI): every statement and program of the test tables,
// forward and gradient, generates CUDA C that NVRTC compiles; the tile families (scatters,
// convolution input gradients, vector copies, odd widths, warpgroups, split reductions) and
// NVRTC itself (logs, architectures). What the schedules decide without compiling is in
// test_cuda_schedule.cpp; runs on a GPU in test_cuda.cpp.
#include "Compare.h"
#include "CudaCompile.h"
#include "CudaTables.h"
#include "CudaTestSupport.h"
#include "InterpreterTable.h"
#include "SplitReduction.h"

#include "runtime/CudaBackend.h"
#include "runtime/Nvrtc.h"

#include <doctest/doctest.h>

using namespace einjit::test;

namespace {

// NVRTC compiles every split case at these sizes; returns how many of them split.
int compileSplitCases(const std::vector<std::int64_t>& sizes) {
  int split = 0;
  for (const SplitCase& c : splitCases())
    for (std::int64_t n : sizes) {
      if (n > 100000 && !c.large) continue;
      for (DType dt : {DType::f32, DType::f64}) {
        INFO(c.program << " n=" << n << " " << einjit::dtypeName(dt));
        try {
          Kernel k = einjit::compile(c.program, on(Device::cuda(), dt));
          std::vector<Arg> args = convertedArgs(c.args(n), dt);
          compileCall(k, byName(k, args), scalarsOf(k, args), dt);
          if (splits(k, args)) ++split;
        } catch (const std::exception& e) {
          FAIL_CHECK("threw: " << std::string(e.what()));
        }
      }
    }
  return split;
}

} // namespace

TEST_CASE("cuda: NVRTC compiles every table statement, forward and gradient (no GPU needed)") {
  std::string why;
  REQUIRE_MESSAGE(einjit::runtime::nvrtc::available(&why), why);
  int compiled = 0;
  for (const auto& row : einjit::test::interp::rows()) {
    INFO(std::string(row.program));
    for (DType dt : {DType::f32, DType::f64}) {
      Kernel k = einjit::compile(row.program, on(Device::cuda(), dt));
      std::vector<Arg> args;
      for (const Arg& a : row.args)
        args.push_back(a.isTensor() ? Arg(converted(a.tensor(), dt)) : a);
      try {
        compileCall(k, byName(k, args), scalarsOf(k, args), dt);
        ++compiled;
      } catch (const std::exception& e) {
        FAIL_CHECK("threw: " << std::string(e.what()));
      }
    }
  }
  for (const auto& row : einjit::test::kGradRows) {
    INFO(std::string(row.program));
    for (DType dt : {DType::f32, DType::f64}) {
      try {
        Kernel ref = einjit::compile(row.program, on(Device::reference(), dt));
        auto in = randomArgs(ref.program(), row.shapes, dt, 5);
        Kernel k = einjit::compile(row.program, on(Device::cuda(), dt));
        compileCall(k, in, row.scalars, dt);
        // The gradient program, with output gradients shaped like the outputs.
        Outputs y = ref.call(in, row.scalars);
        Kernel g = ref.gradient(row.wrt);
        std::map<std::string, double> s = row.scalars;
        auto dys = g.gradientInputs();
        for (std::size_t i = 0; i < y.size(); ++i) {
          if (y[i].rank() == 0)
            s[dys[i]] = 0.5;
          else
            in[dys[i]] = Tensor::random(y[i].shape(), dt, 9);
        }
        std::map<std::string, Tensor> gin;
        for (const auto& n : g.tensorArguments()) gin[n] = in.at(n);
        std::map<std::string, double> gs;
        for (const auto& n : g.scalarArguments()) gs[n] = s.at(n);
        compileCall(einjit::compile(g.source(), on(Device::cuda(), dt)), gin, gs, dt);
        compiled += 2;
      } catch (const std::exception& e) {
        FAIL_CHECK("threw: " << std::string(e.what()));
      }
    }
  }
  MESSAGE("CUDA translation units compiled by NVRTC " << einjit::runtime::nvrtc::version() << ": "
                                                      << compiled);
  CHECK(compiled >= 400);
}

TEST_CASE("cuda: NVRTC compiles the benchmark's bf16 convolution gradients (no GPU needed)") {
  // NVVM in CUDA 13.0 crashed (in most runs, nondeterministically; nvcc too) on the input
  // gradient's kernel once its masked operand lost its bounds checks; masked operands keep
  // them (stageIndices). This test failed 6 runs in 8 without that.
  std::string why;
  REQUIRE_MESSAGE(einjit::runtime::nvrtc::available(&why), why);
  Kernel conv = einjit::compile("y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", on(Device::cuda()));
  const std::map<std::string, Tensor> t = {{"x", Tensor::zeros({32, 64, 56, 56}, DType::bf16)},
                                           {"k", Tensor::zeros({64, 64, 3, 3}, DType::bf16)},
                                           {"dy", Tensor::zeros({32, 64, 54, 54}, DType::bf16)}};
  for (const char* wrt : {"x", "k"}) {
    INFO("gradient for " << wrt);
    Kernel g = conv.gradient({wrt});
    std::map<std::string, Tensor> in;
    for (const auto& n : g.tensorArguments()) in[n] = t.at(n);
    compileCall(g, in, {}, DType::bf16);
  }
}

TEST_CASE("cuda: bf16 programs and their gradients compile through NVRTC (no GPU needed)") {
  std::string why;
  REQUIRE_MESSAGE(einjit::runtime::nvrtc::available(&why), why);
  for (const auto& row : kBf16Rows) {
    INFO(std::string(row.program));
    Kernel ref = einjit::compile(row.program, on(Device::reference(), DType::bf16));
    auto in = randomArgs(ref.program(), row.shapes, DType::bf16, 5);
    compileCall(einjit::compile(row.program, on(Device::cuda(), DType::bf16)), in, {}, DType::bf16);
  }
  // Two bf16 reads: the tensor-core tile, warpgroups on sm_90 (both operand layouts: A
  // k-major, B row-major), mma.sync before.
  Kernel mm = einjit::compile("C[i,k] := A[i,j] * B[j,k]", on(Device::cuda(), DType::bf16));
  const std::map<std::string, Tensor> ab = {{"A", Tensor::random({256, 256}, DType::bf16)},
                                            {"B", Tensor::random({256, 256}, DType::bf16)}};
  auto wg = cudaFor(mm, ab, {}, DType::bf16, 90);
  CHECK(wg.cuda.archSpecific);
  CHECK(wg.lowered.notes[0].find("wgmma m64n64k16") != std::string::npos);
  CHECK(wg.cuda.source.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") !=
        std::string::npos);
  CHECK(wg.cuda.source.find("p, 1, 1, 0, 1;") != std::string::npos); // A k-major, B transposed
  CHECK(wg.cuda.source.find("fence.proxy.async.shared::cta") != std::string::npos);
  CHECK(wg.cuda.source.find("u, 1ull)") != std::string::npos); // 128-byte swizzled operands
  CHECK(wg.cuda.source.find("__align__(1024)") != std::string::npos);
  CHECK(wg.cuda.source.find("ldmatrix") == std::string::npos);
  // Tiles and slices divide 256: every copy is unconditional (no src-size operand); all of a
  // slice's products are waited for before the next slice is issued.
  CHECK(wg.cuda.source.find("cp.async.cg.shared.global [%0], [%1], 16;") != std::string::npos);
  CHECK(wg.cuda.source.find("16, %2;") == std::string::npos);
  CHECK(wg.cuda.source.find("wgmma.wait_group.sync.aligned 0;") != std::string::npos);
  CHECK(wg.cuda.source.find("wgmma.wait_group.sync.aligned 1;") == std::string::npos);
  // Enough 128 x 256 tiles for every SM (18 x 9): the wide tile, 4 slices, copies 2 slices
  // ahead (waiting for all but the latest group), one slice's products left running and all
  // of them waited for after the loop.
  const std::map<std::string, Tensor> big = {{"A", Tensor::random({2304, 256}, DType::bf16)},
                                             {"B", Tensor::random({256, 2304}, DType::bf16)}};
  auto wide = cudaFor(mm, big, {}, DType::bf16, 90);
  CHECK(wide.lowered.notes[0].find("tile 128x256") != std::string::npos);
  CHECK(wide.cuda.source.find("m64n256k16.f32.bf16.bf16") != std::string::npos);
  CHECK(wide.cuda.source.find("cp.async.wait_group 1;") != std::string::npos);
  CHECK(wide.cuda.source.find("wgmma.wait_group.sync.aligned 1;") != std::string::npos);
  CHECK(wide.cuda.source.find("wgmma.wait_group.sync.aligned 0;") != std::string::npos);
  // 1024^3: 128 tiles of 128 x 64 and 16 slices each, not split (splitting 128 x 128 tiles
  // measured 1.6x slower).
  const std::map<std::string, Tensor> mid = {{"A", Tensor::random({1024, 1024}, DType::bf16)},
                                             {"B", Tensor::random({1024, 1024}, DType::bf16)}};
  const std::string midNote = cudaFor(mm, mid, {}, DType::bf16, 90).lowered.notes[0];
  CHECK(midNote.find("tile 128x64") != std::string::npos);
  CHECK(midNote.find("split-K") == std::string::npos);
  // An edge along the rows: those copies read only inside the operand (src-size 0 outside).
  const std::map<std::string, Tensor> edge = {{"A", Tensor::random({300, 256}, DType::bf16)},
                                              {"B", Tensor::random({256, 256}, DType::bf16)}};
  CHECK(cudaFor(mm, edge, {}, DType::bf16, 90).cuda.source.find("16, %2;") != std::string::npos);
  auto old = cudaFor(mm, ab, {}, DType::bf16, 80);
  CHECK(!old.cuda.archSpecific);
  CHECK(old.lowered.notes[0].find("mma.sync m16n8k16") != std::string::npos);
  CHECK(old.cuda.source.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") !=
        std::string::npos);
  CHECK(old.cuda.source.find("wgmma") == std::string::npos);
  // At most 64 rows (a convolution's 48 output channels) and enough columns: the mma.sync
  // tile of 64 x 256, on either architecture (its input is staged through registers).
  Kernel conv =
      einjit::compile("y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", on(Device::cuda(), DType::bf16));
  const std::map<std::string, Tensor> xk = {{"x", Tensor::random({2, 8, 20, 20}, DType::bf16)},
                                            {"k", Tensor::random({48, 8, 3, 3}, DType::bf16)}};
  for (int arch : {80, 90}) {
    const std::string note = cudaFor(conv, xk, {}, DType::bf16, arch).lowered.notes[0];
    CHECK(note.find("tile 64x256 over (o) x (n,h,w), 8 warps (1x8) of 64x32") != std::string::npos);
  }
  // The tensor-core tiles end through shared memory: accumulators into a padded f32 tile, then
  // rows written by consecutive threads.
  CHECK(old.cuda.source.find("float* const l_tile_dC") != std::string::npos);
  // ... in the bytes the slices used (a shared buffer lives for its Allocate's body): the
  // launch asks for 2 slices of A (128 rows of 64 + 8 bf16) and B (64 rows of 128 + 8 bf16),
  // 36864 + 34816 bytes, which the 128 x (128 + 4) f32 epilogue tile (67584) fits into.
  CHECK(old.cuda.source.find("l_tile_dC = (float*)(ej_smem + 0);") != std::string::npos);
  CHECK(old.cuda.kernels.at(0).sharedBytes == 36864 + 34816);
  CHECK(wide.cuda.source.find("float* const l_tile_dC") != std::string::npos);
  // explain shows the code of the device's architecture (without a GPU: sm_90).
  std::string text = mm.explain({ab.at("A"), ab.at("B")});
  CHECK(text.find("tensor cores") != std::string::npos);
  CHECK(text.find(einjit::runtime::codeArch(0) == 90 ? "wgmma.mma_async" : "mma.sync.aligned") !=
        std::string::npos);
}

TEST_CASE("cuda: a compile error carries NVRTC's log and the numbered source") {
  try {
    einjit::runtime::nvrtc::compile("extern \"C\" __global__ void k() { undefined_name(); }", 90);
    FAIL("no error");
  } catch (const einjit::Error& e) {
    std::string m = e.what();
    CHECK(m.find("undefined_name") != std::string::npos);
    CHECK(m.find("    1 | extern") != std::string::npos);
  }
}

TEST_CASE("cuda: code for an architecture's own instructions compiles for exactly that one") {
  const std::string src = "extern \"C\" __global__ void k(float* p) { p[0] = 1.0f; }";
  auto c = einjit::runtime::nvrtc::compile(src, 90, true);
  CHECK(c.cubin);
  CHECK(c.target == "sm_90a");
  // An architecture NVRTC does not know: PTX for an older one, unless the code needs its own.
  auto ptx = einjit::runtime::nvrtc::compile(src, 91, false);
  CHECK(!ptx.cubin);
  CHECK(ptx.target == "compute_90");
  try {
    einjit::runtime::nvrtc::compile(src, 91, true);
    FAIL("no error");
  } catch (const einjit::Error& e) {
    CHECK(std::string(e.what()).find("cannot compile for compute capability 9.1") !=
          std::string::npos);
  }
}

TEST_CASE("cuda: scatters add atomically, one thread per element (no GPU needed)") {
  Tensor tok = Tensor::fromValues({6}, {3, 1, 3, 0, 3, 1}, DType::i64);
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    INFO(dtypeName(dt));
    Kernel emb = einjit::compile(kEmbeddingGrad, on(Device::cuda(), dt));
    std::vector<Tensor> in = {Tensor::zeros({4, 70}, dt), tok, Tensor::random({6, 70}, dt)};
    const std::string text = emb.explain(args(in));
    CHECK(text.find("one GPU thread per element of (b,d), atomic adds into") != std::string::npos);
    // The tokens are checked first, by a kernel of their own (a thread per token).
    CHECK(text.find("# launch ej_s0_check0: 1 block(s) of 6 thread(s)") != std::string::npos);
    CHECK(text.find("(void)(((int)ej_check(b_tok[") != std::string::npos);
    // bf16: the adds go to an f32 copy (rounded once at the end, as the interpreter does).
    CHECK(text.find(dt == DType::bf16 ? "atomicAdd(&b_s0_dwide[" : "atomicAdd(&b_dE[") !=
          std::string::npos);
    if (dt == DType::bf16) {
      CHECK(text.find("an f32 copy of dE, rounded to bf16 once") != std::string::npos);
      // 6 x 70 points, 4 x 70 elements: the whole table widened and rounded back.
      CHECK(text.find("# launch ej_s0_widen: 2 block(s) of 256 thread(s)") != std::string::npos);
      CHECK(text.find("# launch ej_s0_narrow: 2 block(s) of 256 thread(s)") != std::string::npos);
      // 50 x 70 elements: only the tokens' rows, a thread per point (b,d).
      std::vector<Tensor> big = {Tensor::zeros({50, 70}, dt), tok, Tensor::random({6, 70}, dt)};
      const std::string rows = emb.explain(args(big));
      CHECK(rows.find("# launch ej_s0_widen: 2 block(s) of 256 thread(s)") != std::string::npos);
      CHECK(rows.find("b_s0_dwide[((((int)ej_check(b_tok[") != std::string::npos);
      CHECK(rows.find("b_dE[((((int)ej_check(b_tok[") != std::string::npos);
    }
    compileCall(emb, byName(emb, args(in)), {}, dt);
    Kernel ola = einjit::compile(kOverlapAdd, on(Device::cuda(), dt));
    std::vector<Tensor> in2 = {Tensor::zeros({41}, dt), Tensor::random({20}, dt),
                               Tensor::random({3}, dt)};
    CHECK(ola.explain(args(in2)).find(dt == DType::bf16
                                          ? "atomic adds into an f32 copy of y"
                                          : "atomic adds into y") != std::string::npos);
    compileCall(ola, byName(ola, args(in2)), {}, dt);
  }
}

TEST_CASE("cuda: a convolution's input gradient tiles: masked ranges, residue phases for strides "
          "(no GPU needed)") {
  for (const ConvCase& c : kConvGrads)
    for (DType dt : {DType::f32, DType::bf16}) {
      INFO(std::string(c.program) << " " << dtypeName(dt));
      auto [dgrad, in] = dgradOf(c, dt);
      const std::string text = dgrad.explain(args(in));
      CHECK(text.find(dt == DType::bf16 ? "GPU tensor cores" : "GPU tile") != std::string::npos);
      CHECK(text.find("masked to their ranges") != std::string::npos);
      CHECK(text.find("border") == std::string::npos);
      if (c.stride > 1)
        CHECK(text.find(std::to_string(c.stride * c.stride) + " residue phases (u = " +
                        std::to_string(c.stride) + "q + r, h = q + m") != std::string::npos);
      if (c.k[0] == 2048 && dt == DType::f32) CHECK(text.find("split-K") != std::string::npos);
      // The phases run in one launch, unless split-K adds a combining pass to each or their
      // tiles are warpgroup tiles.
      if (c.stride > 1) {
        const bool apart =
            text.find("split-K") != std::string::npos || text.find("wgmma") != std::string::npos;
        CHECK((text.find("; the phases in one launch") != std::string::npos) == !apart);
        CHECK(occurrences(text, "# launch ej_s0_phases:") == (apart ? 0 : 1));
        CHECK(occurrences(text, "# launch ej_s0_phase00:") == (apart ? 1 : 0));
      }
      // Stride 1: the masked operand's dividing indices (the reduction's (o,a,b)) come from
      // shared tables, the weights' row offsets from a table. (The phases' reductions divide
      // by powers of two, and their weights are not unit-stride along them.)
      // Where the slice length (64 bf16, 16 f32) divides o, the reduction runs as (a,b,o): a
      // slice lies in one tap, its masks and offsets the same for a thread's whole slice.
      const std::int64_t slice = dt == DType::bf16 ? 64 : 16;
      if (c.stride == 1 && c.k[0] % slice == 0) {
        CHECK(text.find("slices of " + std::to_string(slice) + " along (a,b,o)") !=
              std::string::npos);
        CHECK(text.find("(reduction indices from tables)") == std::string::npos);
      } else if (c.stride == 1) {
        CHECK(text.find("along (o,a,b)") != std::string::npos);
        CHECK(text.find("(reduction indices from tables)") != std::string::npos);
        CHECK(text.find("(row offsets from a table)") != std::string::npos);
      }
      // bf16, o at least 16 and a multiple of 8: dy and k copied once with o fastest (the
      // reduction (a,b,o), in phases (h,w,o)), both operands staged by 16-byte copies, the
      // masked one zero-filled outside its ranges.
      const bool relaid = dt == DType::bf16 && c.k[0] >= 16 && c.k[0] % 8 == 0;
      CHECK((text.find("tile.A by 16-byte asynchronous copies, tile.B by 16-byte asynchronous "
                       "copies (over the hull of (") != std::string::npos) == relaid);
      CHECK((text.find("; dy, k copied first to layouts with o fastest") != std::string::npos) ==
            relaid);
      CHECK(occurrences(text, "# launch ej_s0_relayout_dy:") == (relaid ? 1 : 0));
      // bf16 phases staging dy through registers: its rows (n, q_u, q_v) from tables.
      if (c.stride > 1 && dt == DType::bf16 && !relaid)
        CHECK(text.find("(row indices from tables)") != std::string::npos);
      // The masked operand reads without bounds checks (its ranges were solved from them).
      CHECK(text.find("ej_check") == std::string::npos);
      compileCall(dgrad, byName(dgrad, args(in)), {}, dt);
    }
}

TEST_CASE("cuda: tiles copy aligned operands 16 bytes at a time, others through registers (no "
          "GPU needed)") {
  for (DType dt : {DType::f32, DType::bf16})
    for (const auto& [program, shapes, f32, bf16] : kVectorTiles) {
      INFO(std::string(program) << " " << dtypeName(dt));
      Kernel k = einjit::compile(program, on(Device::cuda(), dt));
      std::vector<Tensor> in = randomInputs(k, shapes, dt);
      const std::string fast = k.explain(args(in));
      const int vectors = dt == DType::f32 ? f32 : bf16;
      CHECK(fast.find("slices in flight") != std::string::npos);
      CHECK(occurrences(fast, "by 16-byte asynchronous copies") == vectors);
      CHECK((fast.find("cp.async.cg.shared.global") != std::string::npos) == (vectors > 0));
      compileCall(k, byName(k, args(in)), {}, dt);
      // A host view's span is copied to fresh device memory: an offset pointer lands aligned,
      // rows that are not whole vectors do not. (The convolution's input always stages
      // through registers, and padded rows of weights are no longer contiguous along (c,a,b).)
      const bool conv = std::string(program).find("k[o,c,a,b]") != std::string::npos;
      for (auto [pad, first] : {std::pair<int, int>{8, 1}, {1, 0}}) {
        std::vector<Tensor> moved;
        for (const Tensor& t : in) moved.push_back(placed(t, pad, first));
        const std::string text = k.explain(args(moved));
        CHECK(occurrences(text, "by 16-byte asynchronous copies") ==
              (pad == 8 && !conv ? vectors : 0));
        CHECK((text.find("through registers") != std::string::npos) ==
              (pad == 1 || conv || vectors < 2));
        // The convolution's input is a single affine read proven in bounds: its rows' offsets
        // come from a shared table, the reduction's part is computed once a slice.
        if (conv) CHECK(text.find("(row offsets from a table)") != std::string::npos);
      }
    }
}

TEST_CASE("cuda: f32 tiles 112 and 96 wide where they pad less, split-K in any count of ranges "
          "(the Linear layer's gradients; no GPU needed)") {
  for (const auto& [program, shapes, note] : kOddTiles) {
    INFO(std::string(program));
    Kernel k = einjit::compile(program, on(Device::cuda(), DType::f32));
    std::vector<Tensor> in = randomInputs(k, shapes, DType::f32);
    CHECK(k.explain(args(in)).find(note) != std::string::npos);
    compileCall(k, byName(k, args(in)), {}, DType::f32);
  }
  // The Linear layer of bench/ (batch 4096, 784 -> 1024). Its forward: 32 x 8 tiles of 128 x
  // 128, whole. Its input gradient dx[b,i] (i in 0:784 = 7 x 112): 32 x 7 tiles of 128 x 112,
  // whole (224 tiles, 64 slices: two blocks on the busiest of 132 SMs either way). Its weight
  // gradient dw[o,i]: 8 x 7 = 56 tiles, 256 slices of the batch, ranges of at least 32 slices
  // (s <= 8); the busiest SM holds ceil(56 s / 132) blocks of ceil(256 / s) slices: s = 1..8
  // give 256 (x 1.1, one block), 128 (x 1.1), 2 x 86, 2 x 64, 3 x 52, 3 x 43, 3 x 37 = 111,
  // 4 x 32 = 128 slices: 7 ranges (the combine pass, 8 x 3.2 MB, costs less than 17 slices).
  Kernel fwd = einjit::compile("y[b,o] := x[b,i] * w[o,i]", on(Device::cuda(), DType::f32));
  Tensor x = Tensor::zeros({4096, 784}), w = Tensor::zeros({1024, 784});
  Tensor dy = Tensor::zeros({4096, 1024});
  const std::string f = fwd.explain({x, w});
  CHECK(f.find("GPU tile 128x128 over (b) x (o), 8x8 per thread") != std::string::npos);
  CHECK(f.find("split-K") == std::string::npos);
  std::map<std::string, Tensor> named = {{"x", x}, {"w", w}, {"dy", dy}};
  auto gradientNote = [&](const std::string& wrt) {
    Kernel g = fwd.gradient({wrt});
    std::vector<Arg> a;
    for (const auto& n : g.tensorArguments()) a.push_back(named.at(n));
    return g.explain(a);
  };
  const std::string gx = gradientNote("x"), gw = gradientNote("w");
  CHECK(gx.find("GPU tile 128x112 over (b) x (i), 8x7 per thread") != std::string::npos);
  CHECK(gx.find("split-K") == std::string::npos);
  CHECK(gw.find("GPU tile 128x112 over (o) x (i), 8x7 per thread") != std::string::npos);
  CHECK(gw.find("split-K: 7 ranges of 37 slices") != std::string::npos);
  CHECK(gw.find("ej_s0: 392 block(s)") != std::string::npos);
}

TEST_CASE("cuda: bf16 warpgroup tiles (wgmma, sm_90a) compile through NVRTC (no GPU needed)") {
  for (const auto& [program, shapes, width, rows] : kWarpgroupTiles) {
    INFO(std::string(program));
    Kernel k = einjit::compile(program, on(Device::cuda(), DType::bf16));
    std::vector<Tensor> in = randomInputs(k, shapes, DType::bf16);
    auto cp = cudaFor(k, byName(k, args(in)), {}, DType::bf16, 90);
    const std::string& note = cp.lowered.notes[0];
    CHECK(note.find("wgmma m64n" + std::to_string(width) + "k16") != std::string::npos);
    const int cols = rows == 64 ? 2 * width : width;
    CHECK(note.find("tile " + std::to_string(rows) + "x" + std::to_string(cols) + " over") !=
          std::string::npos);
    CHECK((note.find("2 warpgroups side by side of 64x") != std::string::npos) == (rows == 64));
    CHECK(note.find("by 16-byte asynchronous copies") != std::string::npos);
    // The 256-wide tile keeps one slice's products running; it and the 64-wide one 4 slices.
    CHECK((note.find("4 slices in flight") != std::string::npos) == (width != 128));
    CHECK((note.find("products of one slice running") != std::string::npos) == (width == 256));
    CHECK(cp.cuda.archSpecific);
    if (shapes.at("A").back() == 2048)
      CHECK(cp.lowered.notes[0].find("split-K") != std::string::npos);
    compileCall(k, byName(k, args(in)), {}, DType::bf16);
  }
  // Below a full tile, or a single slice, the mma.sync tile (measured faster there).
  Kernel small = einjit::compile("C[i,k] := A[i,j] * B[j,k]", on(Device::cuda(), DType::bf16));
  const std::map<std::string, Tensor> thin = {{"A", Tensor::random({64, 512}, DType::bf16)},
                                              {"B", Tensor::random({512, 300}, DType::bf16)}};
  CHECK(cudaFor(small, thin, {}, DType::bf16, 90).lowered.notes[0].find("mma.sync") !=
        std::string::npos);
}

TEST_CASE("cuda: tensor-core tiles store the output 16 bytes at a time where its rows are whole "
          "vectors, cell by cell otherwise") {
  std::string why;
  REQUIRE_MESSAGE(einjit::runtime::nvrtc::available(&why), why);
  Kernel k = einjit::compile("C[i,k] := A[i,j] * B[j,k]", on(Device::cuda(), DType::bf16));
  for (std::int64_t cols : {200, 202})
    for (int arch : {80, 90}) {
      INFO(cols << " columns, sm_" << arch);
      const std::map<std::string, Tensor> ab = {{"A", Tensor::random({300, 264}, DType::bf16, 1)},
                                                {"B", Tensor::random({264, cols}, DType::bf16, 2)}};
      auto cp = cudaFor(k, ab, {}, DType::bf16, arch);
      const bool whole = cols % 8 == 0;
      CHECK(cp.lowered.notes[0].find("GPU tensor cores") != std::string::npos);
      CHECK((cp.lowered.notes[0].find("the output stored 16 bytes at a time") !=
             std::string::npos) == whole);
      CHECK((cp.cuda.source.find("*reinterpret_cast<uint4*>(&b_C[") != std::string::npos) == whole);
      auto c = einjit::runtime::nvrtc::compile(cp.cuda.source, arch, cp.cuda.archSpecific);
      CHECK(!c.image.empty());
    }
  // '+=' and split reductions read or add what is there: cell by cell.
  Kernel acc = einjit::compile("C[i,k] += A[i,j] * B[j,k]", on(Device::cuda(), DType::bf16));
  const std::map<std::string, Tensor> abc = {{"A", Tensor::random({300, 264}, DType::bf16, 1)},
                                             {"B", Tensor::random({264, 200}, DType::bf16, 2)},
                                             {"C", Tensor::random({300, 200}, DType::bf16, 3)}};
  CHECK(cudaFor(acc, abc, {}, DType::bf16, 90).lowered.notes[0].find("16 bytes at a time") ==
        std::string::npos);
}

TEST_CASE("cuda: split reductions generate CUDA that NVRTC compiles (no GPU needed)") {
  std::string why;
  REQUIRE_MESSAGE(einjit::runtime::nvrtc::available(&why), why);
  // The GPU policy splits every case at 10^6+3 and none of the short ones.
  CHECK(compileSplitCases({7, 257, 1000003}) == 2 * largeSplitCases());
  {
    // Forced: every case at every size, single chunks included; every interpreter-table row.
    ForcedSplit forced(tinySplitPolicy(true));
    CHECK(compileSplitCases({1, 7, 33}) == static_cast<int>(splitCases().size()) * 3 * 2);
    for (const auto& row : einjit::test::interp::rows()) {
      INFO(std::string(row.program));
      for (DType dt : {DType::f32, DType::f64}) {
        try {
          Kernel k = einjit::compile(row.program, on(Device::cuda(), dt));
          std::vector<Arg> args = convertedArgs(row.args, dt);
          compileCall(k, byName(k, args), scalarsOf(k, args), dt);
        } catch (const std::exception& e) {
          FAIL_CHECK("threw: " << std::string(e.what()));
        }
      }
    }
  }
  // Launch shapes: a block per chunk and a one-thread combine for a scalar; a block per row and
  // no combine when each row is one chunk.
  Kernel dot = einjit::compile("s := x[i] * y[i]", on(Device::cuda(), DType::f32));
  Tensor x = Tensor::random({1000003}, DType::f32, 1);
  std::string text = dot.explain({x, x.clone()});
  CAPTURE(text);
  CHECK(text.find("# statement 1: split reduction: 244 chunks of 4099 iterations of (i), one "
                  "block each, tree in shared memory, partials combined in chunk order") !=
        std::string::npos);
  CHECK(text.find("# launch ej_s0: 244 block(s) of 256 thread(s)") != std::string::npos);
  CHECK(text.find("# launch ej_s0_combine: 1 block(s) of 1 thread(s)") != std::string::npos);
  CHECK(text.find("__syncthreads();") != std::string::npos);
  Kernel rows = einjit::compile("y[i] := A[i,j]", on(Device::cuda(), DType::f32));
  std::string t2 = rows.explain({Tensor::random({3000, 5000}, DType::f32, 2)});
  CAPTURE(t2);
  CHECK(t2.find("# launch ej_s0: 3000 block(s) of 256 thread(s)") != std::string::npos);
  CHECK(t2.find("combine") == std::string::npos);
}

TEST_CASE(
    "cuda: NVRTC compiles a chain at the expression limit, forward and gradient (no GPU needed)") {
  // Every operation is parenthesised in the CUDA C, so the deepest expression the parser
  // accepts (kMaxExprHeight) nests as many parentheses.
  std::string why;
  REQUIRE_MESSAGE(einjit::runtime::nvrtc::available(&why), why);
  std::string program = "y[i] := x[i, 0]";
  for (int t = 1; t < 510; ++t)
    program += " + x[i, " + std::to_string(t % 7) + "] * " + std::to_string(t);
  for (DType dt : {DType::f32, DType::f64}) {
    Kernel k = einjit::compile(program, on(Device::cuda(), dt));
    Tensor x = Tensor::random({3, 7}, dt, 1);
    compileCall(k, {{"x", x}}, {}, dt);
    Kernel g = einjit::compile(k.gradient().source(), on(Device::cuda(), dt));
    compileCall(g, {{"x", x}, {"dy", Tensor::random({3}, dt, 2)}}, {}, dt);
  }
}
