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

Stmt taskChunks(const std::vector<TaskChunk>& chunks, Stmt body) {
  using ir::let;
  auto at = [](const Expr& c, std::int64_t count, std::int64_t parts) {
    return ir::binary(BinOp::Div, ir::mul(c, ir::intImm(count)), ir::intImm(parts));
  };
  for (std::size_t i = chunks.size(); i-- > 0;) {
    const TaskChunk& c = chunks[i];
    body = let(c.lo, at(c.at, c.count, c.chunks),
               let(c.hi, at(ir::add(c.at, ir::intImm(1)), c.count, c.chunks), std::move(body)));
  }
  return body;
}

void Lowerer::emitGemmSum(const Statement& st, const GemmPlan& g, const Ranges& r,
                          const std::string& name, const std::string& partial) {
  // The partials [part][batch][M][N] (lower/CpuGemm.cpp) added in part order, a row of N at a
  // time (the rows parallel), into the output: stored by a ':=', added by a '+=', then the
  // epilogue (schedule/Fusion.h), as the last KC block's tile stores do without a split.
  setRanges(st, r);
  ir::Func f = newFunc(name);
  const auto m = static_cast<std::size_t>(g.m), n = static_cast<std::size_t>(g.n);
  const std::vector<std::size_t> batch(g.batch.begin(), g.batch.end());
  const std::int64_t M = r[m].second - r[m].first, N = r[n].second - r[n].first;
  const std::int64_t rows = extentOfGroup(batch, r) * M, total = rows * N;
  out_.scratch.push_back({partial, vt_, g.kParts * total});
  const std::string rv = "gemm.row", cv = "gemm.col";
  // Rows in batch-major order, or (GemmPlan::batchInLine) M-major, the batch values of an
  // output line in consecutive rows.
  const std::int64_t values = extentOfGroup(batch, r);
  decompose(batch, r, g.batchInLine ? ir::var(rv) % values : ir::var(rv) / M);
  varExpr_[m] = (g.batchInLine ? ir::var(rv) / values : ir::var(rv) % M) + r[m].first;
  const Expr partialRow = g.batchInLine ? (ir::var(rv) % values) * M + ir::var(rv) / values
                                        : ir::var(rv);
  varExpr_[n] = ir::var(cv) + r[n].first;
  const Expr at = partialRow * N + ir::var(cv);
  Expr sum = ir::load(vt_, partial, at);
  for (std::int64_t p = 1; p < g.kParts; ++p)
    sum = ir::add(sum, ir::load(vt_, partial, at + p * total));
  std::vector<Stmt> stores;
  if (Stmt s = storeOutput(st, sum)) stores.push_back(s);
  const std::size_t self = stmt_;
  for (std::size_t j = self + 1; j <= ctx_.epilogueThrough; ++j) {
    stmt_ = j;
    if (Stmt e = storeOutput(p_.stmts[j], value(*p_.stmts[j].rhs))) stores.push_back(e);
  }
  stmt_ = self;
  Stmt body = ir::forLoop(cv, ir::intImm(0), ir::intImm(N), ForKind::Serial, ir::block(stores));
  f.body = parallelOver(f, rv, rows, static_cast<double>(N * g.kParts), g.parallel,
                        target_.minParallelWork, std::move(body));
  out_.funcs.push_back(std::move(f));
}

} // namespace einjit::codegen::lowering
