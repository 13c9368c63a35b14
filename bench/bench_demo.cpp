// The README demo's layer (`einjit demo`: a 3x3 convolution with stride 2, x 4x16x33x33, k
// 32x16x3x3, NCHW, f32) beside oneDNN, forward and forward + backward (dx and dk), in one
// process: each iteration times the four calls back to back (einjit forward, einjit forward +
// backward, oneDNN forward, oneDNN forward + backward data + backward weights), so that all
// see the same load. Counters are medians over the iterations: each side's milliseconds, each
// side's (forward + backward) / forward, and oneDNN's time over einjit's for the forward and
// for forward + backward (above 1: einjit faster). range: threads (oneTBB; oneDNN's OpenMP
// follows the process's affinity, so run the 1-thread row under `taskset -c 0`). The calls are
// shorter than GNU OpenMP's spin after a parallel region: with its default wait policy
// oneDNN's worker kept spinning on the core einjit's second thread needed (and on a loaded
// machine the two runtimes' threads waited on each other), so bench_cpu's main sets
// OMP_WAIT_POLICY=passive, as it shortens OpenBLAS's timeout (the measurements: bench/RESULTS.md).
// BM_DemoBackward: the backward with its two statements at once and in order, in one process
// (runtime/CpuStages.h).
#include "bench/DnnlConv.h"
#include "bench/Timing.h"
#include "einjit/einjit.h"
#include "runtime/CpuStages.h"

#include <benchmark/benchmark.h>
#include <dnnl.hpp>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

using einjit::DType;
using einjit::Tensor;

namespace {

using einjit::bench::median;

double millis(const std::function<void()>& f) { return 1e3 * einjit::bench::seconds(f); }

// oneDNN's forward, backward-data and backward-weights primitives of the layer, in the layouts
// it prefers (format_tag::any), buffers filled with random values; reorders are not timed.
struct DnnlLayer {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{eng};
  einjit::bench::DnnlConvPass fwd, bwdData, bwdWeights;

  DnnlLayer(const einjit::Shape& xs, const einjit::Shape& ks, std::int64_t stride)
      : fwd(einjit::bench::dnnlConvPass(eng, xs, ks, stride, 0, 11)),
        bwdData(einjit::bench::dnnlConvPass(eng, xs, ks, stride, 1, 14)),
        bwdWeights(einjit::bench::dnnlConvPass(eng, xs, ks, stride, 2, 17)) {}
  void forward() {
    fwd.prim.execute(s, fwd.args);
    s.wait();
  }
  void backward() {
    bwdData.prim.execute(s, bwdData.args);
    bwdWeights.prim.execute(s, bwdWeights.args);
    s.wait();
  }
};

void BM_DemoLayer(benchmark::State& state) {
  const einjit::Shape xs{4, 16, 33, 33}, ks{32, 16, 3, 3};
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                            static_cast<std::size_t>(state.range(0)));
  auto conv = einjit::compile("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]");
  auto back = conv.gradient({"x", "k"});
  Tensor x = Tensor::random(xs, DType::f32, 1), k = Tensor::random(ks, DType::f32, 2);
  Tensor dy = Tensor::random(conv(x, k)[std::size_t{0}].shape(), DType::f32, 3);
  const std::map<std::string, Tensor> gin{{"dy", dy}, {"x", x}, {"k", k}};
  DnnlLayer dnn(xs, ks, 2);
  auto ours = [&] { benchmark::DoNotOptimize(conv(x, k)[std::size_t{0}].data()); };
  auto oursBack = [&] { benchmark::DoNotOptimize(back.call(gin)[std::size_t{0}].data()); };
  // Warm-up: the first calls compile (einjit) and create scratch (both).
  ours();
  oursBack();
  dnn.forward();
  dnn.backward();
  std::vector<double> ef, eb, df, db, eRatio, dRatio, fwdSpeed, allSpeed;
  for (auto _ : state) {
    const double a = millis(ours), b = millis([&] {
                                     ours();
                                     oursBack();
                                   });
    const double c = millis([&] { dnn.forward(); }), d = millis([&] {
                                                       dnn.forward();
                                                       dnn.backward();
                                                     });
    state.SetIterationTime((a + b + c + d) * 1e-3);
    ef.push_back(a);
    eb.push_back(b);
    df.push_back(c);
    db.push_back(d);
    eRatio.push_back(b / a);
    dRatio.push_back(d / c);
    fwdSpeed.push_back(c / a);
    allSpeed.push_back(d / b);
  }
  state.counters["einjit_fwd_ms"] = median(ef);
  state.counters["einjit_fwd_bwd_ms"] = median(eb);
  state.counters["onednn_fwd_ms"] = median(df);
  state.counters["onednn_fwd_bwd_ms"] = median(db);
  state.counters["einjit_bwd_ratio"] = median(eRatio);
  state.counters["onednn_bwd_ratio"] = median(dRatio);
  state.counters["fwd_speed"] = median(fwdSpeed);
  state.counters["fwd_bwd_speed"] = median(allSpeed);
  state.SetLabel("the demo's conv 3x3 stride 2, x 4x16x33x33, k 32x16x3x3");
}
BENCHMARK(BM_DemoLayer)
    ->Arg(2)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

