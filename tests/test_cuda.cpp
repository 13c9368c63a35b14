// The CUDA backend on a GPU (tests without one say why they skip): the test tables and 300
// random programs against the interpreter (outputs poisoned with NaN first, so an element no
// kernel writes fails), device tensors, errors, determinism, caches, every tile family and
// split reductions (block trees in shared memory, partials combined in order). Without a GPU:
// test_cuda_compile.cpp (NVRTC) and test_cuda_schedule.cpp (schedules and IR).
#include "Compare.h"
#include "CudaCompile.h"
#include "CudaTables.h"
#include "CudaTestSupport.h"
#include "InterpreterTable.h"
#include "SplitReduction.h"

#include "runtime/CudaBackend.h"
#include "runtime/DiskCache.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <random>

using namespace einjit::test;

namespace {

// Turns poisoning on before the first CUDA call of the process.
const bool kPoisoned = [] {
  setenv("EINJIT_POISON", "1", 1);
  return true;
}();

bool gpu() {
  std::string why;
  if (einjit::cudaAvailable(&why)) return true;
  MESSAGE("skipped: this test needs a CUDA GPU (" << why << ")");
  return false;
}

// compareProgram on the GPU (forward and gradient against the interpreter); an exception is a
// failed check that names it, and the caller's other cases still run.
void compareOnGpu(const std::string& program, const std::map<std::string, Shape>& shapes, DType dt,
                  std::uint64_t seed) {
  try {
    compareProgram(program, shapes, {}, {}, dt, seed, Device::cuda());
  } catch (const std::exception& e) {
    FAIL_CHECK("threw: " << std::string(e.what()));
  }
}

} // namespace

TEST_CASE("cuda: bf16 on the GPU (tensor cores), forward and gradient, against the interpreter") {
  if (!gpu()) return;
  for (const auto& row : kBf16Rows) {
    INFO(std::string(row.program));
    compareOnGpu(row.program, row.shapes, DType::bf16, 23);
  }
}

TEST_CASE("cuda: bf16 activations with f32 weights, forward and gradient") {
  if (!gpu()) return;
  for (const auto& row : kMixedRows) {
    INFO(std::string(row.program));
    try {
      compareMixed(row.program, row.shapes, row.f32, 29, Device::cuda());
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << std::string(e.what()));
    }
  }
}

TEST_CASE("cuda: every interpreter-table row equals the interpreter (f64, f32, strided views)") {
  if (!gpu()) return;
  compareInterpreterTable(Device::cuda());
}

TEST_CASE("cuda: every gradient-table program, forward and gradient, f64 and f32, grown shapes") {
  if (!gpu()) return;
  compareGradTable(Device::cuda());
}

TEST_CASE("cuda: 300 random programs, forward and gradient, against the interpreter") {
  if (!gpu()) return;
  CHECK(compareRandomPrograms(Device::cuda(), 300) == 300);
}

TEST_CASE("cuda: device tensors in and out, views, and gradients called twice are identical") {
  if (!gpu()) return;
  Kernel k = einjit::compile("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
                             on(Device::cuda(), DType::f32));
  Kernel ref = einjit::compile(k.source(), on(Device::reference(), DType::f32));
  Tensor x = Tensor::random({2, 5, 17, 19}, DType::f32, 1),
         w = Tensor::random({6, 5, 3, 3}, DType::f32, 2);
  Tensor xd = x.cuda(), wd = w.cuda();
  CHECK(xd.device() == einjit::DeviceKind::cuda);
  Tensor y = k(xd, wd);
  CHECK(y.device() == einjit::DeviceKind::cuda);
  CHECK(relativeError(y.cpu(), ref(x, w)) <= 2e-5);
  // A transposed device view as an argument.
  Kernel mm = einjit::compile("C[i,k] := A[i,j] * B[j,k]", on(Device::cuda(), DType::f32));
  Tensor A = Tensor::random({33, 20}, DType::f32, 3), B = Tensor::random({33, 7}, DType::f32, 4);
  Tensor At = A.cuda().transpose(0, 1);
  Tensor C = mm(At, B.cuda());
  CHECK(relativeError(C.cpu(), einjit::compile(mm.source(), on(Device::reference(), DType::f32))(
                                   A.transpose(0, 1), B)) <= 2e-5);
  Kernel g = k.gradient();
  Tensor dy = Tensor::random(y.shape(), DType::f32, 5).cuda();
  auto g1 = g.call({{"dy", dy}, {"x", xd}, {"k", wd}});
  auto g2 = g.call({{"dy", dy}, {"x", xd}, {"k", wd}});
  CHECK(g1[std::size_t{0}].toVector() == g2[std::size_t{0}].toVector());
  CHECK(g1[std::size_t{1}].toVector() == g2[std::size_t{1}].toVector());
  // '+=' into a device tensor.
  Kernel acc = einjit::compile("y[i] += x[i] * 2", on(Device::cuda(), DType::f32));
  Tensor yd = Tensor::full({5}, 1.0).cuda();
  acc(yd, Tensor::full({5}, 3.0).cuda());
  CHECK(yd.toVector() == std::vector<double>(5, 7.0));
}

