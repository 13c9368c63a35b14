// The CUDA backend's schedules and IR without a GPU or NVRTC: the code architecture, explain's
// kernels and launch shapes, relayout copies around tiles, the IR nodes the GPU tiles use
// (integer xor for swizzles, vector copies), as printed and emitted, and the GPU schedule table.
#include "Compare.h"
#include "CudaCompile.h"
#include "CudaTestSupport.h"

#include "codegen/CodeGenCUDA.h"
#include "codegen/IR.h"
#include "codegen/Lower.h"
#include "runtime/CallLayout.h"
#include "runtime/CudaBackend.h"
#include "runtime/Nvrtc.h"

#include <doctest/doctest.h>

#include <cstdlib>

using namespace einjit::test;

TEST_CASE("cuda: EINJIT_CUDA_ARCH selects an older code architecture, never a newer one") {
  const char* had = std::getenv("EINJIT_CUDA_ARCH");
  const std::string saved = had ? had : "";
  unsetenv("EINJIT_CUDA_ARCH");
  const int own = einjit::runtime::codeArch(0); // the device's, 90 without a GPU
  auto with = [](const char* v) {
    setenv("EINJIT_CUDA_ARCH", v, 1);
    return einjit::runtime::codeArch(0);
  };
  CHECK(with("sm_80") == std::min(80, own));
  CHECK(with("75") == std::min(75, own));
  CHECK(with("1000") == own);
  CHECK(with("sm_8x") == own);
  CHECK(with("") == own);
  if (had)
    setenv("EINJIT_CUDA_ARCH", saved.c_str(), 1);
  else
    unsetenv("EINJIT_CUDA_ARCH");
}

TEST_CASE("cuda: explain --cuda prints the kernels and their launch shapes (no GPU needed)") {
  Kernel k = einjit::compile("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
                             on(Device::cuda(), DType::f32));
  Tensor x = Tensor::random({2, 3, 9, 9}, DType::f32, 1),
         w = Tensor::random({4, 3, 3, 3}, DType::f32, 2);
  std::string text = k.explain({x, w});
  CAPTURE(text);
  CHECK(text.find("__global__") != std::string::npos);
  CHECK(text.find("# launch ej_s0: 1 block(s) of 128 thread(s)") != std::string::npos);
  CHECK(text.find("__restrict__") != std::string::npos);
}

