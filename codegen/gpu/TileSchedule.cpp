// The GPU tile decisions that read the lowerer's state (masked ranges), and the bridges from the
// staged operands to the decisions of schedule/GpuTileSchedule (split-K, pipeline stages).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

auto Lowerer::tileSplit(const Statement& st, const Ranges& r, std::int64_t tiles,
                        std::int64_t slices, std::int64_t BK, const std::string& name,
                        std::int64_t wanted, double cellFlops) -> TileSplit {
  TileSplit t;
  t.elements = extentOfGroup(outputIndices(st), r);
  const double bytes = static_cast<double>(t.elements) * static_cast<double>(ir::typeBytes(vt_));
  const gpuschedule::SplitK k =
      gpuschedule::splitK(target_, tiles, slices, BK, bytes, wanted, cellFlops);
  t.splits = k.splits;
  t.perSplit = k.perSplit;
  if (t.splits > 1) {
    t.partial = name + ".partial";
    out_.scratch.push_back({t.partial, vt_, t.elements * t.splits});
  }
  return t;
}

int Lowerer::stagesFor(const std::vector<Staged>& ops) const {
  const bool allAsync =
      std::all_of(ops.begin(), ops.end(), [](const Staged& s) { return s.vector != 0; });
  return gpuschedule::pipelineStages(target_, allAsync, sharedBytes(ops));
}

std::int64_t Lowerer::sharedBytes(const std::vector<Staged>& ops) {
  std::int64_t n = 0;
  for (const Staged& s : ops) n += s.stageElems * typeBytes(s.elem);
  return n;
}

bool Lowerer::maskedRanges(const Statement& st, const BoundStatement& bs, const Ranges& r,
                           const std::vector<std::size_t>& I, const std::vector<std::size_t>& J,
                           const std::vector<std::size_t>& B, std::vector<std::size_t>& maskL,
                           std::vector<std::size_t>& maskR) const {
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
  double share = 1;
  for (std::size_t v = 0; v < n; ++v) {
    if (!bs.dependent[v]) continue;
    if (v < nOut) return false;
    const std::vector<std::size_t> read = boundReads(st, v);
    auto within = [&](const std::vector<std::size_t>& g) {
      for (std::size_t u : read)
        if (std::find(g.begin(), g.end(), u) == g.end() &&
            std::find(B.begin(), B.end(), u) == B.end())
          return false;
      return true;
    };
    if (within(I))
      maskL.push_back(v);
    else if (within(J))
      maskR.push_back(v);
    else
      return false;
    share *= meanShare(bs, r, v, read);
  }
  return share >= 0.5;
}

} // namespace einjit::codegen::lowering