TEST_CASE("cuda: atomic scatters equal the interpreter; exact sums repeat bit for bit") {
  if (!gpu()) return;
  std::mt19937_64 rng(5);
  std::vector<double> toks(5000);
  for (double& t : toks) t = static_cast<double>(rng() % 37); // many repeats
  Tensor tok = Tensor::fromValues({5000}, toks, DType::i64);
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    INFO(dtypeName(dt));
    Tensor dy = Tensor::random({5000, 129}, dt, 7);
    Tensor E0 = Tensor::random({37, 129}, dt, 8);
    Tensor got = E0.clone(), want = E0.clone();
    einjit::compile(kEmbeddingGrad, on(Device::cuda(), dt))(got, tok, dy);
    einjit::compile(kEmbeddingGrad, on(Device::reference(), dt))(want, tok, dy);
    CHECK(relativeError(got, want) <= tolerance(dt));
    // On the device, in place.
    Tensor gotD = E0.cuda();
    einjit::compile(kEmbeddingGrad, on(Device::cuda(), dt))(gotD, tok.cuda(), dy.cuda());
    CHECK(relativeError(gotD.cpu(), want) <= tolerance(dt));
    // A table larger than the batch: the tokens' rows alone are widened and rounded back; the
    // others stay as they were, bit for bit.
    Tensor big0 = Tensor::random({3000, 129}, dt, 12);
    Tensor bigD = big0.cuda(), bigR = big0.clone();
    Tensor few = Tensor::fromValues({7}, {5, 2999, 5, 0, 1234, 5, 7}, DType::i64);
    Tensor dyFew = Tensor::random({7, 129}, dt, 13);
    einjit::compile(kEmbeddingGrad, on(Device::cuda(), dt))(bigD, few.cuda(), dyFew.cuda());
    einjit::compile(kEmbeddingGrad, on(Device::reference(), dt))(bigR, few, dyFew);
    const Tensor bigGot = bigD.cpu();
    CHECK(relativeError(bigGot, bigR) <= tolerance(dt));
    for (std::int64_t row : {1, 3, 6, 8, 1233, 1235, 2998})
      for (std::int64_t d : {0, 64, 128}) CHECK(bigGot.get({row, d}) == big0.get({row, d}));
    Tensor y = Tensor::zeros({2 * 3000 + 5}, dt), yr = y.clone();
    Tensor x = Tensor::random({3001}, dt, 9), w = Tensor::random({5}, dt, 10);
    einjit::compile(kOverlapAdd, on(Device::cuda(), dt))(y, x, w);
    einjit::compile(kOverlapAdd, on(Device::reference(), dt))(yr, x, w);
    CHECK(relativeError(y, yr) <= tolerance(dt));
  }
  // Small integers add exactly in any order: two calls agree to the bit.
  std::vector<double> ints(5000 * 64);
  for (double& v : ints) v = static_cast<double>(static_cast<int>(rng() % 9) - 4);
  Tensor dy = Tensor::fromValues({5000, 64}, ints, DType::f32);
  Kernel emb = einjit::compile(kEmbeddingGrad, on(Device::cuda(), DType::f32));
  Tensor a = Tensor::zeros({37, 64}), b = Tensor::zeros({37, 64}), r = Tensor::zeros({37, 64});
  emb(a, tok, dy);
  emb(b, tok, dy);
  einjit::compile(kEmbeddingGrad, on(Device::reference(), DType::f32))(r, tok, dy);
  CHECK(a.toVector() == b.toVector());
  CHECK(a.toVector() == r.toVector());
  // The gradient of an embedding lookup runs as this scatter.
  Kernel lookup = einjit::compile("y[b,d] := E[tok[b], d]", on(Device::cuda(), DType::f32));
  Kernel g = lookup.gradient({"E"});
  Tensor E = Tensor::random({37, 64}, DType::f32, 11);
  Tensor ge = g.call({{"dy", dy}, {"E", E}, {"tok", tok}})[std::size_t{0}];
  CHECK(ge.toVector() == r.toVector());
  // A bad token fails the call and leaves the output as it was.
  Tensor bad = Tensor::fromValues({3}, {0, 37, 1}, DType::i64);
  Tensor out = Tensor::full({37, 64}, 2.0);
  CHECK_THROWS_WITH_AS(emb(out, bad, Tensor::random({3, 64})),
                       doctest::Contains("gather index 37 is out of bounds"), einjit::Error);
  for (double v : out.toVector()) CHECK(v == 2.0);
}

