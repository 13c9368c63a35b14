#pragma once
// Where a CPU call's time goes, per function and per thread (EINJIT_CPU_TASK_TIMES set to any
// value): each function's wall time and, for a parallel one, each thread's iterations, ranges
// and CPU time, printed to stderr after the function. The balance of a plan's tasks and its
// serial parts (a packing function before the product) read this way, without a profiler
// (bench/RESULTS.md, "CPU: two threads against one, session 28"). Off, it costs one branch per
// function.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace einjit::runtime {

bool cpuTaskTimesOn();

// One function's record.
class CpuTaskTimes {
public:
  explicit CpuTaskTimes(std::string function);
  // The calling thread's CPU clock, in seconds.
  static double threadCpu();
  // A range of `iterations` run by the calling thread, which took `cpu` seconds of its CPU.
  void add(std::int64_t iterations, double cpu);
  // Prints the record, with the function's wall time.
  void print(double wallSeconds) const;

private:
  struct Thread {
    int id;
    std::int64_t iterations = 0, ranges = 0;
    double cpu = 0;
  };
  std::string function_;
  mutable std::mutex mutex_;
  std::vector<Thread> threads_;
};

} // namespace einjit::runtime
