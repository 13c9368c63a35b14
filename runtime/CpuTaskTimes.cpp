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

void CpuTaskTimes::add(std::int64_t iterations, double cpu) {
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
  t->iterations += iterations;
  t->ranges += 1;
  t->cpu += cpu;
}

void CpuTaskTimes::print(double wallSeconds) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string line = "einjit task times: " + function_ + ": wall " +
                     std::to_string(wallSeconds * 1e3) + " ms";
  for (const Thread& t : threads_)
    line += "; thread " + std::to_string(t.id) + ": " + std::to_string(t.iterations) +
            " iterations in " + std::to_string(t.ranges) + " ranges, CPU " +
            std::to_string(t.cpu * 1e3) + " ms";
  std::fprintf(stderr, "%s\n", line.c_str());
}

} // namespace einjit::runtime
