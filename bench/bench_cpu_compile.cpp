// bench_cpu's compile rows: a cold compile, the in-memory and on-disk cache hits, a call's
// overhead, cold compile time against the shape, and the cold compile of every kernel the
// speed rows run through the packed GEMM path.
#include "bench/CpuBench.h"
#include "einjit/einjit.h"
#include "runtime/Jit.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using einjit::DType;
using einjit::Tensor;

namespace {

using namespace einjit::bench::cpu;

// --- compile latency and call overhead ------------------------------------------------------

// A new program each iteration (a different constant), disk cache off: parse, check, lower,
// LLVM O3, object emission, load.
void BM_Compile_cold(benchmark::State& state) {
  const std::string saved = einjit::runtime::jitCacheDirectory();
  einjit::runtime::jitSetCacheDirectory("");
  Tensor x = rnd({64, 64}, 1), w = rnd({64, 64}, 2);
  static int serial = 0; // new programs in every repetition too
  for (auto _ : state) {
    auto k =
        einjit::compile("C[i,k] := A[i,j] * B[j,k] * " + std::to_string(1.0 + 1e-6 * ++serial));
    benchmark::DoNotOptimize(k(x, w)[std::size_t{0}].data());
  }
  einjit::runtime::jitSetCacheDirectory(saved);
}
// The same program compiled again in the process: the kernel cache in memory.
void BM_Compile_memory_hit(benchmark::State& state) {
  Tensor x = rnd({64, 64}, 1), w = rnd({64, 64}, 2);
  for (auto _ : state) {
    auto k = einjit::compile("C[i,k] := A[i,j] * B[j,k]");
    benchmark::DoNotOptimize(k(x, w)[std::size_t{0}].data());
  }
}
// The same program after the in-memory cache is dropped: the on-disk cache.
void BM_Compile_disk_hit(benchmark::State& state) {
  Tensor x = rnd({64, 64}, 1), w = rnd({64, 64}, 2);
  einjit::compile("C[i,k] := A[i,j] * B[j,k] * 0.5")(x, w); // make sure the entry exists
  for (auto _ : state) {
    einjit::runtime::jitClearMemoryCache();
    auto k = einjit::compile("C[i,k] := A[i,j] * B[j,k] * 0.5");
    benchmark::DoNotOptimize(k(x, w)[std::size_t{0}].data());
  }
}
// One call of a compiled kernel on 4 elements: binding, checks, allocation, launch.
void BM_Call_overhead(benchmark::State& state) {
  auto k = einjit::compile("y[i] := x[i] * 2");
  Tensor x = rnd({4}, 1);
  k(x);
  for (auto _ : state) benchmark::DoNotOptimize(k(x)[std::size_t{0}].data());
}
// Cold compile time against the shape: a new program each iteration (a different constant),
// disk cache off; compiled through explain (parse, check, bind, lower, LLVM O3, object, load)
// without running. range(0): program (0 elementwise, 1 convolution, 2 its gradient);
// range(1): log10 of the element count; range(2): 0 f32, 1 f64. Run under `taskset -c 0`
// for one thread (oneTBB follows the process's affinity).
void BM_Compile_shape(benchmark::State& state) {
  const std::string saved = einjit::runtime::jitCacheDirectory();
  einjit::runtime::jitSetCacheDirectory("");
  const DType dt = state.range(2) == 0 ? DType::f32 : DType::f64;
  std::int64_t n = 1;
  for (int e = 0; e < state.range(1); ++e) n *= 10;
  Tensor x = Tensor::random({n + 2}, dt, 1), w = Tensor::random({3}, dt, 2);
  Tensor dy = Tensor::random({n}, dt, 3);
  static int serial = 0;
  std::vector<double> cpu;
  for (auto _ : state) {
    const double c0 = processCpuMs();
    const std::string c = std::to_string(1.0 + 1e-6 * ++serial);
    if (state.range(0) == 0) {
      benchmark::DoNotOptimize(einjit::compile("y[i] := x[i] * " + c).explain({x}));
    } else {
      auto k = einjit::compile("y[i] := x[i+k] * w[k] * " + c);
      if (state.range(0) == 1) {
        benchmark::DoNotOptimize(k.explain({x, w}));
      } else {
        auto g = k.gradient();
        std::map<std::string, Tensor> in{{"dy", dy}, {"x", x}, {"w", w}};
        std::vector<einjit::Arg> args;
        for (const auto& name : g.tensorArguments()) args.push_back(in.at(name));
        benchmark::DoNotOptimize(g.explain(args));
      }
    }
    cpu.push_back(processCpuMs() - c0);
  }
  // The median and the minimum (which load on a shared machine inflates least).
  std::sort(cpu.begin(), cpu.end());
  state.counters["cpu_ms"] = cpu[cpu.size() / 2];
  state.counters["cpu_ms_min"] = cpu.front();
  state.SetLabel(std::string(state.range(0) == 0   ? "elementwise"
                             : state.range(0) == 1 ? "conv1d"
                                                   : "conv1d gradient") +
                 " n=" + std::to_string(n) + (state.range(2) == 0 ? " f32" : " f64"));
  einjit::runtime::jitSetCacheDirectory(saved);
}
// Cold compile of the kernels that run through the packed GEMM path (issue 24: at most 50 ms
// each), at the shapes the speed benchmarks run them: the kernel's first call without the run
// (bind, lower, LLVM, object, load, through explain), the in-memory cache dropped and the disk
// cache off before each (parsing and differentiation are done once, untimed). range(0): the
// row of kPacked.
struct PackedCase {
  const char* name;
  const char* program;
  const char* wrt; // "" forward; else the gradient with respect to these (space-separated)
  std::vector<std::pair<const char*, einjit::Shape>> inputs;
};
const std::vector<PackedCase>& packedCases() {
  const einjit::Shape sq{1024, 1024}, x{kN, kC, kH, kH}, k{kO, kC, 3, 3};
  const einjit::Shape dy1{kN, kO, convOut(1), convOut(1)}, dy2{kN, kO, convOut(2), convOut(2)};
  static const std::vector<PackedCase> cases{
      {"GEMM A[i,j]*B[j,k] 1024", "C[i,k] := A[i,j] * B[j,k]", "", {{"A", sq}, {"B", sq}}},
      {"GEMM A[i,j]*B[k,j] 1024", "C[i,k] := A[i,j] * B[k,j]", "", {{"A", sq}, {"B", sq}}},
      {"GEMM A[j,i]*B[j,k] 1024", "C[i,k] := A[j,i] * B[j,k]", "", {{"A", sq}, {"B", sq}}},
      {"GEMM A[j,i]*B[k,j] 1024", "C[i,k] := A[j,i] * B[k,j]", "", {{"A", sq}, {"B", sq}}},
      {"permuted A[i,j,b]*B[b,k,j] 512x4",
       "C[i,k,b] := A[i,j,b] * B[b,k,j]",
       "",
       {{"A", {512, 512, 4}}, {"B", {4, 512, 512}}}},
      {"conv 3x3 stride 1 forward", convProgram(1), "", {{"x", x}, {"k", k}}},
      {"conv 3x3 stride 1 input gradient", convProgram(1), "x", {{"dy", dy1}, {"x", x}, {"k", k}}},
      {"conv 3x3 stride 1 weight gradient", convProgram(1), "k", {{"dy", dy1}, {"x", x}, {"k", k}}},
      {"conv 3x3 stride 2 forward", convProgram(2), "", {{"x", x}, {"k", k}}},
      {"conv 3x3 stride 2 input gradient", convProgram(2), "x", {{"dy", dy2}, {"x", x}, {"k", k}}},
      {"conv 3x3 stride 2 weight gradient", convProgram(2), "k", {{"dy", dy2}, {"x", x}, {"k", k}}},
      {"Linear forward", kLinear, "", {{"w", {kIn, kOut}}, {"x", {kIn, kBatchL}}, {"b", {kOut}}}},
      {"Linear gradient (w, x, b)",
       kLinear,
       "w x b",
       {{"dy", {kOut, kBatchL}}, {"w", {kIn, kOut}}, {"x", {kIn, kBatchL}}, {"b", {kOut}}}},
      {"distance forward", kDistance, "", {{"w", {kIn, kOut}}, {"x", {kIn, kBatchL}}}},
      {"distance gradient (w, x)",
       kDistance,
       "w x",
       {{"dy", {kOut, kBatchL}}, {"w", {kIn, kOut}}, {"x", {kIn, kBatchL}}}},
  };
  return cases;
}
void BM_Compile_packed(benchmark::State& state) {
  const PackedCase& c = packedCases()[static_cast<std::size_t>(state.range(0))];
  const std::string saved = einjit::runtime::jitCacheDirectory();
  einjit::runtime::jitSetCacheDirectory("");
  einjit::Kernel kernel = einjit::compile(c.program);
  if (*c.wrt) {
    std::vector<std::string> wrt;
    std::istringstream names(c.wrt);
    for (std::string n; names >> n;) wrt.push_back(n);
    kernel = kernel.gradient(wrt);
  }
  std::map<std::string, Tensor> all;
  std::uint64_t seed = 1;
  for (const auto& [name, shape] : c.inputs) all[name] = rnd(shape, seed++);
  std::vector<einjit::Arg> args;
  for (const auto& name : kernel.tensorArguments()) args.push_back(all.at(name));
  std::vector<double> cpu;
  for (auto _ : state) {
    einjit::clearCaches(); // the JIT's modules and every kernel's binding memo
    const double c0 = processCpuMs();
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(kernel.explain(args));
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(processCpuMs() - c0);
  }
  std::sort(cpu.begin(), cpu.end());
  state.counters["cpu_ms"] = cpu[cpu.size() / 2];
  state.counters["cpu_ms_min"] = cpu.front();
  state.SetLabel(c.name);
  einjit::runtime::jitSetCacheDirectory(saved);
}
void compilePackedArgs(benchmark::internal::Benchmark* b) {
  for (std::size_t row = 0; row < packedCases().size(); ++row)
    b->Arg(static_cast<std::int64_t>(row));
  b->UseManualTime()->Unit(benchmark::kMillisecond);
}
void compileShapeArgs(benchmark::internal::Benchmark* b) {
  for (int program = 0; program < 3; ++program)
    for (int e : {0, 3, 5, 7})
      for (int dt = 0; dt < 2; ++dt) b->Args({program, e, dt});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_Compile_shape)->Apply(compileShapeArgs);
BENCHMARK(BM_Compile_packed)->Apply(compilePackedArgs);
BENCHMARK(BM_Compile_cold)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Compile_memory_hit)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Compile_disk_hit)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Call_overhead)->Unit(benchmark::kMicrosecond)->UseRealTime();

} // namespace