TEST_CASE("cuda: tensors with their unit stride on a batch index go through batch-outermost "
          "copies around the tile; convolution inputs through channel-fast ones") {
  std::string why;
  REQUIRE_MESSAGE(einjit::runtime::nvrtc::available(&why), why);
  auto launches = [](const einjit::runtime::CudaProgram& cp) {
    std::string names;
    for (const auto& k : cp.cuda.kernels) names += (names.empty() ? "" : " ") + k.name;
    return names;
  };
  const std::map<std::string, Tensor> ab = {{"A", Tensor::random({65, 40, 3})},
                                            {"B", Tensor::random({3, 70, 40})}};
  // A[i,j,b] and C[i,k,b] move fastest along b: A is transposed into a copy, the tile writes C
  // into one and it is transposed back; B[b,k,j] is read as it is. ':=' covers C: no copy in.
  Kernel perm = einjit::compile("C[i,k,b] := A[i,j,b] * B[b,k,j]", on(Device::cuda()));
  for (int arch : {80, 90}) {
    auto cp = cudaFor(perm, ab, {}, DType::f32, arch);
    CHECK(cp.lowered.notes[0].find("A, C copied first to batch-outermost layouts") !=
          std::string::npos);
    CHECK(launches(cp) == "ej_s0_relayout_A ej_s0 ej_s0_relayout_back");
    CHECK(cp.lowered.scratch.size() == 2);
    CHECK(cp.lowered.scratch.at(0).bytes() == 65 * 40 * 3 * 4);
  }
  // bf16: the copies are bf16 too (2 bytes an element).
  const std::map<std::string, Tensor> ab16 = {{"A", Tensor::random({65, 40, 3}, DType::bf16)},
                                              {"B", Tensor::random({3, 70, 40}, DType::bf16)}};
  Kernel perm16 =
      einjit::compile("C[i,k,b] := A[i,j,b] * B[b,k,j]", on(Device::cuda(), DType::bf16));
  auto cp16 = cudaFor(perm16, ab16, {}, DType::bf16, 90);
  CHECK(cp16.lowered.notes[0].find("tensor cores") != std::string::npos);
  CHECK(cp16.lowered.scratch.at(0).bytes() == 65 * 40 * 3 * 2);
  // '+=' reads C: it is copied in as well.
  Kernel acc = einjit::compile("C[i,k,b] += A[i,j,b] * B[b,k,j]", on(Device::cuda()));
  std::map<std::string, Tensor> abc = ab;
  abc.emplace("C", Tensor::random({65, 70, 3}));
  CHECK(launches(cudaFor(acc, abc, {}, DType::f32, 90)) ==
        "ej_s0_relayout_A ej_s0_relayout_C ej_s0 ej_s0_relayout_back");
  // Batch indices already outermost: no copies.
  Kernel bmm = einjit::compile("C[b,i,k] := A[b,i,j] * B[b,j,k]", on(Device::cuda()));
  const std::map<std::string, Tensor> outer = {{"A", Tensor::random({3, 70, 33})},
                                               {"B", Tensor::random({3, 33, 90})}};
  auto plain = cudaFor(bmm, outer, {}, DType::f32, 90);
  CHECK(launches(plain) == "ej_s0");
  CHECK(plain.lowered.notes[0].find("batch-outermost") == std::string::npos);
  // bf16 convolutions whose input is read 3 elements at a time along (c,a,b): input and filter
  // copied with c fastest, the reduction run as (a,b,c), both staged by 16-byte copies.
  Kernel conv =
      einjit::compile("y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", on(Device::cuda(), DType::bf16));
  const std::map<std::string, Tensor> xk = {{"x", Tensor::random({4, 64, 20, 20}, DType::bf16)},
                                            {"k", Tensor::random({64, 64, 3, 3}, DType::bf16)}};
  auto fwd = cudaFor(conv, xk, {}, DType::bf16, 90);
  CHECK(fwd.lowered.notes[0].find("slices of 64 along (a,b,c)") != std::string::npos);
  CHECK(fwd.lowered.notes[0].find("tile.B by 16-byte asynchronous copies; x, k copied first to "
                                  "layouts with c fastest") != std::string::npos);
  CHECK(launches(fwd) == "ej_s0_relayout_x ej_s0_relayout_k ej_s0");
  // f32 tiles keep their inputs; so does a stride-1 weight gradient (runs of 18 along (h,w)).
  Kernel conv32 = einjit::compile("y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", on(Device::cuda()));
  const std::map<std::string, Tensor> xk32 = {{"x", Tensor::random({4, 64, 20, 20})},
                                              {"k", Tensor::random({64, 64, 3, 3})}};
  CHECK(cudaFor(conv32, xk32, {}, DType::f32, 90).lowered.notes[0].find("copied first") ==
        std::string::npos);
  const char* wgrad = "dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,h+a,w+b]";
  std::map<std::string, Tensor> dyx = {{"x", Tensor::random({16, 64, 20, 20}, DType::bf16)},
                                       {"dy", Tensor::random({16, 64, 18, 18}, DType::bf16)}};
  Kernel wg1 = einjit::compile(wgrad, on(Device::cuda(), DType::bf16));
  CHECK(cudaFor(wg1, dyx, {}, DType::bf16, 90).lowered.notes[0].find("copied first") ==
        std::string::npos);
  // A stride-2 weight gradient reads x one element at a time along (n,h,w): dy and x are
  // copied with the image index n fastest and the reduction runs as (h,w,n).
  Kernel wg2 = einjit::compile("dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,2h+a,2w+b]",
                               on(Device::cuda(), DType::bf16));
  dyx["dy"] = Tensor::random({16, 64, 9, 9}, DType::bf16);
  auto w2 = cudaFor(wg2, dyx, {}, DType::bf16, 90);
  CHECK(w2.lowered.notes[0].find("along (h,w,n)") != std::string::npos);
  CHECK(w2.lowered.notes[0].find("dy, x copied first to layouts with n fastest") !=
        std::string::npos);
}

