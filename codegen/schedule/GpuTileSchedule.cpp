#include "codegen/schedule/GpuTileSchedule.h"

#include "codegen/schedule/GpuAccess.h"

#include <algorithm>
#include <cstdlib>
#include <functional>

namespace einjit::codegen::gpuschedule {

using namespace einjit::dsl;

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

WarpgroupShape warpgroupShape(const Target& t, bool sideBySide, std::int64_t tilesI,
                              std::int64_t extJ, std::int64_t extB) {
  if (sideBySide) return {64, 4, 0};
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
  const std::int64_t warp = Target::gpuWarp;
  const std::int64_t TS = std::min(extS, warp);
  return {TS, std::min<std::int64_t>(extD, std::max(warp, kRelayoutTile / TS))};
}

int pipelineStages(const Target& t, bool allAsync, std::int64_t stageBytes) {
  if (!allAsync) return 2;
  return static_cast<int>(
      std::clamp<std::int64_t>(t.gpuPipelineShared / std::max<std::int64_t>(stageBytes, 1), 2, 4));
}

int fastestDim(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides) {
  int best = -1;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] >= 2 && strides[d] != 0 &&
        (best < 0 || std::abs(strides[d]) < std::abs(strides[static_cast<std::size_t>(best)])))
      best = static_cast<int>(d);
  return best;
}

namespace {

// The statement's facts the layout-copy decisions read.
struct RelayoutFacts {
  const Program& p;
  const BoundProgram& b;
  const Statement& st;
  const BoundStatement& bs;
  const Strides& strides;
  std::int64_t extent(std::size_t v) const { return bs.hi[v] - bs.lo[v]; }
  const std::vector<std::int64_t>& shape(int t) const {
    return b.tensors[static_cast<std::size_t>(t)].shape;
  }
  const std::vector<std::int64_t>& stridesOf(int t) const {
    return strides[static_cast<std::size_t>(t)];
  }
};

// The batch indices of a '+' product: output indices of two values or more that every factor
// uses.
std::vector<bool> batchIndices(const RelayoutFacts& f, const std::vector<const CExpr*>& factors) {
  const Statement& st = f.st;
  std::vector<bool> batch(st.vars.size(), false);
  if (st.reduce != Reduce::Add || st.lhsVars.empty() || factors.size() < 2) return batch;
  for (int lv : st.lhsVars) {
    const auto v = static_cast<std::size_t>(lv);
    if (f.extent(v) < 2) continue;
    bool all = true;
    for (const CExpr* x : factors) {
      std::vector<bool> used(st.vars.size(), false);
      usedVars(*x, used);
      all = all && used[v];
    }
    batch[v] = all;
  }
  return batch;
}

// Whether subscript d of access a moves with batch indices only (and with one at least).
bool batchSubscript(const CExpr& a, std::size_t d, const std::vector<bool>& batch) {
  const Subscript& s = a.subs[d];
  if (s.gather || s.mode != IndexMode::Plain) return false;
  bool any = false;
  for (std::size_t v = 0; v < s.coef.size(); ++v) {
    if (s.coef[v] == 0) continue;
    if (!batch[v]) return false;
    any = true;
  }
  return any;
}

// Whether access a's tensor has its fastest dimension on a batch subscript and another one (of
// two elements or more) on a non-batch subscript, and no broadcast dimension.
bool batchFast(const RelayoutFacts& f, const CExpr& a, const std::vector<bool>& batch) {
  const auto& shape = f.shape(a.tensor);
  const auto& str = f.stridesOf(a.tensor);
  bool other = false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] >= 2 && str[d] == 0) return false;
    other = other || (shape[d] >= 2 && !batchSubscript(a, d, batch));
  }
  const int d = fastestDim(shape, str);
  if (!other) return false;
  return d >= 0 && batchSubscript(a, static_cast<std::size_t>(d), batch);
}

// Dense strides for tensor t: its dimensions ordered by outer(d) (true first), then by their
// strides (the fastest of each part stays fastest).
std::vector<std::int64_t> denseStrides(const RelayoutFacts& f, int t,
                                       const std::function<bool(std::size_t)>& outer) {
  const auto& shape = f.shape(t);
  const auto& old = f.stridesOf(t);
  std::vector<std::size_t> order(shape.size());
  for (std::size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (outer(x) != outer(y)) return outer(x);
    return std::abs(old[x]) > std::abs(old[y]);
  });
  std::vector<std::int64_t> str(shape.size(), 0);
  std::int64_t step = 1;
  for (std::size_t q = order.size(); q-- > 0;) {
    str[order[q]] = step;
    step *= std::max<std::int64_t>(shape[order[q]], 1);
  }
  return str;
}

