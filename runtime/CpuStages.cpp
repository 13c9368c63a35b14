// The stages of a CPU program, their dependences, and running them at once (CpuStages.h).
#include "runtime/CpuStages.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#if EINJIT_HAVE_TBB
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#endif

namespace einjit::runtime {

namespace {

using codegen::ir::Func;

// The buffers a function reads and writes, by their index in its buffer list (names its
// buffer list does not hold are local buffers of its own).
struct BufferUse {
  std::set<std::size_t> reads, writes;
};

class UseCollector final : public codegen::ir::Visitor {
public:
  UseCollector(const std::unordered_map<std::string, std::size_t>& index, BufferUse& use)
      : index_(index), use_(use) {}

  void visitLoad(const codegen::ir::Load& n) override {
    note(n.buffer, use_.reads);
    Visitor::visitLoad(n);
  }
  void visitStore(const codegen::ir::Store& n) override {
    note(n.buffer, use_.writes);
    if (n.atomicAdd) note(n.buffer, use_.reads);
    Visitor::visitStore(n);
  }
  // A prefetch is a hint ahead of a store to the same buffer; counted as a read all the same.
  void visitPrefetch(const codegen::ir::Prefetch& n) override {
    note(n.buffer, use_.reads);
    Visitor::visitPrefetch(n);
  }
  void visitCopyAsync(const codegen::ir::CopyAsync& n) override {
    note(n.src, use_.reads);
    note(n.dst, use_.writes);
    Visitor::visitCopyAsync(n);
  }
  void visitCopyVector(const codegen::ir::CopyVector& n) override {
    note(n.src, use_.reads);
    note(n.dst, use_.writes);
    Visitor::visitCopyVector(n);
  }

private:
  void note(const std::string& name, std::set<std::size_t>& into) {
    auto it = index_.find(name);
    if (it != index_.end()) into.insert(it->second);
  }
  const std::unordered_map<std::string, std::size_t>& index_;
  BufferUse& use_;
};

bool meet(const std::set<std::size_t>& a, const std::set<std::size_t>& b) {
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i == *j) return true;
    if (*i < *j)
      ++i;
    else
      ++j;
  }
  return false;
}

// EINJIT_CPU_STAGES (or setCpuStages): "0" never concurrent, "1" wherever stages are
// independent, else the rule.
std::atomic<int>& stagesMode() {
  static std::atomic<int> mode = [] {
    const char* e = std::getenv("EINJIT_CPU_STAGES");
    if (!e || !*e) return -1;
    return std::string(e) == "0" ? 0 : 1;
  }();
  return mode;
}

std::optional<bool> stagesOverride() {
  const int mode = stagesMode().load();
  if (mode < 0) return std::nullopt;
  return mode != 0;
}

} // namespace