// The demo's three passes one by one beside oneDNN's, alternated per iteration in one process:
// einjit's forward, input gradient (a program of dx only) and weight gradient (dk only), then
// oneDNN's forward, backward data and backward weights. Counters, medians over the iterations:
// each call's milliseconds and oneDNN's time over einjit's per pass (above 1: einjit faster).
// range: threads, as BM_DemoLayer.
void BM_DemoPasses(benchmark::State& state) {
  const einjit::Shape xs{4, 16, 33, 33}, ks{32, 16, 3, 3};
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism,
                            static_cast<std::size_t>(state.range(0)));
  auto conv = einjit::compile("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]");
  auto dxOnly = conv.gradient({"x"}), dkOnly = conv.gradient({"k"});
  Tensor x = Tensor::random(xs, DType::f32, 1), k = Tensor::random(ks, DType::f32, 2);
  Tensor dy = Tensor::random(conv(x, k)[std::size_t{0}].shape(), DType::f32, 3);
  auto args = [&](const einjit::Kernel& g) {
    std::map<std::string, Tensor> in;
    const std::map<std::string, Tensor> all{{"dy", dy}, {"x", x}, {"k", k}};
    for (const std::string& n : g.tensorArguments()) in[n] = all.at(n);
    return in;
  };
  const auto inDx = args(dxOnly), inDk = args(dkOnly);
  DnnlLayer dnn(xs, ks, 2);
  const std::function<void()> calls[6] = {
      [&] { benchmark::DoNotOptimize(conv(x, k)[std::size_t{0}].data()); },
      [&] { benchmark::DoNotOptimize(dxOnly.call(inDx)[std::size_t{0}].data()); },
      [&] { benchmark::DoNotOptimize(dkOnly.call(inDk)[std::size_t{0}].data()); },
      [&] {
        dnn.fwd.prim.execute(dnn.s, dnn.fwd.args);
        dnn.s.wait();
      },
      [&] {
        dnn.bwdData.prim.execute(dnn.s, dnn.bwdData.args);
        dnn.s.wait();
      },
      [&] {
        dnn.bwdWeights.prim.execute(dnn.s, dnn.bwdWeights.args);
        dnn.s.wait();
      }};
  for (const auto& f : calls) f(); // compile, scratch
  std::vector<double> ms[6], speed[3];
  for (auto _ : state) {
    double t[6], sum = 0;
    for (int i = 0; i < 6; ++i) sum += t[i] = millis(calls[i]);
    state.SetIterationTime(sum * 1e-3);
    for (int i = 0; i < 6; ++i) ms[i].push_back(t[i]);
    for (int i = 0; i < 3; ++i) speed[i].push_back(t[i + 3] / t[i]);
  }
  const char* names[3] = {"fwd", "dx", "dk"};
  for (int i = 0; i < 3; ++i) {
    state.counters[std::string("einjit_") + names[i] + "_ms"] = median(ms[i]);
    state.counters[std::string("onednn_") + names[i] + "_ms"] = median(ms[i + 3]);
    state.counters[std::string(names[i]) + "_speed"] = median(speed[i]);
  }
  state.SetLabel("the demo's conv: forward, input gradient, weight gradient, each alone");
}
BENCHMARK(BM_DemoPasses)
    ->Arg(2)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

