#pragma once
// The CPU backend: one call's binding -> lowered loop nests (codegen/Lower.h) -> JIT-compiled
// functions (Jit.h) -> run, parallel loops split among oneTBB workers.
//
// Kernels are specialised per binding: dtypes, shapes and strides of every tensor and the
// values of integer parameters used in subscripts. Floating-point parameters are read at run
// time, so changing a learning rate does not recompile.
#include "codegen/Lower.h"
#include "dsl/Binding.h"
#include "runtime/CallLayout.h"
#include "runtime/CpuStages.h"
#include "runtime/Jit.h"
#include "runtime/Memo.h"

namespace einjit::runtime {

struct PreparedCpu {
  codegen::LoweredProgram lowered;
  std::shared_ptr<const CompiledCode> code;
  // The program checks accesses at run time, not all of them first (LoweredProgram::
  // prechecked), and writes tensors the caller passed: those are computed in dense scratch
  // copies and copied back only when the call succeeds.
  bool scratch = false;
  // The functions after the hoisted checks as statements, and which may run at once.
  CpuStagePlan stages;
};

std::shared_ptr<const PreparedCpu> prepareCpu(const dsl::Program& p, const dsl::BoundProgram& b,
                                              codegen::Strides strides, bool keepIR = false,
                                              bool keepIntermediates = false);

// Runs every function, with scratch buffers of its own: the hoisted checks, then (when they
// pass) the zero fills and the rest, statement by statement, independent statements at once
// (CpuStages.h). Returns the status: 0, or nonzero when a checked access went out of bounds
// (the results are then meaningless; nothing was written when a hoisted check failed).
int executeCpu(const PreparedCpu& prep, const std::vector<void*>& buffers,
               const std::vector<double>& params, const std::vector<std::int64_t>& zeroBytes);

using PreparedCache = Memo<PreparedCpu>;

// The thread count the CPU plans are made for (codegen::Target::threads, which decides how a
// statement's work is split into tasks); 0, the default: the host's (oneTBB's default
// concurrency). A kernel keeps the plan of its first call per binding, so a benchmark that
// compares the plans for one and two threads in one process (bench/bench_threads.cpp) sets it
// before each kernel's first call.
void setCpuPlanThreads(int threads);

} // namespace einjit::runtime
