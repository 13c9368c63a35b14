// One Adam step on 10^7 f32 parameters: einjit's CPU JIT (one in-place program, see
// examples/Optimizers.h) against the same step as a hand-written loop, single-threaded and
// split over the machine's threads. Prints the first call's time (a cold compile: run with an
// empty EINJIT_CACHE_DIR) and the median of the timed steps. PyTorch's CPU Adam on the same
// sizes: bench/cpu_adam_torch.py. Usage: bench_adam [N] [REPS]
#include "einjit/einjit.h"
#include "examples/Optimizers.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

namespace {

double ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double timeSteps(int reps, const std::function<void(int)>& step) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto a = std::chrono::steady_clock::now();
    step(r + 2);
    t.push_back(ms(std::chrono::steady_clock::now() - a));
  }
  return median(t);
}

} // namespace

int main(int argc, char** argv) {
  namespace ex = einjit::examples;
  using einjit::Tensor;
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 10000000;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  const double b1 = 0.9, b2 = 0.999, lr = 1e-3, eps = 1e-8;
  auto scalars = [&](int t) {
    return std::map<std::string, double>{{"b1", b1}, {"b2", b2}, {"lr", lr}, {"eps", eps},
                                         {"c1", 1 - std::pow(b1, t)}, {"c2", 1 - std::pow(b2, t)}};
  };
  Tensor m = Tensor::zeros({n}), v = Tensor::zeros({n});
  Tensor p = Tensor::random({n}, einjit::DType::f32, 1), g = Tensor::random({n}, einjit::DType::f32, 2);

  auto t0 = std::chrono::steady_clock::now();
  einjit::Kernel step = einjit::compile(ex::kAdam);
  const std::map<std::string, Tensor> args = {{"m", m}, {"g", g}, {"v", v}, {"p", p}};
  step.call(args, scalars(1));
  const double first = ms(std::chrono::steady_clock::now() - t0);
  // The compile alone: a second kernel on 1 element (nothing cached in this process for it).
  Tensor one = Tensor::zeros({1});
  auto t1 = std::chrono::steady_clock::now();
  einjit::compile(ex::kAdam).call({{"m", one}, {"g", one.clone()}, {"v", one.clone()},
                                   {"p", one.clone()}},
                                  scalars(1));
  const double compileSmall = ms(std::chrono::steady_clock::now() - t1);
  const double jit = timeSteps(reps, [&](int t) { step.call(args, scalars(t)); });

  std::vector<float> hm(static_cast<std::size_t>(n)), hv(hm.size()), hp(p.data<float>(),
                                                                          p.data<float>() + n);
  const float* hg = g.data<float>();
  auto loopStep = [&](int t, std::size_t lo, std::size_t hi) {
    ex::adamLoop<float>(hm.data() + lo, hg + lo, hv.data() + lo, hp.data() + lo, hi - lo,
                        float(b1), float(b2), float(lr), float(1 - std::pow(b1, t)),
                        float(1 - std::pow(b2, t)), float(eps));
  };
  const double loop1 = timeSteps(reps, [&](int t) { loopStep(t, 0, hm.size()); });
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const double loopN = timeSteps(reps, [&](int t) {
    std::vector<std::thread> pool;
    const std::size_t chunk = (hm.size() + threads - 1) / threads;
    for (unsigned k = 0; k < threads; ++k) {
      std::size_t lo = std::min(hm.size(), k * chunk), hi = std::min(hm.size(), lo + chunk);
      pool.emplace_back([&, t, lo, hi] { loopStep(t, lo, hi); });
    }
    for (auto& th : pool) th.join();
  });
  std::printf("Adam step, %lld f32 parameters, %u hardware threads, median of %d steps\n",
              static_cast<long long>(n), threads, reps);
  std::printf("  einjit first call (compile + one step): %.1f ms\n", first);
  std::printf("  einjit compile + call on 1 element:     %.1f ms\n", compileSmall);
  std::printf("  einjit CPU JIT step:                    %.2f ms\n", jit);
  std::printf("  hand-written loop, 1 thread:            %.2f ms\n", loop1);
  std::printf("  hand-written loop, %u threads:           %.2f ms\n", threads, loopN);
  return 0;
}
