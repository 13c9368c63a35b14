// The packed GEMM path (codegen/schedule/GemmPlan.h) beside OpenBLAS, alternating in one
// process: each iteration times one einjit call and one call of the peer, back to back, so
// that both see the same load on this shared machine. Counters: the medians of each side's
// GFLOP/s and of the per-iteration ratio einjit / peer (above 1: einjit faster). range: form,
// size, dtype (0 f32, 1 f64), threads (oneTBB and OpenBLAS alike).
#include "einjit/einjit.h"
#include "runtime/Jit.h"
#include "bench/Timing.h"

#include <benchmark/benchmark.h>
#include <cblas.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <map>
#include <string>
#include <vector>

using einjit::DType;
using einjit::Tensor;

namespace {

using einjit::bench::median;
using einjit::bench::seconds;

using einjit::bench::processCpu;

// Runs both sides alternately (one untimed warm-up call each first) and sets the counters:
// each side's median wall time and CPU time per call (all threads: on a loaded machine the CPU
// time is what a comparison can use, the wall time includes the time other processes took).
void alternate(benchmark::State& state, double flops, int threads,
               const std::function<void()>& ours, const std::function<void()>& peer) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                            static_cast<std::size_t>(threads));
  // OpenBLAS's thread count is process-wide: restored below for the benchmarks after this one
  // (bench_cpu's own OpenBLAS rows take it from OPENBLAS_NUM_THREADS).
  const int blasThreads = openblas_get_num_threads();
  openblas_set_num_threads(threads);
  ours();
  peer();
  std::vector<double> a, b, ratio, ca, cb, cratio;
  for (auto _ : state) {
    const double c0 = processCpu();
    const double ta = seconds(ours);
    const double c1 = processCpu();
    const double tb = seconds(peer);
    const double c2 = processCpu();
    state.SetIterationTime(ta + tb);
    a.push_back(flops / ta * 1e-9);
    b.push_back(flops / tb * 1e-9);
    ratio.push_back(tb / ta);
    ca.push_back((c1 - c0) * 1e3);
    cb.push_back((c2 - c1) * 1e3);
    cratio.push_back((c2 - c1) / (c1 - c0));
  }
  state.counters["einjit_GFLOPs"] = median(a);
  state.counters["peer_GFLOPs"] = median(b);
  state.counters["ratio"] = median(ratio);
  state.counters["einjit_cpu_ms"] = median(ca);
  state.counters["peer_cpu_ms"] = median(cb);
  state.counters["cpu_ratio"] = median(cratio);
  openblas_set_num_threads(blasThreads);
}

struct Form {
  const char* program;
  bool transA, transB; // A stored (K, M); B stored (N, K)
};
const Form kForms[] = {{"C[i,k] := A[i,j] * B[j,k]", false, false},
                       {"C[i,k] := A[i,j] * B[k,j]", false, true},
                       {"C[i,k] := A[j,i] * B[j,k]", true, false},
                       {"C[i,k] := A[j,i] * B[k,j]", true, true}};

void gemm(bool f64, bool ta, bool tb, int n, const Tensor& a, const Tensor& b, Tensor& c) {
  const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  if (f64)
    cblas_dgemm(CblasRowMajor, TA, TB, n, n, n, 1.0, a.data<double>(), n, b.data<double>(), n, 0.0,
                c.data<double>(), n);
  else
    cblas_sgemm(CblasRowMajor, TA, TB, n, n, n, 1.0f, a.data<float>(), n, b.data<float>(), n, 0.0f,
                c.data<float>(), n);
}

void BM_Gemm(benchmark::State& state) {
  const Form& f = kForms[state.range(0)];
  const auto n = static_cast<int>(state.range(1));
  const DType dt = state.range(2) == 1 ? DType::f64 : DType::f32;
  einjit::Options o;
  o.defaultDType = dt;
  auto k = einjit::compile(f.program, o);
  Tensor a = Tensor::random({n, n}, dt, 1), b = Tensor::random({n, n}, dt, 2);
  alternate(
      state, 2.0 * n * n * n, static_cast<int>(state.range(3)),
      [&] { benchmark::DoNotOptimize(k(a, b)[std::size_t{0}].data()); },
      [&] {
        Tensor c = Tensor::empty({n, n}, dt);
        gemm(dt == DType::f64, f.transA, f.transB, n, a, b, c);
        benchmark::DoNotOptimize(c.data());
      });
  state.SetLabel(std::string(f.program) + (dt == DType::f64 ? " f64" : " f32"));
}

void gemmArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {2, 1})
    for (int dt : {0, 1})
      for (int form = 0; form < 4; ++form)
        for (int n : {256, 257, 512, 1000, 1024, 2048}) b->Args({form, n, dt, threads});
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
}
BENCHMARK(BM_Gemm)->Apply(gemmArgs);

