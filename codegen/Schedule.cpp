#include "codegen/Schedule.h"

#include "dsl/InPlace.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

namespace einjit::codegen {

using namespace einjit::dsl;

namespace {

void forEachRead(const CExpr& e, const std::function<void(const CExpr&)>& f) {
  if (e.kind == CKind::Read) {
    f(e);
    for (const Subscript& s : e.subs)
      if (s.gather) forEachRead(*s.gather, f);
  }
  for (const CExprPtr& a : e.args) forEachRead(*a, f);
}

// Offset coefficient of index v in a read: sum over dimensions of coef * stride, or nothing
// when a gathered or clamped/wrapped dimension uses v (no constant stride).
std::optional<std::int64_t> strideOf(const CExpr& read, int v, const Strides& strides) {
  std::int64_t c = 0;
  const auto& st = strides[static_cast<std::size_t>(read.tensor)];
  for (std::size_t d = 0; d < read.subs.size(); ++d) {
    const Subscript& s = read.subs[d];
    std::int64_t k = s.coef[static_cast<std::size_t>(v)];
    if (k == 0) continue;
    if (s.gather || s.mode == IndexMode::Clamp || s.mode == IndexMode::Wrap) return std::nullopt;
    c += k * st[d];
  }
  return c;
}

// Every read is contiguous (stride 1) or constant (stride 0) along index v; `affine` tells
// whether each read at least has a constant stride along it.
bool contiguousAlong(const std::vector<const CExpr*>& reads, int v, const Strides& strides,
                     bool* affine = nullptr) {
  bool ok = true, aff = true;
  for (const CExpr* r : reads) {
    auto c = strideOf(*r, v, strides);
    ok = ok && c && (*c == 0 || *c == 1);
    aff = aff && c;
  }
  if (affine) *affine = aff;
  return ok;
}

// Distinct values of v (the others fixed) write distinct elements.
bool injectiveIn(const Statement& st, int v) {
  if (!st.lhsVars.empty()) return true; // v is an output index and appears bare on the left
  for (const Subscript& s : st.lhs->subs) {
    if (s.gather || s.mode == IndexMode::Clamp || s.mode == IndexMode::Wrap) continue;
    bool only = s.coef[static_cast<std::size_t>(v)] != 0;
    for (std::size_t u = 0; u < s.coef.size() && only; ++u)
      if (static_cast<int>(u) != v && s.coef[u] != 0) only = false;
    if (only) return true;
  }
  return false;
}

// The split-reduction fields of s, when the policy splits the statement.
void scheduleSplit(const Statement& st, const BoundStatement& bs, const Target& t,
                   StatementSchedule& s) {
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
  if (n == nOut || !independentOutputs(st)) return;
  for (std::size_t v = 0; v < n; ++v)
    if (bs.dependent[v]) return;
  const SplitPolicy policy = splitPolicy(t);
  // An empty range makes the product 0 (two negative extents must not multiply to a
  // positive count); past int64 the flattened prefix below could not be counted.
  double outputs = 1, reduction = 1;
  for (std::size_t v = 0; v < n; ++v)
    (v < nOut ? outputs : reduction) *=
        static_cast<double>(std::max<std::int64_t>(bs.hi[v] - bs.lo[v], 0));
  if (outputs > static_cast<double>(policy.maxOutputs) || reduction < 1 || reduction > 9e18) return;
  const double chunks = std::min(
      {static_cast<double>(policy.maxChunks),
       std::floor(reduction / static_cast<double>(std::max<std::int64_t>(policy.minChunk, 1))),
       std::floor(static_cast<double>(policy.maxPartials) / outputs)});
  if (chunks < static_cast<double>(std::max<std::int64_t>(policy.minChunks, 1))) return;
  // The chunked prefix of reduction indices: on a GPU all of them (each thread decomposes its
  // flattened iteration); on the CPU the shortest prefix with at least 4 iterations per chunk,
  // so that the later indices run as whole loops (vectorized).
  std::size_t p = nOut;
  std::int64_t prefix = bs.hi[p] - bs.lo[p];
  while (p + 1 < n && (t.gpu || static_cast<double>(prefix) < 4 * chunks)) {
    ++p;
    prefix *= bs.hi[p] - bs.lo[p];
  }
  const auto want = std::min<std::int64_t>(static_cast<std::int64_t>(chunks), prefix);
  s.splitVar = static_cast<int>(p);
  s.splitPrefix = prefix;
  s.splitChunk = (prefix + want - 1) / want;
  s.splitChunks = static_cast<int>((prefix + s.splitChunk - 1) / s.splitChunk);
  std::string group;
  for (std::size_t v = nOut; v <= p; ++v) group += (v > nOut ? "," : "") + st.vars[v].name;
  std::string inner;
  for (std::size_t v = p + 1; v < n; ++v) inner += (v > p + 1 ? "," : "") + st.vars[v].name;
  s.why = "split reduction: " + std::to_string(s.splitChunks) + " chunks of " +
          std::to_string(s.splitChunk) + " iterations of (" + group + ")" +
          (inner.empty() ? "" : " x whole (" + inner + ")") +
          (t.gpu ? ", one block each, tree in shared memory" : ", in parallel") +
          (s.splitChunks > 1 ? ", partials combined in chunk order" : "");
}

// Reductions whose partial results may be kept per vector lane and combined at the end: '+'
// (reassociated, as every vectorised sum is), and max / min, whose value does not depend on
// the order (the comparisons never let NaN in; only the sign of an extreme zero may differ).
bool laneReducible(Reduce r) { return r == Reduce::Add || r == Reduce::Max || r == Reduce::Min; }

// The reduction index a dot-product tile would vectorise along: a reduction index with at
// least `width` iterations along which every read is contiguous or constant; -1 if none.
int dotIndex(const Statement& st, const BoundStatement& bs, const std::vector<const CExpr*>& reads,
             const Strides& strides, int width) {
  if (!laneReducible(st.reduce)) return -1;
  const int nOut = st.numOutputVars(), n = static_cast<int>(st.vars.size());
  for (int v = nOut; v < n; ++v) {
    const auto e = bs.hi[static_cast<std::size_t>(v)] - bs.lo[static_cast<std::size_t>(v)];
    if (e >= width && contiguousAlong(reads, v, strides)) return v;
  }
  return -1;
}

// Load cost per vector of products, in contiguous-vector-load units, of the two tiles open
// to a statement whose only vector output index j is read with non-unit strides:
//   register tile 8 x 2 vectors: each j-dependent read is 2 gathers per step (gatherCost
//   each), each other read 8 broadcasts, for 16 vectors of products;
//   dot-product tile 4 x 4: 8 contiguous loads per step for 16 vectors of products, and a
//   horizontal sum per output at the end (negligible over a reduction of `width` or more).
// The dot tile wins unless gathers are nearly as cheap as loads.
bool dotTileCheaper(const Statement& st, const BoundStatement& bs,
                    const std::vector<const CExpr*>& reads, int j, const Strides& strides,
                    const Target& t, int width) {
  if (dotIndex(st, bs, reads, strides, width) < 0) return false;
  double registerCost = 0;
  for (const CExpr* r : reads) {
    auto c = strideOf(*r, j, strides);
    registerCost += (c && *c == 0) ? 8.0 : 2.0 * (c && *c == 1 ? 1.0 : t.gatherCost);
  }
  const double dotCost = 8.0;
  return dotCost / 16.0 < registerCost / 16.0;
}

} // namespace

std::int64_t spanElements(const std::vector<std::int64_t>& shape,
                          const std::vector<std::int64_t>& strides) {
  std::int64_t span = 1;
  for (std::size_t d = 0; d < shape.size(); ++d)
    span += std::max<std::int64_t>(shape[d] - 1, 0) * strides[d];
  return span;
}

bool readsOwnOutput(const Statement& st) {
  bool reads = false;
  auto see = [&](const CExpr& r) { reads = reads || r.tensor == st.output; };
  forEachRead(*st.rhs, see);
  for (const Subscript& sub : st.lhs->subs)
    if (sub.gather) forEachRead(*sub.gather, see);
  return reads;
}

bool coversOutput(const BoundProgram& b, const Statement& st, const BoundStatement& bs,
                  const StatementSchedule& s) {
  if (!s.run || st.lhsVars.empty()) return false;
  const auto& shape = b.tensors[static_cast<std::size_t>(st.output)].shape;
  for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
    auto v = static_cast<std::size_t>(st.lhsVars[d]);
    for (std::size_t e = 0; e < d; ++e)
      if (st.lhsVars[e] == st.lhsVars[d]) return false;
    if (bs.dependent[v] || bs.lo[v] != 0 || bs.hi[v] != shape[d]) return false;
  }
  return true;
}