TEST_CASE("cuda: checks that read only inputs run first, and written arguments are used in "
          "place") {
  if (!gpu()) return;
  checkHoistedChecks(Device::cuda(), [](const Tensor& t) { return t.cuda(); });
  checkHoistedChecks(Device::cuda(), [](const Tensor& t) { return t; }); // host tensors
}

TEST_CASE("cuda: mistakes are errors with carets, and a failing call writes nothing") {
  if (!gpu()) return;
  Kernel k = einjit::compile("y[b,d] += E[tok[b], d]", on(Device::cuda(), DType::f32));
  Tensor E = Tensor::random({4, 3}, DType::f32, 1);
  Tensor bad = Tensor::fromValues({3}, {0, 5, 1}, DType::i64);
  Tensor y = Tensor::full({3, 3}, 2.0, DType::f32);
  CHECK_THROWS_WITH_AS(k(y, E, bad), doctest::Contains("gather index 5 is out of bounds"),
                       einjit::Error);
  for (double v : y.toVector()) CHECK(v == 2.0);
  Tensor yd = y.cuda();
  CHECK_THROWS_WITH_AS(k(yd, E.cuda(), bad.cuda()), doctest::Contains("^"), einjit::Error);
  for (double v : yd.toVector()) CHECK(v == 2.0);
  k(yd, E.cuda(), Tensor::fromValues({3}, {0, 3, 1}, DType::i64).cuda());
  CHECK(yd.cpu().get({1, 2}) == doctest::Approx(2.0 + E.get({3, 2})));
  // Mixed devices, and device tensors for a CPU kernel.
  CHECK_THROWS_WITH_AS(k(yd, E, bad), doctest::Contains("pass every tensor on one device"),
                       einjit::Error);
  // The caret points at the tensor on the other device: E in "y[b,d] += E[tok[b], d]".
  CHECK_THROWS_WITH_AS(k(yd, E, bad), doctest::Contains("<program>:1:11: error: tensor 'E' is on"),
                       einjit::Error);
  CHECK_THROWS_WITH_AS(k(yd, E, bad),
                       doctest::Contains("   1 | y[b,d] += E[tok[b], d]\n     |           ^"),
                       einjit::Error);
  Kernel cpu = einjit::compile("y[i] := x[i]");
  CHECK_THROWS_WITH_AS(cpu(E.cuda()), doctest::Contains("is on cuda:0 but the kernel runs on cpu"),
                       einjit::Error);
  CHECK_THROWS_WITH_AS(cpu(E.cuda()), doctest::Contains("   1 | y[i] := x[i]\n     |         ^"),
                       einjit::Error);
  CHECK_THROWS_WITH_AS(E.cuda().get({0, 0}), doctest::Contains("copy it to the host"),
                       einjit::Error);
}

