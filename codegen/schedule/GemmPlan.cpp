#include "codegen/schedule/GemmPlan.h"

#include "codegen/Schedule.h"

#include <algorithm>

namespace einjit::codegen {

using namespace einjit::dsl;

namespace {

// Below this many flops the register tiles (no packing) are as fast: packing costs a pass
// over both operands and a scratch buffer per call.
constexpr double kMinFlops = 1e6;

bool uses(const CExpr& read, int v) {
  for (const Subscript& s : read.subs)
    if (s.coef[static_cast<std::size_t>(v)] != 0) return true;
  return false;
}

// A read the packing loops can address: plain affine subscripts, no gather.
bool plainRead(const CExpr& e) {
  if (e.kind != CKind::Read || !e.args.empty()) return false;
  for (const Subscript& s : e.subs)
    if (s.gather || s.mode != IndexMode::Plain) return false;
  return true;
}

std::int64_t strideAlong(const CExpr& read, int v, const std::vector<std::int64_t>& st) {
  std::int64_t c = 0;
  for (std::size_t d = 0; d < read.subs.size(); ++d)
    c += read.subs[d].coef[static_cast<std::size_t>(v)] * st[d];
  return c;
}

std::string names(const Statement& st, const std::vector<int>& vs) {
  std::string s;
  for (int v : vs) s += (s.empty() ? "" : ",") + st.vars[static_cast<std::size_t>(v)].name;
  return s.empty() ? "-" : s;
}

} // namespace

std::optional<GemmPlan> planGemm(const Program& p, const BoundProgram& b, std::size_t k,
                                 const std::vector<std::vector<std::int64_t>>& strides,
                                 const Target& t) {
  const Statement& st = p.stmts[k];
  const BoundStatement& bs = b.stmts[k];
  if (t.gpu || !t.tile || (b.dtype != DType::f32 && b.dtype != DType::f64)) return std::nullopt;
  if (st.reduce != Reduce::Add || st.scatter || readsOwnOutput(st)) return std::nullopt;
  const int nOut = st.numOutputVars(), n = static_cast<int>(st.vars.size());
  if (n == nOut || st.lhsVars.size() != static_cast<std::size_t>(nOut)) return std::nullopt;
  std::vector<bool> seen(static_cast<std::size_t>(nOut), false);
  for (int v : st.lhsVars) {
    if (v >= nOut || seen[static_cast<std::size_t>(v)]) return std::nullopt;
    seen[static_cast<std::size_t>(v)] = true;
  }
  for (int v = 0; v < n; ++v)
    if (bs.dependent[static_cast<std::size_t>(v)]) return std::nullopt;
  const CExpr& rhs = *st.rhs;
  if (rhs.kind != CKind::Binary || rhs.binop != BinOp::Mul) return std::nullopt;
  const CExpr* f[2] = {rhs.args[0].get(), rhs.args[1].get()};
  if (!plainRead(*f[0]) || !plainRead(*f[1])) return std::nullopt;

  // Output indices read by one factor only are its side; by both, batch; by neither: no plan.
  std::vector<int> side[2], batch;
  for (int v = 0; v < nOut; ++v) {
    const bool u0 = uses(*f[0], v), u1 = uses(*f[1], v);
    if (u0 && u1)
      batch.push_back(v);
    else if (u0 || u1)
      side[u0 ? 0 : 1].push_back(v);
    else
      return std::nullopt;
  }
  if (side[0].size() != 1 || side[1].size() != 1) return std::nullopt;
  auto extent = [&](int v) {
    return bs.hi[static_cast<std::size_t>(v)] - bs.lo[static_cast<std::size_t>(v)];
  };
  auto tensorStrides = [&](const CExpr& r) -> const std::vector<std::int64_t>& {
    return strides[static_cast<std::size_t>(r.tensor)];
  };
  // N: the index with unit stride in the output (contiguous vector stores of the tile), else
  // the one its operand reads with unit stride (vector loads while packing), else the longer.
  const auto& os = strides[static_cast<std::size_t>(st.output)];
  auto outStride = [&](int v) {
    for (std::size_t d = 0; d < st.lhsVars.size(); ++d)
      if (st.lhsVars[d] == v) return os[d];
    return std::int64_t{0};
  };
  const int x = side[0][0], y = side[1][0];
  int nFactor = 1;
  if (outStride(x) == 1 && outStride(y) != 1)
    nFactor = 0;
  else if (outStride(x) == outStride(y) || (outStride(x) != 1 && outStride(y) != 1)) {
    const bool ux = strideAlong(*f[0], x, tensorStrides(*f[0])) == 1;
    const bool uy = strideAlong(*f[1], y, tensorStrides(*f[1])) == 1;
    if ((ux && !uy) || (ux == uy && extent(x) > extent(y))) nFactor = 0;
  }
  GemmPlan g;
  g.aFactor = 1 - nFactor;
  g.m = side[g.aFactor][0];
  g.n = side[nFactor][0];
  g.batch = batch;
  for (int v = nOut; v < n; ++v) g.k.push_back(v);

  const int elem = b.dtype == DType::f64 ? 8 : 4;
  g.width = std::max(1, t.vectorBytes / elem);
  if (g.width < 2) return std::nullopt;
  // MR x NR accumulators, NR/width vectors of B and one broadcast of A in the registers:
  // 16 vector registers (AVX2) hold 6 x 2, 32 (AVX-512) hold 14 x 2.
  const int registers = t.vectorBytes >= 64 ? 32 : 16;
  g.nr = 2 * g.width;
  g.mr = (registers - 4) / 2;
  double flops = 2, kt = 1;
  std::int64_t kTotal = 1;
  for (int v = 0; v < n; ++v) flops *= static_cast<double>(std::max<std::int64_t>(extent(v), 0));
  for (int v : g.k) {
    kt *= static_cast<double>(extent(v));
    kTotal *= extent(v);
  }
  if (flops < kMinFlops || extent(g.m) < g.mr || extent(g.n) < g.nr || kt > 1e12)
    return std::nullopt;

  // KC: a B sliver (KC x NR) fills half of L1; MC: an A block (MC x KC) half of L2; NC: a B
  // panel (KC x NC) a quarter of L3 (shared by the threads).
  const std::int64_t e = elem;
  g.kc = std::clamp<std::int64_t>(t.l1Bytes / 2 / (g.nr * e), 16, 1024);
  g.kc = std::min(g.kc, kTotal);
  g.mc = std::max<std::int64_t>(t.l2Bytes / 2 / (g.kc * e) / g.mr, 1) * g.mr;
  g.nc = std::max<std::int64_t>(t.l3Bytes / 4 / (g.kc * e) / g.nr, 1) * g.nr;
  // Whole slivers (the last one padded with zeros).
  const std::int64_t mFull = (extent(g.m) + g.mr - 1) / g.mr * g.mr;
  const std::int64_t nFull = (extent(g.n) + g.nr - 1) / g.nr * g.nr;
  g.nc = std::min(g.nc, nFull);
  g.mc = std::min(g.mc, mFull);
  std::int64_t batchCount = 1;
  for (int v : batch) batchCount *= extent(v);
  // M blocks: at most MC rows each, and with several threads at least as many blocks (of the
  // batch elements together) as threads, a multiple of them where the batch is short.
  const std::int64_t slivers = mFull / g.mr;
  std::int64_t blocks = (mFull + g.mc - 1) / g.mc;
  if (t.threads > 1 && batchCount < 4 * t.threads) {
    blocks = std::max<std::int64_t>(blocks, t.threads);
    blocks = (blocks + t.threads - 1) / t.threads * t.threads;
  }
  blocks = std::min(blocks, slivers);
  g.mBlock = (slivers + blocks - 1) / blocks * g.mr;
  g.mBlocks = (mFull + g.mBlock - 1) / g.mBlock;
  g.parallel = t.threads > 1 && batchCount * g.mBlocks >= 2;
  g.why = "packed GEMM: M " + names(st, {g.m}) + ", N " + names(st, {g.n}) + ", K " +
          names(st, g.k) + ", batch " + names(st, batch) + "; micro-kernel " +
          std::to_string(g.mr) + "x" + std::to_string(g.nr) + ", MC " + std::to_string(g.mc) +
          " KC " + std::to_string(g.kc) + " NC " + std::to_string(g.nc) + "; " +
          (g.parallel ? "parallel over " + std::to_string(batchCount * g.mBlocks) +
                            " (batch, M block) pairs of " + std::to_string(g.mBlock) + " rows"
                      : std::string("one thread"));
  return g;
}

} // namespace einjit::codegen
