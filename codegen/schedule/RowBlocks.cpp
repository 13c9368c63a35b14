#include "codegen/schedule/RowBlocks.h"

#include "codegen/schedule/Fusion.h"

#include <algorithm>
#include <functional>
#include <optional>

namespace einjit::codegen {

namespace {

using dsl::CExpr;
using dsl::CKind;
using dsl::Statement;
using dsl::Subscript;

// Every access of the statement: its left-hand side (write) and every read.
void eachAccess(const Statement& st, const std::function<void(const CExpr&, bool)>& f) {
  f(*st.lhs, true);
  dsl::eachRead(st, [&](const CExpr& e) { f(e, false); });
}

// The access's first subscript is exactly index v (coefficient 1, nothing else, plain).
bool rowSubscript(const dsl::Program& p, const dsl::BoundProgram& b, const CExpr& e, int v) {
  if (e.subs.empty()) return false;
  const Subscript& s = e.subs[0];
  return s.mode == dsl::IndexMode::Plain && !s.gather && s.bareVar() == v &&
         b.eval(p, s.constant) == 0;
}

// Why statement k cannot join the run of the members `in` (k among them); empty when it can.
std::string conflict(const dsl::Program& p, const dsl::BoundProgram& b,
                     const std::vector<int>& rowVar, const std::vector<bool>& in, std::size_t first,
                     std::size_t k) {
  std::vector<bool> written(p.tensors.size(), false);
  for (std::size_t j = first; j <= k; ++j)
    if (in[j]) written[static_cast<std::size_t>(p.stmts[j].output)] = true;
  std::string why;
  for (std::size_t j = first; j <= k && why.empty(); ++j)
    if (in[j])
      eachAccess(p.stmts[j], [&](const CExpr& e, bool write) {
        if (!why.empty() || !written[static_cast<std::size_t>(e.tensor)]) return;
        if (!rowSubscript(p, b, e, rowVar[j]))
          why = "statement " + std::to_string(j + 1) + (write ? " writes '" : " reads '") +
                p.tensors[static_cast<std::size_t>(e.tensor)].name +
                "' other than at its own row, and the run writes it";
      });
  return why;
}

// Whether statement `later` may run before statement `earlier` (which comes first in the
// program): `later` writes nothing `earlier` reads or writes and reads nothing it writes.
bool commutes(const dsl::Program& p, std::size_t earlier, std::size_t later) {
  std::vector<char> reads(p.tensors.size(), 0), writes(p.tensors.size(), 0);
  eachAccess(p.stmts[earlier], [&](const CExpr& e, bool write) {
    (write ? writes : reads)[static_cast<std::size_t>(e.tensor)] = 1;
  });
  bool ok = true;
  eachAccess(p.stmts[later], [&](const CExpr& e, bool write) {
    const auto t = static_cast<std::size_t>(e.tensor);
    ok = ok && !writes[t] && !(write && reads[t]);
  });
  return ok;
}

// Statement k is a ':=' that defines every element of its output (its box covers the whole
// tensor, no index twice on the left), which is dense row-major (intermediates and ':='
// outputs are): a block of its rows, or all of it, is one contiguous run of elements.
bool definesDense(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
                  std::size_t k) {
  const Statement& st = p.stmts[k];
  const dsl::BoundStatement& bs = b.stmts[k];
  const auto t = static_cast<std::size_t>(st.output);
  const auto& shape = b.tensors[t].shape;
  if (st.assign != dsl::Assign::Define || st.lhsVars.size() != shape.size()) return false;
  for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
    const auto v = static_cast<std::size_t>(st.lhsVars[d]);
    for (std::size_t e = 0; e < d; ++e)
      if (st.lhsVars[e] == st.lhsVars[d]) return false;
    if (bs.dependent[v] || bs.lo[v] != 0 || bs.hi[v] != shape[d]) return false;
  }
  const auto& str = strides[t];
  std::int64_t want = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (str[d] != want) return false;
    want *= shape[d];
  }
  return true;
}