TEST_CASE("cuda: the IR's integer xor (the swizzles) folds, prints, emits '^', integers only") {
  namespace ir = einjit::codegen::ir;
  std::int64_t v = 0;
  CHECK(ir::isConst(ir::binary(ir::BinOp::Xor, ir::intImm(5), ir::intImm(3)), &v));
  CHECK(v == 6);
  ir::Func f;
  f.name = "x";
  f.buffers = {{"out", ir::Type::i64}, {"in", ir::Type::f32}};
  f.body = ir::forLoop(
      "i", ir::intImm(0), ir::intImm(8), ir::ForKind::Serial,
      ir::store("out", ir::var("i"), ir::binary(ir::BinOp::Xor, ir::var("i"), ir::intImm(3))));
  ir::verify(f);
  CHECK(ir::print(f).find("^ 3") != std::string::npos);
  CHECK(einjit::codegen::emitCUDA({f}, "t_").source.find("(v_i ^ ") != std::string::npos);
  ir::Func g = f;
  g.buffers = {{"out", ir::Type::f32}, {"in", ir::Type::f32}};
  ir::Expr x = ir::load(ir::Type::f32, "in", ir::var("i"));
  g.body = ir::forLoop("i", ir::intImm(0), ir::intImm(8), ir::ForKind::Serial,
                       ir::store("out", ir::var("i"), ir::binary(ir::BinOp::Xor, x, x)));
  CHECK_THROWS_AS(ir::verify(g), einjit::InternalError);
}

TEST_CASE("cuda: the IR's vector copy prints, emits one 16-byte load and store, same types only") {
  namespace ir = einjit::codegen::ir;
  ir::Func f;
  f.name = "v";
  f.buffers = {{"out", ir::Type::bf16}, {"in", ir::Type::f32}};
  // Eight f32 values rounded into an aligned local vector, stored to out[8 i] at once.
  ir::Stmt fill =
      ir::forLoop("l", ir::intImm(0), ir::intImm(8), ir::ForKind::Unrolled,
                  ir::store("t", ir::var("l"),
                            ir::cast(ir::Type::bf16, ir::load(ir::Type::f32, "in", ir::var("l")))));
  f.body = ir::forLoop(
      "i", ir::intImm(0), ir::intImm(4), ir::ForKind::Serial,
      ir::allocate("t", ir::Type::bf16, 8,
                   ir::block({fill, ir::copyVector("out", ir::mul(ir::var("i"), ir::intImm(8)), "t",
                                                   ir::intImm(0), 16)})));
  ir::verify(f);
  CHECK(ir::print(f).find("copy.vector.16 out[") != std::string::npos);
  const std::string src = einjit::codegen::emitCUDA({f}, "t_").source;
  CHECK(src.find("__align__(16) unsigned short l_t[8];") != std::string::npos);
  CHECK(src.find("*reinterpret_cast<uint4*>(&b_out[") != std::string::npos);
  CHECK(src.find("*reinterpret_cast<const uint4*>(&l_t[") != std::string::npos);
  // out is written (not const) though no Store names it.
  CHECK(src.find("const unsigned short* __restrict__ b_out") == std::string::npos);
  ir::Func g = f;
  g.body = ir::copyVector("out", ir::intImm(0), "in", ir::intImm(0), 16); // bf16 <- f32
  CHECK_THROWS_AS(ir::verify(g), einjit::InternalError);
  CHECK_THROWS_AS(ir::copyVector("out", ir::intImm(0), "in", ir::intImm(0), 12),
                  einjit::InternalError);
}