bool independentOutputs(const Statement& st) {
  if (st.scatter || readsOwnOutput(st)) return false;
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
  if (!st.lhsVars.empty() || nOut == 0) return true;
  // Affine left-hand side: injective when its coefficient matrix (plain and padded
  // dimensions) has full column rank over the output indices.
  std::vector<std::vector<double>> rows;
  for (const Subscript& s : st.lhs->subs) {
    if (s.gather || s.mode == IndexMode::Clamp || s.mode == IndexMode::Wrap) continue;
    std::vector<double> row(nOut);
    for (std::size_t v = 0; v < nOut; ++v) row[v] = static_cast<double>(s.coef[v]);
    rows.push_back(row);
  }
  std::size_t rank = 0;
  for (std::size_t c = 0; c < nOut && rank < rows.size(); ++c) {
    std::size_t piv = rank;
    while (piv < rows.size() && rows[piv][c] == 0) ++piv;
    if (piv == rows.size()) continue;
    std::swap(rows[piv], rows[rank]);
    for (std::size_t q = 0; q < rows.size(); ++q) {
      if (q == rank || rows[q][c] == 0) continue;
      const double f = rows[q][c] / rows[rank][c];
      for (std::size_t x = c; x < nOut; ++x) rows[q][x] -= f * rows[rank][x];
    }
    ++rank;
  }
  return rank == nOut;
}

