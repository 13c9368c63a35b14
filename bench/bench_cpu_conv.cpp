// bench_cpu's convolution rows: conv2d NCHW 3x3 (stride 1 and 2) and 1x1, each pass and the
// whole layer, einjit beside oneDNN (alone and alternated in one process) and einjit alone in
// f32 and f64; then the alignment rows (a GEMM and the stride-1 convolution with their output
// or operands shifted from a cache line).
#include "bench/CpuBench.h"
#include "bench/DnnlConv.h"
#include "bench/Timing.h"
#include "einjit/einjit.h"

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

using einjit::DType;
using einjit::Tensor;

namespace {

using namespace einjit::bench::cpu;

// --- conv2d NCHW 3x3, stride 1 and 2: forward, input gradient, weight gradient ---------------

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

} // namespace
