// Reductions over a row (softmax, layernorm) as einjit programs, forward and forward + all
// gradients, beside a plain copy of the same bytes (the memory-bandwidth bound of a forward
// pass: read x once, write y once). The peer, PyTorch's CPU autograd, runs in Python
// (bench/rows_torch.py); bench/run_rows.sh alternates the two processes round by round and
// bench/summarize_rows.py prints the medians and ratios for bench/RESULTS.md.
//
// range: case (kCases), rows, columns, threads (oneTBB), dtype (0 f32, 1 f64).
#include "einjit/einjit.h"

#include <benchmark/benchmark.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

using einjit::DType;
using einjit::Tensor;

namespace {

// The programs as a user writes them (examples/attention.cpp, examples/layernorm.cpp).
const char* kSoftmax = R"((max) m[i] := x[i,j]
e[i,j] := exp(x[i,j] - m[i])
z[i] := e[i,j]
y[i,j] := e[i,j] / z[i])";
const char* kLayernorm = R"(mu[i] := x[i,j] / size(x,1)
d[i,j] := x[i,j] - mu[i]
var[i] := d[i,j]^2 / size(x,1)
y[i,j] := d[i,j] / sqrt(var[i] + eps) * g[j] + b[j])";

enum Case { kCopy, kSoftmaxFwd, kSoftmaxGrad, kLayernormFwd, kLayernormGrad };
const char* const kCaseNames[] = {"copy", "softmax forward", "softmax forward + gradients",
                                  "layernorm forward", "layernorm forward + gradients"};

void BM_Rows(benchmark::State& state) {
  const auto c = static_cast<Case>(state.range(0));
  const std::int64_t rows = state.range(1), cols = state.range(2);
  const auto threads = static_cast<std::size_t>(state.range(3));
  const DType dt = state.range(4) == 1 ? DType::f64 : DType::f32;
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  const Tensor x = Tensor::random({rows, cols}, dt, 1), dy = Tensor::random({rows, cols}, dt, 2);
  const Tensor g = Tensor::random({cols}, dt, 3), b = Tensor::random({cols}, dt, 4);
  const std::size_t bytes = static_cast<std::size_t>(rows * cols) * (dt == DType::f64 ? 8 : 4);

  if (c == kCopy) {
    // A fresh output per call, as einjit's ':=' allocates one; rows split among the threads.
    const std::size_t rowBytes = bytes / static_cast<std::size_t>(rows);
    for (auto _ : state) {
      Tensor y = Tensor::empty({rows, cols}, dt);
      const auto* src = static_cast<const char*>(x.data());
      auto* dst = static_cast<char*>(y.data());
      tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, rows, 64),
                        [&](const tbb::blocked_range<std::int64_t>& r) {
                          const auto lo = static_cast<std::size_t>(r.begin());
                          std::memcpy(dst + lo * rowBytes, src + lo * rowBytes,
                                      static_cast<std::size_t>(r.size()) * rowBytes);
                        });
      benchmark::DoNotOptimize(y.data());
    }
  } else {
    const bool softmax = c == kSoftmaxFwd || c == kSoftmaxGrad;
    const bool grad = c == kSoftmaxGrad || c == kLayernormGrad;
    // The layer's forward as a training step uses it: only its output is read, so its
    // intermediates need not be kept, except the row statistics its gradient reads instead of
    // recomputing them (PyTorch's kernels save the same: softmax its output, layer_norm the
    // mean and 1/sqrt(var + eps)).
    einjit::Options layer;
    layer.keepIntermediates = false;
    // (ROWS_SAVED=0: none saved, the gradient recomputes them: the A/B of Options::saved;
    // ROWS_SAVED=e: the softmax saves its exponentials e too, which the gradient then reads
    // instead of computing exp(x - m) again: a full write of e in the forward against an exp
    // per element in the gradient.)
    const char* savedEnv = std::getenv("ROWS_SAVED");
    const std::string_view savedMode = savedEnv ? savedEnv : "";
    if (savedMode != "0")
      layer.saved = softmax ? std::vector<std::string>{"m", "z"} : std::vector<std::string>{"mu", "var"};
    if (softmax && savedMode == "e") layer.saved = {"m", "e", "z"};
    auto fwd = einjit::compile(softmax ? kSoftmax : kLayernorm, layer);
    auto back = fwd.gradient();
    std::map<std::string, Tensor> in{{"x", x}};
    std::map<std::string, double> scalars;
    if (!softmax) {
      in["g"] = g;
      in["b"] = b;
      scalars["eps"] = 1e-5;
    }
    std::map<std::string, Tensor> gin = in;
    gin["dy"] = dy;
    auto once = [&] {
      const einjit::Outputs y = fwd.call(in, scalars);
      benchmark::DoNotOptimize(y[std::size_t{0}].data());
      if (!grad) return;
      std::map<std::string, Tensor> used;
      for (const auto& n : back.tensorArguments())
        used[n] = gin.count(n) ? gin.at(n) : y[std::string_view(n)];
      benchmark::DoNotOptimize(back.call(used, scalars)[std::size_t{0}].data());
    };
    once(); // compiles (or loads from the disk cache) outside the timed loop
    // ROWS_EXPLAIN=1: each program's text and schedule on stderr (the passes per row).
    if (const char* ex = std::getenv("ROWS_EXPLAIN"); ex && *ex == '1') {
      std::vector<einjit::Arg> args;
      for (const auto& n : fwd.tensorArguments()) args.emplace_back(in.at(n));
      for (const auto& n : fwd.scalarArguments()) args.emplace_back(scalars.at(n));
      std::fprintf(stderr, "%s\n%s\n", fwd.source().c_str(), fwd.explain(args).c_str());
      if (grad) {
        const einjit::Outputs y = fwd.call(in, scalars);
        std::vector<einjit::Arg> gargs;
        for (const auto& n : back.tensorArguments())
          gargs.emplace_back(gin.count(n) ? gin.at(n) : y[std::string_view(n)]);
        for (const auto& n : back.scalarArguments()) gargs.emplace_back(scalars.at(n));
        std::fprintf(stderr, "%s\n%s\n", back.source().c_str(), back.explain(gargs).c_str());
      }
    }
    for (auto _ : state) once();
  }
  // Bytes read and written by the copy (a forward pass's least traffic).
  state.counters["GB/s"] = benchmark::Counter(2.0 * static_cast<double>(bytes),
                                              benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
  state.SetLabel(std::string(kCaseNames[c]) + (dt == DType::f64 ? " f64" : " f32"));
}

void rowArgs(benchmark::internal::Benchmark* b) {
  for (int dtype : {0, 1})
    for (int threads : {1, 2})
      for (auto [rows, cols] : {std::pair{4096, 1024}, std::pair{1024, 4096}})
        for (int c = kCopy; c <= kLayernormGrad; ++c) b->Args({c, rows, cols, threads, dtype});
}
BENCHMARK(BM_Rows)->Apply(rowArgs)->Unit(benchmark::kMillisecond)->UseRealTime();

} // namespace

BENCHMARK_MAIN();
