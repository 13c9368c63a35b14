// The CPU JIT beside its peers, in one process: OpenBLAS (run this binary twice, with and
// without OPENBLAS_CORETYPE=SkylakeX; bench/run_cpu.sh does), Eigen (OpenMP) and oneDNN.
// Every case reports GFLOP/s; bench/summarize.py turns the JSON into the ratio table of
// bench/RESULTS.md.
//
// The binary's rows register (and list) in the order of its files in bench/CMakeLists.txt:
// this one (the FMA peak, GEMM in four transpositions, the permuted batched contraction),
// bench_cpu_conv.cpp, bench_cpu_layers.cpp, bench_cpu_compile.cpp (what these four share is in
// bench/CpuBench.h), then bench_gemm.cpp, bench_demo.cpp and bench_threads.cpp.
#include "bench/CpuBench.h"
#include "einjit/einjit.h"

#include <Eigen/Dense>
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <immintrin.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>
#include <utility>
#include <vector>

using einjit::DType;
using einjit::Tensor;

namespace {

using namespace einjit::bench::cpu;

// --- the machine's f32 FMA peak (the roofline of every table) ------------------------------

// Twelve independent FMA chains per thread, enough to fill two FMA pipes of 4-5 cycles'
// latency; the vector types never cross a function boundary (their ABI needs the target).
__attribute__((target("avx2,fma"))) float chains256(std::int64_t iters) {
  __m256 a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(k));
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(0.0001f);
  for (std::int64_t i = 0; i < iters; ++i)
    for (auto& x : a) x = _mm256_fmadd_ps(x, m, c);
  float sum = 0;
  for (const auto& x : a) sum += _mm256_cvtss_f32(x);
  return sum;
}
__attribute__((target("avx512f"))) float chains512(std::int64_t iters) {
  __m512 a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(k));
  const __m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(0.0001f);
  for (std::int64_t i = 0; i < iters; ++i)
    for (auto& x : a) x = _mm512_fmadd_ps(x, m, c);
  float sum = 0;
  for (const auto& x : a) sum += _mm512_cvtss_f32(x);
  return sum;
}

// range(0): threads. The widest vectors the CPU has (AVX-512 or AVX2).
void BM_FmaPeak(benchmark::State& state) {
  const bool wide = __builtin_cpu_supports("avx512f");
  const int lanes = wide ? 16 : 8;
  const std::int64_t iters = 1 << 22;
  const auto threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::vector<std::thread> pool;
    std::vector<float> out(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        out[static_cast<std::size_t>(t)] = wide ? chains512(iters) : chains256(iters);
      });
    for (auto& th : pool) th.join();
    benchmark::DoNotOptimize(out.data());
  }
  setFlops(state, 2.0 * lanes * 12 * static_cast<double>(iters) * threads);
  state.SetLabel(wide ? "AVX-512 FMA" : "AVX2 FMA");
}
BENCHMARK(BM_FmaPeak)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// --- matmul in four transpositions -----------------------------------------------------------

struct MatmulForm {
  const char* program;
  bool transA, transB; // A stored k x m (A[j,i]); B stored n x k (B[k,j])
};
const MatmulForm kForms[] = {
    {"C[i,k] := A[i,j] * B[j,k]", false, false},
    {"C[i,k] := A[j,i] * B[j,k]", true, false},
    {"C[i,k] := A[i,j] * B[k,j]", false, true},
    {"C[i,k] := A[j,i] * B[k,j]", true, true},
};

