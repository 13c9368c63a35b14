#include "grad/ShiftInvariance.h"

#include <functional>

namespace einjit::grad {

using namespace einjit::dsl;

namespace {

// A plain subscript that is exactly index variable v's value.
bool bare(const Subscript& s, int v) {
  std::int64_t k = 1;
  return s.mode == IndexMode::Plain && !s.gather && s.bareVar() == v &&
         symIsConst(s.constant, &k) && k == 0;
}

// A ':=' intermediate: assigned by one statement only, neither an argument nor an output (its
// value reaches the outputs only through the statements that read it), not a snapshot.
bool intermediate(const Program& p, int t) {
  const TensorInfo& info = p.tensors[static_cast<std::size_t>(t)];
  if (info.isArgument || info.snapshotOf >= 0 || info.writtenBy.size() != 1 || info.definedBy < 0)
    return false;
  for (int o : p.outputs)
    if (o == t) return false;
  return true;
}

// Every read of any tensor in e (gathers included), with its parent node (null at the root).
void eachRead(const CExprPtr& e, const CExpr* parent,
              const std::function<void(const CExpr&, const CExpr*)>& f) {
  if (e->kind == CKind::Read) f(*e, parent);
  for (const Subscript& s : e->subs)
    if (s.gather) eachRead(s.gather, e.get(), f);
  for (const CExprPtr& a : e->args) eachRead(a, e.get(), f);
}

void eachReadOf(const Statement& st, const std::function<void(const CExpr&, const CExpr*)>& f) {
  for (const Subscript& s : st.lhs->subs)
    if (s.gather) eachRead(s.gather, st.lhs.get(), f);
  eachRead(st.rhs, nullptr, f);
}

// Whether m (an intermediate) is shift-invariant in p (ShiftInvariance.h).
bool invariant(const Program& p, int m) {
  if (!intermediate(p, m)) return false;
  // The one statement that reads m: e[...] := exp(A - m[R]), element-wise, m's subscripts bare
  // left-hand indices of it, A free of m.
  int se = -1;
  for (std::size_t k = 0; k < p.stmts.size(); ++k) {
    bool reads = false;
    eachReadOf(p.stmts[k], [&](const CExpr& r, const CExpr*) { reads |= r.tensor == m; });
    if (!reads) continue;
    if (se >= 0) return false;
    se = static_cast<int>(k);
  }
  if (se < 0) return false;
  const Statement& e = p.stmts[static_cast<std::size_t>(se)];
  if (e.assign != Assign::Define || e.numOutputVars() != static_cast<int>(e.vars.size()) ||
      !intermediate(p, e.output) || e.output == m)
    return false;
  const CExpr& call = *e.rhs;
  if (call.kind != CKind::Call || call.fn != Fn::Exp || call.args.size() != 1) return false;
  const CExpr& diff = *call.args[0];
  if (diff.kind != CKind::Binary || diff.binop != BinOp::Sub) return false;
  const CExpr& mRead = *diff.args[1];
  if (mRead.kind != CKind::Read || mRead.tensor != m) return false;
  bool inA = false;
  eachRead(diff.args[0], nullptr, [&](const CExpr& r, const CExpr*) { inA |= r.tensor == m; });
  if (inA) return false;
  // rowDim[q]: the dimension of e whose left-hand index is m's q-th subscript.
  std::vector<std::size_t> rowDim;
  for (const Subscript& s : mRead.subs) {
    std::size_t d = 0;
    while (d < e.lhs->subs.size() && !(s.bareVar() && bare(e.lhs->subs[d], *s.bareVar()))) ++d;
    if (d == e.lhs->subs.size() || !bare(s, *s.bareVar())) return false;
    rowDim.push_back(d);
  }
  for (std::size_t d = 0; d < e.lhs->subs.size(); ++d) {
    const std::optional<int> v = e.lhs->subs[d].bareVar();
    if (!v || !bare(e.lhs->subs[d], *v)) return false;
    for (std::size_t d2 = 0; d2 < d; ++d2)
      if (e.lhs->subs[d2].bareVar() == v) return false;
  }
  // The sums z[R] := e[...] over e's rows: the whole right-hand side one read of e whose row
  // dimensions are z's left-hand indices in m's order.
  std::vector<bool> isSum(p.tensors.size(), false);
  for (const Statement& st : p.stmts) {
    const CExpr& r = *st.rhs;
    if (r.kind != CKind::Read || r.tensor != e.output) continue;
    if (st.assign != Assign::Define || st.reduce != Reduce::Add || !intermediate(p, st.output) ||
        st.lhs->subs.size() != rowDim.size() || r.subs.size() != e.lhs->subs.size())
      return false;
    for (std::size_t q = 0; q < rowDim.size(); ++q) {
      const std::optional<int> v = st.lhs->subs[q].bareVar();
      if (!v || !bare(st.lhs->subs[q], *v) || !bare(r.subs[rowDim[q]], *v)) return false;
    }
    isSum[static_cast<std::size_t>(st.output)] = true;
  }
  // Every other read of e, and every read of a sum, is a ratio e[s] / z[t] of the same row:
  // s at e's row dimensions equal to t, index by index.
  for (std::size_t k = 0; k < p.stmts.size(); ++k) {
    const Statement& st = p.stmts[k];
    if (static_cast<int>(k) == se) continue;
    if (st.rhs->kind == CKind::Read && st.rhs->tensor == e.output && isSum[static_cast<std::size_t>(st.output)])
      continue; // a sum, checked above
    bool ok = true;
    eachReadOf(st, [&](const CExpr& r, const CExpr* parent) {
      const bool eRead = r.tensor == e.output, zRead = isSum[static_cast<std::size_t>(r.tensor)];
      if (!ok || (!eRead && !zRead)) return;
      if (!parent || parent->kind != CKind::Binary || parent->binop != BinOp::Div) {
        ok = false;
        return;
      }
      const CExpr& num = *parent->args[0];
      const CExpr& den = *parent->args[1];
      if (num.kind != CKind::Read || num.tensor != e.output || den.kind != CKind::Read ||
          !isSum[static_cast<std::size_t>(den.tensor)] || den.subs.size() != rowDim.size() ||
          num.subs.size() != e.lhs->subs.size()) {
        ok = false;
        return;
      }
      for (std::size_t q = 0; q < rowDim.size(); ++q) {
        const std::optional<int> v = den.subs[q].bareVar();
        ok = ok && v && bare(den.subs[q], *v) && bare(num.subs[rowDim[q]], *v);
      }
    });
    if (!ok) return false;
  }
  return true;
}

} // namespace

std::vector<bool> shiftInvariant(const Program& p) {
  std::vector<bool> out(p.tensors.size(), false);
  for (std::size_t t = 0; t < p.tensors.size(); ++t) out[t] = invariant(p, static_cast<int>(t));
  return out;
}

} // namespace einjit::grad
