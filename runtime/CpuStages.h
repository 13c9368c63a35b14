#pragma once
// The statements of a CPU program that do not depend on each other run at the same time.
//
// A stage is one statement's functions (codegen::ir::Func::statement: a row run or element-wise
// group is one statement), run in order, each with its own parallel loop. What a stage reads
// and writes is read off its functions' IR: every buffer it loads from, stores to or prefetches
// (the program's tensors and the scratch buffers its functions use). A later stage depends on an
// earlier one when one writes a buffer the other reads or writes (read after write, write after
// read, write after write: in-place '=' and '+=', a statement reading another's output or an
// intermediate, two statements writing one tensor, a scratch buffer two statements would share).
// Independent stages run as oneTBB tasks at once, each one's parallel loops nested in its task,
// so that on two threads each thread takes a statement instead of both forking over two short
// loops one after the other (the README demo's dx and dk, 0.1-0.2 ms each).
//
// Results are the same bit for bit as in order: each output element is written by one stage's
// functions as before, and no function's order of additions changes; only the order in which
// independent stages finish does.
//
// When it pays: a stage whose parallel loops keep every thread busy gains nothing from company,
// and two large GEMMs at once each pack their own panels and share the caches where one at a
// time has them to itself. So a large stage (its buffers, tensors and scratch, over
// kSmallStageBytes together) waits for the large stages before it, as in order; small ones run
// beside anything (measured: bench/RESULTS.md, statements run concurrently).
#include "codegen/Lower.h"

#include <cstddef>
#include <functional>
#include <vector>

namespace einjit::runtime {

struct CpuStage {
  std::size_t from = 0, to = 0;   // its functions [from, to) of LoweredProgram::funcs
  std::vector<std::size_t> after; // the earlier stages it depends on (direct conflicts)
  std::vector<std::size_t> next;  // the later stages that depend on it
  std::size_t bytes = 0;          // the sizes of the buffers it reads or writes
};

struct CpuStagePlan {
  std::vector<CpuStage> stages; // the functions after the hoisted checks, in order
  bool concurrent = false;      // run independent stages at once (else every function in order)
};

// A stage that touches at most this much memory is small: the README demo's statements touch
// 0.6-0.7 MB each and run for 0.1-0.2 ms, Linear's and the distance layer's gradients tens of
// MiB for tens of milliseconds.
inline constexpr std::size_t kSmallStageBytes = std::size_t{4} << 20;

// The stages of a lowered CPU program and whether to run them concurrently; bufferBytes[i]: the
// size of buffer i (the program's tensors, then its scratch buffers).
// EINJIT_CPU_STAGES=0 runs every program in order, =1 concurrently wherever two stages are
// independent whatever their size (for measurements), unset: the rule above; setCpuStages
// below overrides it.
// EINJIT_DEBUG_STAGES=1 prints each plan (its stages, their sizes and dependences) on stderr.
CpuStagePlan planCpuStages(const codegen::LoweredProgram& lowered,
                           const std::vector<std::size_t>& bufferBytes);

// How the plans made from now on run their stages: 0 in order, 1 independent stages at once
// whatever their size, -1 the rule (the default, or EINJIT_CPU_STAGES). A kernel keeps the plan
// of its first call per binding, so a benchmark that compares the modes in one process
// (bench/bench_demo.cpp) sets it before each kernel's first call.
void setCpuStages(int mode);

// Runs every stage's functions (runFunction(i) runs function i), each stage after those it
// depends on, independent ones as concurrent oneTBB tasks where the plan says so and more than
// one thread may run; in order otherwise.
void runCpuStages(const CpuStagePlan& plan, const std::function<void(std::size_t)>& runFunction);

} // namespace einjit::runtime
