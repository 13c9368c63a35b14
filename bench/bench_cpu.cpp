// The CPU JIT beside its peers, in one process: OpenBLAS (run this binary twice, with and
// without OPENBLAS_CORETYPE=SkylakeX; bench/run_cpu.sh does), Eigen (OpenMP) and oneDNN.
// Every case reports GFLOP/s; bench/summarize.py turns the JSON into the ratio table of
// bench/RESULTS.md.
#include "bench/DnnlConv.h"
#include "bench/Timing.h"
#include "einjit/einjit.h"
#include "runtime/Jit.h"
#include "bench/Timing.h"

#include <Eigen/Dense>
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <tbb/global_control.h>

#include <immintrin.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using einjit::DType;
using einjit::Tensor;

namespace {

void setFlops(benchmark::State& state, double flop) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flop, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

Tensor rnd(const einjit::Shape& s, std::uint64_t seed) {
  return Tensor::random(s, DType::f32, seed);
}

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

// --- conv2d NCHW 3x3, stride 1 and 2: forward, input gradient, weight gradient ---------------

constexpr std::int64_t kN = 8, kC = 64, kO = 64, kH = 56;

const char* convProgram(int stride) {
  return stride == 1 ? "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]"
                     : "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]";
}
std::int64_t convOut(int stride) { return (kH - 3) / stride + 1; }
double convFlops(int stride) { return 2.0 * kN * kO * convOut(stride) * convOut(stride) * kC * 9; }

const char* convPass(int pass) {
  return pass == 0   ? "forward"
         : pass == 1 ? "input gradient"
         : pass == 2 ? "weight gradient"
                     : "forward + gradients";
}

// A convolution case on N 8 images of 56 x 56: C -> O channels, a KS x KS filter at `stride`,
// without padding. Every case is the same program, the filter's size set by k's shape (a 1x1
// convolution is the 3x3 layer's program with a 1x1 filter, as a network writes it).
struct ConvCase {
  std::int64_t c, o, ks;
  int stride;
  std::int64_t out() const { return (kH - ks) / stride + 1; }
  double flops() const { return 2.0 * kN * o * out() * out() * c * ks * ks; }
  std::string label(int pass) const {
    return std::string(convPass(pass)) +
           (ks == 1 ? ", 1x1 " + std::to_string(c) + "->" + std::to_string(o)
                    : " stride " + std::to_string(stride));
  }
};
ConvCase conv3x3(int stride) { return {kC, kO, 3, stride}; }

// One call of einjit's convolution (pass: 0 forward, 1 input gradient, 2 weight gradient, 3
// the layer: forward, then the gradient of x and k in one program, as autograd's backward),
// compiled and run once here (the first call compiles: BM_Compile_* time that).
std::function<void()> einjitConv(const ConvCase& cc, int pass, DType dt = DType::f32) {
  einjit::Options opt;
  opt.defaultDType = dt;
  auto conv = std::make_shared<einjit::Kernel>(einjit::compile(convProgram(cc.stride), opt));
  Tensor x = Tensor::random({kN, cc.c, kH, kH}, dt, 1);
  Tensor k = Tensor::random({cc.o, cc.c, cc.ks, cc.ks}, dt, 2);
  Tensor dy = Tensor::random({kN, cc.o, cc.out(), cc.out()}, dt, 3);
  auto g = std::make_shared<einjit::Kernel>(pass == 1   ? conv->gradient({"x"})
                                            : pass == 2 ? conv->gradient({"k"})
                                                        : conv->gradient({"x", "k"}));
  std::function<void()> once = [=] {
    if (pass == 0 || pass == 3) benchmark::DoNotOptimize((*conv)(x, k)[std::size_t{0}].data());
    if (pass != 0)
      benchmark::DoNotOptimize(g->call({{"dy", dy}, {"x", x}, {"k", k}})[std::size_t{0}].data());
  };
  once();
  return once;
}
std::function<void()> einjitConv(int stride, int pass) { return einjitConv(conv3x3(stride), pass); }

// One call of oneDNN's, in the layouts it prefers (format_tag::any, blocked), buffers filled
// with random values directly; reorders are not timed. Its strongest configuration.
std::function<void()> oneDnnConv(const ConvCase& cc, int pass) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  einjit::bench::DnnlConvPass o = einjit::bench::dnnlConvPass(
      eng, {kN, cc.c, kH, kH}, {cc.o, cc.c, cc.ks, cc.ks}, cc.stride, pass, 9);
  dnnl::primitive prim = o.prim;
  std::unordered_map<int, dnnl::memory> args = o.args;
  return [eng, prim, args, s]() mutable {
    prim.execute(s, args);
    s.wait();
  };
}
std::function<void()> oneDnnConv(int stride, int pass) { return oneDnnConv(conv3x3(stride), pass); }

