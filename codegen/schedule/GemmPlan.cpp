#include "codegen/schedule/GemmPlan.h"

#include "codegen/Schedule.h"
#include "codegen/schedule/GemmBinding.h"
#include "codegen/schedule/GemmKnobs.h"
#include "codegen/schedule/GemmParts.h"
#include "codegen/schedule/GemmRows.h"
#include "codegen/schedule/GemmSummand.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace einjit::codegen {

using namespace einjit::dsl;

namespace {

// An operand is packed whole, once per call and shared by every task, up to this size; a larger
// one a cache block at a time by each task (a convolution's input: its packed form would be an
// im2col tensor of 9x its size).
constexpr std::int64_t kWholeBytes = 32 << 20;
// A task should hold at least this many flops: below it the scheduling overhead shows.
constexpr double kTaskFlops = 2e5;
// A window of one tap along a merged N (a 1x1 convolution's x[n,c,h+a,w+b] over N h*w, a and b
// of extent 1) packs each element once, as any B: read in place only where M is shorter than
// this many rows. Measured on the 1x1 rows (bench/RESULTS.md, "1x1 convolutions as one GEMM
// per image"): packed faster with M 256 (K 64), in place with M 64 (K 256), where a packed
// sliver serves few A slivers. Where 512-bit operations run at full width (the Xeon) such a B
// is always packed: there the 1x1 forward and input gradient of 64 rows (K 256, each step's
// line of B a whole image row from the last) run faster packed (bench/RESULTS.md, the Xeon's
// 1x1 rows).
constexpr std::int64_t kPackedOneTapRows = 128;
// Bytes of a cache line (GemmPlan::batchFastest).
constexpr std::int64_t kCacheLine = 64;

// Whether B's lanes, `stride` elements apart along N, can be read in place: unit stride, or
// with 64-byte vectors lanes two apart (a stride-2 convolution's window) in whole 512-bit
// vectors. CodeGenLLVM reads such a vector as two loads (the second masked to the run's end, or
// to the lanes a last sliver holds) and one two-source permute, beside MR FMAs; packing it per
// block was a quarter of the stride-2 forward's time on Zen 4, and the in-place read measured
// faster there and on the Xeon (full width: the permute takes one of its two FMA ports, about
// 1/MR of the step; bench/RESULTS.md, "the stride-2 forward on Zen 4" and "the stride-2
// forward on the Xeon"). Not where a half-width tail would run (its half vectors would be read
// lane by lane). EINJIT_GEMM_S2_IN_PLACE=0 packs it (GemmKnobs.h).
bool inPlaceStride(std::int64_t stride, const GemmPlan& g, std::int64_t n, const Target& t) {
  if (stride == 1) return true;
  return stride == 2 && t.vectorBytes >= 64 && gemmKnobs().strideTwoInPlace && g.nr == g.width &&
         !halfWidthTail(g, n, t);
}

// Whether an in-place stride-2 plan takes one more equal tile where that pads M less (64-byte
// vectors; EINJIT_GEMM_S2_TILE=0 keeps the rule's rows).
bool strideTwoTile(const Target& t) {
  return t.vectorBytes >= 64 && gemmKnobs().strideTwoTile;
}

// Index names for `einjit explain`; merged indices (GemmPlan::merged) as one, "h*w", the outer
// index not on its own.
std::string names(const Statement& st, const std::vector<int>& vs,
                  const std::vector<GemmMerge>& merged = {}) {
  std::string s;
  for (int v : vs) {
    bool outer = false;
    std::string name = st.vars[static_cast<std::size_t>(v)].name;
    for (const GemmMerge& m : merged) {
      outer = outer || m.outer == v;
      if (m.inner == v) name = st.vars[static_cast<std::size_t>(m.outer)].name + "*" + name;
    }
    if (!outer) s += (s.empty() ? "" : ",") + name;
  }
  return s.empty() ? "-" : s;
}

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Where 512-bit operations run at full width (the Xeon), a B that carries dependent reduction
// ranges (a stride-1 input gradient's taps, zeros packed where a tap is outside) takes the
// whole reduction in one KC block where it is at most half again the L1 block: a second
// block costs its own pass over the output tile (loaded, added to, stored again) and its own
// packing pass, more than the block's overrun of L1 (bench/RESULTS.md, "the 3x3 convolutions
// on the Xeon").
bool oneBlockOfTaps(const GemmPlan& g, const Target& t, std::int64_t reduction,
                    std::int64_t kcWanted) {
  return t.vectorBytes >= 64 && !t.halvedVectors && !g.masks[1].empty() &&
         reduction > kcWanted && 2 * reduction <= 3 * kcWanted;
}

// The experiment knobs (schedule/GemmKnobs.h) that set the tile: MR and the accumulator sets
// of a product's tile (a tile with reads of output indices keeps its own).
void applyKnobs(GemmPlan& g, bool plainTile) {
  const GemmKnobs& k = gemmKnobs();
  if (plainTile && k.mr > 0) g.mr = k.mr;
  if (plainTile && k.kSets > 0) g.kSets = k.kSets;
  g.prefetchOut = k.prefetchOut;
  g.prefetchNext = g.prefetchNext && k.prefetchNext;
}

// Dependent ranges may hold this share of their hulls on average, at the least.
constexpr double kMinShare = 0.5;

// The mean length of dependent index v's range over the values of the indices it reads (up to
// 16 evenly spaced values of each), as a share of its hull.
double meanShare(const BoundStatement& bs, int v, const std::vector<bool>& reads) {
  const auto u = static_cast<std::size_t>(v);
  const std::int64_t hull = bs.hi[u] - bs.lo[u];
  if (hull <= 0) return 0;
  std::vector<std::size_t> rd;
  for (std::size_t x = 0; x < reads.size(); ++x)
    if (reads[x] && x != u) rd.push_back(x);
  std::vector<std::int64_t> vals(bs.lo.size(), 0);
  double sum = 0, points = 0;
  std::function<void(std::size_t)> walk = [&](std::size_t q) {
    if (q == rd.size()) {
      const std::int64_t lo = std::max(bs.loBound[u].eval(vals), bs.lo[u]);
      const std::int64_t hi = std::min(bs.hiBound[u].eval(vals), bs.hi[u]);
      sum += static_cast<double>(std::max<std::int64_t>(hi - lo, 0));
      points += 1;
      return;
    }
    const std::int64_t a = bs.lo[rd[q]], e = bs.hi[rd[q]] - a, step = std::max<std::int64_t>(e / 16, 1);
    for (std::int64_t x = 0; x < e; x += step) {
      vals[rd[q]] = a + x;
      walk(q + 1);
    }
  };
  walk(0);
  return points > 0 ? sum / (points * static_cast<double>(hull)) : 0;
}

// NC of a batched plan (batch values outside the GEMM): where a task's chunk of M is one MC
// block, that block stays in L2 across the NC panels, so nothing asks for a panel longer than
// L2 holds beside it; a longer one (a merged 1x1 input gradient's 256 x 3136 per image, NC
// 3136) is packed through L3 and read back from there, where a panel of half of L2 is read
// back from L2. (Without batch values the threads' chunks of N keep panels that short.)
std::int64_t boundedNc(const GemmPlan& g, const Target& t, std::int64_t batchTotal,
                       std::int64_t elem) {
  if (batchTotal <= 1 || g.batchInside || g.mChunk * g.mr > g.mc) return g.nc;
  const std::int64_t l2 = std::max<std::int64_t>(t.l2Bytes / 2 / (g.kc * elem) / g.nr, 1) * g.nr;
  return std::min(g.nc, l2);
}

} // namespace