void BM_Matmul_einjit(benchmark::State& state) {
  const MatmulForm& f = kForms[state.range(0)];
  const std::int64_t n = state.range(1);
  auto k = einjit::compile(f.program);
  Tensor a = rnd({n, n}, 1), b = rnd({n, n}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(k(a, b)[std::size_t{0}].data());
  setFlops(state, 2.0 * n * n * n);
  state.SetLabel(f.program);
}

void BM_Matmul_OpenBLAS(benchmark::State& state) {
  const MatmulForm& f = kForms[state.range(0)];
  const std::int64_t n = state.range(1);
  Tensor a = rnd({n, n}, 1), b = rnd({n, n}, 2);
  for (auto _ : state) {
    Tensor c = Tensor::empty({n, n});
    cblas_sgemm(CblasRowMajor, f.transA ? CblasTrans : CblasNoTrans,
                f.transB ? CblasTrans : CblasNoTrans, static_cast<int>(n), static_cast<int>(n),
                static_cast<int>(n), 1.0f, a.data<float>(), static_cast<int>(n), b.data<float>(),
                static_cast<int>(n), 0.0f, c.data<float>(), static_cast<int>(n));
    benchmark::DoNotOptimize(c.data());
  }
  setFlops(state, 2.0 * n * n * n);
  state.SetLabel(f.program);
}

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void BM_Matmul_Eigen(benchmark::State& state) {
  const MatmulForm& f = kForms[state.range(0)];
  const std::int64_t n = state.range(1);
  Tensor a = rnd({n, n}, 1), b = rnd({n, n}, 2);
  Eigen::Map<RowMat> A(a.data<float>(), n, n), B(b.data<float>(), n, n);
  RowMat C(n, n);
  for (auto _ : state) {
    if (!f.transA && !f.transB) C.noalias() = A * B;
    if (f.transA && !f.transB) C.noalias() = A.transpose() * B;
    if (!f.transA && f.transB) C.noalias() = A * B.transpose();
    if (f.transA && f.transB) C.noalias() = A.transpose() * B.transpose();
    benchmark::DoNotOptimize(C.data());
  }
  setFlops(state, 2.0 * n * n * n);
  state.SetLabel(f.program);
}

void matmulArgs(benchmark::internal::Benchmark* b) {
  for (int form = 0; form < 4; ++form)
    for (int n : {256, 512, 1024, 2048}) b->Args({form, n});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_Matmul_einjit)->Apply(matmulArgs);
BENCHMARK(BM_Matmul_OpenBLAS)->Apply(matmulArgs);
BENCHMARK(BM_Matmul_Eigen)->Apply(matmulArgs);

// --- permuted batched contraction C[i,k,b] := A[i,j,b] * B[b,k,j] -----------------------------

constexpr std::int64_t kBatch = 4;

void BM_Permuted_einjit(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  auto k = einjit::compile("C[i,k,b] := A[i,j,b] * B[b,k,j]");
  Tensor a = rnd({n, n, kBatch}, 1), b = rnd({kBatch, n, n}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(k(a, b)[std::size_t{0}].data());
  setFlops(state, 2.0 * n * n * n * kBatch);
}

// What a library-based einsum does: permute A to [b,i,j] (a copy), one GEMM per batch
// (C_b = A_b B_b^T), permute the result to [i,k,b] (a copy).
void BM_Permuted_OpenBLAS(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Tensor a = rnd({n, n, kBatch}, 1), b = rnd({kBatch, n, n}, 2);
  for (auto _ : state) {
    Tensor ap = a.permute({2, 0, 1}).contiguous();
    Tensor cp = Tensor::empty({kBatch, n, n});
    for (std::int64_t bb = 0; bb < kBatch; ++bb)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(n),
                  static_cast<int>(n), 1.0f, ap.data<float>() + bb * n * n, static_cast<int>(n),
                  b.data<float>() + bb * n * n, static_cast<int>(n), 0.0f,
                  cp.data<float>() + bb * n * n, static_cast<int>(n));
    Tensor c = cp.permute({1, 2, 0}).contiguous();
    benchmark::DoNotOptimize(c.data());
  }
  setFlops(state, 2.0 * n * n * n * kBatch);
}
BENCHMARK(BM_Permuted_einjit)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Permuted_OpenBLAS)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same in f64, einjit alone: PyTorch's einsum is its peer in bench/run_layers.sh (OpenBLAS's
// alternated in BM_GemmPermuted).
void BM_F64Permuted_einjit(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  einjit::Options opt;
  opt.defaultDType = DType::f64;
  auto k = einjit::compile("C[i,k,b] := A[i,j,b] * B[b,k,j]", opt);
  Tensor a = Tensor::random({n, n, kBatch}, DType::f64, 1);
  Tensor b = Tensor::random({kBatch, n, n}, DType::f64, 2);
  for (auto _ : state) benchmark::DoNotOptimize(k(a, b)[std::size_t{0}].data());
  setFlops(state, 2.0 * n * n * n * kBatch);
}
BENCHMARK(BM_F64Permuted_einjit)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

} // namespace

// The peers' worker threads spin after each call before they sleep, and in the cases that
// alternate einjit and a peer in one process they take the core einjit's second thread needs,
// so einjit's next call measures the contention, not its kernel: OpenBLAS's through a long
// timeout (bench_gemm.cpp), oneDNN's and Eigen's (GNU OpenMP) through GOMP's spin count
// (BM_DemoLayer, whose calls are shorter than the spin; on a loaded machine the two runtimes'
// spinning threads also wait on each other). Both libraries read their setting once, when they
// are loaded, so the process sets OPENBLAS_THREAD_TIMEOUT (2^4 cycles: the workers sleep at
// once, as oneTBB's do) and OMP_WAIT_POLICY=passive and starts again. A value the user sets is
// kept.
int main(int argc, char** argv) {
  bool again = false;
  for (const auto& [name, value] :
       {std::pair<const char*, const char*>{"OPENBLAS_THREAD_TIMEOUT", "4"},
        {"OMP_WAIT_POLICY", "passive"}})
    if (!std::getenv(name)) {
      setenv(name, value, 1);
      again = true;
    }
  if (again) execv("/proc/self/exe", argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