// Whether tensor t can live in a block-sized scratch of the run whose statements (members and
// column sums) are `in` (RowBlocks.h).
bool scratchable(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
                 const std::vector<bool>& in, int t) {
  const dsl::TensorInfo& info = p.tensors[static_cast<std::size_t>(t)];
  if (info.isArgument || info.saved || info.writtenBy.empty()) return false;
  if (std::find(p.outputs.begin(), p.outputs.end(), t) != p.outputs.end()) return false;
  auto inside = [&](std::size_t k) { return bool(in[k]); };
  for (int w : info.writtenBy)
    if (!inside(static_cast<std::size_t>(w))) return false;
  for (std::size_t k = 0; k < p.stmts.size(); ++k) {
    if (inside(k)) continue;
    bool reads = false;
    eachAccess(p.stmts[k], [&](const CExpr& e, bool write) { reads |= !write && e.tensor == t; });
    if (reads) return false;
  }
  // The first write defines every element of it.
  return definesDense(p, b, strides, static_cast<std::size_t>(info.writtenBy.front()));
}

// Why the deferred statement k cannot be summed inside the run of the members `in` over the rows
// [lo, hi) (RowRun::sums); empty when it can, `rowVar` then its reduction index over the rows.
// `before`: the statements between the run's first and k that are no members (deferred or
// summed): k moves before them, so it must commute with each.
std::string notColumnSum(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
                         const Target& t, const std::vector<bool>& in,
                         const std::vector<std::size_t>& before, std::int64_t lo, std::int64_t hi,
                         std::size_t k, int& rowVar) {
  const Statement& st = p.stmts[k];
  const dsl::BoundStatement& bs = b.stmts[k];
  rowVar = -1;
  if (st.assign != dsl::Assign::Define || st.reduce != dsl::Reduce::Add) return "no ':=' sum";
  const DType dt = b.tensors[static_cast<std::size_t>(st.output)].dtype;
  if (dt != DType::f32 && dt != DType::f64) return "partial sums need f32 or f64";
  if (!independentOutputs(st)) return "a scatter or a repeated write";
  for (std::size_t w = 0; w < st.vars.size(); ++w)
    if (bs.dependent[w]) return "a range that depends on another index";
  if (!definesDense(p, b, strides, k)) return "it does not define all of a dense output";
  for (std::size_t d : before)
    if (d < k && !commutes(p, d, k)) return "it depends on statement " + std::to_string(d + 1);
  std::vector<bool> written(p.tensors.size(), false);
  for (std::size_t j = 0; j < in.size(); ++j)
    if (in[j]) written[static_cast<std::size_t>(p.stmts[j].output)] = true;
  bool touched = false, gathers = false;
  for (std::size_t j = 0; j < in.size(); ++j)
    if (in[j])
      eachAccess(p.stmts[j], [&](const CExpr& e, bool) { touched |= e.tensor == st.output; });
  eachAccess(st, [&](const CExpr& e, bool) {
    for (const Subscript& s : e.subs) gathers = gathers || s.gather;
  });
  if (touched) return "a statement of the run touches its output";
  if (gathers) return "a gathered subscript";
  // Its row: a reduction index over exactly the run's rows that is the first subscript of every
  // read of what the run writes (those rows are final when the block reaches the statement),
  // and of one read at least.
  for (int v = st.numOutputVars(); v < static_cast<int>(st.vars.size()) && rowVar < 0; ++v) {
    if (bs.lo[static_cast<std::size_t>(v)] != lo || bs.hi[static_cast<std::size_t>(v)] != hi)
      continue;
    bool any = false, all = true;
    eachAccess(st, [&](const CExpr& e, bool write) {
      if (write) return;
      const bool row = rowSubscript(p, b, e, v);
      any = any || row;
      all = all && (row || !written[static_cast<std::size_t>(e.tensor)]);
    });
    if (any && all) rowVar = v;
  }
  if (rowVar < 0) return "no reduction index over the rows of the run";
  const StatementSchedule s = scheduleStatement(p, b, k, strides, t);
  if (!s.run || s.splitChunks > 0 || s.gemm || s.oneHot || s.dotVar == rowVar) {
    rowVar = -1;
    return "its schedule reduces over the rows in another way";
  }
  return {};
}

// Tensor u's bytes as bound.
std::int64_t tensorBytes(const dsl::BoundProgram& b, std::size_t u) {
  auto bytes = static_cast<std::int64_t>(dtypeSize(b.tensors[u].dtype));
  for (std::int64_t e : b.tensors[u].shape) bytes *= e;
  return bytes;
}