std::optional<GemmPlan> planGemm(const Program& p, const BoundProgram& b, std::size_t k,
                                 const std::vector<std::vector<std::int64_t>>& strides,
                                 const Target& t) {
  // Indices that every access reads as one run are planned as one (GemmBinding.h).
  const std::vector<GemmMerge> merged = planMerges(p, b, k, strides);
  const BoundStatement mergedBs = mergedBinding(b.stmts[k], merged);
  const BoundStatement& bs = merged.empty() ? b.stmts[k] : mergedBs;
  // Every subscript of the read inside its dimension over the statement's ranges (its own:
  // the merged ranges address the same elements).
  auto inside = [&](const CExpr& read) {
    return readInside(read, b.stmts[k], b.tensors[static_cast<std::size_t>(read.tensor)].shape,
                      [&](std::size_t d) { return b.eval(p, read.subs[d].constant); });
  };
  std::optional<GemmPlan> g =
      planGemm(p.stmts[k], bs, b.dtype, strides, t, kGemmMinFlops, inside, merged);
  if (!g) return g;
  return withParts(std::move(*g), bs, b.dtype, t, [&](const Target& other) {
    return planGemm(p.stmts[k], bs, b.dtype, strides, other, kGemmMinFlops, inside, merged);
  });
}

namespace {

// The plan with a micro-kernel `vectors` vectors of columns wide (where no read of output
// indices sets the tile). `folded`: the one-vector plan for a broadcast that folds into a
// subtraction where 512-bit operations run in halves (planGemm).
std::optional<GemmPlan> planTile(const Statement& st, const BoundStatement& bs, DType dtype,
                                 const std::vector<std::vector<std::int64_t>>& strides,
                                 const Target& t, double minFlops,
                                 const std::function<bool(const CExpr&)>& inside, int nrVectors,
                                 const std::vector<GemmMerge>& merged, bool folded = false,
                                 std::int64_t rows = 0);

} // namespace

