#include "codegen/schedule/GpuTileGroups.h"

#include "codegen/schedule/GpuSimtPlan.h"
#include "codegen/schedule/GpuTensorCorePlan.h"
#include "codegen/schedule/GpuTileSchedule.h"

#include <algorithm>
#include <cstdlib>

namespace einjit::codegen::gpuschedule {

using namespace einjit::dsl;

namespace {

std::vector<std::size_t> outputIndices(const Statement& st) {
  std::vector<std::size_t> v(static_cast<std::size_t>(st.numOutputVars()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

// Dependent reduction indices (the ranges a gradient's index solving leaves, e.g. a in
// max(u - 2, 0):min(u + 1, 3)) in a tile: it runs over their hulls, and the operand on the side
// whose output indices (with the batch ones) are all the bounds read checks them, staging 0
// outside. False when some bound reads both sides, reduction indices or a dependent output
// index, or when the ranges fill less than half of their hulls on average (a strided
// convolution's input gradient: residue phases are better).
bool maskedRanges(const GpuTileContext& c, const Statement& st, const BoundStatement& bs,
                  const Box& r, const std::vector<std::size_t>& I,
                  const std::vector<std::size_t>& J, const std::vector<std::size_t>& B,
                  std::vector<std::size_t>& maskL, std::vector<std::size_t>& maskR) {
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
    share *= meanShare(bs, r, v, read, c.phase);
  }
  return share >= 0.5;
}

// A masked tile's reduction (a solved input gradient's (o, a, b): the hull of the filter taps
// masked to each output position's range) reordered so that the last index is one whose extent
// BK divides, when there is one: every slice then lies in one tap (Lowerer::slicesAligned), so
// a thread's masks and offsets are the same for all the elements it stages in a slice (the sums
// run in another order). Unmasked tiles keep their order: a forward convolution's filter
// (o, c, a, b) is contiguous along (c, a, b) and copied by vectors, which (a, b, c) would lose.
void sliceAlongFullIndex(std::vector<std::size_t>& K, const Box& r, std::int64_t BK) {
  std::stable_partition(K.begin(), K.end(),
                        [&](std::size_t v) { return (r[v].second - r[v].first) % BK != 0; });
}

GpuOperandAccess operandAccess(const GpuTileContext& c, const Statement& st,
                               const std::vector<const CExpr*>& fs,
                               const std::vector<std::size_t>& group,
                               const std::vector<std::size_t>& K, const Box& r, ir::Type elem,
                               const std::vector<std::size_t>& masks) {
  GpuOperandAccess a;
  a.kFast = unitAlongAny(c.buffers, fs, K);
  // A masked operand is copied by vectors only along the channel index run last (kLast): its
  // masks are on other reduction indices, so a vector is wholly inside or outside.
  const bool vectorMasks =
      masks.empty() ||
      (c.kLast >= 0 && a.kFast && !K.empty() && K.back() == static_cast<std::size_t>(c.kLast) &&
       std::find(masks.begin(), masks.end(), K.back()) == masks.end());
  a.vector = vectorMasks ? vectorRead(c, fs, a.kFast ? K : group, r, elem, !masks.empty()) : 0;
  a.separable = separableRead(c, fs, r);
  if (!masks.empty()) a.masked = groupNames(st, masks);
  for (std::size_t v : group) a.rows.push_back(r[v].second - r[v].first);
  return a;
}

} // namespace

std::optional<GpuTileGroups> tileGroups(const GpuTileContext& c, const Statement& st,
                                        const BoundStatement& bs, const Box& r) {
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
  if (st.reduce != Reduce::Add || n == nOut || st.lhsVars.empty()) return std::nullopt;
  std::vector<const CExpr*> factors;
  flattenProduct(*st.rhs, factors);
  // The column index: of the output indices some factors use and others do not (batch
  // indices, used by every factor, cannot separate them), the one with the smallest stride
  // in the output (coalesced stores when it is 1).
  const auto& os = c.buffers.strides[static_cast<std::size_t>(st.output)];
  int fast = -1;
  std::int64_t fastStride = 0;
  std::vector<std::vector<bool>> uses(factors.size(), std::vector<bool>(n, false));
  for (std::size_t q = 0; q < factors.size(); ++q) usedVars(*factors[q], uses[q]);
  for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
    const auto v = static_cast<std::size_t>(st.lhsVars[d]);
    if (r[v].second - r[v].first < 2) continue;
    std::size_t users = 0;
    for (const auto& u : uses) users += u[v] ? 1 : 0;
    if (users == 0 || users == factors.size()) continue;
    std::int64_t stride = 0; // in the output (a residue phase's q moves by g elements)
    for (std::size_t e = 0; e < st.lhs->subs.size(); ++e) stride += st.lhs->subs[e].coef[v] * os[e];
    if (fast < 0 || std::abs(stride) < fastStride) {
      fast = static_cast<int>(v);
      fastStride = std::abs(stride);
    }
  }
  if (fast < 0) return std::nullopt;
  std::vector<const CExpr*> L, R;
  std::vector<bool> inL(n, false), inR(n, false);
  for (std::size_t q = 0; q < factors.size(); ++q) {
    const CExpr* f = factors[q];
    const std::vector<bool>& u = uses[q];
    auto& side = u[static_cast<std::size_t>(fast)] ? R : L;
    auto& in = u[static_cast<std::size_t>(fast)] ? inR : inL;
    side.push_back(f);
    for (std::size_t v = 0; v < n; ++v) in[v] = in[v] || u[v];
  }
  if (L.empty() || R.empty()) return std::nullopt;
  std::vector<std::size_t> I, J, B, K;
  for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
    const auto v = static_cast<std::size_t>(st.lhsVars[d]);
    if (std::find(I.begin(), I.end(), v) != I.end() ||
        std::find(J.begin(), J.end(), v) != J.end() || std::find(B.begin(), B.end(), v) != B.end())
      continue;
    if (inL[v] && !inR[v])
      I.push_back(v);
    else if (inR[v] && !inL[v])
      J.push_back(v);
    else
      B.push_back(v);
  }
  for (std::size_t v = nOut; v < n; ++v) K.push_back(v);
  if (c.kLast >= 0) { // over channel-fast copies: the channel index last
    const auto ch = static_cast<std::size_t>(c.kLast);
    K.erase(std::remove(K.begin(), K.end(), ch), K.end());
    K.push_back(ch);
  }
  // Indices of one value (a 1x1 filter's a, b) leave the groups and keep that value: a unit
  // stride along one must not decide an operand's layout or break a contiguous run (the 1x1
  // convolution's input was staged through registers as if contiguous along b).
  std::vector<bool> pinned(n, false);
  for (auto* g : {&I, &J, &B, &K})
    g->erase(std::remove_if(g->begin(), g->end(),
                            [&](std::size_t v) {
                              pinned[v] = r[v].second - r[v].first == 1 && !bs.dependent[v];
                              return pinned[v];
                            }),
             g->end());
  if (I.empty() || J.empty() || K.empty()) return std::nullopt;
  std::vector<std::size_t> maskL, maskR;
  if (!maskedRanges(c, st, bs, r, I, J, B, maskL, maskR)) return std::nullopt;
  if ((maskL.empty() && !maskR.empty() && !provenInside(c, L, r)) ||
      (maskR.empty() && !maskL.empty() && !provenInside(c, R, r)))
    return std::nullopt;
  const std::int64_t extI = groupExtent(I, r), extJ = groupExtent(J, r), extK = groupExtent(K, r);
  // (A residue phase is tiled whatever its size: planPhases weighed the whole statement.)
  if (!worthTile(extI, extJ, extK, !c.phase.empty())) return std::nullopt;
  // bf16 operands read as they are (rounding them again to bf16 is exact): tensor cores.
  const bool mma = c.binding->dtype == DType::bf16 && L.size() == 1 && R.size() == 1 &&
                   L[0]->kind == CKind::Read && R[0]->kind == CKind::Read && extK >= 16;
  if (!maskL.empty() || !maskR.empty()) sliceAlongFullIndex(K, r, mma ? kMmaSlice : kSimtSlice);
  if (!outputWritable(c, st)) return std::nullopt;
  return GpuTileGroups{std::move(L),      std::move(R), std::move(I),     std::move(J),
                       std::move(B),      std::move(K), std::move(maskL), std::move(maskR),
                       std::move(pinned), mma};
}

GpuPlanInput tileInput(const GpuTileContext& c, const Statement& st, const Box& r,
                       const GpuTileGroups& g) {
  GpuPlanInput in;
  in.mma = g.mma;
  in.extI = groupExtent(g.I, r);
  in.extJ = groupExtent(g.J, r);
  in.extK = groupExtent(g.K, r);
  in.extB = groupExtent(g.B, r);
  for (std::size_t v : g.K) in.reduction.push_back(r[v].second - r[v].first);
  const ir::Type value = c.valueType(), elem = g.mma ? ir::Type::bf16 : value;
  in.elemBytes = ir::typeBytes(elem);
  in.valueBytes = ir::typeBytes(value);
  in.outputElements = groupExtent(outputIndices(st), r);
  in.L = operandAccess(c, st, g.mma ? std::vector<const CExpr*>{g.L[0]} : g.L, g.I, g.K, r, elem,
                       g.maskL);
  in.R = operandAccess(c, st, g.mma ? std::vector<const CExpr*>{g.R[0]} : g.R, g.J, g.K, r, elem,
                       g.maskR);
  in.outputVector = vectorRead(c, {st.lhs.get()}, g.J, r, c.elemType(st.output));
  // A GPU tile's statement is planned outside any atomic scatter: ':=' writes the output itself.
  in.outputOwned = st.assign == Assign::Define;
  in.I = groupNames(st, g.I);
  in.J = groupNames(st, g.J);
  in.K = groupNames(st, g.K);
  in.B = g.B.empty() ? std::string() : groupNames(st, g.B);
  return in;
}

std::optional<GpuTilePart> planTilePart(const GpuTileContext& c, const Target& t,
                                        const Statement& st, const BoundStatement& bs, const Box& r,
                                        const std::string& name) {
  std::optional<GpuTileGroups> g = tileGroups(c, st, bs, r);
  if (!g) return std::nullopt;
  GpuTilePart part{st, bs, r, name, std::move(*g), {}, {}};
  const GpuPlanInput in = tileInput(c, part.st, part.r, part.groups);
  part.tile = in.mma ? planTensorCoreTile(in, t) : planSimtTile(in, t);
  return part;
}

} // namespace einjit::codegen::gpuschedule