TEST_CASE("cuda: compiled kernels are cached in memory and on disk") {
  if (!gpu()) return;
  Kernel k = einjit::compile("y[i] := x[i] * 41 + 1", on(Device::cuda(), DType::f32));
  Tensor x = Tensor::random({1000}, DType::f32, 1);
  auto before = einjit::runtime::cudaStats();
  k(x);
  einjit::runtime::cudaClearMemoryCache();
  Kernel again = einjit::compile("y[i] := x[i] * 41 + 1", on(Device::cuda(), DType::f32));
  Tensor y = again(x);
  auto after = einjit::runtime::cudaStats();
  CHECK(after.diskHits + after.compiled + after.memoryHits >
        before.diskHits + before.compiled + before.memoryHits);
  // Builds without a keyed hash (no LLVM) have no disk cache (DiskCache::supported).
  if (einjit::runtime::DiskCache::supported()) CHECK(after.diskHits >= before.diskHits + 1);
  CHECK(y.get({3}) == doctest::Approx(x.get({3}) * 41 + 1));
}

TEST_CASE("cuda: convolution input gradients (masked tiles, residue phases) equal the "
          "interpreter") {
  if (!gpu()) return;
  for (const ConvCase& c : kConvGrads)
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
      INFO(std::string(c.program) << " " << dtypeName(dt));
      auto [dgrad, in] = dgradOf(c, dt);
      Kernel ref = einjit::compile(c.program, on(Device::reference(), dt)).gradient({"x"});
      CHECK(relativeError(dgrad.call(args(in))[0], ref.call(args(in))[0]) <= tolerance(dt));
    }
}

TEST_CASE(
    "cuda: shared-memory tiles (matmul forms, batched, conv, Linear) at odd sizes, fwd+grad") {
  if (!gpu()) return;
  struct Case {
    const char* program;
    std::map<std::string, Shape> shapes;
  };
  const std::vector<Case> cases = {
      {"C[i,k] := A[i,j] * B[j,k]", {{"A", {257, 131}}, {"B", {131, 129}}}},
      {"C[i,k] := A[j,i] * B[j,k]", {{"A", {67, 200}}, {"B", {67, 190}}}},
      {"C[i,k] := A[i,j] * B[k,j]", {{"A", {150, 77}}, {"B", {33, 77}}}},
      {"C[i,k] := A[j,i] * B[k,j]", {{"A", {45, 129}}, {"B", {140, 45}}}},
      {"C[i,k,b] := A[i,j,b] * B[b,k,j]", {{"A", {65, 40, 3}}, {"B", {3, 70, 40}}}},
      {"C[b,i,k] := A[b,i,j] * B[b,j,k]", {{"A", {3, 70, 33}}, {"B", {3, 33, 90}}}},
      {"y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]", {{"x", {2, 5, 21, 19}}, {"k", {12, 5, 3, 3}}}},
      {"y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]", {{"x", {3, 4, 23, 21}}, {"k", {9, 4, 3, 3}}}},
      {"y[b,o] := x[b,i] * w[o,i] + 0 * w[o,i]", {{"x", {300, 49}}, {"w", {70, 49}}}},
      {"y[b,o] := x[b,i] * w[o,i] * 2", {{"x", {300, 49}}, {"w", {70, 49}}}},
      // Few tiles and a long reduction: split-K (partials in scratch, added in order).
      {"C[i,k] := A[i,j] * B[j,k]", {{"A", {70, 5003}}, {"B", {5003, 90}}}},
      {"dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,h+a,w+b]",
       {{"dy", {3, 7, 30, 29}}, {"x", {3, 5, 32, 31}}}},
  };
  for (const Case& c : cases)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(std::string(c.program));
      compareOnGpu(c.program, c.shapes, dt, 21);
    }
  // The schedule is the tiled one for these shapes, split-K where there are few tiles; '+='
  // into a passed-in tensor keeps its values (the combine adds to them).
  Kernel mm = einjit::compile("C[i,k] := A[i,j] * B[j,k]", on(Device::cuda(), DType::f32));
  CHECK(mm.explain({Tensor::random({257, 131}), Tensor::random({131, 129})}).find("GPU tile") !=
        std::string::npos);
  CHECK(mm.explain({Tensor::random({70, 5003}), Tensor::random({5003, 90})}).find("split-K") !=
        std::string::npos);
  for (DType dt : {DType::f32, DType::bf16}) {
    INFO(std::string(dtypeName(dt)));
    Tensor A = Tensor::random({70, 5003}, dt, 1), B = Tensor::random({5003, 90}, dt, 2);
    Tensor C0 = Tensor::random({70, 90}, dt, 3);
    Tensor Cg = C0.clone(), Cr = C0.clone();
    einjit::compile("C[i,k] += A[i,j] * B[j,k]", on(Device::cuda(), dt))(Cg, A, B);
    einjit::compile("C[i,k] += A[i,j] * B[j,k]", on(Device::reference(), dt))(Cr, A, B);
    CHECK(relativeError(Cg, Cr) <= tolerance(dt));
    // Bit-identical when called again (the partials are added in a fixed order).
    Tensor Cg2 = C0.clone();
    einjit::compile("C[i,k] += A[i,j] * B[j,k]", on(Device::cuda(), dt))(Cg2, A, B);
    CHECK(Cg2.toVector() == Cg.toVector());
  }
}

