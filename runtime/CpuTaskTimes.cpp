// Per-function, per-thread times of a CPU call (CpuTaskTimes.h).
#include "runtime/CpuTaskTimes.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>

#if EINJIT_HAVE_TBB
#include <tbb/task_arena.h>
#endif

namespace einjit::runtime {

bool cpuTaskTimesOn() {
  static const bool on = std::getenv("EINJIT_CPU_TASK_TIMES") != nullptr;
  return on;
}

CpuTaskTimes::CpuTaskTimes(std::string function) : function_(std::move(function)) {}

double CpuTaskTimes::threadCpu() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void CpuTaskTimes::add(std::int64_t lo, std::int64_t hi, double cpu) {
#if EINJIT_HAVE_TBB
  const int id = tbb::this_task_arena::current_thread_index();
#else
  const int id = 0;
#endif
  std::lock_guard<std::mutex> lock(mutex_);
  Thread* t = nullptr;
  for (Thread& x : threads_)
    if (x.id == id) t = &x;
  if (!t) t = &threads_.emplace_back(Thread{id});
  t->ranges.push_back({lo, hi, cpu});
}

void CpuTaskTimes::print(double wallSeconds) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string line = "einjit task times: " + function_ + ": wall " +
                     std::to_string(wallSeconds * 1e3) + " ms";
  for (const Thread& t : threads_) {
    double cpu = 0;
    std::int64_t iterations = 0;
    std::string ranges;
    for (const Range& r : t.ranges) {
      cpu += r.cpu;
      iterations += r.hi - r.lo;
      ranges += " [" + std::to_string(r.lo) + "," + std::to_string(r.hi) + ") " +
                std::to_string(r.cpu * 1e3);
    }
    line += "; thread " + std::to_string(t.id) + ": " + std::to_string(iterations) +
            " iterations in " + std::to_string(t.ranges.size()) + " ranges, CPU " +
            std::to_string(cpu * 1e3) + " ms:" + ranges;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

} // namespace einjit::runtime