// The members of `run` whose stores are non-temporal (RowRun::streamed); `in`: the members.
std::vector<std::size_t> streamedMembers(const dsl::Program& p, const dsl::BoundProgram& b,
                                         const Strides& strides, const Target& t, const RowRun& run,
                                         const std::vector<bool>& in) {
  std::vector<std::size_t> out;
  std::vector<char> oneHot(run.last + 1, 0); // touches one element per row
  for (std::size_t k = run.first; k <= run.last; ++k)
    oneHot[k] = in[k] && scheduleStatement(p, b, k, strides, t).oneHot.has_value();
  for (std::size_t k = run.first; k <= run.last; ++k) {
    const Statement& st = p.stmts[k];
    if (!in[k] || oneHot[k] || st.numOutputVars() != static_cast<int>(st.vars.size()))
      continue; // element-wise statements over whole rows only
    const int o = st.output;
    const auto u = static_cast<std::size_t>(o);
    const bool storesStaged = run.stores(k) == o; // the other writes went to the scratch
    if (!storesStaged && std::find(run.scratch.begin(), run.scratch.end(), o) != run.scratch.end())
      continue;
    if (tensorBytes(b, u) < kStreamL2s * t.l2Bytes) continue;
    // Another statement of the run touches the output other than at one element per row: a
    // later one would read it back from memory; after an earlier one the lines are in the cache,
    // where a non-temporal store first writes them back (measured slower).
    bool other = false;
    for (std::size_t j = run.first; j <= run.last && !other && !storesStaged; ++j) {
      if (j == k || (!in[j] && !run.summed(j))) continue; // deferred: runs after the run
      bool touches = false;
      eachAccess(p.stmts[j], [&](const CExpr& e, bool) { touches |= e.tensor == o; });
      other = touches && !oneHot[j];
    }
    if (!other) out.push_back(k);
  }
  return out;
}

// The last member of the run that writes tensor t when t can be staged in scratch (RowRun::staged),
// else no value: t is an output of the program (no argument, not saved) written only by members
// of the run, two of them at least, the first a ':=' over all of it (dense), the last an
// element-wise statement over every element of its rows; no member after the last writer and no
// other statement of the run reads it (they would read the scratch, or the memory before it is
// written).
std::optional<std::size_t> stagedWriter(const dsl::Program& p, const dsl::BoundProgram& b,
                                        const Strides& strides, const Target& t,
                                        const RowRun& run, const std::vector<bool>& in,
                                        int tensor) {
  const dsl::TensorInfo& info = p.tensors[static_cast<std::size_t>(tensor)];
  if (info.isArgument || info.saved || info.writtenBy.size() < 2) return std::nullopt;
  if (std::find(p.outputs.begin(), p.outputs.end(), tensor) == p.outputs.end())
    return std::nullopt;
  for (int w : info.writtenBy)
    if (!in[static_cast<std::size_t>(w)]) return std::nullopt;
  if (!definesDense(p, b, strides, static_cast<std::size_t>(info.writtenBy.front())))
    return std::nullopt;
  const auto last = static_cast<std::size_t>(info.writtenBy.back());
  const Statement& st = p.stmts[last];
  const dsl::BoundStatement& bs = b.stmts[last];
  const auto& shape = b.tensors[static_cast<std::size_t>(tensor)].shape;
  if (st.numOutputVars() != static_cast<int>(st.vars.size()) ||
      st.lhsVars.size() != shape.size())
    return std::nullopt;
  // A one-hot sum writes one element per row (RowRun::streamed has the same exception).
  if (scheduleStatement(p, b, last, strides, t).oneHot) return std::nullopt;
  for (std::size_t d = 1; d < shape.size(); ++d) {
    const auto v = static_cast<std::size_t>(st.lhsVars[d]);
    if (bs.lo[v] != 0 || bs.hi[v] != shape[d] || st.lhs->subs[d].bareVar() != st.lhsVars[d] ||
        st.lhs->subs[d].mode != dsl::IndexMode::Plain || b.eval(p, st.lhs->subs[d].constant) != 0)
      return std::nullopt;
  }
  for (std::size_t k = run.first; k <= run.last; ++k) {
    if (in[k] && k <= last) continue;
    bool touches = false;
    eachAccess(p.stmts[k], [&](const CExpr& e, bool) { touches |= e.tensor == tensor; });
    if (touches) return std::nullopt;
  }
  return last;
}

