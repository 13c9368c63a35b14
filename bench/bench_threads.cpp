// Two threads against one (issue 24: "two threads >= 1.8x one thread on every case above 10^8
// flops"), in one process. Each case's kernel is compiled twice, planned for one thread and for
// two (runtime::setCpuPlanThreads: the plans split the work into tasks by the thread count),
// and each iteration calls, back to back, the one-thread plan in a oneTBB arena of one thread,
// the two-thread plan in an arena of two and in an arena of one, then the peer (OpenBLAS or
// oneDNN, its thread count set per call) on one thread and on two, so that the machine's drift
// falls on all of them. Counters (medians over the iterations of per-iteration figures):
// `speedup`, the one-thread plan's time on one thread over the two-thread plan's on two (the
// issue's figure); `plan_cost`, the two-thread plan's time on one thread over the one-thread
// plan's (the work its task split adds: packing whole, operands streamed per task; a ratio of
// two one-thread calls, so it reads the same on a loaded machine); `plan_scaling`, the
// two-thread plan's time on one thread over its time on two; `peer_speedup`, the peer's one
// over two threads (the machine's reference: a shared host's second core is not always a
// whole core); `cpu_growth`, the process CPU time of the two-thread call over the one-thread
// call; and each side's milliseconds. Cases: bench_cpu's convolutions, GEMM forms, permuted
// contraction and layers, and the README demo's layer (bench/RESULTS.md, "CPU: two threads
// against one").
#include "bench/DnnlConv.h"
#include "bench/Timing.h"
#include "einjit/einjit.h"
#include "runtime/CpuBackend.h"

#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <tbb/task_arena.h>

#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

using einjit::DType;
using einjit::Tensor;

namespace {

using einjit::bench::median;
using einjit::bench::seconds;

Tensor rnd(const einjit::Shape& s, std::uint64_t seed) {
  return Tensor::random(s, DType::f32, seed);
}

using einjit::bench::processCpu;

struct ThreadCase {
  std::string name;
  double flops = 0;
  // One call of the kernel planned for this many threads, on the threads of the arena it runs
  // in.
  std::function<std::function<void()>(int)> ours;
  std::function<void(int)> peer; // one call on this many threads
};

// A kernel (the gradient with respect to `wrt` when not empty) planned for `threads` threads,
// and its arguments by name; the first call (planning, compiling) is made here.
std::function<void()> einjitCall(const std::string& program, const std::vector<std::string>& wrt,
                                 const std::map<std::string, einjit::Shape>& shapes, int threads) {
  einjit::runtime::setCpuPlanThreads(threads);
  auto k = std::make_shared<einjit::Kernel>(einjit::compile(program));
  if (!wrt.empty()) *k = k->gradient(wrt);
  auto args = std::make_shared<std::vector<einjit::Arg>>();
  std::uint64_t seed = 1;
  for (const std::string& n : k->tensorArguments()) args->push_back(rnd(shapes.at(n), seed++));
  std::function<void()> once = [k, args] {
    benchmark::DoNotOptimize(k->call(*args)[std::size_t{0}].data());
  };
  once();
  einjit::runtime::setCpuPlanThreads(0);
  return once;
}

// OpenBLAS's sgemm of the given form and sizes (row-major), on `threads` threads.
std::function<void(int)> blasGemm(bool ta, bool tb, int m, int n, int k) {
  auto a = std::make_shared<Tensor>(rnd({ta ? k : m, ta ? m : k}, 1));
  auto b = std::make_shared<Tensor>(rnd({tb ? n : k, tb ? k : n}, 2));
  auto c = std::make_shared<Tensor>(Tensor::empty({m, n}));
  return [=](int threads) {
    openblas_set_num_threads(threads);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, 1.0f, a->data<float>(), ta ? m : k, b->data<float>(), tb ? k : n, 0.0f,
                c->data<float>(), n);
    benchmark::DoNotOptimize(c->data());
  };
}

// oneDNN's convolution (pass 0 forward, 1 backward data, 2 backward weights) in the layouts it
// prefers, one primitive per thread count: oneDNN sizes its work split when the primitive is
// created, from OpenMP's thread count then, so each is created and run under its own count.
std::function<void(int)> dnnlConv(const einjit::Shape& xs, const einjit::Shape& ks, int stride,
                                  int pass) {
  using One = einjit::bench::DnnlConvPass;
  auto eng = std::make_shared<dnnl::engine>(dnnl::engine::kind::cpu, 0);
  auto strm = std::make_shared<dnnl::stream>(*eng);
  auto made = std::make_shared<std::map<int, One>>();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    (*made)[threads] = einjit::bench::dnnlConvPass(*eng, xs, ks, stride, pass, 11);
  }
  return [eng, strm, made](int threads) {
    omp_set_num_threads(threads);
    One& o = made->at(threads);
    o.prim.execute(*strm, o.args);
    strm->wait();
  };
}

