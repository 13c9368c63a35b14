#pragma once
// The task loop of the CPU's packed GEMM path (lower/CpuGemmTasks.cpp): the parallel loop of a
// packing function or of the product.
#include "codegen/IR.h"

#include <cstdint>
#include <string>

namespace einjit::codegen::lowering {

// The loop of function f over [0, count), the runtime's parallel loop when allowed and there
// are two iterations or more, each `inner` flops (the grain keeps tasks above minWork).
ir::Stmt parallelOver(ir::Func& f, const std::string& v, std::int64_t count, double inner,
                      bool allowed, double minWork, ir::Stmt body);

} // namespace einjit::codegen::lowering
