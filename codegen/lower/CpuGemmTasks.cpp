// The task loop of the CPU's packed GEMM path (CpuGemmTasks.h): one parallel loop over groups of
// tasks, each task running every part's share (lower/CpuGemm.cpp emits the parts).
#include "codegen/lower/CpuGemmTasks.h"

#include "codegen/IROperator.h"
#include "codegen/lower/Lowerer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace einjit::codegen::lowering {

Stmt parallelOver(ir::Func& f, const std::string& v, std::int64_t count, double inner, bool allowed,
                  double minWork, Stmt body) {
  ForKind kind = ForKind::Serial;
  if (allowed && count >= 2) {
    kind = ForKind::Parallel;
    f.parallel = true;
    f.parallelLo = 0;
    f.parallelHi = count;
    f.grain = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(std::ceil(minWork / std::max(inner, 1.0))));
  }
  return ir::forLoop(v, ir::intImm(0), ir::intImm(count), kind, std::move(body));
}

void Lowerer::emitGemmProduct(const std::string& name, const std::vector<GemmTasks>& parts) {
  // One loop over tasks runs every part's task in turn (a strided gradient's residue phases,
  // which write the same lines of the output: written while they are in cache). Task t is the
  // same batch value in each part when their task structures agree; a part runs the tasks it
  // has. The task groups are the fewest any part has scratch for.
  const std::string gv = "gemm.g", tk = "gemm.task";
  std::int64_t tasks = 0, groups = std::numeric_limits<std::int64_t>::max();
  double flops = 0;
  bool parallel = true;
  for (const GemmTasks& p : parts) {
    tasks = std::max(tasks, p.tasks);
    groups = std::min(groups, p.groups);
    flops += p.flops;
    parallel = parallel && p.parallel;
  }
  std::vector<Stmt> bodies;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const GemmTasks& p = parts[i];
    // Several parts (residue phases): each part's share of a task is outlined, a function
    // that the CPU JIT compiles as a module of its own (codegen::separateParts), in parallel.
    const Expr t = ir::var(tk);
    Stmt body = parts.size() == 1
                    ? p.body
                    : ir::forLoop(tk + std::to_string(i), t, t + 1, ForKind::Outlined, p.body);
    bodies.push_back(p.tasks == tasks ? body : ir::ifThen(ir::lt(t, p.tasks), body));
  }
  const std::int64_t perGroup = (tasks + groups - 1) / groups;
  const Expr firstTask = ir::var(gv) * perGroup;
  Stmt body = ir::forLoop(tk, firstTask, ir::min(firstTask + perGroup, tasks), ForKind::Serial,
                          ir::block(std::move(bodies)));
  ir::Func f = newFunc(name);
  f.explicitCode = true;
  f.body = parallelOver(f, gv, groups, flops / static_cast<double>(groups), parallel,
                        target_.minParallelWork, std::move(body));
  out_.funcs.push_back(std::move(f));
}

} // namespace einjit::codegen::lowering
