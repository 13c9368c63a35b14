#pragma once
// Command-line arguments shared by the einjit tool's commands.
#include "Commands.h"

#include "einjit/DType.h"
#include "einjit/Tensor.h"
#include "einjit/einjit.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace einjit::cli {

struct Arguments {
  std::string program;
  std::map<std::string, Shape> shapes;       // --shape NAME=AxBxC, and the shapes of --input files
  std::map<std::string, std::string> inputs; // --input NAME=file.npy
  std::string saveDir;                       // --save DIR: each output to DIR/NAME.npy (run)
  std::map<std::string, double> scalars;     // --scalar NAME=VALUE
  std::uint64_t seed = 1;                    // --seed N
  DType dtype = DType::f32;                  // --dtype f32|f64|bf16
  bool dtypeGiven = false;                   // --dtype was given (else an --input file's may rule)
  std::vector<std::string> wrt;              // --wrt x,w
  Device device = Device::cpu();             // --device reference|cpu|cuda[:N]
  bool check = false;                        // --check: compare with the reference interpreter
  bool ir = false, llvm = false;             // --ir, --llvm (explain)
  bool grad = false;                         // --grad (bench: forward + gradients)
  int reps = 0;                              // --reps N (bench; 0: enough for 0.5 s)
  Options options() const;                   // dtype and device for compile()
};

// Median seconds per call of f: one warm-up call (compilation), then `reps` calls, or with
// reps == 0 as many as fit in 0.5 s (at least 3).
template <class F>
double medianSeconds(F&& f, int reps) {
  using Clock = std::chrono::steady_clock;
  f();
  std::vector<double> times;
  const auto start = Clock::now();
  while (true) {
    const auto t0 = Clock::now();
    f();
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    const double spent = std::chrono::duration<double>(Clock::now() - start).count();
    if (reps > 0 ? static_cast<int>(times.size()) >= reps
                 : (times.size() >= 3 && spent >= 0.5) || times.size() >= 10000)
      break;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The program text (one word) and the options; einjit::Error on anything else.
Arguments parseArguments(const Words& words);

} // namespace einjit::cli