// The dimension of read x that index v alone subscripts (plain, coefficient 1); -1 when x does
// not use v; -2 when it uses v otherwise (or in several subscripts).
int channelDim(const CExpr& x, std::size_t v) {
  int dim = -1;
  for (std::size_t d = 0; d < x.subs.size(); ++d) {
    const Subscript& sub = x.subs[d];
    if (sub.gather) return -2;
    if (sub.coef[v] == 0) continue;
    if (dim >= 0 || sub.coef[v] != 1 || sub.mode != IndexMode::Plain) return -2;
    for (std::size_t u = 0; u < sub.coef.size(); ++u)
      if (u != v && sub.coef[u] != 0) return -2;
    dim = static_cast<int>(d);
  }
  return dim;
}

// The channel index of a bf16 convolution (see relayoutPlan), or -1.
int channelIndex(const RelayoutFacts& f, const std::vector<const CExpr*>& factors) {
  const Statement& st = f.st;
  if (f.b.dtype != DType::bf16 || st.reduce != Reduce::Add || factors.size() != 2) return -1;
  const auto nOut = static_cast<std::size_t>(st.numOutputVars());
  for (std::size_t v = 0; v < nOut; ++v)
    if (f.bs.dependent[v]) return -1;
  // Some windowed factor reads less than a 16-byte vector contiguously along the reduction
  // (its run: the last moving reduction index with unit stride, extended while each earlier
  // one moves by the extent of those after it).
  bool shortRun = false;
  for (const CExpr* x : factors) {
    if (x->kind != CKind::Read || x->tensor == st.output) return -1;
    bool window = false;
    for (const Subscript& sub : x->subs) {
      int moving = 0;
      for (std::size_t v = 0; v < sub.coef.size(); ++v)
        moving += sub.coef[v] != 0 && f.extent(v) >= 2;
      window = window || moving >= 2;
    }
    if (!window) continue;
    const auto& str = f.stridesOf(x->tensor);
    std::int64_t run = 1;
    for (std::size_t v = st.vars.size(); v-- > nOut;) {
      if (f.extent(v) < 2) continue;
      std::int64_t coef = 0;
      for (std::size_t d = 0; d < x->subs.size(); ++d) coef += x->subs[d].coef[v] * str[d];
      if (coef != run) break;
      run *= f.extent(v);
    }
    shortRun = shortRun || run < 8;
  }
  if (!shortRun) return -1;
  for (std::size_t v = nOut; v < st.vars.size(); ++v) {
    if (f.bs.dependent[v] || f.extent(v) < 16 || f.extent(v) % 8 != 0) continue;
    bool ok = true;
    for (const CExpr* x : factors) ok = ok && channelDim(*x, v) != -2;
    if (ok) return static_cast<int>(v);
  }
  return -1;
}

} // namespace

std::optional<GpuRelayoutPlan> relayoutPlan(const Program& p, const BoundProgram& b,
                                            const Statement& st, const BoundStatement& bs,
                                            const Strides& strides, bool outputCovered) {
  const RelayoutFacts f{p, b, st, bs, strides};
  std::vector<const CExpr*> factors;
  flattenProduct(*st.rhs, factors);
  GpuRelayoutPlan plan;
  auto add = [&](const CExpr* x, std::vector<std::int64_t> str) {
    for (const GpuRelayoutCopy& m : plan.inputs)
      if (m.tensor == x->tensor) return;
    plan.inputs.push_back({x->tensor, std::move(str)});
  };
  const std::vector<bool> batch = batchIndices(f, factors);
  auto batchOuter = [&](const CExpr& a) {
    return denseStrides(f, a.tensor, [&](std::size_t d) { return batchSubscript(a, d, batch); });
  };
  for (const CExpr* x : factors)
    if (x->kind == CKind::Read && x->tensor != st.output && batchFast(f, *x, batch))
      add(x, batchOuter(*x));
  if (batchFast(f, *st.lhs, batch)) plan.output = GpuRelayoutCopy{st.output, batchOuter(*st.lhs)};
  if (plan.inputs.empty() && !plan.output) {
    const int c = channelIndex(f, factors);
    if (c < 0) return std::nullopt;
    const auto v = static_cast<std::size_t>(c);
    for (const CExpr* x : factors) {
      const int d = channelDim(*x, v);
      if (d < 0 || fastestDim(f.shape(x->tensor), f.stridesOf(x->tensor)) == d) continue;
      add(x, denseStrides(f, x->tensor,
                          [d](std::size_t e) { return e != static_cast<std::size_t>(d); }));
    }
    if (plan.inputs.empty()) return std::nullopt;
    plan.kLast = c;
    plan.channel = st.vars[v].name;
  }
  // The output's copy starts from its values unless ':=' writes all of it.
  plan.outputIn = !(st.assign == Assign::Define && outputCovered);
  for (const GpuRelayoutCopy& m : plan.inputs)
    plan.tensors +=
        (plan.tensors.empty() ? "" : ", ") + p.tensors[static_cast<std::size_t>(m.tensor)].name;
  if (plan.output)
    plan.tensors += (plan.tensors.empty() ? "" : ", ") +
                    p.tensors[static_cast<std::size_t>(plan.output->tensor)].name;
  return plan;
}

} // namespace einjit::codegen::gpuschedule
