// Residue phases of strided gradients as separate GPU tile statements, as planned
// (schedule/GpuPhases.h), and their launches offered to passes::mergeLaunches.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

GpuTileSchedule Lowerer::emitPhases(const GpuStatementPlan& plan) {
  const std::size_t funcs = out_.funcs.size();
  GpuTileSchedule s;
  bool split = false;
  for (const GpuTilePart& phase : plan.tiles) {
    s.tile = emitTilePart(phase); // the last phase's is shown
    split = split || s.tile.splits > 1;
  }
  s.phases = plan.phases;
  // The phases' launches may share one grid (passes::mergeLaunches) unless a phase is split
  // along its reduction: its partials are added by a launch that must follow its tile's, and
  // the blocks of one grid run in no order.
  s.phases->firstLaunch = funcs;
  s.phases->endLaunch = split ? funcs : out_.funcs.size();
  return s;
}

std::vector<passes::LaunchGroup> Lowerer::launchGroups() {
  std::vector<passes::LaunchGroup> groups;
  for (const PhaseLaunches& l : phaseLaunches_)
    groups.push_back(
        {l.schedule.phases->firstLaunch, l.schedule.phases->endLaunch, newFunc(l.name)});
  return groups;
}

void Lowerer::noteMerged(std::vector<std::string>& notes, const std::vector<bool>& merged) const {
  for (std::size_t g = 0; g < phaseLaunches_.size(); ++g) {
    if (!merged[g]) continue;
    const PhaseLaunches& l = phaseLaunches_[g];
    // The note starts with the schedule's own part; what follows it (fusion, rows) stays.
    const std::string before = describe(l.schedule);
    std::string& note = notes[l.note];
    if (note.compare(0, before.size(), before) != 0)
      throw InternalError("lower: a residue phases' note that does not start with its schedule");
    GpuTileSchedule after = l.schedule;
    after.phases->merged = true;
    note = describe(after) + note.substr(before.size());
  }
}

} // namespace einjit::codegen::lowering
