#pragma once
// Command-line arguments shared by the einjit tool's commands.
#include "Commands.h"

#include "einjit/DType.h"
#include "einjit/Tensor.h"
#include "einjit/einjit.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace einjit::cli {

struct Arguments {
  std::string program;
  std::map<std::string, Shape> shapes;   // --shape NAME=AxBxC
  std::map<std::string, double> scalars; // --scalar NAME=VALUE
  std::uint64_t seed = 1;                // --seed N
  DType dtype = DType::f32;              // --dtype f32|f64
  std::vector<std::string> wrt;          // --wrt x,w
  Device device = Device::cpu();         // --device reference|cpu|cuda[:N]
  bool check = false;                    // --check: compare with the reference interpreter
  bool ir = false, llvm = false;         // --ir, --llvm (explain)
  bool grad = false;                     // --grad (bench: forward + gradients)
  int reps = 0;                          // --reps N (bench; 0: enough for 0.5 s)
};

// The program text (one word) and the options; einjit::Error on anything else.
Arguments parseArguments(const Words& words);

} // namespace einjit::cli
