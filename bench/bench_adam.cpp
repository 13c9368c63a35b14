// One Adam step on 10^7 f32 parameters: einjit (one in-place program, see
// examples/Optimizers.h) against the same step as a hand-written loop. On the CPU (the default)
// the JIT runs beside the loop, single-threaded and split over the machine's threads; with
// --cuda the program runs on the GPU and is checked against the loop on the host (PyTorch's GPU
// Adam on the same sizes: bench/gpu_adam_torch.py, both through tools/gpu-adam.sh). Prints the
// first call's time (a cold compile: run with an empty EINJIT_CACHE_DIR) and the median of the
// timed steps. PyTorch's CPU Adam: bench/cpu_adam_torch.py.
// Usage: bench_adam [N] [REPS] [--cuda]
#include "einjit/einjit.h"
#include "examples/Optimizers.h"

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace {

using einjit::Tensor;
namespace ex = einjit::examples;

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

constexpr double b1 = 0.9, b2 = 0.999, lr = 1e-3, eps = 1e-8;

std::map<std::string, double> scalars(int t) {
  return {{"b1", b1}, {"b2", b2}, {"lr", lr}, {"eps", eps}, {"c1", 1 - std::pow(b1, t)},
          {"c2", 1 - std::pow(b2, t)}};
}

// Distance in ulps of the larger of the element's old and new value (examples/optimizers.cpp
// says why); NaN on one side only is a failure.
double ulpsApart(float got, float want, float old) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want) ? 0 : 1e30;
  const float scale = std::max({std::fabs(old), std::fabs(want), FLT_MIN});
  return std::fabs(static_cast<double>(got) - want) / (std::nextafter(scale, INFINITY) - scale);
}

int runCpu(std::int64_t n, int reps) {
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

// The GPU: inputs made on the host and copied once; the first call (NVRTC compile, load, one
// step) timed; then samples of `batch` steps queued back to back and one synchronize, so that
// a step's time is the GPU's, as PyTorch's CUDA events time its steps. The first step is
// checked on the host against the loop (every element; no interpreter).
int runCuda(std::int64_t n, int reps) {
  const einjit::Device gpu = einjit::Device::cuda();
  std::string why;
  if (!einjit::cudaAvailable(&why)) {
    std::printf("no CUDA device: %s\n", why.c_str());
    return 1;
  }
  Tensor hp = Tensor::random({n}, einjit::DType::f32, 1), hg = Tensor::random({n}, einjit::DType::f32, 2);
  Tensor m = Tensor::zeros({n}).cuda(), v = Tensor::zeros({n}).cuda(), p = hp.cuda(), g = hg.cuda();
  einjit::synchronize(gpu);
  einjit::Options opt;
  opt.device = gpu;
  auto t0 = std::chrono::steady_clock::now();
  einjit::Kernel step = einjit::compile(ex::kAdam, opt);
  const std::map<std::string, Tensor> args = {{"m", m}, {"g", g}, {"v", v}, {"p", p}};
  step.call(args, scalars(1));
  einjit::synchronize(gpu);
  const double first = ms(std::chrono::steady_clock::now() - t0);

  // The check of step 1 from m = v = 0: m and v against the loop from the same inputs, p
  // against the loop's last statement from einjit's m and v (so a difference does not carry).
  const Tensor cm = m.cpu(), cv = v.cpu(), cp = p.cpu();
  const auto un = static_cast<std::size_t>(n);
  std::vector<float> lm(un, 0.f), lv(un, 0.f), lp(hp.data<float>(), hp.data<float>() + n);
  const float* gg = hg.data<float>();
  const auto c1 = float(1 - b1), c2 = float(1 - b2);
  ex::adamLoop<float>(lm.data(), gg, lv.data(), lp.data(), un, float(b1), float(b2), float(lr), c1,
                      c2, float(eps));
  std::vector<float> em(cm.data<float>(), cm.data<float>() + n),
      ev(cv.data<float>(), cv.data<float>() + n), pp(hp.data<float>(), hp.data<float>() + n);
  ex::adamLoop<float>(em.data(), gg, ev.data(), pp.data(), un, float(b1), float(b2), float(lr),
                      c1, c2, float(eps), 0.f, false, true);
  double worst = 0;
  for (std::size_t i = 0; i < un; ++i) {
    worst = std::max(worst, ulpsApart(cm.data<float>()[i], lm[i], 0.f));
    worst = std::max(worst, ulpsApart(cv.data<float>()[i], lv[i], 0.f));
    worst = std::max(worst, ulpsApart(cp.data<float>()[i], pp[i], hp.data<float>()[i]));
  }

  const int batch = 20;
  int t = 2;
  const double perBatch = timeSteps(reps, [&](int) {
    for (int k = 0; k < batch; ++k) step.call(args, scalars(t++));
    einjit::synchronize(gpu);
  });
  // One step's wall time with a synchronize after it: the host's work per call shows here.
  const double single = timeSteps(reps, [&](int) {
    step.call(args, scalars(t++));
    einjit::synchronize(gpu);
  });
  const double stepMs = perBatch / batch;
  std::printf("Adam step on %s, %lld f32 parameters, median of %d samples of %d queued steps\n",
              gpu.name().c_str(), static_cast<long long>(n), reps, batch);
  std::printf("  einjit first call (NVRTC compile, load, one step): %.1f ms\n", first);
  std::printf("  einjit step:                %.3f ms, %.0f GB/s (7 x 4 bytes per parameter)\n",
              stepMs, 28.0 * static_cast<double>(n) / stepMs / 1e6);
  std::printf("  einjit step + synchronize:  %.3f ms\n", single);
  std::printf("  step 1 against the loop on the host: at most %.2f ulp of the element's scale\n",
              worst);
  // NVRTC contracts a*b + c into FMA; the loop does not: 1.5 ulp per statement (see
  // examples/optimizers.cpp), 2 allowing for the GPU's square root and division.
  if (!(worst <= 2)) {
    std::printf("FAILED: the GPU step differs from the loop by more than 2 ulp\n");
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<const char*> pos;
  bool cuda = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cuda") == 0)
      cuda = true;
    else
      pos.push_back(argv[i]);
  }
  const std::int64_t n = !pos.empty() ? std::atoll(pos[0]) : 10000000;
  const int reps = pos.size() > 1 ? std::atoi(pos[1]) : 20;
  if (n < 1 || reps < 1) {
    std::fprintf(stderr, "usage: bench_adam [N] [REPS] [--cuda]\n");
    return 2;
  }
  try {
    return cuda ? runCuda(n, reps) : runCpu(n, reps);
  } catch (const einjit::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