// The GPU's schedule table, as test_schedule's is the CPU's: {program, shapes, dtype, code
// architecture} -> every statement's schedule value as `describe` prints it (the `einjit
// explain` note), exactly. One row per family and surrounding: the f32 tile, the two tensor-core
// families, split-K, residue phases, layout copies, a split reduction, one thread per element
// (generic, in place, atomic adds). A change to any GPU decision shows
// here as a changed line; GPU_SCHEDULES.md gives each rule.
TEST_CASE("cuda: the GPU schedule table (program, shapes, dtype, arch -> each statement's note)") {
  struct Row {
    const char* program;
    std::map<std::string, Shape> shapes;
    DType dtype;
    int arch;
    std::vector<std::string> notes;
  };
  const std::vector<Row> rows = {
      {"C[i,k] := A[i,j] * B[j,k]",
       {{"A", {512, 512}}, {"B", {512, 512}}},
       DType::f32,
       90,
       {"GPU tile 128x128 over (i) x (k), 8x8 per thread, shared-memory slices of 16 along (j), 4 "
        "slices in flight; tile.L by 4-byte asynchronous copies, tile.R by 16-byte asynchronous "
        "copies"}},
      {"C[i,k] := A[i,j] * B[j,k]",
       {{"A", {1024, 1024}}, {"B", {1024, 1024}}},
       DType::bf16,
       90,
       {"GPU tensor cores (wgmma m64n64k16 bf16, sm_90a, f32 accumulators, 128-byte swizzled "
        "operands): tile 128x64 over (i) x (k), 2 warpgroups of 64x64, shared-memory slices of 64 "
        "along (j), 4 slices in flight; tile.A by 16-byte asynchronous copies, tile.B by 16-byte "
        "asynchronous copies, the output stored 16 bytes at a time"}},
      {"C[i,k] := A[i,j] * B[j,k]",
       {{"A", {1024, 1024}}, {"B", {1024, 1024}}},
       DType::bf16,
       80,
       {"GPU tensor cores (mma.sync m16n8k16 bf16, f32 accumulators): tile 128x128 over (i) x (k), "
        "8 warps (2x4) of 64x32, shared-memory slices of 64 along (j), 2 slices in flight; tile.A "
        "by 16-byte asynchronous copies, tile.B by 16-byte asynchronous copies, split-K: 2 ranges "
        "of 8 slices, partials added in order"}},
      {"C[i,k] := A[i,j] * B[j,k]",
       {{"A", {64, 8192}}, {"B", {8192, 128}}},
       DType::f32,
       90,
       {"GPU tile 64x128 over (i) x (k), 4x8 per thread, shared-memory slices of 16 along (j), 2 "
        "slices in flight; tile.L through registers (row offsets from a table), tile.R by 16-byte "
        "asynchronous copies, split-K: 16 ranges of 32 slices, partials added in order"}},
      {"C[i,k,b] := A[i,j,b] * B[b,k,j]",
       {{"A", {256, 128, 8}}, {"B", {8, 256, 128}}},
       DType::f32,
       90,
       {"GPU tile 128x128 over (i) x (k), 8x8 per thread, shared-memory slices of 16 along (j), "
        "one tile row per (b), 4 slices in flight; tile.L by 16-byte asynchronous copies, tile.R "
        "by 16-byte asynchronous copies; A, C copied first to batch-outermost layouts (unit stride "
        "on a batch index)"}},
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {8, 64, 30, 30}}, {"k", {64, 64, 3, 3}}},
       DType::f32,
       90,
       {"GPU tile 64x128 over (o) x (n,h,w), 4x8 per thread, shared-memory slices of 16 along "
        "(c,a,b), 2 slices in flight; tile.L by 4-byte asynchronous copies, tile.R through "
        "registers (row offsets from a table)"}},
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {8, 64, 30, 30}}, {"k", {64, 64, 3, 3}}},
       DType::bf16,
       90,
       {"GPU tensor cores (wgmma m64n64k16 bf16, sm_90a, f32 accumulators, 128-byte swizzled "
        "operands): tile 64x128 over (o) x (n,h,w), 2 warpgroups side by side of 64x64, "
        "shared-memory slices of 64 along (a,b,c), 4 slices in flight; tile.A by 16-byte "
        "asynchronous copies, tile.B by 16-byte asynchronous copies, the output stored 16 bytes at "
        "a time; x, k copied first to layouts with c fastest, the reduction run with c last (whole "
        "16-byte vectors)"}},
      // The stride-2 convolution's input gradient (x 8x64x29x29) as Kernel::gradient writes it.
      {"dx[n,c,u,v] := dy[n,o,h,w] * k[o,c,u-2h,v-2w] where u in 0:29, v in 0:29, "
       "h in max(0, cdiv(u-2, 2)):min(14, fdiv(u, 2)+1), w in max(0, cdiv(v-2, 2)):min(14, "
       "fdiv(v, 2)+1)",
       {{"dy", {8, 64, 14, 14}}, {"k", {64, 64, 3, 3}}},
       DType::f32,
       90,
       {"4 residue phases (u = 2q + r, h = q + m, v = 2q + r, w = q + m), each: GPU tile 64x112 "
        "over (c) x (n,u,v), 4x7 per thread, shared-memory slices of 16 along (h,w,o), 2 slices in "
        "flight; tile.L through registers, tile.R through registers (over the hull of (h,w), "
        "masked to their ranges); the phases in one launch"}},
      // A 1-d convolution's input gradient (x of 100000, w of 1000).
      {"dx[u] := dy[u-k] * w[k] where u in 0:100000, k in max(u+1000-100000, 0):min(u+1, 1000)",
       {{"dy", {99001}}, {"w", {1000}}},
       DType::f32,
       90,
       {"generic: output indices in left-hand order, reductions inside"}},
      {"s := x[i] * x[i]",
       {{"x", {1 << 20}}},
       DType::f32,
       90,
       {"split reduction: 256 chunks of 4096 iterations of (i), one block each, tree in shared "
        "memory, partials combined in chunk order"}},
      {"y[i] = y[i] * 0.5 + x[i]",
       {{"y", {4096}}, {"x", {4096}}},
       DType::f32,
       90,
       {"one GPU thread per element, in place"}},
      {"y[tok[b], d] += x[b, d]",
       {{"y", {100, 64}}, {"tok", {512}}, {"x", {512, 64}}},
       DType::f32,
       90,
       {"one GPU thread per element of (b,d), atomic adds into y (several land on one element: "
        "their order, and the sum's last bits, vary between runs)"}},
      {"y[b,d] := E[tok[b], d]\nz[d] := y[b,d]",
       {{"E", {100, 64}}, {"tok", {512}}},
       DType::bf16,
       90,
       {"generic: output indices in left-hand order, reductions inside",
        "generic: output indices in left-hand order, reductions inside"}},
  };
  for (const Row& r : rows) {
    CAPTURE(r.program);
    CAPTURE(r.arch);
    Kernel k = einjit::compile(r.program, on(Device::cuda(), r.dtype));
    std::map<std::string, Tensor> in;
    for (int id : k.program().arguments) {
      const auto& t = k.program().tensors[static_cast<std::size_t>(id)];
      in[t.name] = t.readAsIndex ? Tensor::randomInt(r.shapes.at(t.name), 0, 2, DType::i64, 1)
                                 : Tensor::random(r.shapes.at(t.name), r.dtype, 1);
    }
    const auto cp = cudaFor(k, in, {}, r.dtype, r.arch);
    CHECK(cp.lowered.notes == r.notes);
    if (std::getenv("EINJIT_PRINT_NOTES"))
      for (const std::string& n : cp.lowered.notes) MESSAGE(n);
  }
}