CpuStagePlan planCpuStages(const codegen::LoweredProgram& lowered,
                           const std::vector<std::size_t>& bufferBytes) {
  CpuStagePlan plan;
  const std::vector<Func>& funcs = lowered.funcs;
  std::vector<BufferUse> use;
  for (std::size_t i = lowered.checks; i < funcs.size(); ++i) {
    const Func& f = funcs[i];
    if (plan.stages.empty() || f.statement < 0 ||
        f.statement != funcs[plan.stages.back().to - 1].statement) {
      plan.stages.push_back({i, i, {}, {}, 0});
      use.emplace_back();
    }
    CpuStage& s = plan.stages.back();
    s.to = i + 1;
    std::unordered_map<std::string, std::size_t> index;
    for (std::size_t b = 0; b < f.buffers.size(); ++b) index.emplace(f.buffers[b].name, b);
    UseCollector collect(index, use.back());
    collect.visit(f.body);
  }
  for (std::size_t k = 0; k < plan.stages.size(); ++k) {
    std::set<std::size_t> touched = use[k].reads;
    touched.insert(use[k].writes.begin(), use[k].writes.end());
    for (std::size_t b : touched)
      plan.stages[k].bytes += b < bufferBytes.size() ? bufferBytes[b] : 0;
  }
  const std::size_t n = plan.stages.size();
  const std::optional<bool> forced = stagesOverride();
  if (n < 2 || (forced && !*forced)) return plan;
  // reach[j][i]: stage j runs after stage i finished (directly or through others).
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  auto depend = [&](std::size_t i, std::size_t j) {
    plan.stages[j].after.push_back(i);
    plan.stages[i].next.push_back(j);
    for (std::size_t k = 0; k < n; ++k)
      if (reach[i][k]) reach[j][k] = true;
    reach[j][i] = true;
  };
  const bool any = forced.value_or(false);
  std::optional<std::size_t> lastLarge;
  for (std::size_t j = 0; j < n; ++j) {
    // Nearest first, so that a conflict already ordered through a stage between them adds no
    // edge.
    for (std::size_t i = j; i-- > 0;) {
      if (reach[j][i]) continue;
      const BufferUse &a = use[i], &b = use[j];
      if (meet(a.writes, b.reads) || meet(a.writes, b.writes) || meet(a.reads, b.writes))
        depend(i, j);
    }
    // Two large stages run one after the other, in program order (CpuStages.h: when it pays).
    const bool large = plan.stages[j].bytes > kSmallStageBytes;
    if (large && !any && lastLarge && !reach[j][*lastLarge]) depend(*lastLarge, j);
    if (large) lastLarge = j;
  }
  for (std::size_t j = 0; j < n && !plan.concurrent; ++j)
    for (std::size_t i = 0; i < j && !plan.concurrent; ++i) plan.concurrent = !reach[j][i];
  if (const char* e = std::getenv("EINJIT_DEBUG_STAGES"); e && std::string(e) == "1") {
    std::string text =
        plan.concurrent ? "einjit stages (concurrent):" : "einjit stages (in order):";
    for (std::size_t k = 0; k < n; ++k) {
      const CpuStage& s = plan.stages[k];
      text += "\n  stage " + std::to_string(k) + ": " + funcs[s.from].name + " (" +
              std::to_string(s.to - s.from) + " functions), " + std::to_string(s.bytes) +
              " bytes, after";
      for (std::size_t a : s.after) text += " " + std::to_string(a);
    }
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  return plan;
}

void setCpuStages(int mode) { stagesMode().store(mode < 0 ? -1 : mode == 0 ? 0 : 1); }

void runCpuStages(const CpuStagePlan& plan, const std::function<void(std::size_t)>& runFunction) {
  auto inOrder = [&] {
    for (const CpuStage& s : plan.stages)
      for (std::size_t f = s.from; f < s.to; ++f) runFunction(f);
  };
#if EINJIT_HAVE_TBB
  const auto threads = std::min<std::size_t>(
      static_cast<std::size_t>(tbb::this_task_arena::max_concurrency()),
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  if (!plan.concurrent || threads < 2) return inOrder();
  const std::size_t n = plan.stages.size();
  auto waiting = std::make_unique<std::atomic<std::size_t>[]>(n);
  for (std::size_t s = 0; s < n; ++s) waiting[s].store(plan.stages[s].after.size());
  tbb::task_group group;
  // Runs stage s, then each stage it was the last to wait for: the first of them in this task,
  // the others as tasks of their own.
  std::function<void(std::size_t)> run = [&](std::size_t s) {
    for (;;) {
      const CpuStage& stage = plan.stages[s];
      for (std::size_t f = stage.from; f < stage.to; ++f) runFunction(f);
      std::optional<std::size_t> following;
      for (std::size_t t : stage.next) {
        if (waiting[t].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
        if (!following)
          following = t;
        else
          group.run([&run, t] { run(t); });
      }
      if (!following) return;
      s = *following;
    }
  };
  for (std::size_t s = 0; s < n; ++s)
    if (plan.stages[s].after.empty()) group.run([&run, s] { run(s); });
  group.wait();
#else
  inOrder();
#endif
}

} // namespace einjit::runtime
