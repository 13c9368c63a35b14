#pragma once
// Where a CPU call's time goes, per function and per thread (EINJIT_CPU_TASK_TIMES set to any
// value): each function's wall time and, for a parallel one, each thread's ranges of iterations
// with their CPU times, printed to stderr after the function. The balance of a plan's tasks and its
// serial parts (a packing function before the product) read this way, without a profiler
// (bench/RESULTS.md, "CPU: two threads against one"). Off, it costs one branch per
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
  // Iterations [lo, hi) run by the calling thread, which took `cpu` seconds of its CPU.
  void add(std::int64_t lo, std::int64_t hi, double cpu);
  // Prints the record, with the function's wall time.
  void print(double wallSeconds) const;

private:
  struct Range {
    std::int64_t lo, hi;
    double cpu;
  };
  struct Thread {
    int id;
    std::vector<Range> ranges;
  };
  std::string function_;
  mutable std::mutex mutex_;
  std::vector<Thread> threads_;
};

} // namespace einjit::runtime