// The GPU plan of each statement (schedule/GpuStatementPlan.h), decided as lowering decides it
// but without lowering anything (codegen::planGpuStatement): the family, each tile's shape,
// staging, stages and split-K, the residue phases' split and the layout copies, as `describe`
// prints the plan. The rows are those of the schedule table above; the lowered note of each
// tiled row must start with the plan's, so the plan is the one lowering carries out.
TEST_CASE("cuda: the GPU plan of a statement, without lowering (program, shapes -> the plan)") {
  using Family = einjit::codegen::GpuStatementPlan::Family;
  struct Row {
    const char* program;
    std::map<std::string, Shape> shapes;
    DType dtype;
    int arch;
    Family family;
    std::string plan;
    std::size_t tiles; // the tiles the plan holds (one per residue phase)
  };
  const char* strided = "dx[n,c,u,v] := dy[n,o,h,w] * k[o,c,u-2h,v-2w] where u in 0:29, v in 0:29, "
                        "h in max(0, cdiv(u-2, 2)):min(14, fdiv(u, 2)+1), w in max(0, "
                        "cdiv(v-2, 2)):min(14, fdiv(v, 2)+1)";
  const std::vector<Row> rows = {
      {"C[i,k] := A[i,j] * B[j,k]",
       {{"A", {512, 512}}, {"B", {512, 512}}},
       DType::f32,
       90,
       Family::Tile,
       "GPU tile 128x128 over (i) x (k), 8x8 per thread, shared-memory slices of 16 along (j), 4 "
       "slices in flight; tile.L by 4-byte asynchronous copies, tile.R by 16-byte asynchronous "
       "copies",
       1},
      {"C[i,k] := A[i,j] * B[j,k]",
       {{"A", {1024, 1024}}, {"B", {1024, 1024}}},
       DType::bf16,
       80,
       Family::Tile,
       "GPU tensor cores (mma.sync m16n8k16 bf16, f32 accumulators): tile 128x128 over (i) x (k), "
       "8 warps (2x4) of 64x32, shared-memory slices of 64 along (j), 2 slices in flight; tile.A "
       "by 16-byte asynchronous copies, tile.B by 16-byte asynchronous copies, split-K: 2 ranges "
       "of 8 slices, partials added in order",
       1},
      {"C[i,k,b] := A[i,j,b] * B[b,k,j]",
       {{"A", {256, 128, 8}}, {"B", {8, 256, 128}}},
       DType::f32,
       90,
       Family::Tile,
       "GPU tile 128x128 over (i) x (k), 8x8 per thread, shared-memory slices of 16 along (j), one "
       "tile row per (b), 4 slices in flight; tile.L by 16-byte asynchronous copies, tile.R by "
       "16-byte asynchronous copies; A, C copied first to batch-outermost layouts (unit stride on "
       "a batch index)",
       1},
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
       {{"x", {8, 64, 30, 30}}, {"k", {64, 64, 3, 3}}},
       DType::bf16,
       90,
       Family::Tile,
       "GPU tensor cores (wgmma m64n64k16 bf16, sm_90a, f32 accumulators, 128-byte swizzled "
       "operands): tile 64x128 over (o) x (n,h,w), 2 warpgroups side by side of 64x64, "
       "shared-memory slices of 64 along (a,b,c), 4 slices in flight; tile.A by 16-byte "
       "asynchronous copies, tile.B by 16-byte asynchronous copies, the output stored 16 bytes at "
       "a time; x, k copied first to layouts with c fastest, the reduction run with c last (whole "
       "16-byte vectors)",
       1},
      {strided,
       {{"dy", {8, 64, 14, 14}}, {"k", {64, 64, 3, 3}}},
       DType::f32,
       90,
       Family::Phases,
       "4 residue phases (u = 2q + r, h = q + m, v = 2q + r, w = q + m), each: GPU tile 64x112 "
       "over (c) x (n,u,v), 4x7 per thread, shared-memory slices of 16 along (h,w,o), 2 slices in "
       "flight; tile.L through registers, tile.R through registers (over the hull of (h,w), masked "
       "to their ranges)",
       4},
      {"dx[u] := dy[u-k] * w[k] where u in 0:100000, k in max(u+1000-100000, 0):min(u+1, 1000)",
       {{"dy", {99001}}, {"w", {1000}}},
       DType::f32,
       90,
       Family::Threads,
       "one GPU thread per element",
       0},
      {"s := x[i] * x[i]", {{"x", {1 << 20}}}, DType::f32, 90, Family::Split, "split reduction", 0},
      {"y[i] = y[i] * 0.5 + x[i]",
       {{"y", {4096}}, {"x", {4096}}},
       DType::f32,
       90,
       Family::InPlace,
       "one GPU thread per element, in place",
       0},
      {"y[tok[b], d] += x[b, d]",
       {{"y", {100, 64}}, {"tok", {512}}, {"x", {512, 64}}},
       DType::f32,
       90,
       Family::Atomic,
       "one GPU thread per element of (b,d), atomic adds into y (several land on one element: "
       "their order, and the sum's last bits, vary between runs)",
       0},
  };
  for (const Row& r : rows) {
    CAPTURE(r.program);
    CAPTURE(r.arch);
    Kernel k = einjit::compile(r.program, on(Device::cuda(), r.dtype));
    const auto& p = k.program();
    std::map<std::string, Tensor> in;
    std::vector<einjit::dsl::ArgSpec> specs;
    std::vector<std::vector<std::int64_t>> strides;
    for (int id : p.arguments) {
      const auto& t = p.tensors[static_cast<std::size_t>(id)];
      in[t.name] = t.readAsIndex ? Tensor::randomInt(r.shapes.at(t.name), 0, 2, DType::i64, 1)
                                 : Tensor::random(r.shapes.at(t.name), r.dtype, 1);
      specs.push_back({in[t.name].dtype(), in[t.name].shape()});
      strides.push_back(in[t.name].strides());
    }
    const auto bound = einjit::dsl::bind(p, specs, {}, r.dtype);
    const einjit::codegen::GpuStatementPlan plan = einjit::codegen::planGpuStatement(
        p, bound, einjit::runtime::callStrides(p, bound, strides),
        einjit::runtime::cudaTarget(r.arch), 0, einjit::codegen::Aligned16(p.tensors.size(), true));
    CHECK(plan.family == r.family);
    CHECK(describe(plan) == r.plan);
    CHECK(plan.tiles.size() == r.tiles);
    if (r.family == Family::Phases) {
      CHECK(plan.tiles.front().name == "s0_phase00");
      CHECK(plan.tiles.back().name == "s0_phase11");
    }
    if (!plan.tiled()) continue;
    // Lowering carries this plan out: its note is the plan's (the phases' launches merged
    // afterwards, where they are).
    std::string note = cudaFor(k, in, {}, r.dtype, r.arch).lowered.notes.at(0);
    CAPTURE(note);
    const std::string merged = "; the phases in one launch";
    if (const auto at = note.find(merged); at != std::string::npos) note.erase(at, merged.size());
    CHECK(note.rfind(describe(plan), 0) == 0);
  }
}