constexpr std::int64_t kN = 8, kC = 64, kO = 64, kH = 56;
constexpr std::int64_t kIn = 784, kOut = 1024, kBatchL = 4096;
const char* const kLinear = "t[i,j] := w[k,i] * x[k,j]\ny[i,j] := t[i,j] + b[i]";
const char* const kDistance = "y[i,j] := (w[k,i] - x[k,j]) ^ 2";

// The cases, by row: 0-5 conv 3x3 (stride 1 forward, input gradient, weight gradient, then
// stride 2), 6-13 GEMM 1024 and 2048 (NN, NT, TN, TT), 14-15 permuted 512 and 1024, 16-19
// Linear (forward, dw, dx, all gradients), 20-22 distance (forward, dw, dx), 23-25 the demo
// layer (forward, dx, dk), 26-28 conv 1x1 64 -> 256 (forward, input gradient, weight
// gradient).
constexpr int kCases = 29;

// einjitCall's arguments, bound: the kernel planned for a thread count, made when asked.
std::function<std::function<void()>(int)> plans(const std::string& program,
                                                const std::vector<std::string>& wrt,
                                                const std::map<std::string, einjit::Shape>& shapes) {
  return [=](int threads) { return einjitCall(program, wrt, shapes, threads); };
}

ThreadCase makeCase(int row) {
  ThreadCase c;
  if (row < 6) {
    const int stride = row < 3 ? 1 : 2, pass = row % 3;
    const std::int64_t oh = (kH - 3) / stride + 1;
    const std::string program = stride == 1 ? "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]"
                                            : "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]";
    const std::vector<std::string> wrt =
        pass == 0 ? std::vector<std::string>{} : std::vector<std::string>{pass == 1 ? "x" : "k"};
    c.name = std::string("conv stride ") + std::to_string(stride) +
             (pass == 0 ? " forward" : pass == 1 ? " input gradient" : " weight gradient");
    c.flops = 2.0 * kN * kO * oh * oh * kC * 9;
    c.ours = plans(program, wrt, {{"x", {kN, kC, kH, kH}}, {"k", {kO, kC, 3, 3}},
                                       {"dy", {kN, kO, oh, oh}}});
    c.peer = dnnlConv({kN, kC, kH, kH}, {kO, kC, 3, 3}, stride, pass);
  } else if (row < 14) {
    const int form = (row - 6) % 4;
    const int n = row < 10 ? 1024 : 2048;
    const bool ta = form >= 2, tb = form % 2 == 1;
    static const char* const programs[] = {"C[i,k] := A[i,j] * B[j,k]", "C[i,k] := A[i,j] * B[k,j]",
                                           "C[i,k] := A[j,i] * B[j,k]", "C[i,k] := A[j,i] * B[k,j]"};
    static const char* const forms[] = {"NN", "NT", "TN", "TT"};
    c.name = std::string("GEMM ") + forms[form] + " " + std::to_string(n);
    c.flops = 2.0 * n * n * n;
    c.ours = plans(programs[form], {}, {{"A", {n, n}}, {"B", {n, n}}});
    c.peer = blasGemm(ta, tb, n, n, n);
  } else if (row < 16) {
    const int n = row == 14 ? 512 : 1024;
    constexpr int kB = 4;
    c.name = "permuted C[i,k,b] := A[i,j,b] * B[b,k,j] " + std::to_string(n);
    c.flops = 2.0 * n * n * n * kB;
    c.ours = plans("C[i,k,b] := A[i,j,b] * B[b,k,j]", {},
                        {{"A", {n, n, kB}}, {"B", {kB, n, n}}});
    // The GEMMs a library einsum runs (C_b = A_b B_b^T per batch value), without its permute
    // copies: the peer's scaling, not its speed, is the reference here.
    auto g = blasGemm(false, true, n, n, n);
    c.peer = [g](int threads) {
      for (int b = 0; b < kB; ++b) g(threads);
    };
  } else if (row < 20) {
    const int which = row - 16;
    static const char* const names[] = {"forward", "dw", "dx", "all gradients"};
    c.name = std::string("Linear 784x1024x4096 ") + names[which];
    const std::map<std::string, einjit::Shape> shapes{
        {"w", {kIn, kOut}}, {"x", {kIn, kBatchL}}, {"b", {kOut}}, {"dy", {kOut, kBatchL}}};
    const std::vector<std::string> wrt = which == 0   ? std::vector<std::string>{}
                                         : which == 1 ? std::vector<std::string>{"w"}
                                         : which == 2 ? std::vector<std::string>{"x"}
                                                      : std::vector<std::string>{"w", "x", "b"};
    c.flops = (which == 3 ? 2.0 : 1.0) * 2.0 * kIn * kOut * kBatchL;
    c.ours = plans(kLinear, wrt, shapes);
    // y = w^T x; dw = x dy^T; dx = w dy.
    auto fwd = blasGemm(true, false, kOut, kBatchL, kIn);
    auto dw = blasGemm(false, true, kIn, kOut, kBatchL);
    auto dx = blasGemm(false, false, kIn, kBatchL, kOut);
    c.peer = which == 0   ? fwd
             : which == 1 ? dw
             : which == 2 ? dx
                          : std::function<void(int)>([dw, dx](int threads) {
                              dw(threads);
                              dx(threads);
                            });
  } else if (row < 23) {
    const int which = row - 20;
    static const char* const names[] = {"forward", "dw", "dx"};
    c.name = std::string("distance 784x1024x4096 ") + names[which];
    c.flops = 2.0 * kIn * kOut * kBatchL;
    c.ours = plans(kDistance,
                        which == 0   ? std::vector<std::string>{}
                        : which == 1 ? std::vector<std::string>{"w"}
                                     : std::vector<std::string>{"x"},
                        {{"w", {kIn, kOut}}, {"x", {kIn, kBatchL}}, {"dy", {kOut, kBatchL}}});
    // A GEMM of the same M, N and K (no composition of library calls computes the gradients).
    c.peer = which == 0   ? blasGemm(true, false, kOut, kBatchL, kIn)
             : which == 1 ? blasGemm(false, true, kIn, kOut, kBatchL)
                          : blasGemm(false, false, kIn, kBatchL, kOut);
  } else if (row >= 26) {
    const int pass = row - 26;
    constexpr std::int64_t kWide = 256;
    c.name = std::string("conv 1x1 64->256 ") +
             (pass == 0 ? "forward" : pass == 1 ? "input gradient" : "weight gradient");
    c.flops = 2.0 * kN * kWide * kH * kH * kC;
    c.ours = plans("y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
                   pass == 0   ? std::vector<std::string>{}
                   : pass == 1 ? std::vector<std::string>{"x"}
                               : std::vector<std::string>{"k"},
                   {{"x", {kN, kC, kH, kH}}, {"k", {kWide, kC, 1, 1}}, {"dy", {kN, kWide, kH, kH}}});
    c.peer = dnnlConv({kN, kC, kH, kH}, {kWide, kC, 1, 1}, 1, pass);
  } else {
    const int pass = row - 23;
    const einjit::Shape xs{4, 16, 33, 33}, ks{32, 16, 3, 3};
    c.name = std::string("demo layer ") + (pass == 0 ? "forward" : pass == 1 ? "dx" : "dk");
    c.flops = 2.0 * 4 * 32 * 16 * 16 * 16 * 9;
    c.ours = plans("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
                        pass == 0   ? std::vector<std::string>{}
                        : pass == 1 ? std::vector<std::string>{"x"}
                                    : std::vector<std::string>{"k"},
                        {{"x", xs}, {"k", ks}, {"dy", {4, 32, 16, 16}}});
    c.peer = dnnlConv(xs, ks, 2, pass);
  }
  return c;
}