void BM_Conv_einjit(benchmark::State& state) {
  const int stride = static_cast<int>(state.range(0)), pass = static_cast<int>(state.range(1));
  const std::function<void()> once = einjitConv(stride, pass);
  for (auto _ : state) once();
  setFlops(state, convFlops(stride));
  state.SetLabel(std::string(convPass(pass)) + " stride " + std::to_string(stride));
}

void BM_Conv_oneDNN(benchmark::State& state) {
  const int stride = static_cast<int>(state.range(0)), pass = static_cast<int>(state.range(1));
  const std::function<void()> once = oneDnnConv(stride, pass);
  for (auto _ : state) once();
  setFlops(state, convFlops(stride));
  state.SetLabel(std::string(convPass(pass)) + " stride " + std::to_string(stride));
}

// Both, alternated per iteration in one process (a shared host's speed swings between runs
// and within one: only the ratio of calls side by side is a figure). Counters: each side's
// median ms and GFLOP/s, and the median per-iteration ratio oneDNN time / einjit time (above
// 1: einjit faster), of wall time (`ratio`) and of process CPU time (`cpu_ratio`). Threads:
// the process's CPUs (taskset), for oneTBB and oneDNN alike.
void convAlt(benchmark::State& state, const ConvCase& cc, int pass) {
  const std::function<void()> ours = einjitConv(cc, pass), peer = oneDnnConv(cc, pass);
  peer();
  std::vector<double> a, b, ratio, cpuRatio;
  for (auto _ : state) {
    const double c0 = einjit::bench::processCpu();
    const double ta = einjit::bench::seconds(ours);
    const double c1 = einjit::bench::processCpu();
    const double tb = einjit::bench::seconds(peer);
    const double c2 = einjit::bench::processCpu();
    state.SetIterationTime(ta + tb);
    a.push_back(ta * 1e3);
    b.push_back(tb * 1e3);
    ratio.push_back(tb / ta);
    cpuRatio.push_back((c2 - c1) / (c1 - c0));
  }
  // On one CPU (taskset) the process's CPU time leaves out the time other processes took:
  // under load the steadier figure (on two, it also counts the workers' waiting).
  state.counters["cpu_ratio"] = einjit::bench::median(cpuRatio);
  const double flops = cc.flops();
  state.counters["einjit_ms"] = einjit::bench::median(a);
  state.counters["oneDNN_ms"] = einjit::bench::median(b);
  state.counters["einjit_GFLOPs"] = flops / einjit::bench::median(a) * 1e-6;
  state.counters["oneDNN_GFLOPs"] = flops / einjit::bench::median(b) * 1e-6;
  state.counters["ratio"] = einjit::bench::median(ratio);
  state.SetLabel(cc.label(pass));
}

// range: stride, pass (3x3, C = O = 64).
void BM_ConvAlt(benchmark::State& state) {
  convAlt(state, conv3x3(static_cast<int>(state.range(0))), static_cast<int>(state.range(1)));
}
// range: C, O, pass (1x1, stride 1: a GEMM per image with the pixels as its columns).
void BM_ConvAlt1x1(benchmark::State& state) {
  convAlt(state, {state.range(0), state.range(1), 1, 1}, static_cast<int>(state.range(2)));
}