// Statement k (a member with row index `row`) in a row loop: an element-wise statement writing
// [row, col] or a reduction over col into [row] by its dot-product tile (RowRun::loops). Returns
// its column index, or -1.
int loopColumn(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
               const Target& t, std::size_t k, int row) {
  const Statement& st = p.stmts[k];
  if (st.vars.size() != 2 || row < 0 || row > 1) return -1;
  const int col = 1 - row;
  const StatementSchedule s = scheduleStatement(p, b, k, strides, t);
  if (!s.run || s.oneHot || s.gemm || s.splitChunks > 0 || s.tileJ >= 0) return -1;
  if (st.numOutputVars() == 2) {
    if (s.dotVar >= 0 || st.lhs->subs.size() != 2) return -1;
    const Subscript& c = st.lhs->subs[1];
    const bool plain = c.mode == dsl::IndexMode::Plain && !c.gather && c.bareVar() == col &&
                       b.eval(p, c.constant) == 0;
    return plain ? col : -1;
  }
  const bool laneReduce = st.reduce == dsl::Reduce::Add || st.reduce == dsl::Reduce::Max ||
                          st.reduce == dsl::Reduce::Min;
  return laneReduce && s.dotVar == col && s.tileI == row && s.mr >= 1 ? col : -1;
}

// Whether the statements first..k (row loop candidates, columns `col`) may share one loop along
// the row: every access to a tensor that an element-wise one of them writes is at that element,
// and what a reduction among them writes is touched by its own write only.
bool loopLegal(const dsl::Program& p, const dsl::BoundProgram& b, const std::vector<int>& rowVar,
               const std::vector<int>& col, std::size_t first, std::size_t k) {
  std::vector<int> writer(p.tensors.size(), 0); // 1 element-wise, 2 a reduction
  for (std::size_t j = first; j <= k; ++j) {
    int& w = writer[static_cast<std::size_t>(p.stmts[j].output)];
    const int kind = p.stmts[j].numOutputVars() == 2 ? 1 : 2;
    if (w != 0 && (w == 2 || kind == 2)) return false; // a reduction's output written twice
    w = kind;
  }
  auto bare = [&](const Subscript& s, int v) {
    return s.mode == dsl::IndexMode::Plain && !s.gather && s.bareVar() == v &&
           b.eval(p, s.constant) == 0;
  };
  bool ok = true;
  for (std::size_t j = first; j <= k && ok; ++j)
    eachAccess(p.stmts[j], [&](const CExpr& e, bool write) {
      const int w = writer[static_cast<std::size_t>(e.tensor)];
      if (w == 2) ok = ok && write && p.stmts[j].numOutputVars() == 1;
      if (w == 1)
        ok = ok && e.subs.size() == 2 && bare(e.subs[0], rowVar[j]) && bare(e.subs[1], col[j]);
    });
  return ok;
}

// The expression calls a function that is evaluated as a polynomial of dozens of instructions
// (codegen/VectorMath): not sqrt, abs, min, max, rounding or conversions.
bool callsPolynomial(const CExpr& e) {
  if (e.kind == CKind::Call) switch (e.fn) {
    case dsl::Fn::Exp: case dsl::Fn::Log: case dsl::Fn::Tanh: case dsl::Fn::Sigmoid:
    case dsl::Fn::Sin: case dsl::Fn::Cos: case dsl::Fn::Erf: case dsl::Fn::Atan:
    case dsl::Fn::Atan2: case dsl::Fn::Log2: case dsl::Fn::Log10: case dsl::Fn::Log1p:
    case dsl::Fn::Expm1: case dsl::Fn::Cbrt: return true;
    default: break;
    }
  for (const dsl::CExprPtr& a : e.args)
    if (callsPolynomial(*a)) return true;
  return false;
}