std::optional<GemmPlan> planGemm(const Statement& st, const BoundStatement& bs, DType dtype,
                                 const std::vector<std::vector<std::int64_t>>& strides,
                                 const Target& t, double minFlops,
                                 const std::function<bool(const CExpr&)>& inside,
                                 const std::vector<GemmMerge>& merged, std::int64_t rows) {
  if (gemmKnobs().nrVectors > 0) {
    std::optional<GemmPlan> g =
        planTile(st, bs, dtype, strides, t, minFlops, inside, gemmKnobs().nrVectors, merged);
    if (g) g->why += gemmKnobs().note();
    return g;
  }
  std::optional<GemmPlan> two = planTile(st, bs, dtype, strides, t, minFlops, inside, 2, merged);
  if (two) two->why += gemmKnobs().note();
  // Where 512-bit operations run in halves (Zen 4), an element-wise summand whose A read is a
  // subtrahend (the distance layer's) takes one vector: A's broadcast then folds into the
  // subtraction (GemmSummand.h), 1.0 cycle per FMA against 1.5 (docs/CPU_SCHEDULES.md).
  if (t.halvedVectors && t.vectorRegisters() >= 32 && two && !two->product) {
    std::optional<GemmPlan> one = planTile(st, bs, dtype, strides, t, minFlops, inside, 1, merged, true);
    if (one && broadcastFolds(one->summand, *gemmOperands(*st.rhs, st.numOutputVars())->read[one->aFactor])) {
      one->why += gemmKnobs().note();
      return one;
    }
  }
  // With 32 registers NR is two 16-lane vectors, wider than a short contiguous index (a
  // stride-2 convolution's 28 output columns, its input gradient's residue phases of 28): M and
  // N are then picked among the indices at least NR long, with scattered tile stores or strided
  // packing, or there is no plan at all (the phases kept the generic loops). One vector of
  // columns and a taller tile (28 x 16: as many accumulators) lets the pick follow the strides;
  // it is taken where it picks otherwise (bench/RESULTS.md, "a second CPU kind": the stride-2
  // input gradient 1.4-1.6x faster on an AVX-512 Xeon, the forward unchanged).
  // Where 512-bit operations run in halves (Target::halvedVectors), a last sliver of N that
  // holds at most half a vector runs on half vectors (lower/CpuGemm.cpp): 54 or 56 columns are
  // 56 in one-vector tiles against 64 in two-vector ones. Where only the one-vector tile's last
  // sliver is that short, the tile that computes fewer padded cells (rows x columns) is taken
  // (bench/RESULTS.md, "the 3x3 convolutions on Zen 4").
  auto extentOf = [&](int v) {
    return bs.hi[static_cast<std::size_t>(v)] - bs.lo[static_cast<std::size_t>(v)];
  };
  auto halfTail = [&](const GemmPlan& g) { return halfWidthTail(g, extentOf(g.n), t); };
  auto paddedCells = [&](const GemmPlan& g) {
    const std::int64_t m = extentOf(g.m), n = extentOf(g.n);
    const std::int64_t cols = halfTail(g) ? n / g.nr * g.nr + g.nr / 2 : cdiv(n, g.nr) * g.nr;
    return cdiv(m, g.mr) * g.mr * cols;
  };
  // Where 512-bit operations run in halves (Zen 4), a product's one-vector tile whose rows do
  // not divide M takes the tallest of at least two rows per FMA chain (16) that does: 64
  // channels in four 16 x 16 tiles, not three of 22 (66 rows, the last tile's 20 rows stored
  // element by element). The 3x3 stride-1 forward and input gradient, and the strided input
  // gradient's residue phases (bench/RESULTS.md, "stride-2 input gradients on Zen 4" and "the
  // 3x3 stride-1 rows on Zen 4").
  auto dividing = [&](std::optional<GemmPlan> g) {
    if (!g || !t.halvedVectors || rows > 0 || gemmKnobs().mr > 0 || !g->product ||
        g->nr != g->width)
      return g;
    const std::int64_t m = extentOf(g->m);
    for (std::int64_t r = g->mr - 1; m % g->mr != 0 && r >= 2 * t.fmaChains; --r)
      if (m % r == 0) {
        std::optional<GemmPlan> d =
            planTile(st, bs, dtype, strides, t, minFlops, inside, 1, merged, false, r);
        return d && d->mr == r && d->m == g->m && d->n == g->n ? d : g;
      }
    return g;
  };
  if (t.vectorRegisters() >= 32) {
    std::optional<GemmPlan> one =
        planTile(st, bs, dtype, strides, t, minFlops, inside, 1, merged, false, rows);
    const bool fewerCells = one && two && t.halvedVectors && halfTail(*one) && !halfTail(*two) &&
                            paddedCells(*one) < paddedCells(*two);
    if (one && (!two || one->m != two->m || one->n != two->n || fewerCells)) {
      one = dividing(std::move(one));
      one->why += gemmKnobs().note();
      return one;
    }
  }
  return two;
}