// C[i,k,b] := A[i,j,b] * B[b,k,j] against what a library einsum does: permute A to [b,i,j] (a
// copy), one GEMM per batch element (C_b = A_b B_b^T), permute the result to [i,k,b].
void BM_GemmPermuted(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const DType dt = state.range(1) == 1 ? DType::f64 : DType::f32;
  const bool f64 = dt == DType::f64;
  constexpr int kB = 4;
  einjit::Options o;
  o.defaultDType = dt;
  auto k = einjit::compile("C[i,k,b] := A[i,j,b] * B[b,k,j]", o);
  Tensor a = Tensor::random({n, n, kB}, dt, 1), b = Tensor::random({kB, n, n}, dt, 2);
  alternate(
      state, 2.0 * n * n * n * kB, static_cast<int>(state.range(2)),
      [&] { benchmark::DoNotOptimize(k(a, b)[std::size_t{0}].data()); },
      [&] {
        Tensor ap = a.permute({2, 0, 1}).contiguous();
        Tensor cp = Tensor::empty({kB, n, n}, dt);
        const std::size_t e = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
        for (std::size_t bb = 0; bb < kB; ++bb) {
          if (f64)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0,
                        ap.data<double>() + bb * e, n, b.data<double>() + bb * e, n, 0.0,
                        cp.data<double>() + bb * e, n);
          else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f,
                        ap.data<float>() + bb * e, n, b.data<float>() + bb * e, n, 0.0f,
                        cp.data<float>() + bb * e, n);
        }
        Tensor c = cp.permute({1, 2, 0}).contiguous();
        benchmark::DoNotOptimize(c.data());
      });
  state.SetLabel(std::string("C[i,k,b] := A[i,j,b] * B[b,k,j], b=4") + (f64 ? " f64" : " f32"));
}
BENCHMARK(BM_GemmPermuted)
    ->ArgsProduct({{256, 512, 1024}, {0, 1}, {2, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

// Linear 784 -> 1024 on a batch of 4096 (f32): y[n,o] := x[n,i] * w[o,i] + b[o], forward
// (range 0 = 0) or forward + the gradients of x, w and b (1), against OpenBLAS calls doing
// the same (y = x w^T + b; dx = dy w, dw = dy^T x, db = column sums of dy).
void BM_GemmLinear(benchmark::State& state) {
  constexpr int kIn = 784, kOut = 1024, kN = 4096;
  const bool grads = state.range(0) == 1;
  auto fwd = einjit::compile("t[n,o] := x[n,i] * w[o,i]\ny[n,o] := t[n,o] + b[o]");
  auto back = fwd.gradient({"x", "w", "b"});
  Tensor x = Tensor::random({kN, kIn}, DType::f32, 1),
         w = Tensor::random({kOut, kIn}, DType::f32, 2);
  Tensor b = Tensor::random({kOut}, DType::f32, 3), dy = Tensor::random({kN, kOut}, DType::f32, 4);
  std::map<std::string, Tensor> all{{"x", x}, {"w", w}, {"b", b}, {"dy", dy}};
  std::vector<einjit::Arg> gargs;
  for (const auto& name : back.tensorArguments()) gargs.push_back(all.at(name));
  alternate(
      state, (grads ? 3.0 : 1.0) * 2.0 * kIn * kOut * kN, static_cast<int>(state.range(1)),
      [&] {
        benchmark::DoNotOptimize(fwd(x, w, b)[std::size_t{0}].data());
        if (grads) benchmark::DoNotOptimize(back.call(gargs)[std::size_t{0}].data());
      },
      [&] {
        Tensor y = Tensor::empty({kN, kOut});
        float* py = y.data<float>();
        for (int r = 0; r < kN; ++r)
          std::copy(b.data<float>(), b.data<float>() + kOut, py + std::size_t{1} * r * kOut);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kN, kOut, kIn, 1.0f, x.data<float>(),
                    kIn, w.data<float>(), kIn, 1.0f, py, kOut);
        benchmark::DoNotOptimize(py);
        if (!grads) return;
        Tensor dx = Tensor::empty({kN, kIn}), dw = Tensor::empty({kOut, kIn}),
               db = Tensor::zeros({kOut});
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kIn, kOut, 1.0f,
                    dy.data<float>(), kOut, w.data<float>(), kIn, 0.0f, dx.data<float>(), kIn);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kOut, kIn, kN, 1.0f, dy.data<float>(),
                    kOut, x.data<float>(), kIn, 0.0f, dw.data<float>(), kIn);
        float* pdb = db.data<float>();
        for (int r = 0; r < kN; ++r)
          for (int c = 0; c < kOut; ++c) pdb[c] += dy.data<float>()[std::size_t{1} * r * kOut + c];
        benchmark::DoNotOptimize(dx.data());
        benchmark::DoNotOptimize(dw.data());
      });
  state.SetLabel(grads ? "Linear 784->1024 x4096, forward + gradients" : "Linear forward");
}
BENCHMARK(BM_GemmLinear)
    ->ArgsProduct({{0, 1}, {2, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

// The cold JIT compile of a packed GEMM kernel (a new program each iteration, disk cache off):
// parse, check, bind, lower, LLVM O3, object, load, through explain (no run).
void BM_GemmCompile(benchmark::State& state) {
  const std::string saved = einjit::runtime::jitCacheDirectory();
  einjit::runtime::jitSetCacheDirectory("");
  Tensor a = Tensor::random({512, 512}, DType::f32, 1);
  static int serial = 0;
  for (auto _ : state) {
    auto k =
        einjit::compile("C[i,k] := A[i,j] * B[k,j] * " + std::to_string(1.0 + 1e-6 * ++serial));
    benchmark::DoNotOptimize(k.explain({a, a}));
  }
  einjit::runtime::jitSetCacheDirectory(saved);
}
BENCHMARK(BM_GemmCompile)->Unit(benchmark::kMillisecond)->UseRealTime();

} // namespace