std::string coreBorderNote(const StatementSchedule& core) {
  return "core/border split; core: " + core.why;
}

StatementSchedule scheduleStatement(const Program& p, const BoundProgram& b, std::size_t k,
                                    const Strides& strides, const Target& t) {
  const Statement& st = p.stmts[k];
  const BoundStatement& bs = b.stmts[k];
  const int nOut = st.numOutputVars(), n = static_cast<int>(st.vars.size());
  auto extent = [&](int v) {
    return bs.hi[static_cast<std::size_t>(v)] - bs.lo[static_cast<std::size_t>(v)];
  };
  StatementSchedule s;
  for (int v = 0; v < nOut; ++v)
    if (extent(v) <= 0) {
      s.run = false;
      s.why = "no element is covered";
      return s;
    }
  for (int v = 0; v < nOut; ++v) s.outerOrder.push_back(v);
  scheduleSplit(st, bs, t, s);
  if (s.splitChunks > 0) return s;

  bool readsOutput = false, anyDependent = false;
  std::vector<const CExpr*> reads;
  forEachRead(*st.rhs, [&](const CExpr& r) {
    reads.push_back(&r);
    readsOutput = readsOutput || r.tensor == st.output;
  });
  for (int v = 0; v < n; ++v)
    anyDependent = anyDependent || bs.dependent[static_cast<std::size_t>(v)];
  double work = 1;
  for (int v = 0; v < n; ++v) work *= static_cast<double>(std::max<std::int64_t>(extent(v), 1));
  s.vectorizeInner = true;

  // Register tile: contractions with a unit-stride output index read contiguously.
  const int elemBytes = b.dtype == DType::f64 ? 8 : 4;
  const int width = std::max(1, t.vectorBytes / elemBytes);
  bool distinct = !st.lhsVars.empty();
  for (std::size_t a = 0; a < st.lhsVars.size(); ++a)
    for (std::size_t c = a + 1; c < st.lhsVars.size(); ++c)
      distinct = distinct && st.lhsVars[a] != st.lhsVars[c];
  if (t.tile && n > nOut && !anyDependent && !st.scatter && !readsOutput && distinct && width > 1) {
    // The vector index: every read is contiguous (stride 1) or constant (stride 0) along it.
    // Prefer one with unit stride in the output too; otherwise the finished tile is stored
    // with a scatter, once per tile.
    const auto& os = strides[static_cast<std::size_t>(st.output)];
    // Failing that, an index with unit stride in the output and constant strides in the
    // reads (a strided convolution's output column): those reads become vector gathers.
    int j = -1, jStrided = -1;
    bool jUnitInOutput = false;
    for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
      int v = st.lhsVars[d];
      if (extent(v) < width) continue;
      bool affine = false;
      const bool ok = contiguousAlong(reads, v, strides, &affine);
      bool unit = os[d] == 1;
      if (ok && (j < 0 || (unit && !jUnitInOutput))) {
        j = v;
        jUnitInOutput = unit;
      }
      if (!ok && affine && unit) jStrided = v;
    }
    // A strided j turns every j-dependent read into a vector gather; take it only when no
    // dot-product tile (contiguous loads along a reduction index) is cheaper.
    if (j < 0 && jStrided >= 0 && !dotTileCheaper(st, bs, reads, jStrided, strides, t, width))
      j = jStrided;
    bool contiguous = j >= 0;
    if (contiguous) {
      // The other tile index: one that the j-dependent reads do not use, so each vector they
      // load serves MR rows; the longest such range. A read that no reduction index moves
      // (x[k,j] in the distance layer's dx[k,j] := dy[i,j] * (w[k,i] - x[k,j])) is loaded
      // once per tile, not once per step, so it costs nothing either way.
      auto stepInvariant = [&](const CExpr& r) {
        for (int u = nOut; u < n; ++u) {
          auto c = strideOf(r, u, strides);
          if (!c || *c != 0) return false;
        }
        return true;
      };
      int best = -1;
      int bestScore = -1;
      for (int v = 0; v < nOut; ++v) {
        if (v == j || extent(v) < 2) continue;
        int score = 1;
        for (const CExpr* r : reads) {
          auto cj = strideOf(*r, j, strides), cv = strideOf(*r, v, strides);
          if (stepInvariant(*r)) continue;
          if (cj && *cj != 0 && cv && *cv == 0) ++score;
          if (cj && *cj != 0 && (!cv || *cv != 0)) score -= 4;
        }
        if (score > bestScore || (score == bestScore && best >= 0 && extent(v) > extent(best))) {
          best = v;
          bestScore = score;
        }
      }
      s.tileJ = j;
      s.tileI = best;
      s.width = width;
      s.nr = extent(j) >= 2 * width ? 2 * width : width;
      // A single row of outputs with a long reduction (a column sum, a bias's or a gain's
      // gradient, a matrix-vector product): each reduction step reads one run of every row.
      // A tile of up to kRowRun vectors (accumulators in L1, not registers) reads long runs
      // per row and walks down the rows once per tile instead of once per two vectors; the
      // threads still get a tile each. Short reductions keep their accumulators in registers.
      constexpr int kRowRun = 64;
      double reduction = 1;
      for (int v = nOut; v < n; ++v) reduction *= static_cast<double>(extent(v));
      if (best < 0 && reduction >= 256 && extent(j) >= 4 * width) {
        const std::int64_t perThread = extent(j) / std::max(t.threads, 1) / width * width;
        s.nr = static_cast<int>(std::clamp<std::int64_t>(perThread, s.nr, kRowRun * width));
      }
      s.mr = best < 0 ? 1 : static_cast<int>(std::min<std::int64_t>(8, extent(best)));
      s.why = "register tile " + std::to_string(s.mr) + "x" + std::to_string(s.nr) + " over " +
              (best < 0 ? std::string("-") : st.vars[static_cast<std::size_t>(best)].name) + " x " +
              st.vars[static_cast<std::size_t>(j)].name;
      // Tile loops run outermost-but-others: other output indices, then j tiles, i tiles.
      std::vector<int> order;
      for (int v = 0; v < nOut; ++v)
        if (v != j && v != best) order.push_back(v);
      order.push_back(j);
      if (best >= 0) order.push_back(best);
      s.outerOrder = order;
    }
  }
  if (t.tile && s.tileJ < 0 && laneReducible(st.reduce) && n > nOut && !anyDependent &&
      !st.scatter && !readsOutput && distinct && width > 1) {
    const int r = dotIndex(st, bs, reads, strides, width);
    if (r >= 0) {
      // Two output indices, each used by different r-dependent reads, so each loaded vector
      // serves a whole row or column of the tile.
      std::vector<int> cands;
      for (int v = 0; v < nOut; ++v)
        if (extent(v) >= 2) cands.push_back(v);
      std::sort(cands.begin(), cands.end(), [&](int a, int c) { return extent(a) > extent(c); });
      int a = cands.empty() ? -1 : cands[0], c = -1;
      for (std::size_t x = 0; x < cands.size() && a >= 0; ++x) {
        int v = cands[x];
        if (v == a) continue;
        bool separate = true;
        for (const CExpr* rd : reads) {
          auto cr = strideOf(*rd, r, strides), ca = strideOf(*rd, a, strides),
               cv = strideOf(*rd, v, strides);
          if (cr && *cr != 0 && (!ca || *ca != 0) && (!cv || *cv != 0)) separate = false;
        }
        if (separate) {
          c = v;
          break;
        }
      }
      if (a >= 0) {
        s.dotVar = r;
        s.tileI = a;
        s.tileJ = c;
        s.width = width;
        s.mr = static_cast<int>(std::min<std::int64_t>(4, extent(a)));
        s.nr = c < 0 ? 1 : static_cast<int>(std::min<std::int64_t>(4, extent(c)));
        s.why = "dot-product tile " + std::to_string(s.mr) + "x" + std::to_string(s.nr) + " over " +
                st.vars[static_cast<std::size_t>(a)].name + " x " +
                (c < 0 ? std::string("-") : st.vars[static_cast<std::size_t>(c)].name) +
                ", vectors along " + st.vars[static_cast<std::size_t>(r)].name;
        std::vector<int> order;
        for (int v = 0; v < nOut; ++v)
          if (v != a && v != c) order.push_back(v);
        order.push_back(a);
        if (c >= 0) order.push_back(c);
        s.outerOrder = order;
      }
    }
  }
  if (s.tileJ < 0 && s.dotVar < 0)
    s.why = "generic: output indices in left-hand order, reductions inside";

  // In place (dsl/InPlace.h): each element's reads precede its own store and touch no other
  // element, so its elements may run on several threads too.
  const bool inPlace = readsOutput && dsl::runsInPlace(p, k);
  if (!st.scatter && (!readsOutput || inPlace) && t.threads > 1 && work >= t.minParallelWork) {
    for (int v : s.outerOrder) {
      if (bs.dependent[static_cast<std::size_t>(v)] || !injectiveIn(st, v)) continue;
      std::int64_t e = extent(v);
      if (v == s.tileJ) e /= s.nr;
      if (v == s.tileI) e /= s.mr;
      if (e >= 2) {
        s.parallelVar = v;
        break;
      }
    }
  }
  if (s.parallelVar >= 0)
    s.why += "; parallel over " + st.vars[static_cast<std::size_t>(s.parallelVar)].name;
  if ((s.gemm = planGemm(p, b, k, strides, t))) s.why = s.gemm->why;
  if (!s.gemm) s.oneHot = planOneHot(p, b, k, t);
  return s;
}

} // namespace einjit::codegen
