#include "codegen/schedule/GemmParts.h"

#include "codegen/Target.h"
#include "codegen/schedule/GemmKnobs.h"

#include <string>

namespace einjit::codegen {

GemmPlan withParts(GemmPlan g, const dsl::BoundStatement& bs, DType dtype, const Target& t,
                   const std::function<std::optional<GemmPlan>(const Target&)>& replan) {
  // A plan's partial output ([part][batch][M][N]) fits half of L2: the tiles it adds to after
  // every KC block stay in cache, and the last pass reads them from there.
  auto partialFits = [&](const GemmPlan& s) {
    auto extent = [&](int v) {
      return bs.hi[static_cast<std::size_t>(v)] - bs.lo[static_cast<std::size_t>(v)];
    };
    std::int64_t outputs = extent(s.m) * extent(s.n);
    for (int v : s.batch) outputs *= extent(v);
    return outputs * (dtype == DType::f64 ? 8 : 4) <= t.l2Bytes / 2;
  };
  if (t.threads > 1) {
    // The reduction split across the threads (GemmPlan::kParts): the one-thread plan, its KC
    // blocks in one run per thread, where that plan is a single task (no batch values outside
    // the GEMM: those give tasks that share nothing) and each part holds two KC blocks or more.
    Target one = t;
    one.threads = 1;
    std::optional<GemmPlan> s = replan(one);
    if (s && s->tasks == 1 && s->kBlocks >= 2 * t.threads) {
      s->kParts = t.threads;
      if (partialFits(*s)) {
        s->staged = s->parallel = true;
        s->tasks = s->groups = s->kParts;
        s->why = s->why.substr(0, s->why.rfind("; ")) + "; the reduction split in " +
                 std::to_string(s->kParts) + " parts (" + std::to_string(s->kParts) +
                 " tasks in parallel, partial sums added in order)";
        return *s;
      }
    }
  }
  // One thread's tasks, their output not contiguous along N, over several KC blocks: the tiles
  // summed into a contiguous partial (one part; GemmPlan::staged), stored by one pass. Also,
  // whatever its size and the threads, an output that holds several batch values per line
  // (GemmPlan::batchInLine).
  if (!g.vectorStore && g.kBlocks >= 2 && ((!g.parallel && partialFits(g)) || g.batchInLine) &&
      gemmKnobs().stage != 0) {
    g.staged = true;
    g.why += "; output staged in a contiguous partial";
  }
  return g;
}

} // namespace einjit::codegen