// Each GPU tile's schedule is in the plan, decided before anything is emitted
// (schedule/GpuSimtPlan.h, GpuTensorCorePlan.h, GpuStagingPlan.h): the family and shape, how each
// operand is staged, the slices in flight and split-K, for contiguous tensors on 16-byte aligned
// pointers. Lowering writes the note of the same tile.
TEST_CASE(
    "cuda: each GPU tile's shape, staging, stages and split-K in the plan, without lowering") {
  using einjit::codegen::GpuTileKind;
  struct Row {
    const char* program;
    std::map<std::string, Shape> shapes;
    DType dtype;
    int arch;
    GpuTileKind kind;
    std::int64_t BM, BN;
    int stages;
    std::int64_t splits, perSplit; // split-K: ranges of the reduction, slices in each
    std::vector<int> copyBytes;    // per operand: bytes per asynchronous copy, 0: registers
  };
  const char* matmul = "C[i,k] := A[i,j] * B[j,k]";
  const char* strided = "dx[n,c,u,v] := dy[n,o,h,w] * k[o,c,u-2h,v-2w] where u in 0:29, v in 0:29, "
                        "h in max(0, cdiv(u-2, 2)):min(14, fdiv(u, 2)+1), w in max(0, "
                        "cdiv(v-2, 2)):min(14, fdiv(v, 2)+1)";
  const std::vector<Row> rows = {
      // small
      {matmul,
       {{"A", {64, 64}}, {"B", {64, 64}}},
       DType::f32,
       90,
       GpuTileKind::Simt,
       64,
       64,
       2,
       1,
       4,
       {0, 16}},
      // long f32 reduction: row-major A copied 4 bytes at a time, every operand asynchronous
      {matmul,
       {{"A", {512, 512}}, {"B", {512, 512}}},
       DType::f32,
       90,
       GpuTileKind::Simt,
       128,
       128,
       4,
       1,
       32,
       {4, 16}},
      // strided operands (both transposed)
      {"C[i,k] := A[j,i] * B[k,j]",
       {{"A", {512, 512}}, {"B", {512, 512}}},
       DType::f32,
       90,
       GpuTileKind::Simt,
       128,
       128,
       4,
       1,
       32,
       {16, 4}},
      // split-K-sized: one tile (four), a long reduction cut into as many ranges as keep 512 of
      // it (8 slices) in each (f32: the cost model's best; bf16: doubling while blocks are few)
      {matmul,
       {{"A", {128, 65536}}, {"B", {65536, 128}}},
       DType::f32,
       90,
       GpuTileKind::Simt,
       128,
       128,
       2,
       128,
       32,
       {0, 16}},
      {matmul,
       {{"A", {256, 65536}}, {"B", {65536, 256}}},
       DType::bf16,
       80,
       GpuTileKind::MmaSync,
       128,
       128,
       2,
       128,
       8,
       {16, 16}},
      // wgmma-sized
      {matmul,
       {{"A", {4096, 4096}}, {"B", {4096, 4096}}},
       DType::bf16,
       90,
       GpuTileKind::Wgmma,
       128,
       256,
       4,
       1,
       64,
       {16, 16}},
      {matmul,
       {{"A", {4096, 4096}}, {"B", {4096, 4096}}},
       DType::bf16,
       80,
       GpuTileKind::MmaSync,
       128,
       128,
       2,
       1,
       64,
       {16, 16}},
      // residue phases of a strided convolution's input gradient: the last phase's tile
      {strided,
       {{"dy", {8, 64, 14, 14}}, {"k", {64, 64, 3, 3}}},
       DType::f32,
       90,
       GpuTileKind::Simt,
       64,
       112,
       2,
       1,
       4,
       {0, 0}},
  };
  for (const Row& r : rows) {
    CAPTURE(r.program);
    CAPTURE(r.arch);
    Kernel k = einjit::compile(r.program, on(Device::cuda(), r.dtype));
    const auto& p = k.program();
    std::vector<einjit::dsl::ArgSpec> specs;
    std::vector<std::vector<std::int64_t>> strides;
    for (int id : p.arguments) {
      const Shape& shape = r.shapes.at(p.tensors[static_cast<std::size_t>(id)].name);
      std::vector<std::int64_t> str(shape.size(), 1);
      for (std::size_t d = shape.size(); d-- > 1;) str[d - 1] = str[d] * shape[d];
      specs.push_back({r.dtype, shape});
      strides.push_back(str);
    }
    const auto bound = einjit::dsl::bind(p, specs, {}, r.dtype);
    const auto callStrides = einjit::runtime::callStrides(p, bound, strides);
    const einjit::codegen::Aligned16 aligned(p.tensors.size(), true);
    const einjit::codegen::Target target = einjit::runtime::cudaTarget(r.arch);
    const auto plan = einjit::codegen::planGpuStatement(p, bound, callStrides, target, 0, aligned);
    REQUIRE(plan.tiled());
    const einjit::codegen::GpuTilePlan& t = plan.tiles.back().tile;
    CAPTURE(describe(plan));
    CHECK(t.kind == r.kind);
    CHECK(t.BM == r.BM);
    CHECK(t.BN == r.BN);
    CHECK(t.stages == r.stages);
    CHECK(t.splits == r.splits);
    CHECK(t.perSplit == r.perSplit);
    std::vector<int> copies;
    for (const auto& o : t.operands) copies.push_back(o.copyBytes);
    CHECK(copies == r.copyBytes);
    std::string note = einjit::codegen::lower(p, bound, callStrides, target, aligned).notes.at(0);
    const std::string merged = "; the phases in one launch";
    if (const auto at = note.find(merged); at != std::string::npos) note.erase(at, merged.size());
    CHECK(note.rfind(describe(plan), 0) == 0);
  }
}

