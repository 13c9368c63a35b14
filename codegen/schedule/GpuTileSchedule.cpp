#include "codegen/schedule/GpuTileSchedule.h"

#include <algorithm>

namespace einjit::codegen::gpuschedule {

bool worthTile(std::int64_t extI, std::int64_t extJ, std::int64_t extK, bool phase) {
  if (extK < 8) return false;
  return phase ||
         static_cast<double>(extI) * static_cast<double>(extJ) * static_cast<double>(extK) >=
             kMinTileWork;
}

std::int64_t simtCells(std::int64_t ext) {
  // 784 = 7 x 112 (the Linear layer's input features, whose gradients measured faster so),
  // 576 = 6 x 96 (a C=64 3x3 filter's (c,a,b)).
  std::int64_t t = 8;
  while (t > 1 && 16 * t / 2 >= ext) t /= 2;
  if (t == 8) {
    auto padded = [ext](std::int64_t u) { return (ext + 16 * u - 1) / (16 * u) * (16 * u); };
    std::int64_t best = 8;
    for (std::int64_t u : {7, 6})
      if (padded(u) < padded(best) && 20 * padded(u) <= 19 * padded(8)) best = u;
    t = best;
  }
  return t;
}

bool simtWordCopies(std::int64_t splits, std::int64_t slices) {
  return splits == 1 && slices >= kLongReduction;
}

TensorCoreShape tensorCoreShape(const Target& t, bool bothCopied, std::int64_t extI,
                                std::int64_t extJ, std::int64_t extK) {
  TensorCoreShape s;
  const bool sideBySide = extI <= 64 && extI >= 48;
  if (t.gpuWarpgroupMma() && bothCopied && (extI >= 128 || sideBySide) && extJ >= 128 &&
      extK >= 2 * kMmaSlice) {
    s.kind = GpuTileKind::Wgmma;
    s.sideBySide = sideBySide;
    s.WM = sideBySide ? 1 : 2;
  } else {
    s.WM = extI <= 64 && extJ >= kWideTile ? 1 : 2;
  }
  s.WN = 8 / s.WM;
  return s;
}

WarpgroupShape warpgroupShape(const Target& t, std::int64_t tilesI, std::int64_t extJ,
                              std::int64_t extB) {
  const std::int64_t sms = t.gpuSms;
  auto tiles = [&](std::int64_t bn) { return tilesI * ((extJ + bn - 1) / bn) * extB; };
  if (extJ >= kWideTile && tiles(kWideTile) >= sms) return {kWideTile, 4, 1};
  if (tiles(128) >= sms) return {128, 3, 0};
  return {64, 4, 0};
}

std::int64_t tensorCoreBlocksWanted(const Target& t, GpuTileKind kind, std::int64_t tiles) {
  std::int64_t wanted = t.gpuBlocksWanted();
  if (kind == GpuTileKind::Wgmma && 4 * tiles >= t.gpuBlocksWanted()) wanted /= 4;
  return wanted;
}

SplitK splitK(const Target& t, std::int64_t tiles, std::int64_t slices, std::int64_t BK,
              double outputBytes, std::int64_t wanted, double cellFlops) {
  SplitK k;
  const std::int64_t least = std::max<std::int64_t>(8, kSplitReduction / BK);
  if (cellFlops <= 0) {
    while (tiles * k.splits < wanted && slices / (2 * k.splits) >= least) k.splits *= 2;
  } else {
    const std::int64_t sms = std::max<std::int64_t>(1, t.gpuSms);
    double best = 0;
    for (std::int64_t s = 1; s == 1 || (s <= slices / least && s <= 1024); ++s) {
      const std::int64_t per = (slices + s - 1) / s, busiest = (tiles * s + sms - 1) / sms;
      double time = static_cast<double>(busiest * per) * cellFlops / t.gpuSmFlops;
      if (busiest == 1) time *= t.gpuLoneBlock;
      if (s > 1) time += static_cast<double>(2 * s + 1) * outputBytes / t.gpuBandwidth;
      if (s == 1 || time < best) {
        best = time;
        k.splits = s;
      }
    }
  }
  k.perSplit = (slices + k.splits - 1) / k.splits;
  k.splits = (slices + k.perSplit - 1) / k.perSplit; // no empty range
  return k;
}

RelayoutTile relayoutTile(std::int64_t extS, std::int64_t extD) {
  const std::int64_t TS = std::min<std::int64_t>(extS, 32);
  return {TS, std::min<std::int64_t>(extD, std::max<std::int64_t>(32, kRelayoutTile / TS))};
}

int pipelineStages(const Target& t, bool allAsync, std::int64_t stageBytes) {
  if (!allAsync) return 2;
  return static_cast<int>(
      std::clamp<std::int64_t>(t.gpuPipelineShared / std::max<std::int64_t>(stageBytes, 1), 2, 4));
}

} // namespace einjit::codegen::gpuschedule