TEST_CASE(
    "cuda: tensors with their unit stride on a batch index (copies around the tile) equal the "
    "interpreter, and '+=' keeps C's values") {
  if (!gpu()) return;
  // Against the interpreter: edges in every tiled dimension (17 batch values: two transpose
  // tiles of 16), two batch indices, gradients (whose outputs and operands move fastest along b).
  struct Case {
    const char* program;
    std::map<std::string, Shape> shapes;
  };
  const std::vector<Case> cases = {
      {"C[i,k,b] := A[i,j,b] * B[b,k,j]", {{"A", {70, 45, 17}}, {"B", {17, 66, 45}}}},
      {"C[i,k,b,c] := A[i,j,b,c] * B[c,b,k,j]", {{"A", {33, 20, 3, 5}}, {"B", {5, 3, 40, 20}}}},
  };
  for (const Case& c : cases)
    for (DType dt : {DType::f32, DType::bf16}) {
      INFO(std::string(c.program) << " " << dtypeName(dt));
      compareOnGpu(c.program, c.shapes, dt, 31);
    }
  // '+=' keeps C's values (copied in, added to, copied back).
  for (DType dt : {DType::f32, DType::bf16}) {
    INFO(std::string(dtypeName(dt)));
    Tensor A = Tensor::random({70, 45, 17}, dt, 1), B = Tensor::random({17, 66, 45}, dt, 2);
    Tensor C0 = Tensor::random({70, 66, 17}, dt, 3);
    Tensor Cg = C0.clone(), Cr = C0.clone();
    einjit::compile("C[i,k,b] += A[i,j,b] * B[b,k,j]", on(Device::cuda(), dt))(Cg, A, B);
    einjit::compile("C[i,k,b] += A[i,j,b] * B[b,k,j]", on(Device::reference(), dt))(Cr, A, B);
    CHECK(relativeError(Cg, Cr) <= tolerance(dt));
  }
}

TEST_CASE("cuda: tiles with asynchronous copies and with register staging equal the "
          "interpreter, forward and gradient") {
  if (!gpu()) return;
  for (DType dt : {DType::f32, DType::bf16})
    for (const VectorTile& tile : kVectorTiles) {
      INFO(std::string(tile.program) << " " << dtypeName(dt));
      try {
        compareProgram(tile.program, tile.shapes, {}, {}, dt, 31, Device::cuda());
        Kernel ref = einjit::compile(tile.program, on(Device::reference(), dt));
        Kernel gpuK = einjit::compile(tile.program, on(Device::cuda(), dt));
        std::vector<Tensor> in = randomInputs(ref, tile.shapes, dt);
        const Tensor want = ref.call(args(in))[0];
        for (auto [pad, first] : {std::pair<int, int>{8, 1}, {1, 0}}) {
          std::vector<Tensor> moved;
          for (const Tensor& t : in) moved.push_back(placed(t, pad, first));
          CHECK(relativeError(gpuK.call(args(moved))[0], want) <= tolerance(dt));
          // The same views on the device.
          std::vector<Tensor> onDevice;
          for (const Tensor& t : in) onDevice.push_back(placed(t, pad, first, true));
          // A device view is used in place: neither layout can be copied by vectors.
          CHECK(gpuK.explain(args(onDevice)).find("asynchronous") == std::string::npos);
          CHECK(relativeError(gpuK.call(args(onDevice))[0].cpu(), want) <= tolerance(dt));
        }
      } catch (const std::exception& e) {
        FAIL_CHECK("threw: " << std::string(e.what()));
      }
    }
}

