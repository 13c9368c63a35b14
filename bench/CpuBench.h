#pragma once
// What the files of bench_cpu (bench_cpu.cpp: the FMA peak, GEMM forms and the permuted
// contraction; bench_cpu_conv.cpp: convolutions and alignment; bench_cpu_layers.cpp: the
// Linear and distance layers; bench_cpu_compile.cpp: compile latency) share: the GFLOP/s
// counter, random tensors, the convolution's and the layers' shapes and programs (the compile
// rows compile the kernels that the speed rows run), and the process's CPU time.
#include "einjit/einjit.h"

#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <cstdint>

namespace einjit::bench::cpu {

inline void setFlops(benchmark::State& state, double flop) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flop, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

inline einjit::Tensor rnd(const einjit::Shape& s, std::uint64_t seed) {
  return einjit::Tensor::random(s, einjit::DType::f32, seed);
}

// The convolution rows' shapes: N images of H x H, C -> O channels.
constexpr std::int64_t kN = 8, kC = 64, kO = 64, kH = 56;

inline const char* convProgram(int stride) {
  return stride == 1 ? "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]"
                     : "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]";
}
inline std::int64_t convOut(int stride) { return (kH - 3) / stride + 1; }
inline double convFlops(int stride) {
  return 2.0 * kN * kO * convOut(stride) * convOut(stride) * kC * 9;
}

// The layers' shapes and programs.
constexpr std::int64_t kIn = 784, kOut = 1024, kBatchL = 4096;
constexpr const char* kLinear = "t[i,j] := w[k,i] * x[k,j]\ny[i,j] := t[i,j] + b[i]";
constexpr const char* kDistance = "y[i,j] := (w[k,i] - x[k,j]) ^ 2";

// CPU time of the whole process (user + system, all threads): the functions of a program
// compile on several threads.
inline double processCpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) * 1e-3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

} // namespace einjit::bench::cpu