// The demo's backward (dx and dk, one program) with its statements at once and in order
// (runtime::setCpuStages, planned before each kernel's first call), alternated in one process:
// each iteration calls the forward on two threads, the backward with concurrent stages on two
// threads, the same in order on two threads, and in order on one (an arena of one thread), so
// that the four see the same load. Counters, medians over the iterations: `stages_gain` (in
// order ÷ at once, both on two threads), `ratio_at_once` and `ratio_in_order` (the demo's
// (forward + backward) / forward on two threads each way), `bwd_speedup` (in order on one
// thread ÷ at once on two) and `bwd_speedup_in_order` (in order, one thread ÷ two).
void BM_DemoBackward(benchmark::State& state) {
  const einjit::Shape xs{4, 16, 33, 33}, ks{32, 16, 3, 3};
  auto conv = einjit::compile("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]");
  Tensor x = Tensor::random(xs, DType::f32, 1), k = Tensor::random(ks, DType::f32, 2);
  Tensor dy = Tensor::random(conv(x, k)[std::size_t{0}].shape(), DType::f32, 3);
  const std::map<std::string, Tensor> gin{{"dy", dy}, {"x", x}, {"k", k}};
  tbb::task_arena one(1), two(2);
  auto backward = [&](int mode) {
    einjit::runtime::setCpuStages(mode);
    auto back = std::make_shared<einjit::Kernel>(conv.gradient({"x", "k"}));
    auto call = [back, &gin] { benchmark::DoNotOptimize(back->call(gin)[std::size_t{0}].data()); };
    call(); // planned and compiled here
    einjit::runtime::setCpuStages(-1);
    return std::function<void()>(call);
  };
  const std::function<void()> atOnce = backward(1), inOrder = backward(0);
  const std::function<void()> fwd = [&] {
    benchmark::DoNotOptimize(conv(x, k)[std::size_t{0}].data());
  };
  auto on = [](tbb::task_arena& a, const std::function<void()>& f) {
    return millis([&] { a.execute(f); });
  };
  for (const auto* f : {&fwd, &atOnce, &inOrder}) on(two, *f), on(one, *f); // workers, scratch
  std::vector<double> f2, c2, o2, o1, gain, rc, ro, sp, spo;
  for (auto _ : state) {
    const double a = on(two, fwd), b = on(two, atOnce), c = on(two, inOrder), d = on(one, inOrder);
    state.SetIterationTime((a + b + c + d) * 1e-3);
    f2.push_back(a);
    c2.push_back(b);
    o2.push_back(c);
    o1.push_back(d);
    gain.push_back(c / b);
    rc.push_back((a + b) / a);
    ro.push_back((a + c) / a);
    sp.push_back(d / b);
    spo.push_back(d / c);
  }
  state.counters["fwd_ms"] = median(f2);
  state.counters["bwd_at_once_ms"] = median(c2);
  state.counters["bwd_in_order_ms"] = median(o2);
  state.counters["bwd_1thread_ms"] = median(o1);
  state.counters["stages_gain"] = median(gain);
  state.counters["ratio_at_once"] = median(rc);
  state.counters["ratio_in_order"] = median(ro);
  state.counters["bwd_speedup"] = median(sp);
  state.counters["bwd_speedup_in_order"] = median(spo);
  state.SetLabel("the demo's backward (dx, dk): statements at once against in order");
}
BENCHMARK(BM_DemoBackward)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

// The large gradient programs with their independent statements forced at once (setCpuStages(1))
// against in order (0, which the rule picks for them: runtime/CpuStages.h), alternated per
// iteration in one process on the default threads: range(0) 0 Linear 784->1024 x4096 (dt, db,
// dx, dw), 1 the distance layer (dw, dx). Counter `stages_gain`: in order ÷ at once (above 1:
// at once faster), the median over iterations.
void BM_StagesAtOnce(benchmark::State& state) {
  constexpr std::int64_t kIn = 784, kOut = 1024, kN = 4096;
  const bool linear = state.range(0) == 0;
  auto fwd = einjit::compile(linear ? "t[n,o] := x[n,i] * w[o,i]\ny[n,o] := t[n,o] + b[o]"
                                    : "y[i,j] := (w[k,i] - x[k,j]) ^ 2");
  const std::map<std::string, Tensor> all =
      linear ? std::map<std::string, Tensor>{{"x", Tensor::random({kN, kIn}, DType::f32, 1)},
                                             {"w", Tensor::random({kOut, kIn}, DType::f32, 2)},
                                             {"b", Tensor::random({kOut}, DType::f32, 3)},
                                             {"dy", Tensor::random({kN, kOut}, DType::f32, 4)}}
             : std::map<std::string, Tensor>{{"w", Tensor::random({kIn, kOut}, DType::f32, 1)},
                                             {"x", Tensor::random({kIn, kN}, DType::f32, 2)},
                                             {"dy", Tensor::random({kOut, kN}, DType::f32, 4)}};
  auto backward = [&](int mode) {
    einjit::runtime::setCpuStages(mode);
    auto back = std::make_shared<einjit::Kernel>(fwd.gradient());
    auto in = std::make_shared<std::map<std::string, Tensor>>();
    for (const std::string& n : back->tensorArguments()) (*in)[n] = all.at(n);
    auto call = [back, in] { benchmark::DoNotOptimize(back->call(*in)[std::size_t{0}].data()); };
    call();
    einjit::runtime::setCpuStages(-1);
    return std::function<void()>(call);
  };
  const std::function<void()> atOnce = backward(1), inOrder = backward(0);
  std::vector<double> a, o, gain;
  for (auto _ : state) {
    const double x = millis(atOnce), y = millis(inOrder);
    state.SetIterationTime((x + y) * 1e-3);
    a.push_back(x);
    o.push_back(y);
    gain.push_back(y / x);
  }
  state.counters["at_once_ms"] = median(a);
  state.counters["in_order_ms"] = median(o);
  state.counters["stages_gain"] = median(gain);
  state.SetLabel(linear ? "Linear 784->1024 x4096 gradients (dt, db, dx, dw)"
                        : "distance 784x1024x4096 gradients (dw, dx)");
}
BENCHMARK(BM_StagesAtOnce)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

} // namespace