// The inputs of the row loop of statements first..last that are fetched one block ahead
// (RowRun::Loop::ahead): read with the row index as their first subscript, written by no
// statement of the run, larger than L2 (a smaller one stays cached between calls).
std::vector<int> fetchedAhead(const dsl::Program& p, const dsl::BoundProgram& b, const Target& t,
                              const std::vector<int>& rowVar, const RowRun& run,
                              std::size_t first, std::size_t last) {
  std::vector<int> out;
  if (t.gpu) return out;
  std::vector<char> written(p.tensors.size(), 0);
  for (std::size_t k = run.first; k <= run.last; ++k)
    written[static_cast<std::size_t>(p.stmts[k].output)] = 1;
  for (std::size_t j = first; j <= last; ++j)
    eachAccess(p.stmts[j], [&](const CExpr& e, bool write) {
      const auto u = static_cast<std::size_t>(e.tensor);
      if (write || written[u] || !rowSubscript(p, b, e, rowVar[j])) return;
      if (std::find(out.begin(), out.end(), e.tensor) != out.end()) return;
      if (tensorBytes(b, u) > t.l2Bytes) out.push_back(e.tensor);
    });
  return out;
}

// "; x, dy fetched one block ahead" for a loop's RowRun::Loop::ahead, else "".
std::string aheadNote(const dsl::Program& p, const RowRun::Loop& l) {
  std::string names;
  for (int t : l.ahead) names += (names.empty() ? "" : ", ") + p.tensors[static_cast<std::size_t>(t)].name;
  return names.empty() ? "" : "; " + names + " fetched one block ahead";
}

// The row loops of `run` (RowRun::loops): from each member on, the longest stretch of members
// that qualify; kept where it holds two statements or more, one of them a reduction.
void planLoops(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
               const Target& t, const std::vector<int>& rowVar, RowRun& run) {
  std::vector<int> col(p.stmts.size(), -1);
  for (std::size_t k = run.first; k <= run.last; ++k)
    if (run.member(k)) col[k] = loopColumn(p, b, strides, t, k, rowVar[k]);
  auto colRange = [&](std::size_t k) {
    const auto c = static_cast<std::size_t>(col[k]);
    return std::pair{b.stmts[k].lo[c], b.stmts[k].hi[c]};
  };
  std::size_t k = run.first;
  while (k <= run.last) {
    if (col[k] < 0) {
      ++k;
      continue;
    }
    std::size_t last = k;
    while (last + 1 <= run.last && col[last + 1] >= 0 && colRange(last + 1) == colRange(k) &&
           loopLegal(p, b, rowVar, col, k, last + 1))
      ++last;
    bool reduces = false, polynomial = false;
    for (std::size_t j = k; j <= last; ++j) {
      reduces |= p.stmts[j].numOutputVars() == 1;
      polynomial |= callsPolynomial(*p.stmts[j].rhs);
    }
    if (last > k && reduces) {
      RowRun::Loop loop{k, last, polynomial ? 1 : kRowLoopChains, {}};
      // Fetched ahead under a polynomial function's arithmetic, and on Zen 4 in a run with
      // column sums: its large blocks' later passes (the sums, the second row loop) read
      // only L2, which the next block's reads from memory then overlap.
      if (polynomial || (t.halvedVectors && !run.sums.empty()))
        loop.ahead = fetchedAhead(p, b, t, rowVar, run, k, last);
      run.loops.push_back(std::move(loop));
    }
    k = last + 1;
  }
}

// The members of `run` whose store is left out (RowRun::forwarded); `in`: the members. A
// statement's element loop: its row loop's statements, or outside row loops its element-wise
// group (`fusion`, every member of it in the run and outside row loops: lowered as one loop).
std::vector<std::size_t> forwardedMembers(const dsl::Program& p, const RowRun& run,
                                          const std::vector<bool>& in, const FusionPlan& fusion) {
  auto loopOf = [&](std::size_t k) -> const RowRun::Loop* {
    for (const RowRun::Loop& l : run.loops)
      if (k >= l.first && k <= l.last) return &l;
    return nullptr;
  };
  // The last statement of k's element loop, or k when it has none.
  auto loopEnd = [&](std::size_t k) {
    if (const RowRun::Loop* l = loopOf(k)) return l->last;
    const std::size_t f = fusion.first[k], l = fusion.last[k];
    for (std::size_t j = f; j <= l; ++j)
      if (j >= in.size() || !in[j] || loopOf(j)) return k;
    return l;
  };
  std::vector<std::size_t> out;
  for (std::size_t k = run.first; k <= run.last; ++k) {
    const Statement& st = p.stmts[k];
    const int t = st.output;
    if (!in[k] || st.numOutputVars() != static_cast<int>(st.vars.size())) continue;
    if (std::find(run.scratch.begin(), run.scratch.end(), t) == run.scratch.end() ||
        std::find(run.staged.begin(), run.staged.end(), t) != run.staged.end())
      continue;
    const std::size_t end = loopEnd(k);
    bool later = false; // a statement after k's element loop touches t, or one in it writes t
    for (std::size_t j = k + 1; j < p.stmts.size() && !later; ++j)
      eachAccess(p.stmts[j], [&](const CExpr& e, bool write) {
        later = later || (e.tensor == t && (j > end || write));
      });
    if (!later && end > k) out.push_back(k);
  }
  return out;
}