void convArgs(benchmark::internal::Benchmark* b) {
  for (int stride : {1, 2})
    for (int pass : {0, 1, 2}) b->Args({stride, pass});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK(BM_Conv_einjit)->Apply(convArgs);
BENCHMARK(BM_Conv_oneDNN)->Apply(convArgs);
BENCHMARK(BM_ConvAlt)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int stride : {1, 2})
        for (int pass : {0, 1, 2}) b->Args({stride, pass});
    })
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(BM_ConvAlt1x1)
    ->ArgsProduct({{64}, {256}, {0, 1, 2}})
    ->ArgsProduct({{256}, {64}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

// einjit alone, for the PyTorch columns of bench/run_layers.sh (layers_torch.py names its
// cases after these rows): range(0) the case (0 3x3 stride 1, 1 3x3 stride 2, C = O = 64;
// 2 1x1 64 -> 256), range(1) 0 f32, 1 f64 (oneDNN has no f64 convolution on the CPU: PyTorch
// is the f64 peer), range(2) the pass (einjitConv; 3: the layer, forward + all gradients).
void BM_ConvPass_einjit(benchmark::State& state) {
  const ConvCase cc =
      state.range(0) == 2 ? ConvCase{kC, 256, 1, 1} : conv3x3(static_cast<int>(state.range(0)) + 1);
  const DType dt = state.range(1) == 1 ? DType::f64 : DType::f32;
  const int pass = static_cast<int>(state.range(2));
  const std::function<void()> once = einjitConv(cc, pass, dt);
  for (auto _ : state) once();
  setFlops(state, (pass == 3 ? 3.0 : 1.0) * cc.flops());
  state.SetLabel(cc.label(pass) + (dt == DType::f64 ? " f64" : " f32"));
}
BENCHMARK(BM_ConvPass_einjit)
    ->ArgsProduct({{0, 1}, {0}, {0, 3}})
    ->ArgsProduct({{0, 1}, {1}, {0, 1, 2, 3}})
    ->ArgsProduct({{2}, {0, 1}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// --- alignment: the same kernel with its output and operands shifted from a cache line ------

// A tensor of random values `shift` bytes past a 64-byte boundary (a view into a larger block
// that the returned holder owns).
struct Shifted {
  std::shared_ptr<float> block;
  Tensor t;
};
Shifted shifted(const einjit::Shape& s, std::int64_t shift, std::uint64_t seed) {
  std::int64_t n = 1;
  for (std::int64_t d : s) n *= d;
  const auto bytes = static_cast<std::size_t>((n * 4 + shift + 63) / 64 * 64);
  std::shared_ptr<float> block(static_cast<float*>(std::aligned_alloc(64, bytes)), std::free);
  Tensor t = Tensor::view(block.get() + shift / 4, DType::f32, s);
  std::memcpy(t.data(), rnd(s, seed).data(), static_cast<std::size_t>(n) * 4);
  return {block, t};
}

// range(0): 0 GEMM C[i,k] = A[i,j] * B[j,k] at 1024, 1 conv 3x3 stride 1 forward (the bench's
// shapes), both writing into a given output ('='); range(1): the output's shift in bytes from
// a 64-byte boundary, range(2): the operands'. Each iteration calls the kernel on aligned
// buffers and on the shifted ones, alternated, so that the machine's drift falls on both: the
// counter `shifted/aligned` (the median of the per-iteration ratios) is the figure (issue 24:
// within 1.2x); the iteration time is the shifted call's.
void BM_Align_einjit(benchmark::State& state) {
  const bool conv = state.range(0) == 1;
  const std::int64_t outShift = state.range(1), inShift = state.range(2);
  auto k = einjit::compile(conv ? "y[n,o,h,w] = x[n,c,h+a,w+b] * k[o,c,a,b]"
                                : "C[i,k] = A[i,j] * B[j,k]");
  std::vector<Shifted> keep;
  std::map<std::string, Tensor> aligned, moved;
  auto add = [&](const char* name, const einjit::Shape& s, std::int64_t shift) {
    const std::uint64_t seed = keep.size() + 1;
    keep.push_back(shifted(s, 0, seed));
    aligned[name] = keep.back().t;
    keep.push_back(shifted(s, shift, seed));
    moved[name] = keep.back().t;
  };
  if (conv) {
    add("x", {kN, kC, kH, kH}, inShift);
    add("k", {kO, kC, 3, 3}, inShift);
    add("y", {kN, kO, convOut(1), convOut(1)}, outShift);
  } else {
    add("A", {1024, 1024}, inShift);
    add("B", {1024, 1024}, inShift);
    add("C", {1024, 1024}, outShift);
  }
  k.call(aligned); // the first call compiles
  k.call(moved);
  std::vector<double> ratios;
  for (auto _ : state) {
    const double a = einjit::bench::seconds([&] { k.call(aligned); });
    const double m = einjit::bench::seconds([&] { k.call(moved); });
    ratios.push_back(m / a);
    state.SetIterationTime(m);
  }
  setFlops(state, conv ? convFlops(1) : 2.0 * 1024 * 1024 * 1024);
  state.counters["shifted/aligned"] = einjit::bench::median(ratios);
  state.SetLabel(std::string(conv ? "conv stride 1 forward" : "GEMM 1024") + ", output +" +
                 std::to_string(outShift) + " B, operands +" + std::to_string(inShift) + " B");
}
void alignArgs(benchmark::internal::Benchmark* b) {
  for (int kernel : {0, 1}) {
    for (int s : {4, 16, 32, 64}) b->Args({kernel, s, 0});
    for (int s : {4, 16, 32, 64}) b->Args({kernel, 0, s});
  }
  b->Unit(benchmark::kMillisecond)->UseManualTime();
}
BENCHMARK(BM_Align_einjit)->Apply(alignArgs);

// --- layers: forward, and forward + all gradients -----------------------------------------

constexpr std::int64_t kIn = 784, kOut = 1024, kBatchL = 4096;
const char* kLinear = "t[i,j] := w[k,i] * x[k,j]\ny[i,j] := t[i,j] + b[i]";
const char* kDistance = "y[i,j] := (w[k,i] - x[k,j]) ^ 2";

// range(0): 0 forward, 1 forward + gradients (all inputs)
void layer(benchmark::State& state, const char* program, bool bias) {
  auto fwd = einjit::compile(program);
  auto back = fwd.gradient();
  Tensor w = rnd({kIn, kOut}, 1), x = rnd({kIn, kBatchL}, 2), b = rnd({kOut}, 3);
  Tensor dy = rnd({kOut, kBatchL}, 4);
  std::map<std::string, Tensor> in{{"w", w}, {"x", x}};
  if (bias) in["b"] = b;
  std::map<std::string, Tensor> gin = in;
  gin["dy"] = dy;
  std::map<std::string, Tensor> used;
  for (const auto& n : back.tensorArguments()) used[n] = gin.at(n);
  auto once = [&] {
    benchmark::DoNotOptimize(fwd.call(in)[std::size_t{0}].data());
    if (state.range(0) == 1) benchmark::DoNotOptimize(back.call(used)[std::size_t{0}].data());
  };
  once(); // the first call compiles (BM_Compile_* time that)
  for (auto _ : state) once();
  setFlops(state, (state.range(0) == 1 ? 3.0 : 1.0) * 2.0 * kIn * kOut * kBatchL);
  state.SetLabel(state.range(0) == 1 ? "forward + gradients" : "forward");
}
void BM_Linear_einjit(benchmark::State& state) { layer(state, kLinear, true); }
void BM_Distance_einjit(benchmark::State& state) { layer(state, kDistance, false); }

// OpenBLAS: y = w^T x + b; backward dW = x dy^T, dx = w dy, db = row sums of dy.
void BM_Linear_OpenBLAS(benchmark::State& state) {
  Tensor w = rnd({kIn, kOut}, 1), x = rnd({kIn, kBatchL}, 2), b = rnd({kOut}, 3),
         dy = rnd({kOut, kBatchL}, 4);
  for (auto _ : state) {
    Tensor y = Tensor::empty({kOut, kBatchL});
    float* py = y.data<float>();
    for (std::int64_t i = 0; i < kOut; ++i)
      for (std::int64_t j = 0; j < kBatchL; ++j) py[i * kBatchL + j] = b.data<float>()[i];
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kOut, kBatchL, kIn, 1.0f, w.data<float>(),
                kOut, x.data<float>(), kBatchL, 1.0f, py, kBatchL);
    benchmark::DoNotOptimize(py);
    if (state.range(0) == 1) {
      Tensor dw = Tensor::empty({kIn, kOut}), dx = Tensor::empty({kIn, kBatchL}),
             db = Tensor::empty({kOut});
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kIn, kOut, kBatchL, 1.0f,
                  x.data<float>(), kBatchL, dy.data<float>(), kBatchL, 0.0f, dw.data<float>(),
                  kOut);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kIn, kBatchL, kOut, 1.0f,
                  w.data<float>(), kOut, dy.data<float>(), kBatchL, 0.0f, dx.data<float>(),
                  kBatchL);
      for (std::int64_t i = 0; i < kOut; ++i) {
        float s = 0;
        for (std::int64_t j = 0; j < kBatchL; ++j) s += dy.data<float>()[i * kBatchL + j];
        db.data<float>()[i] = s;
      }
      benchmark::DoNotOptimize(dw.data());
      benchmark::DoNotOptimize(dx.data());
    }
  }
  setFlops(state, (state.range(0) == 1 ? 3.0 : 1.0) * 2.0 * kIn * kOut * kBatchL);
  state.SetLabel(state.range(0) == 1 ? "forward + gradients" : "forward");
}

// The distance layer through BLAS: |w_i|^2 + |x_j|^2 - 2 w_i . x_j (one GEMM and two norms).
void distanceBlas(const Tensor& w, const Tensor& x) {
  Tensor y = Tensor::empty({kOut, kBatchL});
  const float *pw = w.data<float>(), *px = x.data<float>();
  std::vector<float> nw(kOut, 0.0f), nx(kBatchL, 0.0f);
  for (std::int64_t k = 0; k < kIn; ++k) {
    for (std::int64_t i = 0; i < kOut; ++i)
      nw[static_cast<std::size_t>(i)] += pw[k * kOut + i] * pw[k * kOut + i];
    for (std::int64_t j = 0; j < kBatchL; ++j)
      nx[static_cast<std::size_t>(j)] += px[k * kBatchL + j] * px[k * kBatchL + j];
  }
  float* py = y.data<float>();
  for (std::int64_t i = 0; i < kOut; ++i)
    for (std::int64_t j = 0; j < kBatchL; ++j)
      py[i * kBatchL + j] = nw[static_cast<std::size_t>(i)] + nx[static_cast<std::size_t>(j)];
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kOut, kBatchL, kIn, -2.0f, pw, kOut, px,
              kBatchL, 1.0f, py, kBatchL);
  benchmark::DoNotOptimize(py);
}