namespace {

std::optional<GemmPlan> planTile(const Statement& st, const BoundStatement& bs, DType dtype,
                                 const std::vector<std::vector<std::int64_t>>& strides,
                                 const Target& t, double minFlops,
                                 const std::function<bool(const CExpr&)>& inside, int nrVectors,
                                 const std::vector<GemmMerge>& merged, bool folded,
                                 std::int64_t rows) {
  if (t.gpu || !t.tile || (dtype != DType::f32 && dtype != DType::f64)) return std::nullopt;
  if (st.reduce != Reduce::Add || st.scatter || readsOwnOutput(st) || bs.empty)
    return std::nullopt;
  const int nOut = st.numOutputVars(), n = static_cast<int>(st.vars.size());
  if (n == nOut || st.lhsVars.size() != static_cast<std::size_t>(nOut)) return std::nullopt;
  std::vector<bool> seen(static_cast<std::size_t>(nOut), false);
  for (int v : st.lhsVars) {
    if (v >= nOut || seen[static_cast<std::size_t>(v)]) return std::nullopt;
    seen[static_cast<std::size_t>(v)] = true;
  }
  for (int v = 0; v < nOut; ++v)
    if (bs.dependent[static_cast<std::size_t>(v)]) return std::nullopt;
  const std::optional<GemmOperands> ops = gemmOperands(*st.rhs, st.numOutputVars());
  if (!ops) return std::nullopt;
  const CExpr* f[2] = {ops->read[0], ops->read[1]};
  auto extent = [&](int v) {
    return bs.hi[static_cast<std::size_t>(v)] - bs.lo[static_cast<std::size_t>(v)];
  };
  auto tensorStrides = [&](const CExpr& r) -> const std::vector<std::int64_t>& {
    return strides[static_cast<std::size_t>(r.tensor)];
  };
  const auto& os = strides[static_cast<std::size_t>(st.output)];
  auto outStride = [&](int v) {
    std::int64_t c = 0;
    for (std::size_t d = 0; d < st.lhs->subs.size(); ++d)
      c += st.lhs->subs[d].coef[static_cast<std::size_t>(v)] * os[d];
    return c;
  };
  const int elem = dtype == DType::f64 ? 8 : 4;
  const int width = std::max(1, t.vectorBytes / elem);
  if (width < 2) return std::nullopt;
  // MR x NR accumulators, NR/width vectors of B and one broadcast of A in the registers:
  // 16 vector registers (AVX2) hold 6 x 2, 32 (AVX-512) hold 14 x 2.
  const int registers = t.vectorRegisters();
  int nrWanted = nrVectors * width, mrWanted = (registers - 4) / nrVectors;
  if (nrVectors > 2) mrWanted = (registers - nrVectors - 1) / nrVectors; // (a knob's)
  // Reads of output indices only (GemmOperands::tile) keep a tile of values each beside the
  // accumulators: (tiles + 1) x MR x (NR vectors), NR's vectors and two temporaries fit the
  // registers (AVX2: 5 x 8 with one such read; 6 x 16 would spill the accumulators).
  int kSets = 1;
  // A folded one-vector plan without a local tile is as tall as two vectors' (14 rows): as fast
  // as 28, and its kernel compiles in two thirds of the time.
  folded = folded && nrVectors == 1 && !ops->product;
  if (folded) mrWanted = (registers - 4) / 2;
  if (!ops->tile.empty()) {
    // The tile reads choose their own width, but for a broadcast that folds.
    if (nrVectors != 2 && !folded) return std::nullopt;
    const int per = static_cast<int>(ops->tile.size()) + 1;
    int vectors = 2;
    if ((registers - vectors - 4) / (per * vectors) < 4 || nrVectors == 1) vectors = 1;
    mrWanted = std::max(1, (registers - vectors - 4) / (per * vectors));
    nrWanted = vectors * width;
    // Fewer independent accumulator chains than the FMA pipes keep in flight: the tile waits
    // on the FMA latency. A second accumulator set along the reduction doubles the chains for
    // a smaller tile (AVX2, one tile read: 4 x 8 with two sets, 8 chains, against 5 x 8 with 5).
    const int mrSets = (registers - vectors - 3) / ((per + 1) * vectors);
    if (mrWanted * vectors < t.fmaChains && 2 * mrSets > mrWanted) {
      kSets = 2;
      mrWanted = mrSets;
    }
  }

  // Output indices read by one factor only are its side; by both, batch; by neither: no plan.
  std::vector<int> side[2], both;
  for (int v = 0; v < nOut; ++v) {
    const bool u0 = uses(*f[0], v), u1 = uses(*f[1], v);
    if (u0 && u1)
      both.push_back(v);
    else if (u0 || u1)
      side[u0 ? 0 : 1].push_back(v);
    else
      return std::nullopt;
  }
  if (side[0].empty() || side[1].empty()) return std::nullopt;
  // One index of each side becomes M or N, the others are looped around the GEMM: the one the
  // output stores with unit stride (vector stores), else the one its operand reads with unit
  // stride (vector loads while packing), else the longest; an index shorter than a tile's
  // width only where nothing longer exists.
  auto pick = [&](int fi) {
    int best = -1;
    auto score = [&](int v) {
      const bool longEnough = extent(v) >= nrWanted;
      const int unit = outStride(v) == 1 ? 2 : strideAlong(*f[fi], v, tensorStrides(*f[fi])) == 1;
      return std::make_tuple(longEnough, longEnough ? unit : 0, extent(v));
    };
    for (int v : side[fi])
      if (best < 0 || score(v) > score(best)) best = v;
    return best;
  };
  const int x = pick(0), y = pick(1);
  // N: the index with unit stride in the output (contiguous vector stores of the tile), else
  // the one its operand reads with unit stride (vector loads while packing), else the longer.
  // Where neither operand reads its index with unit stride (both contiguous only along the
  // reduction: a convolution's weight gradient dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,h+a,w+b])
  // and the reduction is long against the output (the tile's stores cost nothing then), B is
  // the factor with fewer lanes to copy one element at a time: its index's extent times the
  // values of its own other indices (x's taps a, b: its panel is packed once per tap). A's
  // panel is packed lane-major, in vectors along its columns (lower/CpuGemmPanels).
  const bool ux = strideAlong(*f[0], x, tensorStrides(*f[0])) == 1;
  const bool uy = strideAlong(*f[1], y, tensorStrides(*f[1])) == 1;
  std::int64_t kLength = 1, copies[2] = {extent(x), extent(y)};
  for (int v = nOut; v < n; ++v) kLength *= extent(v);
  for (int fi = 0; fi < 2; ++fi)
    for (int v : side[fi])
      if (v != (fi == 0 ? x : y)) copies[fi] *= extent(v);
  const bool transposes = !ux && !uy && kLength >= 8 * (extent(x) + extent(y));
  int nFactor = 1;
  if (transposes && copies[0] < copies[1] && extent(x) >= nrWanted && extent(y) >= mrWanted)
    nFactor = 0;
  else if (transposes && copies[1] < copies[0] && extent(y) >= nrWanted && extent(x) >= mrWanted)
    nFactor = 1;
  else if (outStride(x) == 1 && outStride(y) != 1)
    nFactor = 0;
  else if (outStride(x) == outStride(y) || (outStride(x) != 1 && outStride(y) != 1)) {
    if ((ux && !uy) || (ux == uy && extent(x) > extent(y))) nFactor = 0;
  }
  GemmPlan g;
  g.aFactor = 1 - nFactor;
  g.product = ops->product;
  if (!g.product) {
    g.summand = withoutScale(st.rhs, g.scale);
    // A scale far from 1 makes overflow and underflow, where the bits may differ, likely.
    if (std::abs(g.scale) > 1e30 || std::abs(g.scale) < 1e-30) {
      g.summand = st.rhs;
      g.scale = 1;
    }
  }
  if (folded) g.summand = broadcastAsSubtrahend(g.summand, *f[g.aFactor], g.scale);
  g.m = g.aFactor == 0 ? x : y;
  g.n = g.aFactor == 0 ? y : x;
  g.width = width;
  g.nr = nrWanted;
  g.mr = mrWanted;
  if (ops->tile.empty() && registers >= 32)
    g.mr = static_cast<int>(fittedRows(extent(g.m), mrWanted, nrVectors == 1 ? t.fmaChains : mrWanted,
                                       (t.fmaChains + nrVectors - 1) / nrVectors));
  else if (ops->tile.empty())
    g.mr = static_cast<int>(fittedRowsFew(extent(g.m), mrWanted, (t.fmaChains + nrVectors - 1) / nrVectors));
  if (rows > 0 && rows <= mrWanted && nrVectors == 1 && ops->tile.empty() && registers >= 32)
    g.mr = static_cast<int>(rows);
  g.kSets = kSets;
  g.prefetchNext = t.halvedVectors;
  applyKnobs(g, ops->tile.empty());
  for (int v = 0; v < nOut; ++v)
    if (v != g.m && v != g.n) g.batch.push_back(v);
  for (int v = nOut; v < n; ++v) g.k.push_back(v);
  const CExpr* op[2] = {f[g.aFactor], f[1 - g.aFactor]};
  for (int s = 0; s < 2; ++s)
    for (int v : g.batch)
      if (uses(*op[s], v)) g.reads[static_cast<std::size_t>(s)].push_back(v);

  double flops = 2, kt = 1;
  std::int64_t kTotal = 1, batchTotal = 1;
  for (int v = 0; v < n; ++v) flops *= static_cast<double>(std::max<std::int64_t>(extent(v), 0));
  for (int v : g.k) {
    kt *= static_cast<double>(extent(v));
    kTotal *= extent(v);
  }
  for (int v : g.batch) batchTotal *= extent(v);
  if (flops < minFlops || extent(g.m) < g.mr || extent(g.n) < g.nr || kt > 1e12)
    return std::nullopt;
  const std::int64_t e = elem, sl[2] = {cdiv(extent(g.m), g.mr), cdiv(extent(g.n), g.nr)};
  const std::int64_t w[2] = {g.mr, g.nr};
  for (int s = 0; s < 2; ++s) {
    double bytes = static_cast<double>(sl[s] * w[s] * kTotal * e);
    for (int v : g.reads[static_cast<std::size_t>(s)]) bytes *= static_cast<double>(extent(v));
    g.whole[static_cast<std::size_t>(s)] = bytes <= static_cast<double>(kWholeBytes);
  }

  // Dependent reduction ranges: the packing of an operand that holds every index the range
  // reads applies it (a whole-packed operand holds only the batch indices it reads).
  double share = 1;
  for (int v : g.k) {
    if (!bs.dependent[static_cast<std::size_t>(v)]) continue;
    // A zero in a packed sliver adds nothing only to a sum of products.
    if (!ops->product) return std::nullopt;
    std::vector<bool> rd(static_cast<std::size_t>(n), false);
    boundVars(bs.loBound[static_cast<std::size_t>(v)], rd);
    boundVars(bs.hiBound[static_cast<std::size_t>(v)], rd);
    // The hull must not be much longer than the ranges (a strided gradient's taps: one in
    // `stride` of the hull): the zeros would cost more than the terms.
    share *= meanShare(bs, v, rd);
    if (share < kMinShare) return std::nullopt;
    auto needsPanel = [&](int s) {
      const auto& rs = g.reads[static_cast<std::size_t>(s)];
      if (!g.whole[static_cast<std::size_t>(s)]) return false;
      for (int u : g.batch)
        if (rd[static_cast<std::size_t>(u)] && std::find(rs.begin(), rs.end(), u) == rs.end())
          return true;
      return false;
    };
    int chosen = -1;
    for (int pass = 0; pass < 2 && chosen < 0; ++pass)
      for (int s = 1; s >= 0 && chosen < 0; --s)
        if (!rd[static_cast<std::size_t>(s == 0 ? g.n : g.m)] && (pass == 1 || !needsPanel(s)))
          chosen = s;
    if (chosen < 0) return std::nullopt;
    if (needsPanel(chosen)) g.whole[static_cast<std::size_t>(chosen)] = false;
    g.masks[static_cast<std::size_t>(chosen)].push_back(v);
  }

  // KC blocks: a B sliver (KC x NR) fills half of L1; with 32 registers (AVX-512), all of it:
  // each KC block ends in a pass over its tiles of the output, which the convolution forwards'
  // short reductions (576 terms) felt, and the Xeon ran them faster with twice the blocks
  // (bench/RESULTS.md, "AVX-512 forwards and one-thread weight gradients"; as BLIS blocks K by
  // 384 there). The block runs over whole ranges of the innermost reduction indices and a
  // chunk of the next one (no division per element).
  const std::int64_t l1Share = registers >= 32 ? t.l1Bytes : t.l1Bytes / 2;
  std::int64_t kcWanted = gemmKnobs().kc > 0
                             ? gemmKnobs().kc
                             : std::clamp<std::int64_t>(l1Share / (g.nr * e), 16, 1024);
  const std::size_t nk = g.k.size();
  std::vector<std::int64_t> suffix(nk + 1, 1);
  for (std::size_t q = nk; q-- > 0;) suffix[q] = suffix[q + 1] * extent(g.k[q]);
  if (gemmKnobs().kc == 0 && oneBlockOfTaps(g, t, suffix[0], kcWanted)) kcWanted = suffix[0];
  std::size_t split = 0;
  while (split + 1 < nk && suffix[split + 1] > kcWanted) ++split;
  const std::int64_t inner = suffix[split + 1], ext = extent(g.k[split]);
  std::int64_t chunk = std::clamp<std::int64_t>(kcWanted / inner, 1, ext);
  chunk = cdiv(ext, cdiv(ext, chunk)); // equal chunks
  g.kSplit = static_cast<int>(split);
  g.kChunk = chunk;
  g.kc = chunk * inner;
  g.kBlocks = cdiv(ext, chunk);
  for (std::size_t q = 0; q < split; ++q) g.kBlocks *= extent(g.k[q]);

  // MC: an A block (MC x KC) half of L2; NC: a B panel (KC x NC) at most 4 MB or a quarter of
  // L3, whole slivers.
  const std::int64_t panelBytes = std::min<std::int64_t>(t.l3Bytes / 4, 4 << 20);
  g.mc = std::max<std::int64_t>(t.l2Bytes / 2 / (g.kc * e) / g.mr, 1) * g.mr;
  g.nc = std::max<std::int64_t>(panelBytes / (g.kc * e) / g.nr, 1) * g.nr;

  // Batch inside the KC blocks (GemmPlan::batchInside): one operand holds every batch index
  // as a window tap, the other (packed whole) none; the first is then packed per block (packed
  // whole, it would be its elements once per tap, through memory).
  int insideSide = -1;
  for (int s = 0; s < 2 && !g.batch.empty(); ++s) {
    const auto u = static_cast<std::size_t>(s);
    if (!g.whole[1 - u] || !g.reads[1 - u].empty() || !g.masks[u].empty() ||
        g.reads[u].size() != g.batch.size())
      continue;
    bool taps = true;
    for (const Subscript& sub : op[s]->subs) {
      bool batch = false, reduction = false;
      for (int v : g.batch) batch = batch || sub.coef[static_cast<std::size_t>(v)] != 0;
      for (int v : g.k) reduction = reduction || sub.coef[static_cast<std::size_t>(v)] != 0;
      taps = taps && (!batch || reduction);
    }
    if (taps) insideSide = s;
  }
  const std::array<bool, 2> wholeBefore = g.whole;
  if (insideSide >= 0) {
    g.batchInside = true;
    g.whole[static_cast<std::size_t>(insideSide)] = false;
  }

  // Tasks: with several threads, at least 4 per thread where the work allows, splitting M or N
  // into chunks; a split re-packs the other side's operand per chunk unless it is packed whole.
  // With the batch inside, a task holds a group of batch values: 2 per thread, by splits of the
  // side whose re-packing is free (the tapped operand's own index), then by groups of batch
  // values (each value's block still packed by one task), then by the other side; where M and
  // N give fewer chunks than threads, the batch outside. (The weight gradient of the README
  // demo has 3 chunks of M: 3 tasks left one of two threads idle a third of the time; a split
  // of N packed the tapped input twice, 30% more work; 6 tasks of 3 chunks and 2 groups of
  // taps pack nothing twice.)
  std::int64_t mTasks = 1, nTasks = 1, bGroups = 1;
  // The chunks a split asks for make fewer where they do not divide the slivers (3 slivers in
  // 4 chunks make 3 of 1): tasks are counted as the chunks they make.
  auto chunks = [](std::int64_t slivers, std::int64_t asked) {
    return cdiv(slivers, cdiv(slivers, asked));
  };
  auto splitTasks = [&] {
    mTasks = nTasks = bGroups = 1;
    if (t.threads <= 1) return;
    const std::int64_t outer = g.batchInside ? 1 : batchTotal;
    const double perThread = g.batchInside ? 2.0 : 4.0;
    const double want = std::min(perThread * t.threads, std::max(1.0, flops / kTaskFlops));
    // ... and a multiple of the thread count where a few tasks per thread would leave one
    // thread a task more than the others. (One task per thread for a weight gradient, each
    // task's block of the whole-packed operand serving all its taps, measured slower on two
    // threads than two tasks per thread: bench/RESULTS.md, "two threads against one".)
    auto more = [&] {
      const std::int64_t tasks = outer * bGroups * chunks(sl[0], mTasks) * chunks(sl[1], nTasks);
      return static_cast<double>(tasks) < want ||
             (tasks % t.threads != 0 && tasks < 8 * t.threads &&
              static_cast<double>(tasks) * kTaskFlops * 2 < flops);
    };
    while (more()) {
      const std::int64_t mc0 = cdiv(sl[0], mTasks), nc0 = cdiv(sl[1], nTasks);
      const bool canM = mc0 >= 2, canN = nc0 >= 2;
      const bool freeM = g.whole[1], freeN = g.whole[0];
      if (g.batchInside && !(canM && freeM) && !(canN && freeN) && bGroups < batchTotal) {
        bGroups = std::min(2 * bGroups, batchTotal);
        continue;
      }
      if (!canM && !canN) break;
      bool splitM = canM;
      if (canM && canN)
        splitM = freeM != freeN ? freeM : mc0 * g.mr >= nc0 * g.nr;
      (splitM ? mTasks : nTasks) *= 2;
    }
  };
  splitTasks();
  if (g.batchInside && t.threads > 1 && chunks(sl[0], mTasks) * chunks(sl[1], nTasks) < t.threads) {
    g.batchInside = false;
    g.whole = wholeBefore;
    splitTasks();
  }
  g.mChunk = cdiv(sl[0], mTasks);
  g.nChunk = cdiv(sl[1], nTasks);
  g.mTasks = cdiv(sl[0], g.mChunk);
  g.nTasks = cdiv(sl[1], g.nChunk);
  // Chunks of balanced sizes (lower/CpuGemm.cpp): the longest.
  g.mChunk = cdiv(sl[0], g.mTasks);
  g.nChunk = cdiv(sl[1], g.nTasks);
  // Equal MC (NC) blocks in a chunk: a chunk of 43 slivers in blocks of 42 left a block of one
  // sliver, which streamed the whole B panel through L2 for one micro-kernel call per sliver.
  auto equalBlocks = [](std::int64_t block, std::int64_t slivers, std::int64_t lanes) {
    const std::int64_t per = std::max<std::int64_t>(block / lanes, 1);
    return cdiv(slivers, cdiv(slivers, per)) * lanes;
  };
  g.nc = boundedNc(g, t, batchTotal, e);
  g.mc = equalBlocks(g.mc, g.mChunk, g.mr);
  g.nc = equalBlocks(g.nc, g.nChunk, g.nr);
  g.batchGroups = g.batchInside ? bGroups : 1;
  g.tasks = (g.batchInside ? g.batchGroups : batchTotal) * g.mTasks * g.nTasks;
  // An operand packed whole pays a round trip through memory so that several tasks share it;
  // where each of its packed elements would be packed once anyway (it reads every batch index,
  // the other side is not split, and for A, N is one NC block: a task packs its B panel once
  // per KC block, its A blocks once per NC block), the task packs it per block, in cache.
  for (int s = 0; s < 2; ++s) {
    std::int64_t users = s == 0 ? g.nTasks * cdiv(g.nChunk * g.nr, g.nc) : g.mTasks;
    for (int v : g.batch) {
      const auto& rs = g.reads[static_cast<std::size_t>(s)];
      if (std::find(rs.begin(), rs.end(), v) == rs.end()) users *= extent(v);
    }
    if (users == 1) g.whole[static_cast<std::size_t>(s)] = false;
  }
  // Task groups (the parallel loop's iterations, each with its scratch): at most 4 per thread,
  // equally many tasks in each but the last. Where that makes a count of groups that is no
  // multiple of the threads, the most groups that are and hold equally many tasks (10 tasks
  // in 5 groups of 2 left one thread 3 groups: 1.67x at most; in 2 groups of 5, one each).
  g.groups = t.threads > 1 ? std::min<std::int64_t>(g.tasks, 4 * t.threads) : 1;
  g.groups = cdiv(g.tasks, cdiv(g.tasks, g.groups)); // none empty
  if (g.tasks > g.groups && g.groups % t.threads != 0)
    for (std::int64_t c = g.groups; c >= t.threads; --c)
      if (c % t.threads == 0 && g.tasks % c == 0) {
        g.groups = c;
        break;
      }
  g.parallel = g.groups >= 2;
  g.vectorStore = outStride(g.n) == 1;
  // A batch index's output stride under a cache line (GemmPlan::batchInLine); batch values
  // fastest in the task order (GemmPlan::batchFastest) where the tasks split each value's
  // output in chunks.
  if (!g.batchInside)
    for (int v : g.batch)
      if (extent(v) > 1 && std::abs(outStride(v)) * e < kCacheLine) g.batchInLine = true;
  g.batchFastest = g.batchInLine && g.parallel && g.mTasks * g.nTasks > 1;

  // B read in place (GemmPlan::bInPlace): a window along N, read with unit stride, packed per
  // block (packed whole, it is shared by tasks and its copy is paid once). Dependent ranges of
  // B (a stride-1 input gradient's taps, dy[n,o,u-a,v-b]; a residue phase's) are applied by
  // the kernel instead of zeros: a range that reads N masks the lanes of B's loads, one that
  // reads only batch indices bounds its loop (an index inside the KC block: after k[kSplit]).
  // Every dependent index B reads must be one of them (B is read only at terms), and B's
  // subscripts inside their dimensions at every term (readInside).
  bool masksInPlace = g.product;
  for (int v : g.masks[1]) {
    std::vector<bool> rd(static_cast<std::size_t>(n), false);
    boundVars(bs.loBound[static_cast<std::size_t>(v)], rd);
    boundVars(bs.hiBound[static_cast<std::size_t>(v)], rd);
    for (int u = 0; u < n; ++u)
      if (rd[static_cast<std::size_t>(u)] && u != g.n &&
          std::find(g.batch.begin(), g.batch.end(), u) == g.batch.end())
        masksInPlace = false;
    const auto pos = std::find(g.k.begin(), g.k.end(), v) - g.k.begin();
    if (!rd[static_cast<std::size_t>(g.n)] && pos <= g.kSplit) masksInPlace = false;
  }
  for (int v = 0; v < n; ++v)
    if (bs.dependent[static_cast<std::size_t>(v)] && uses(*op[1], v) &&
        std::find(g.masks[1].begin(), g.masks[1].end(), v) == g.masks[1].end())
      masksInPlace = false;
  if (inside && !gemmKnobs().packB && !g.whole[1] && !g.batchInside && masksInPlace && g.kSets == 1 &&
      inPlaceStride(strideAlong(*op[1], g.n, tensorStrides(*op[1])), g, extent(g.n), t) &&
      inside(*op[1])) {
    bool window = false, oneTap = true;
    for (const Subscript& sub : op[1]->subs) {
      bool reduction = false;
      const bool alongN = sub.coef[static_cast<std::size_t>(g.n)] != 0;
      for (int v : g.k) {
        const bool reads = sub.coef[static_cast<std::size_t>(v)] != 0;
        reduction = reduction || reads;
        oneTap = oneTap && (!reads || !alongN || extent(v) == 1);
      }
      window = window || (reduction && alongN);
    }
    const bool fullWidth = t.vectorBytes >= 64 && !t.halvedVectors;
    g.bInPlace = window && (merged.empty() || !oneTap ||
                            (extent(g.m) < kPackedOneTapRows && !fullWidth));
  }
  if (g.bInPlace) {
    // The slivers of N read without a mask: every lane inside N, and every range that reads N
    // whole at every lane (a longest run of them). Where they hold fewer than half of N's
    // columns, B is packed: masked loads in every step cost more than the packing (a residue
    // phase of 28 columns, whose first and last columns lack a tap, measured 1.4-1.9x slower).
    // Where 512-bit operations run in halves (Target::halvedVectors: Zen 4), B is packed
    // wherever a range masks a whole sliver and the tiles pad M (the stride-1 input gradient of
    // 64 channels in 22 x 16 tiles, its first of three whole slivers masked: packed, 1.15x
    // faster); in tiles whose rows divide M (planGemm: 16 x 16) it is read in place, faster
    // than packed, its border rows' missing taps skipped (bench/RESULTS.md, "the 3x3 stride-1
    // rows on Zen 4").
    const std::int64_t lo = bs.lo[static_cast<std::size_t>(g.n)], full = extent(g.n) / g.nr;
    std::vector<std::int64_t> vals(static_cast<std::size_t>(n), 0);
    auto whole = [&](std::int64_t col) {
      for (int v : g.masks[1]) {
        const auto u = static_cast<std::size_t>(v);
        std::vector<bool> rd(static_cast<std::size_t>(n), false);
        boundVars(bs.loBound[u], rd);
        boundVars(bs.hiBound[u], rd);
        if (!rd[static_cast<std::size_t>(g.n)]) continue; // bounds its loop instead
        for (int other = 0; other < n; ++other)
          if (rd[static_cast<std::size_t>(other)] && other != g.n) return false;
        for (std::int64_t l = col * g.nr; l < (col + 1) * g.nr; ++l) {
          vals[static_cast<std::size_t>(g.n)] = lo + l;
          if (bs.loBound[u].eval(vals) > bs.lo[u] || bs.hiBound[u].eval(vals) < bs.hi[u])
            return false;
        }
      }
      return true;
    };
    std::int64_t best = 0;
    for (std::int64_t col = 0, run = 0; col < full; ++col) {
      run = whole(col) ? run + 1 : 0;
      if (run > best) {
        best = run;
        g.plainTo = col + 1;
      }
    }
    g.plainFrom = g.plainTo - best;
    const bool maskedSliver = t.halvedVectors && best < full && extent(g.m) % g.mr != 0;
    if (!g.masks[1].empty() && (maskedSliver || 2 * best * g.nr < extent(g.n))) g.bInPlace = false;
  }

  auto packing = [&](int s) {
    std::string r = s == 1 && g.bInPlace                 ? "read in place"
                    : g.whole[static_cast<std::size_t>(s)] ? "whole"
                                                           : "per block";
    if (!g.masks[static_cast<std::size_t>(s)].empty())
      r += ", ranges of " + names(st, g.masks[static_cast<std::size_t>(s)]);
    return r;
  };
  const std::string what =
      g.product ? "packed GEMM"
                : "packed contraction (element-wise summand" +
                      (g.scale != 1 ? ", scaled by " + formatScale(g.scale) : std::string()) + ")";
  g.merged = merged;
  g.why = what + ": M " + names(st, {g.m}, merged) + ", N " + names(st, {g.n}, merged) + ", K " +
          names(st, g.k, merged) + ", batch " + names(st, g.batch, merged) +
          (g.batchInside ? " inside the KC blocks" +
                               (g.batchGroups > 1
                                    ? " (" + std::to_string(g.batchGroups) + " groups)"
                                    : std::string())
                         : std::string()) +
          "; micro-kernel " + std::to_string(g.mr) + "x" + std::to_string(g.nr) +
          (halfWidthTail(g, extent(g.n), t) && g.nr / 2 < g.width
               ? " (the last " + std::to_string(g.nr / 2) + " columns in half vectors)"
               : std::string()) +
          (g.kSets > 1 ? " (" + std::to_string(g.kSets) + " accumulator sets)" : std::string()) +
          ", MC " + std::to_string(g.mc) + " KC " + std::to_string(g.kc) + " NC " +
          std::to_string(g.nc) + "; A packed " + packing(0) + ", B " +
          (g.bInPlace ? "" : "packed ") + packing(1) + "; " +
          (g.parallel ? std::to_string(g.tasks) + " tasks" +
                            (g.batchFastest ? " (batch values fastest)" : "") + " in " +
                            std::to_string(g.groups) + " parallel groups"
                      : std::string("one thread"));
  // B's lanes two apart read in place (inPlaceStride): its tile also comes in one more equal
  // tile where that pads M less (64 channels: 4 x 16 rows, where 3 x 22 computed 66). On Zen 4
  // each step's two loads and permute beside 16 FMAs still run at the FMA peak (timed alone,
  // A and B in L1), and M's padded rows and edge tiles go (an edge tile is stored element by
  // element; bench/RESULTS.md, "the stride-2 forward on Zen 4"); on the Xeon the two tiles
  // measured alike (its permute takes an FMA port: 17 issues for a 16-row step's 16 FMAs).
  if (rows == 0 && g.bInPlace && strideTwoTile(t) &&
      strideAlong(*op[1], g.n, tensorStrides(*op[1])) == 2 && extent(g.m) % g.mr != 0) {
    const std::int64_t m = extent(g.m), tiles = cdiv(m, g.mr) + 1, mr = cdiv(m, tiles);
    if (mr >= t.fmaChains && cdiv(m, mr) * mr < cdiv(m, g.mr) * g.mr) {
      std::optional<GemmPlan> more = planTile(st, bs, dtype, strides, t, minFlops, inside,
                                              nrVectors, merged, folded, static_cast<int>(mr));
      if (more && more->bInPlace && more->mr == mr) return more;
    }
  }
  return g;
}

} // namespace

bool halfWidthTail(const GemmPlan& g, std::int64_t n, const Target& t) {
  const std::int64_t half = g.nr / 2, lanes = t.halvedVectors ? g.width / 2 : g.width;
  return n % g.nr != 0 && n % g.nr <= half && lanes > 0 && half % lanes == 0;
}

std::string describePhases(std::size_t phases, const GemmPlan& each) {
  return std::to_string(phases) + " residue phases, each a " + each.why;
}

} // namespace einjit::codegen