// Zen 4 (Target::halvedVectors): a run without column sums whose widest rows are a quarter of
// a page to a page (kRowPageBytes) and whose cached rows (every tensor touched by rows but the
// outputs stored non-temporally; one of under a cache line per row, such as a softmax's m[i],
// shares its lines with other rows) fill at most half of L1 runs blocks of one row
// (RowRun::blockRows): each row's later passes read what the first one brought into L1, and
// the rows come from memory in address order, one after another, where blocks of 8 rows read
// 4 rows at once in their first pass (bench/RESULTS.md, "softmax and layernorm rows of 1024
// on Zen 4"). `rowOf`: a
// row's bytes of each tensor touched by rows, else 0.
bool singleRowBlocks(const dsl::Program& p, const Target& t, const RowRun& run,
                     const std::vector<std::int64_t>& rowOf) {
  if (!t.halvedVectors || !run.sums.empty()) return false;
  std::vector<char> streamed(p.tensors.size(), 0);
  for (std::size_t k : run.streamed) streamed[static_cast<std::size_t>(p.stmts[k].output)] = 1;
  for (int id : run.scratch) streamed[static_cast<std::size_t>(id)] = 0; // a staged one's scratch
  std::int64_t cached = 0, widest = 0;
  for (std::size_t id = 0; id < rowOf.size(); ++id) {
    widest = std::max(widest, rowOf[id]);
    if (!streamed[id] && rowOf[id] >= 64) cached += rowOf[id];
  }
  return widest >= kRowPageBytes / 4 && widest <= kRowPageBytes && cached <= t.l1Bytes / 2;
}

} // namespace

std::string notRowStatement(const dsl::Program& p, const dsl::BoundProgram& b,
                            const Strides& strides, const Target& t, std::size_t k, int& rowVar) {
  const Statement& st = p.stmts[k];
  const dsl::BoundStatement& bs = b.stmts[k];
  rowVar = -1;
  if (st.vars.empty() || st.lhs->subs.empty()) return "no row index";
  const std::optional<int> v = st.lhs->subs[0].bareVar();
  if (st.lhs->subs[0].mode != dsl::IndexMode::Plain || st.lhs->subs[0].gather || !v ||
      b.eval(p, st.lhs->subs[0].constant) != 0 || *v >= st.numOutputVars())
    return "its first left-hand subscript is not a bare index";
  const auto u = static_cast<std::size_t>(*v);
  for (std::size_t d = 1; d < st.lhs->subs.size(); ++d)
    if (st.lhs->subs[d].coef[u] != 0) return "it writes its row index in another dimension";
  if (!independentOutputs(st)) return "a scatter, an in-place update or a repeated write";
  for (std::size_t w = 0; w < st.vars.size(); ++w)
    if (bs.dependent[w]) return "a range that depends on another index";
  if (bs.empty || bs.hi[u] <= bs.lo[u]) return "no rows";
  bool gathers = false;
  eachAccess(st, [&](const CExpr& e, bool) {
    for (const Subscript& s : e.subs) gathers = gathers || s.gather;
  });
  if (gathers) return "a gathered subscript";
  const StatementSchedule s = scheduleStatement(p, b, k, strides, t);
  if (!s.run) return "no element";
  if (s.splitChunks > 0) return "a split reduction";
  if (s.gemm) return "the packed GEMM path";
  // A contraction's tile over two output indices keeps its own loops and threads: its rows
  // are long reductions, re-read per tile, which row blocks would only cut into more edges.
  if (s.tileJ >= 0) return "a register tile over two output indices";
  rowVar = *v;
  return {};
}