void BM_Threads(benchmark::State& state) {
  ThreadCase c = makeCase(static_cast<int>(state.range(0)));
  const std::function<void()> plan1 = c.ours(1), plan2 = c.ours(2);
  tbb::task_arena one(1), two(2);
  const std::function<void()> ours1 = [&] { one.execute(plan1); };
  const std::function<void()> ours2 = [&] { two.execute(plan2); };
  const std::function<void()> ours2on1 = [&] { one.execute(plan2); };
  const std::function<void()> peer1 = [&] { c.peer(1); }, peer2 = [&] { c.peer(2); };
  for (const auto* f : {&ours1, &ours2, &ours2on1, &peer1, &peer2}) (*f)(); // scratch, workers
  std::vector<double> e1, e2, e21, p1, p2, speed, cost, scaling, peerSpeed, growth;
  for (auto _ : state) {
    const double c0 = processCpu();
    const double a = seconds(ours1);
    const double c1 = processCpu();
    const double b = seconds(ours2);
    const double c2 = processCpu();
    const double d = seconds(ours2on1);
    const double pa = seconds(peer1), pb = seconds(peer2);
    state.SetIterationTime(a + b + d + pa + pb);
    e1.push_back(a * 1e3);
    e2.push_back(b * 1e3);
    e21.push_back(d * 1e3);
    p1.push_back(pa * 1e3);
    p2.push_back(pb * 1e3);
    speed.push_back(a / b);
    cost.push_back(d / a);
    scaling.push_back(d / b);
    peerSpeed.push_back(pa / pb);
    growth.push_back((c2 - c1) / (c1 - c0));
  }
  state.counters["einjit_1t_ms"] = median(e1);
  state.counters["einjit_2t_ms"] = median(e2);
  state.counters["einjit_2t_plan_1t_ms"] = median(e21);
  state.counters["peer_1t_ms"] = median(p1);
  state.counters["peer_2t_ms"] = median(p2);
  state.counters["einjit_2t_GFLOPs"] = c.flops / median(e2) * 1e-6;
  state.counters["speedup"] = median(speed);
  state.counters["plan_cost"] = median(cost);
  state.counters["plan_scaling"] = median(scaling);
  state.counters["peer_speedup"] = median(peerSpeed);
  state.counters["cpu_growth"] = median(growth);
  state.SetLabel(c.name);
}
BENCHMARK(BM_Threads)
    ->DenseRange(0, kCases - 1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0);

} // namespace
