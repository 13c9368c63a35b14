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
#include "bench/DnnlConv.h"
#include "bench/Timing.h"
#include "einjit/einjit.h"

#include <benchmark/benchmark.h>
#include <dnnl.hpp>
#include <tbb/global_control.h>

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
BENCHMARK(BM_DemoLayer)->Arg(2)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

} // namespace
