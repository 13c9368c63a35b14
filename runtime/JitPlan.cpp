#include "runtime/JitPlan.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>

namespace einjit::runtime {

namespace {
// Fitted to EINJIT_DEBUG_JIT's module lines of the packed kernels, forward and gradients, on
// one thread and two (the fit and its error: bench/RESULTS.md, JIT compile time); only their
// ratios matter, to order and group the modules. A module's fixed cost is about 5 ms; a
// product's cost follows its instructions as emitted. A packing function's does not: its
// loops may grow in the middle end (unrolled: the distance gradient's three packings from 221
// instructions to 416) or shrink (the Linear gradient's four from 597 to 440), so each packing
// function counts a share of its own besides a smaller cost per instruction.
constexpr double kModuleMs = 5.0, kMoverFunctionMs = 3.5;
double perInstructionMs(ModuleKind kind) {
  switch (kind) {
  case ModuleKind::o3: return 0.045;
  case ModuleKind::computes: return 0.032;
  case ModuleKind::moves: return 0.015;
  case ModuleKind::unoptimized: return 0.005;
  }
  return 0.015;
}
double moverMs(std::size_t instructions) {
  return kMoverFunctionMs + perInstructionMs(ModuleKind::moves) * static_cast<double>(instructions);
}
} // namespace

double expectedCompileMs(ModuleKind kind, std::size_t instructions) {
  if (kind == ModuleKind::moves) return kModuleMs + moverMs(instructions);
  const double fixed = kind == ModuleKind::unoptimized ? 2.0 : kModuleMs;
  return fixed + perInstructionMs(kind) * static_cast<double>(instructions);
}

double expectedMoversMs(const std::vector<std::size_t>& instructions) {
  double ms = kModuleMs;
  for (std::size_t n : instructions) ms += moverMs(n);
  return ms;
}

double listScheduleMs(std::vector<double> costs, unsigned threads) {
  std::sort(costs.begin(), costs.end(), std::greater<>());
  std::priority_queue<double, std::vector<double>, std::greater<>> free;
  for (unsigned t = 0; t < std::max(1u, threads); ++t) free.push(0);
  double end = 0;
  for (double c : costs) {
    const double start = free.top();
    free.pop();
    free.push(start + c);
    end = std::max(end, start + c);
  }
  return end;
}

std::vector<std::vector<std::size_t>> groupMovers(const std::vector<double>& others,
                                                  const std::vector<std::size_t>& movers,
                                                  unsigned threads, std::size_t maxInstructions) {
  const std::size_t n = movers.size();
  if (n == 0) return {};
  std::vector<std::size_t> bySize(n);
  std::iota(bySize.begin(), bySize.end(), std::size_t{0});
  std::stable_sort(bySize.begin(), bySize.end(),
                   [&](std::size_t a, std::size_t b) { return movers[a] > movers[b]; });
  const std::size_t total = std::accumulate(movers.begin(), movers.end(), std::size_t{0});
  const std::size_t fewest =
      std::min(n, std::max<std::size_t>(1, (total + maxInstructions - 1) / std::max<std::size_t>(1, maxInstructions)));
  std::vector<std::vector<std::size_t>> best;
  double bestEnd = 0;
  // Each count of groups from the fewest the cap allows to a few per thread beyond: the movers
  // costliest first, each into the group of the least expected time that has room.
  for (std::size_t k = fewest; k <= std::min(n, fewest + 2 * std::max(1u, threads)); ++k) {
    std::vector<std::vector<std::size_t>> groups(k);
    std::vector<std::size_t> filled(k, 0);
    std::vector<double> ms(k, 0);
    bool fits = true;
    for (std::size_t i : bySize) {
      std::size_t g = k;
      for (std::size_t j = 0; j < k; ++j)
        if ((g == k || ms[j] < ms[g]) &&
            (filled[j] == 0 || filled[j] + movers[i] <= maxInstructions))
          g = j;
      if (g == k) {
        fits = false;
        break;
      }
      groups[g].push_back(i);
      filled[g] += movers[i];
      ms[g] += moverMs(movers[i]);
    }
    if (!fits) continue;
    std::vector<double> costs = others;
    for (const std::vector<std::size_t>& group : groups) {
      std::vector<std::size_t> sizes;
      for (std::size_t i : group) sizes.push_back(movers[i]);
      costs.push_back(expectedMoversMs(sizes));
    }
    const double end = listScheduleMs(costs, threads);
    // Fewer modules win ties (each pays the fixed cost again); a hundredth of a millisecond
    // is below what the estimate can tell.
    if (best.empty() || end < bestEnd - 0.01) {
      best = std::move(groups);
      bestEnd = end;
    }
  }
  if (best.empty()) // nothing fits the cap but one mover a module
    for (std::size_t i = 0; i < n; ++i) best.push_back({i});
  for (std::vector<std::size_t>& group : best) std::sort(group.begin(), group.end());
  std::sort(best.begin(), best.end());
  return best;
}

} // namespace einjit::runtime