// Residue phases split along their reduction (split-K) add each phase's partials in a launch
// that must follow the phase's tile: their launches never share one grid, whose blocks run in
// no order (each phase's partials here are 400 elements, so its combining launch has the tile's
// 256 threads and would fit one grid with it).
TEST_CASE("cuda: residue phases with split-K keep their launches apart") {
  Kernel k = einjit::compile(
      "dx[n,c,u,v] := dy[n,o,h,w] * k[o,c,u-2h,v-2w] where u in 0:9, v in 0:9, h in max(0, "
      "cdiv(u-2, 2)):min(4, fdiv(u, 2)+1), w in max(0, cdiv(v-2, 2)):min(4, fdiv(v, 2)+1)",
      on(Device::cuda()));
  const std::map<std::string, Tensor> in = {{"dy", Tensor::random({1, 2048, 4, 4})},
                                            {"k", Tensor::random({2048, 16, 3, 3})}};
  const auto cp = cudaFor(k, in, {}, DType::f32, 90);
  CAPTURE(cp.lowered.notes.at(0));
  CHECK(cp.lowered.notes.at(0).find("4 residue phases") == 0);
  CHECK(cp.lowered.notes.at(0).find("split-K: 4 ranges") != std::string::npos);
  CHECK(cp.lowered.notes.at(0).find("the phases in one launch") == std::string::npos);
  std::string funcs;
  for (const auto& f : cp.lowered.funcs) funcs += (funcs.empty() ? "" : " ") + f.name;
  CHECK(funcs == "s0_phase00 s0_phase00_combine s0_phase10 s0_phase10_combine s0_phase01 "
                 "s0_phase01_combine s0_phase11 s0_phase11_combine");
}
