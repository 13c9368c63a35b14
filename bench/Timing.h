#pragma once
// What the benchmarks that alternate einjit and a peer by hand (bench_gemm.cpp, bench_demo.cpp)
// share: a median, a wall-clock timer and the process's CPU time.
#include <time.h>

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

// The CPU time of every thread of the process, in seconds.
inline double processCpu() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

} // namespace einjit::bench