void BM_Distance_OpenBLAS(benchmark::State& state) {
  Tensor w = rnd({kIn, kOut}, 1), x = rnd({kIn, kBatchL}, 2);
  for (auto _ : state) distanceBlas(w, x);
  setFlops(state, 2.0 * kIn * kOut * kBatchL);
  state.SetLabel("forward");
}

// CPU time of the whole process (user + system, all threads): the functions of a program
// compile on several threads.
double processCpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) * 1e-3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

// The distance layer's three calls alternated per iteration in one process: einjit's forward,
// einjit's forward + gradients (w and x) and the OpenBLAS composition, so that the machine's
// drift falls on all three (the separate BM_Distance_* rows swing between runs). range(0):
// threads (oneTBB and OpenBLAS alike). Counters: each call's median wall ms and CPU ms (all
// threads: under load the CPU time is the steadier measure) and the medians of the
// per-iteration ratios: `peer/forward` (above 1: einjit's forward faster) and
// `grads/forward`, einjit's (forward + gradients) / forward (issue 24: at most 3.5). A fourth
// call, einjit's plain product `w[k,i] * x[k,j]` of the same shapes (the composition's GEMM on
// the same packed path), splits the forward's distance to the composition into the path's
// GEMM against OpenBLAS's and the subtraction's cost on that path: `forward/gemm` (wall and CPU).
void BM_DistanceAlt(benchmark::State& state) {
  const auto threads = static_cast<int>(state.range(0));
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                            static_cast<std::size_t>(threads));
  // OpenBLAS's thread count is process-wide: restored at the end for the benchmarks after this
  // one (with --benchmark_enable_random_interleaving, any of them).
  const int blasThreads = openblas_get_num_threads();
  openblas_set_num_threads(threads);
  auto fwd = einjit::compile(kDistance);
  auto back = fwd.gradient();
  auto gemm = einjit::compile("y[i,j] := w[k,i] * x[k,j]");
  Tensor w = rnd({kIn, kOut}, 1), x = rnd({kIn, kBatchL}, 2), dy = rnd({kOut, kBatchL}, 4);
  std::map<std::string, Tensor> in{{"w", w}, {"x", x}}, all{{"w", w}, {"x", x}, {"dy", dy}};
  std::map<std::string, Tensor> used;
  for (const auto& n : back.tensorArguments()) used[n] = all.at(n);
  const std::function<void()> forward = [&] {
    benchmark::DoNotOptimize(fwd.call(in)[std::size_t{0}].data());
  };
  const std::function<void()> both = [&] {
    forward();
    benchmark::DoNotOptimize(back.call(used)[std::size_t{0}].data());
  };
  const std::function<void()> peer = [&] { distanceBlas(w, x); };
  const std::function<void()> product = [&] {
    benchmark::DoNotOptimize(gemm.call(in)[std::size_t{0}].data());
  };
  both(); // the first calls compile (BM_Compile_* time that)
  peer();
  product();
  std::vector<double> tf, tg, tp, tm, cf, cg, cp, cm, peerRatio, gradRatio, cpuGradRatio,
      gemmRatio, cpuGemmRatio;
  for (auto _ : state) {
    const double c0 = processCpuMs();
    const double f = einjit::bench::seconds(forward);
    const double c1 = processCpuMs();
    const double g = einjit::bench::seconds(both);
    const double c2 = processCpuMs();
    const double p = einjit::bench::seconds(peer);
    const double c3 = processCpuMs();
    const double q = einjit::bench::seconds(product);
    const double c4 = processCpuMs();
    state.SetIterationTime(f + g + p + q);
    tm.push_back(q * 1e3);
    cm.push_back(c4 - c3);
    gemmRatio.push_back(f / q);
    cpuGemmRatio.push_back((c1 - c0) / (c4 - c3));
    tf.push_back(f * 1e3);
    tg.push_back(g * 1e3);
    tp.push_back(p * 1e3);
    cf.push_back(c1 - c0);
    cg.push_back(c2 - c1);
    cp.push_back(c3 - c2);
    peerRatio.push_back(p / f);
    gradRatio.push_back(g / f);
    cpuGradRatio.push_back((c2 - c1) / (c1 - c0));
  }
  using einjit::bench::median;
  state.counters["forward_ms"] = median(tf);
  state.counters["grads_ms"] = median(tg);
  state.counters["peer_ms"] = median(tp);
  state.counters["forward_cpu_ms"] = median(cf);
  state.counters["grads_cpu_ms"] = median(cg);
  state.counters["peer_cpu_ms"] = median(cp);
  state.counters["peer/forward"] = median(peerRatio);
  state.counters["grads/forward"] = median(gradRatio);
  state.counters["cpu_grads/forward"] = median(cpuGradRatio);
  state.counters["gemm_ms"] = median(tm);
  state.counters["gemm_cpu_ms"] = median(cm);
  state.counters["forward/gemm"] = median(gemmRatio);
  state.counters["cpu_forward/gemm"] = median(cpuGemmRatio);
  state.SetLabel("distance 784->1024 x4096, " + std::to_string(threads) + " thread(s)");
  openblas_set_num_threads(blasThreads);
}

BENCHMARK(BM_Linear_einjit)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Linear_OpenBLAS)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Distance_einjit)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Distance_OpenBLAS)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DistanceAlt)->Arg(2)->Arg(1)->Unit(benchmark::kMillisecond)->UseManualTime();

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
