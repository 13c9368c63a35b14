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
//
// A call that writes its arguments must leave them untouched when a check fails, so the
// runtime runs such a program on copies of them, unless the checks can run first: when every
// checked subscript reads only indices of fixed ranges and tensors the program does not write
// (an embedding's gradient dE[tok[b], d] += dy[b, d]), functions that evaluate just those
// subscripts, over the box of the indices they read, come first (`checks` of them,
// `prechecked`). The runtime runs them, and only when they pass runs the rest, on the arguments
// themselves and without reading the status again: the later checks cannot fail. The box may
// cover points the program never reaches (another index's range empty there); such a call then
// fails its checks in vain and runs in the interpreter, which is exact.
//
// Split reductions (Schedule.h) write each chunk's partial result into a scratch buffer that
// the runtime allocates per call (kernels stay immutable and may run on many threads at once)
// and combine the partials in chunk order in a second function.
#include "codegen/IR.h"
#include "codegen/Schedule.h"
#include "codegen/schedule/CpuStatementPlan.h"
#include "codegen/schedule/GpuStatementPlan.h"

namespace einjit::codegen {

// A buffer of partial results or of a re-laid-out tensor, uninitialised; each call needs its
// own.
struct ScratchBuffer {
  std::string name;
  ir::Type elem;
  std::int64_t elements;
  std::size_t bytes() const {
    return static_cast<std::size_t>(elements) * static_cast<std::size_t>(ir::typeBytes(elem));
  }
};

struct LoweredProgram {
  std::vector<ir::Func> funcs;        // run in order
  std::vector<ScratchBuffer> scratch; // buffers after the program's tensors
  std::vector<int> zeroFill;          // ':=' tensors to zero before the first function runs
  bool checked = false;               // some access is checked at run time
  bool prechecked = false;            // ... and every check is in the first `checks` funcs
  std::size_t checks = 0;             // leading funcs that only evaluate access checks
  // A check may fail after something was written: the runtime computes written arguments in
  // copies, and reads the status after the last function.
  bool lateChecks() const { return checked && !prechecked; }
  std::vector<std::string> notes; // the schedule of each statement, for `einjit explain`
};

// Per tensor id: whether the call's pointer to it is 16-byte aligned (then GPU tiles may copy
// 16 bytes at a time from it). Entries past the end: not aligned.
using Aligned16 = std::vector<bool>;

// Statement k's GPU plan for `target` (a GPU target), decided as lower() decides it but without
// lowering anything: the family, the layout copies, each tile's index groups, the residue
// phases (schedule/GpuStatementPlan.h).
GpuStatementPlan planGpuStatement(const dsl::Program& p, const dsl::BoundProgram& b,
                                  const Strides& strides, const Target& target, std::size_t k,
                                  const Aligned16& aligned = {});

// Statement k's CPU plan for `target` (a CPU target), decided as lower() decides it but without
// lowering anything: the family (Rows or Fused where the program's row runs or element-wise
// groups take the statement), the schedule, the packed plan and its epilogue, the residue
// phases, the core/border split (schedule/CpuStatementPlan.h).
CpuStatementPlan planCpuStatement(const dsl::Program& p, const dsl::BoundProgram& b,
                                  const Strides& strides, const Target& target, std::size_t k);

// Buffer i of every function is tensor id i of the program, then scratch buffer i is buffer
// tensors.size() + i.
LoweredProgram lower(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
                     const Target& target, const Aligned16& aligned = {});

} // namespace einjit::codegen
