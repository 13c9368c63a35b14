#pragma once
// Lowering: a checked, bound program and the strides of one call's tensors -> loop-nest IR
// functions, one or more per statement (a register-tiled main part and its edge parts), run
// in order. Shapes and strides are constants in the IR (kernels are specialised per binding);
// floating-point scalar parameters are read at run time.
//
// Semantics follow the reference interpreter (codegen/Interpreter.h): each statement reduces
// its right-hand side per covered output element into a local accumulator, max/min keep the
// first extreme, pad() reads zeros, clamp()/wrap() fold indices, a padded left-hand side drops
// writes. Accesses that cannot be proven in bounds (gathers; subscripts over ranges that
// depend on other indices) become Check nodes: an index outside sets the call's status, the
// access is clamped, and the runtime reruns the call through the interpreter, which reports
// the error with its caret.
#include "codegen/IR.h"
#include "codegen/Schedule.h"

namespace einjit::codegen {

struct LoweredProgram {
  std::vector<ir::Func> funcs;    // run in order
  std::vector<int> zeroFill;      // ':=' tensors to zero before the first function runs
  bool checked = false;           // some access is checked at run time
  std::vector<std::string> notes; // the schedule of each statement, for `einjit explain`
};

// Buffer i of every function is tensor id i of the program.
LoweredProgram lower(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
                     const Target& target);

} // namespace einjit::codegen