TEST_CASE("cuda: f32 tiles 112 and 96 wide and 9-range split-K equal the interpreter, forward "
          "and gradient") {
  if (!gpu()) return;
  for (const OddTile& t : kOddTiles)
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(std::string(t.program) << " " << dtypeName(dt));
      compareOnGpu(t.program, t.shapes, dt, 41);
    }
}

TEST_CASE("cuda: tensor-core tiles with rows of whole vectors or not equal the interpreter") {
  if (!gpu()) return;
  for (std::int64_t cols : {200, 202}) {
    INFO(cols << " columns");
    compareOnGpu("C[i,k] := A[i,j] * B[j,k]", {{"A", {300, 264}}, {"B", {264, cols}}}, DType::bf16,
                 41);
  }
}

TEST_CASE("cuda: bf16 warpgroup tiles equal the interpreter, forward and gradient") {
  if (!gpu()) return;
  for (const auto& [program, shapes, width, rows] : kWarpgroupTiles) {
    INFO(std::string(program) << ", tile " << rows << " x " << width);
    try {
      Kernel k = einjit::compile(program, on(Device::cuda(), DType::bf16));
      std::vector<Tensor> in = randomInputs(k, shapes, DType::bf16);
      const bool sm90 = einjit::runtime::codeArch(0) == 90;
      CHECK((k.explain(args(in)).find("wgmma.mma_async") != std::string::npos) == sm90);
      compareProgram(program, shapes, {}, {}, DType::bf16, 37, Device::cuda());
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << std::string(e.what()));
    }
  }
}

TEST_CASE("cuda: split reductions equal the interpreter, GPU policy and forced, sizes 1 to "
          "10^6+3") {
  if (!gpu()) return;
  CHECK(compareSplitCases(Device::cuda(), {1, 7, 33, 257, 1000003}) == 2 * largeSplitCases());
  ForcedSplit forced(tinySplitPolicy(true));
  CHECK(compareSplitCases(Device::cuda(), {1, 7, 33, 257}) ==
        static_cast<int>(splitCases().size()) * 4 * 2);
}

TEST_CASE("cuda: forced split reductions on every interpreter-table and gradient-table program") {
  if (!gpu()) return;
  ForcedSplit forced(tinySplitPolicy(true));
  compareInterpreterTable(Device::cuda());
  compareGradTable(Device::cuda());
}

TEST_CASE("cuda: split (max)/(min) gradients land on the first extreme, reruns are bit-identical") {
  if (!gpu()) return;
  for (DType dt : {DType::f64, DType::f32}) {
    checkFirstExtremeGradient(Device::cuda(), 1000003, dt);
    ForcedSplit forced(tinySplitPolicy(true));
    for (std::int64_t n : {1, 7, 33, 257}) checkFirstExtremeGradient(Device::cuda(), n, dt);
  }
  int checked = 0;
  for (const SplitCase& c : splitCases()) {
    if (!c.large) continue;
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(c.program << " " << einjit::dtypeName(dt));
      Kernel k = einjit::compile(c.program, on(Device::cuda(), dt));
      std::vector<Arg> args = convertedArgs(c.args(1000003), dt);
      rerunBits(k, args);
      // Device tensors in: the same bits as host tensors in.
      std::vector<Arg> onDevice;
      for (const Arg& a : args) onDevice.push_back(a.tensor().cuda());
      CHECK(rerunBits(k, onDevice) == rerunBits(k, args));
      ++checked;
    }
  }
  CHECK(checked == 2 * largeSplitCases());
}