RowPlan planRows(const dsl::Program& p, const dsl::BoundProgram& b, const Strides& strides,
                 const Target& t) {
  const std::size_t n = p.stmts.size();
  RowPlan plan;
  plan.runOf.assign(n, -1);
  plan.deferredBy.assign(n, -1);
  plan.rowVar.assign(n, -1);
  plan.notes.assign(n, {});
  if (t.gpu) return plan;
  const FusionPlan fusion = planFusion(p, b);
  std::vector<bool> member(n, false);
  for (std::size_t k = 0; k < n; ++k)
    member[k] = notRowStatement(p, b, strides, t, k, plan.rowVar[k]).empty();
  auto rows = [&](std::size_t k) {
    const auto v = static_cast<std::size_t>(plan.rowVar[k]);
    return std::pair{b.stmts[k].lo[v], b.stmts[k].hi[v]};
  };
  std::size_t k = 0;
  while (k < n) {
    if (!member[k]) {
      ++k;
      continue;
    }
    // Members from k on; statements that are no row statements in between are deferred
    // (RowRun::deferred) while every later member may run before them.
    std::vector<bool> in(n, false);
    in[k] = true;
    std::vector<std::size_t> deferred;
    std::size_t last = k;
    for (std::size_t next = k + 1; next < n; ++next) {
      if (!member[next]) {
        deferred.push_back(next);
        continue;
      }
      std::string why;
      if (rows(next) != rows(k)) why = "other rows";
      for (std::size_t d : deferred)
        if (why.empty() && !commutes(p, d, next))
          why = "it depends on statement " + std::to_string(d + 1) +
                ", which is no row statement, or changes what that statement touches";
      if (why.empty()) {
        in[next] = true;
        why = conflict(p, b, plan.rowVar, in, k, next);
        in[next] = why.empty();
      }
      if (!why.empty()) {
        plan.notes[next] =
            "not in the row blocks of " +
            (last == k ? "statement " + std::to_string(k + 1)
                       : "statements " + std::to_string(k + 1) + "-" + std::to_string(last + 1)) +
            ": " + why;
        break;
      }
      last = next;
    }
    // Statements after the last member stay where they are.
    deferred.erase(
        std::remove_if(deferred.begin(), deferred.end(), [&](std::size_t d) { return d > last; }),
        deferred.end());
    if (last == k) {
      ++k;
      continue;
    }
    RowRun run;
    run.first = k;
    run.last = last;
    std::tie(run.lo, run.hi) = rows(k);
    // Deferred statements that sum over the rows are summed inside the run instead.
    std::vector<std::size_t> notMembers = deferred;
    for (std::size_t d : notMembers) {
      int v = -1;
      if (notColumnSum(p, b, strides, t, in, notMembers, run.lo, run.hi, d, v).empty()) {
        run.sums.push_back(d);
        plan.rowVar[d] = v;
      } else {
        run.deferred.push_back(d);
      }
    }
    std::vector<bool> inRun = in; // the members and the column sums
    for (std::size_t d : run.sums) inRun[d] = true;
    // The bytes of one row of every tensor touched only by rows.
    std::vector<int> byRows(p.tensors.size(), 0); // 0 untouched, 1 by rows, -1 otherwise
    for (std::size_t j = k; j <= last; ++j)
      if (inRun[j])
        eachAccess(p.stmts[j], [&](const CExpr& e, bool) {
          int& s = byRows[static_cast<std::size_t>(e.tensor)];
          if (s >= 0) s = rowSubscript(p, b, e, plan.rowVar[j]) ? 1 : -1;
        });
    std::int64_t rowBytes = 0;
    std::vector<std::int64_t> rowOf(p.tensors.size(), 0); // a row's bytes of each
    for (std::size_t id = 0; id < p.tensors.size(); ++id) {
      if (byRows[id] != 1) continue;
      const auto& bt = b.tensors[id];
      auto perRow = static_cast<std::int64_t>(dtypeSize(bt.dtype));
      for (std::size_t d = 1; d < bt.shape.size(); ++d) perRow *= bt.shape[d];
      rowBytes += perRow;
      rowOf[id] = perRow;
      if (t.rowScratch && scratchable(p, b, strides, inRun, static_cast<int>(id))) {
        run.scratch.push_back(static_cast<int>(id));
      } else if (const auto writer = t.rowScratch ? stagedWriter(p, b, strides, t, run, in,
                                                               static_cast<int>(id))
                                                : std::nullopt) {
        run.scratch.push_back(static_cast<int>(id));
        run.staged.push_back(static_cast<int>(id));
        run.stagedBy.push_back(*writer);
      }
    }
    // With column sums, each block adds into its group's partial sums (a row of each): larger
    // blocks, as before the quarter-L2 rule. Blocks of 4 rows only where 8 do not fit: a short
    // run then keeps one function (its rows in the tail block) instead of a block and a tail.
    const bool sums = !run.sums.empty();
    const std::int64_t fit = t.l2Bytes / (sums ? kRowSumL2Share : kRowBlockL2Share) /
                             std::max<std::int64_t>(rowBytes, 1);
    const std::int64_t align = sums || fit >= kRowAlignWide ? kRowAlignWide : kRowAlign;
    // Enough blocks for every group of every thread where the rows allow it; with column sums,
    // as many groups whatever the thread count.
    const std::int64_t groups =
        run.sums.empty() ? kRowGroupsPerThread * std::max(t.threads, 1) : kRowSumGroups;
    const std::int64_t share = (run.hi - run.lo) / groups;
    run.blockRows = std::clamp(std::min(fit, share) / align * align, align, kMaxBlockRows);
    run.groups = std::clamp<std::int64_t>(run.fullBlocks(), 1, groups);
    run.streamed = streamedMembers(p, b, strides, t, run, in);
    if (singleRowBlocks(p, t, run, rowOf)) {
      run.blockRows = 1;
      run.groups = std::clamp<std::int64_t>(run.fullBlocks(), 1, groups);
    }
    planLoops(p, b, strides, t, plan.rowVar, run);
    run.forwarded = forwardedMembers(p, run, in, fusion);
    const int index = static_cast<int>(plan.runs.size());
    std::string scratchNames;
    for (int id : run.scratch)
      scratchNames += (scratchNames.empty() ? "" : ",") + p.tensors[static_cast<std::size_t>(id)].name;
    for (std::size_t d : run.sums) {
      plan.runOf[d] = index;
      plan.notes[d] = "summed in the row blocks of statements " + std::to_string(k + 1) + "-" +
                      std::to_string(last + 1) + " (over the rows of " +
                      p.stmts[d].vars[static_cast<std::size_t>(plan.rowVar[d])].name +
                      ": a partial sum per task group, added in group order)";
    }
    for (std::size_t d : run.deferred) {
      plan.deferredBy[d] = index;
      const std::string after = "run after the row blocks of statements " + std::to_string(k + 1) +
                                "-" + std::to_string(last + 1);
      plan.notes[d] = plan.notes[d].empty() ? after : plan.notes[d] + "; " + after;
    }
    for (std::size_t j = k; j <= last; ++j) {
      if (!in[j]) continue;
      plan.runOf[j] = index;
      std::string note = "row blocks of statements " + std::to_string(k + 1) + "-" +
                         std::to_string(last + 1) + " (" + std::to_string(run.blockRows) +
                         (run.blockRows == 1 ? " row of " : " rows of ") +
                         p.stmts[j].vars[static_cast<std::size_t>(plan.rowVar[j])].name +
                         ", " + std::to_string(run.groups) + (run.groups == 1 ? " task group" : " task groups");
      if (j == k) note += scratchNames.empty() ? ", no scratch" : ", scratch: " + scratchNames;
      note += ")";
      if (const int o = run.stores(j); o >= 0)
        note += "; stores '" + p.tensors[static_cast<std::size_t>(o)].name +
                "' to memory from the scratch (earlier writes stay in it)";
      for (const RowRun::Loop& l : run.loops)
        if (j >= l.first && j <= l.last)
          note += "; one loop along the row with statements " + std::to_string(l.first + 1) +
                  "-" + std::to_string(l.last + 1) + " (" + std::to_string(l.chains) +
                  (l.chains == 1 ? " vector" : " vectors") + " of partial results" +
                  aheadNote(p, l) + ")";
      if (run.streams(j)) note += "; stored non-temporally";
      if (run.forwards(j))
        note += "; no store: its element loop's later statements take the value";
      plan.notes[j] = plan.notes[j].empty() ? note : plan.notes[j] + "; " + note;
    }
    plan.runs.push_back(std::move(run));
    k = last + 1;
  }
  return plan;
}

std::string rowRunNote(const RowPlan& plan, std::size_t k, const std::string& own) {
  return own + (own.empty() ? "" : "; ") + plan.notes[k];
}

} // namespace einjit::codegen
