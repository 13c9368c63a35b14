// GPU tile decisions: warpgroup shape, pipeline stages, shared memory, masked ranges, split-K.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

auto Lowerer::tileSplit(const Statement& st, const Ranges& r, std::int64_t tiles,
                        std::int64_t slices, std::int64_t BK, const std::string& name,
                        std::int64_t wanted, double cellFlops) -> TileSplit {
  TileSplit t;
  t.elements = extentOfGroup(outputIndices(st), r);
  const std::int64_t least = std::max<std::int64_t>(8, kSplitReduction / BK);
  if (cellFlops <= 0) {
    while (tiles * t.splits < wanted && slices / (2 * t.splits) >= least) t.splits *= 2;
  } else {
    const std::int64_t sms = std::max<std::int64_t>(1, target_.gpuSms);
    const double bytes = static_cast<double>(t.elements) * static_cast<double>(ir::typeBytes(vt_));
    double best = 0;
    for (std::int64_t s = 1; s == 1 || (s <= slices / least && s <= 1024); ++s) {
      const std::int64_t per = (slices + s - 1) / s, busiest = (tiles * s + sms - 1) / sms;
      double time = static_cast<double>(busiest * per) * cellFlops / target_.gpuSmFlops;
      if (busiest == 1) time *= target_.gpuLoneBlock;
      if (s > 1) time += static_cast<double>(2 * s + 1) * bytes / target_.gpuBandwidth;
      if (s == 1 || time < best) {
        best = time;
        t.splits = s;
      }
    }
  }
  t.perSplit = (slices + t.splits - 1) / t.splits;
  t.splits = (slices + t.perSplit - 1) / t.perSplit; // no empty range
  if (t.splits > 1) {
    t.partial = name + ".partial";
    out_.scratch.push_back({t.partial, vt_, t.elements * t.splits});
  }
  return t;
}

int Lowerer::stagesFor(const std::vector<Staged>& ops) const {
  for (const Staged& s : ops)
    if (s.vector == 0) return 2;
  const std::int64_t per = sharedBytes(ops);
  return static_cast<int>(
      std::clamp<std::int64_t>(target_.gpuPipelineShared / std::max<std::int64_t>(per, 1), 2, 4));
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

auto Lowerer::warpgroupShape(std::int64_t tilesI, std::int64_t extJ, std::int64_t extB) const
    -> WarpgroupShape {
  const std::int64_t sms = target_.gpuSms;
  auto tiles = [&](std::int64_t bn) { return tilesI * ((extJ + bn - 1) / bn) * extB; };
  if (extJ >= kWideTile && tiles(kWideTile) >= sms) return {kWideTile, 4, 1};
  if (tiles(128) >= sms) return {128, 3, 0};
  return {64, 4, 0};
}

} // namespace einjit::codegen::lowering
