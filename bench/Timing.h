#pragma once
// What the benchmarks that alternate einjit and a peer by hand (bench_gemm.cpp, bench_demo.cpp)
// share: a median and a wall-clock timer.
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace einjit::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Seconds f takes, on the steady clock.
inline double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace einjit::bench
