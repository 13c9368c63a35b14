// The reference interpreter beside a hand-written loop of the same matmul. The interpreter
// is the correctness oracle, not a fast path; this benchmark keeps its cost visible (tests
// that run thousands of programs through it depend on it) and is the template the JIT and
// BLAS comparisons of the next issues follow: einjit and its peer in one process, GFLOP/s in
// a counter, ratio computed from the two rows.
#include "einjit/einjit.h"

#include <benchmark/benchmark.h>

namespace {

void matmulCounters(benchmark::State& state, std::int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(n * n * n),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void BM_InterpreterMatmul(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  einjit::Options ref;
  ref.device = einjit::Device::reference();
  auto mm = einjit::compile("C[i,k] := A[i,j] * B[j,k]", ref);
  auto a = einjit::Tensor::random({n, n}, einjit::DType::f32, 1);
  auto b = einjit::Tensor::random({n, n}, einjit::DType::f32, 2);
  for (auto _ : state) {
    einjit::Tensor c = mm(a, b);
    benchmark::DoNotOptimize(c.data());
  }
  matmulCounters(state, n);
}

void BM_NaiveLoopMatmul(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  auto a = einjit::Tensor::random({n, n}, einjit::DType::f32, 1);
  auto b = einjit::Tensor::random({n, n}, einjit::DType::f32, 2);
  auto c = einjit::Tensor::zeros({n, n});
  const float *pa = a.data<float>(), *pb = b.data<float>();
  float* pc = c.data<float>();
  for (auto _ : state) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < n; ++k) {
        double acc = 0;
        for (std::int64_t j = 0; j < n; ++j) acc += double(pa[i * n + j]) * pb[j * n + k];
        pc[i * n + k] = static_cast<float>(acc);
      }
    benchmark::DoNotOptimize(pc);
  }
  matmulCounters(state, n);
}

} // namespace

BENCHMARK(BM_InterpreterMatmul)->Arg(32)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NaiveLoopMatmul)->Arg(32)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
