#pragma once
// The task loop of the CPU's packed GEMM path (lower/CpuGemmTasks.cpp): the parallel loop of a
// packing function or of the product.
#include "codegen/IR.h"

#include <cstdint>
#include <string>
#include <vector>

namespace einjit::codegen::lowering {

// The loop of function f over [0, count), the runtime's parallel loop when allowed and there
// are two iterations or more, each `inner` flops (the grain keeps tasks above minWork).
ir::Stmt parallelOver(ir::Func& f, const std::string& v, std::int64_t count, double inner,
                      bool allowed, double minWork, ir::Stmt body);

// A chunk of a task: chunk `at` of `chunks` over [0, count), bound to lo and hi in the task's
// body: [at count / chunks, (at + 1) count / chunks), sizes that differ by one at most (86
// slivers in 4 chunks of 22 left the last 20: on two threads, 44 slivers against 42).
struct TaskChunk {
  std::string lo, hi;
  ir::Expr at;
  std::int64_t count = 0, chunks = 1;
};
// body with every chunk's bounds bound, the first chunk's outermost.
ir::Stmt taskChunks(const std::vector<TaskChunk>& chunks, ir::Stmt body);

} // namespace einjit::codegen::lowering
