// The CUDA backend on the GPU, each case beside its peer: cuBLAS SGEMM (no TF32) in this
// process for the matmul forms; cuDNN (through PyTorch, bench/gpu_peers.py) for convolutions
// and the permuted batched contraction, joined by case name in bench/gpu_summarize.py.
// Device tensors; CUDA events around batches of calls (warm-up first: compilation and module
// load excluded); input sets rotated so that they do not sit in L2; random inputs, never zeros;
// every case checked against the float64 interpreter or cuBLAS before it is timed.
#include "einjit/einjit.h"
#include "runtime/CudaBackend.h"
#include "runtime/CudaDriver.h"
#include "runtime/Nvrtc.h"

#include <benchmark/benchmark.h>
#include <cublas_v2.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

using einjit::Device;
using einjit::DType;
using einjit::Kernel;
using einjit::Shape;
using einjit::Tensor;
namespace cuda = einjit::runtime::cuda;

namespace {

// Each iteration times a batch of calls (the reported time is per call), so Google Benchmark's
// own minimum time applies to per-call time: keep it short.
constexpr double kMinTime = 0.02;

einjit::Options onGpu(DType dtype = DType::f32) {
  einjit::Options o;
  o.device = Device::cuda(0);
  o.defaultDType = dtype;
  return o;
}

// Benchmark argument -> dtype, and the label suffix that gpu_summarize.py joins on.
DType dtypeArg(std::int64_t a) { return a == 1 ? DType::bf16 : DType::f32; }
std::string suffix(DType d) { return d == DType::f32 ? "" : "@" + std::string(dtypeName(d)); }

double bytesOf(const Shape& s, DType dtype) {
  double n = static_cast<double>(einjit::dtypeSize(dtype));
  for (auto e : s) n *= static_cast<double>(e);
  return n;
}

// Input sets whose total exceeds L2 several times (at least 256 MB, at most 32 sets).
std::vector<std::map<std::string, Tensor>> inputSets(const std::map<std::string, Shape>& shapes,
                                                     DType dtype = DType::f32) {
  double bytes = 0;
  for (const auto& [n, s] : shapes) bytes += bytesOf(s, dtype);
  int sets = static_cast<int>(std::clamp(std::ceil(256e6 / std::max(bytes, 1.0)), 1.0, 32.0));
  std::vector<std::map<std::string, Tensor>> out(static_cast<std::size_t>(sets));
  std::uint64_t seed = 1;
  for (auto& set : out)
    for (const auto& [n, s] : shapes) set[n] = Tensor::random(s, dtype, seed++).cuda();
  return out;
}

// Times fn(set) on the GPU: batches of calls between two events until ~20 ms per iteration.
template <class F>
void timeOnGpu(benchmark::State& state, std::size_t sets, F&& fn, double flop) {
  cuda::Timer timer(0);
  for (std::size_t i = 0; i < 3; ++i) fn(i % sets); // warm-up
  cuda::synchronize(0);
  timer.start();
  fn(0);
  double one = timer.stop();
  const int batch = static_cast<int>(std::clamp(20.0 / std::max(one, 1e-3), 1.0, 200.0));
  std::size_t next = 0;
  for (auto _ : state) {
    timer.start();
    for (int b = 0; b < batch; ++b) fn(next++ % sets);
    state.SetIterationTime(timer.stop() / 1e3 / batch);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(flop, benchmark::Counter::kIsIterationInvariantRate);
}

double relErr(const Tensor& a, const Tensor& b) {
  auto x = a.toVector(), y = b.toVector();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// --- matmul forms: einjit against cuBLAS ----------------------------------------------------

struct Form {
  const char* name;
  const char* program;
  bool transA, transB; // stored transposed: A as [j,i], B as [k,j]
};
const Form kForms[] = {{"NN", "C[i,k] := A[i,j] * B[j,k]", false, false},
                       {"TN", "C[i,k] := A[j,i] * B[j,k]", true, false},
                       {"NT", "C[i,k] := A[i,j] * B[k,j]", false, true},
                       {"TT", "C[i,k] := A[j,i] * B[k,j]", true, true}};

cublasHandle_t cublas() {
  static cublasHandle_t h = [] {
    cuda::setDevice(0);
    cublasHandle_t x = nullptr;
    if (cublasCreate(&x) != CUBLAS_STATUS_SUCCESS) std::abort();
    cublasSetMathMode(x, CUBLAS_DEFAULT_MATH); // true fp32: no TF32
    return x;
  }();
  return h;
}

// Row-major C = op(A) op(B) as column-major C^T = op(B)^T op(A)^T.
// bf16: cublasGemmEx with bf16 operands and result, f32 accumulation.
void gemm(const Form& f, std::int64_t n, const Tensor& A, const Tensor& B, Tensor& C) {
  const float one = 1, zero = 0;
  const int m = static_cast<int>(n);
  const cublasOperation_t ta = f.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                          tb = f.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (A.dtype() == DType::f32) {
    cublasSgemm(cublas(), ta, tb, m, m, m, &one, B.data<float>(), m, A.data<float>(), m, &zero,
                C.data<float>(), m);
    return;
  }
  cublasGemmEx(cublas(), ta, tb, m, m, m, &one, B.data(), CUDA_R_16BF, m, A.data(), CUDA_R_16BF, m,
               &zero, C.data(), CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

void BM_Matmul(benchmark::State& state, bool peer) {
  const Form& f = kForms[state.range(0)];
  const std::int64_t n = state.range(1);
  const DType dt = dtypeArg(state.range(2));
  auto sets = inputSets({{"A", {n, n}}, {"B", {n, n}}}, dt);
  Kernel k = einjit::compile(f.program, onGpu(dt));
  Tensor C = Tensor::emptyCuda({n, n}, dt);
  {
    Tensor mine = k(sets[0]["A"], sets[0]["B"]);
    gemm(f, n, sets[0]["A"], sets[0]["B"], C);
    double err = relErr(mine, C);
    if (err > (dt == DType::f32 ? 1e-5 : 1e-2))
      state.SkipWithError(("einjit and cuBLAS differ: " + std::to_string(err)).c_str());
  }
  timeOnGpu(
      state, sets.size(),
      [&](std::size_t s) {
        if (peer)
          gemm(f, n, sets[s]["A"], sets[s]["B"], C);
        else
          k(sets[s]["A"], sets[s]["B"]);
      },
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n));
  state.SetLabel(std::string("matmul_") + f.name + "_" + std::to_string(n) + suffix(dt));
}
void BM_Matmul_einjit(benchmark::State& s) { BM_Matmul(s, false); }
void BM_Matmul_cuBLAS(benchmark::State& s) { BM_Matmul(s, true); }
void matmulArgs(benchmark::internal::Benchmark* b) {
  for (int d = 0; d < 2; ++d) {
    for (int f = 0; f < 4; ++f)
      for (int n : {1024, 4096}) b->Args({f, n, d});
    b->Args({0, 8192, d});
  }
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(kMinTime);
}
BENCHMARK(BM_Matmul_einjit)->Apply(matmulArgs);
BENCHMARK(BM_Matmul_cuBLAS)->Apply(matmulArgs);

// --- programs with a PyTorch peer (forward, or one gradient) ---------------------------------

struct Case {
  const char* name;
  const char* program;
  std::map<std::string, Shape> shapes;
  const char* wrt; // "": the forward; "x": the gradient with respect to x only
};

std::vector<Case> cases() {
  auto conv = [](const char* name, std::int64_t c, std::int64_t o, std::int64_t h, int s,
                 std::int64_t kk, const char* wrt) {
    const char* prog = s == 1 ? "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]"
                              : "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]";
    return Case{name, prog, {{"x", {32, c, h, h}}, {"k", {o, c, kk, kk}}}, wrt};
  };
  return {
      {"permuted_batched",
       "C[i,k,b] := A[i,j,b] * B[b,k,j]",
       {{"A", {1024, 1024, 16}}, {"B", {16, 1024, 1024}}},
       ""},
      conv("conv_c64_56_s1_fwd", 64, 64, 56, 1, 3, ""),
      conv("conv_c64_56_s1_dgrad", 64, 64, 56, 1, 3, "x"),
      conv("conv_c64_56_s1_wgrad", 64, 64, 56, 1, 3, "k"),
      conv("conv_c128_56_s2_fwd", 128, 128, 56, 2, 3, ""),
      conv("conv_c128_56_s2_dgrad", 128, 128, 56, 2, 3, "x"),
      conv("conv_c128_56_s2_wgrad", 128, 128, 56, 2, 3, "k"),
      conv("conv_c256_14_s1_fwd", 256, 256, 14, 1, 3, ""),
      conv("conv_c256_14_s1_dgrad", 256, 256, 14, 1, 3, "x"),
      conv("conv_c256_14_s1_wgrad", 256, 256, 14, 1, 3, "k"),
      conv("conv_c64_256_1x1_fwd", 64, 256, 56, 1, 1, ""),
      conv("conv_c64_256_1x1_dgrad", 64, 256, 56, 1, 1, "x"),
      conv("conv_c64_256_1x1_wgrad", 64, 256, 56, 1, 1, "k"),
  };
}

void BM_Case(benchmark::State& state) {
  const Case c = cases()[static_cast<std::size_t>(state.range(0))];
  const DType dt = dtypeArg(state.range(1));
  state.SetLabel(c.name + suffix(dt));
  Kernel fwd = einjit::compile(c.program, onGpu(dt));
  auto sets = inputSets(c.shapes, dt);
  Tensor y0 = fwd.call(sets[0])[std::size_t{0}];
  // Flops: 2 x (output elements) x (reduction length) = 2 x product of every index range.
  double flop = 0;
  if (c.shapes.count("k")) {
    const Shape& x = c.shapes.at("x");
    const Shape& w = c.shapes.at("k");
    flop = 2.0 * static_cast<double>(y0.numel()) * static_cast<double>(x[1] * w[2] * w[3]);
  } else {
    flop = 2.0 * static_cast<double>(y0.numel()) * 1024.0;
  }
  if (std::string(c.wrt).empty()) {
    timeOnGpu(
        state, sets.size(), [&](std::size_t s) { fwd.call(sets[s]); }, flop);
    return;
  }
  Kernel g = fwd.gradient({c.wrt});
  std::vector<std::map<std::string, Tensor>> gsets;
  std::uint64_t seed = 100;
  for (auto& set : sets) {
    std::map<std::string, Tensor> m;
    for (const auto& n : g.tensorArguments())
      m[n] = n == g.gradientInputs()[0] ? Tensor::random(y0.shape(), dt, seed++).cuda() : set.at(n);
    gsets.push_back(m);
  }
  timeOnGpu(
      state, gsets.size(), [&](std::size_t s) { g.call(gsets[s]); }, flop);
}
BENCHMARK(BM_Case)
    ->ArgsProduct({benchmark::CreateDenseRange(0, 12, 1), {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(kMinTime);

// --- a scatter: an embedding's gradient, atomic adds (PyTorch peer: index_add_) -------------

// dE[tok[b], d] += dy[b, d]: 16384 tokens drawn uniformly from a 32768-row table of width 1024.
// "GFLOP/s" counts the adds (16384 x 1024 per call). bf16 adds into an f32 copy of dE, widened
// before and rounded after (three kernels; the table's 32 M elements dominate the time).
void BM_Scatter(benchmark::State& state) {
  const DType dt = dtypeArg(state.range(0));
  const std::int64_t V = 32768, D = 1024, Bt = 16384;
  Kernel k = einjit::compile("dE[tok[b], d] += dy[b, d]", onGpu(dt));
  std::mt19937_64 rng(3);
  std::vector<std::map<std::string, Tensor>> sets(2);
  std::uint64_t seed = 1;
  for (auto& set : sets) {
    std::vector<double> toks(static_cast<std::size_t>(Bt));
    for (double& t : toks) t = static_cast<double>(rng() % static_cast<std::uint64_t>(V));
    set["tok"] = Tensor::fromValues({Bt}, toks, DType::i64).cuda();
    set["dy"] = Tensor::random({Bt, D}, dt, seed++).cuda();
    set["dE"] = Tensor::zeros({V, D}, dt).cuda();
  }
  timeOnGpu(
      state, sets.size(), [&](std::size_t s) { k.call(sets[s]); },
      static_cast<double>(Bt) * static_cast<double>(D));
  state.SetLabel("embedding_grad" + suffix(dt));
}
BENCHMARK(BM_Scatter)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(kMinTime);

// --- the Linear layer: forward, and forward + both gradients ---------------------------------

void BM_Linear(benchmark::State& state) {
  const bool both = state.range(0) == 1;
  Kernel fwd = einjit::compile("y[b,o] := x[b,i] * w[o,i]", onGpu());
  Kernel g = fwd.gradient();
  auto sets = inputSets({{"x", {4096, 784}}, {"w", {1024, 784}}});
  Tensor dy = Tensor::random({4096, 1024}, DType::f32, 9).cuda();
  const double flop = 2.0 * 4096 * 784 * 1024 * (both ? 3 : 1);
  timeOnGpu(
      state, sets.size(),
      [&](std::size_t s) {
        fwd.call(sets[s]);
        if (both) g.call({{"dy", dy}, {"x", sets[s]["x"]}, {"w", sets[s]["w"]}});
      },
      flop);
  state.SetLabel(both ? "linear_fwdbwd" : "linear_fwd");
}
BENCHMARK(BM_Linear)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(kMinTime);

// --- NVRTC: a new kernel compiled cold, and found in the on-disk cache -----------------------

void BM_Compile(benchmark::State& state) {
  const bool disk = state.range(0) == 1;
  Tensor x = Tensor::random({1 << 20}, DType::f32, 1).cuda();
  int n = 0;
  for (auto _ : state) {
    // A new constant each time: a new kernel (cold), or the same one again (disk).
    std::string prog = "y[i] := tanh(x[i]) * " + std::to_string(disk ? 7 : 1000 + n++) + ".5";
    if (disk) einjit::runtime::cudaClearMemoryCache();
    auto t0 = std::chrono::steady_clock::now();
    einjit::compile(prog, onGpu())(x);
    cuda::synchronize(0);
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  state.SetLabel(disk ? "nvrtc_disk_cache" : "nvrtc_cold");
}
BENCHMARK(BM_Compile)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);

} // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!einjit::cudaAvailable(&why)) {
    std::fprintf(stderr, "bench_cuda: no GPU: %s\n", why.c_str());
    return 0;
  }
  const auto& info = cuda::deviceInfo(0);
  benchmark::AddCustomContext("gpu", info.name);
  benchmark::AddCustomContext("nvrtc", einjit::runtime::nvrtc::version());
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
