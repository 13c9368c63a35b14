#include "dsl/InPlace.h"

#include <functional>
#include <set>

namespace einjit::dsl {

bool writesEachElementOnce(const Statement& st) {
  std::vector<std::size_t> outs;
  for (std::size_t v = 0; v < st.vars.size(); ++v)
    if (st.vars[v].isOutput) outs.push_back(v);
  // Fraction-free Gaussian elimination on rows = dimensions, columns = output indices.
  std::vector<std::vector<long double>> m;
  for (const Subscript& sub : st.lhs->subs) {
    std::vector<long double> row;
    for (std::size_t v : outs) row.push_back(static_cast<long double>(sub.coef[v]));
    m.push_back(std::move(row));
  }
  std::size_t rank = 0;
  for (std::size_t col = 0; col < outs.size() && rank < m.size(); ++col) {
    std::size_t piv = rank;
    while (piv < m.size() && m[piv][col] == 0) ++piv;
    if (piv == m.size()) continue;
    std::swap(m[piv], m[rank]);
    for (std::size_t r = rank + 1; r < m.size(); ++r) {
      long double f = m[r][col] / m[rank][col];
      for (std::size_t c = col; c < outs.size(); ++c) m[r][c] -= f * m[rank][c];
    }
    ++rank;
  }
  return rank == outs.size();
}

namespace {

bool sameSubscript(const Subscript& a, const Subscript& b) {
  return a.mode == b.mode && !a.gather && !b.gather && a.coef == b.coef &&
         symPrint(a.constant) == symPrint(b.constant);
}

// Every read of tensor t in the statement (right-hand side, and gathers in any subscript).
void readsOf(const Statement& st, int t, std::vector<const CExpr*>& found) {
  eachRead(st, [&](const CExpr& e) {
    if (e.tensor == t) found.push_back(&e);
  });
}

// The expression with every read of tensor `from` reading `to` instead (size(from, d) is
// the same shape and stays).
ExprPtr rename(const ExprPtr& e, const std::string& from, const std::string& to) {
  if (e->kind == ExprKind::Call && e->name == "size") return e;
  bool changed = (e->kind == ExprKind::Access || e->kind == ExprKind::Ident) && e->name == from;
  std::vector<ExprPtr> args;
  for (const ExprPtr& a : e->args) {
    args.push_back(rename(a, from, to));
    changed = changed || args.back() != a;
  }
  if (!changed) return e;
  auto n = std::make_shared<Expr>(*e);
  if ((e->kind == ExprKind::Access || e->kind == ExprKind::Ident) && e->name == from) n->name = to;
  n->args = std::move(args);
  return n;
}

void namesIn(const Expr& e, std::set<std::string>& names) {
  if (!e.name.empty()) names.insert(e.name);
  for (const ExprPtr& a : e.args) namesIn(*a, names);
}

std::string fresh(const std::string& base, std::set<std::string>& used) {
  std::string n = base;
  for (int i = 1; used.count(n); ++i) n = base + "_" + std::to_string(i);
  used.insert(n);
  return n;
}

// "t_old[i, j] := t[i, j]", its nodes pointing at the statement that needs it.
Stmt snapshotStatement(const Stmt& s, int rank, const std::string& copy,
                       std::set<std::string>& used) {
  Stmt c;
  c.output = copy;
  c.outputRange = s.outputRange;
  c.outputBracketed = rank > 0;
  c.assign = Assign::Define;
  c.assignRange = s.assignRange;
  c.range = s.range;
  static const char* const kNames[] = {"i", "j", "k", "l", "m", "n"};
  std::vector<ExprPtr> idx;
  for (int d = 0; d < rank; ++d) {
    std::string base = d < 6 ? kNames[d] : "i" + std::to_string(d);
    idx.push_back(Expr::makeIdent(fresh(base, used), s.outputRange));
  }
  c.lhs = idx;
  c.rhs = rank > 0 ? Expr::makeAccess(s.output, idx, s.outputRange, s.outputRange)
                   : Expr::makeIdent(s.output, s.outputRange);
  return c;
}

} // namespace

const std::string& shownName(const Program& p, int t) {
  const TensorInfo& info = p.tensors[static_cast<std::size_t>(t)];
  return info.snapshotOf >= 0 ? p.tensors[static_cast<std::size_t>(info.snapshotOf)].name
                              : info.name;
}

bool readsOwnOutput(const Program& p, std::size_t k) {
  const Statement& st = p.stmts[k];
  std::vector<const CExpr*> reads;
  readsOf(st, st.output, reads);
  return !reads.empty();
}

bool runsInPlace(const Program& p, std::size_t k) {
  const Statement& st = p.stmts[k];
  if (st.assign == Assign::Define || st.scatter || !writesEachElementOnce(st)) return false;
  for (const IndexVar& v : st.vars)
    if (!v.isOutput) return false; // a reduction may keep partial sums in the output
  std::vector<const CExpr*> reads;
  readsOf(st, st.output, reads);
  for (const CExpr* r : reads) {
    if (r->subs.size() != st.lhs->subs.size()) return false;
    for (std::size_t d = 0; d < r->subs.size(); ++d)
      if (!sameSubscript(r->subs[d], st.lhs->subs[d])) return false;
  }
  return true;
}

std::optional<SnapshotPlan> planSnapshots(const Program& p) {
  std::vector<std::size_t> need;
  for (std::size_t k = 0; k < p.stmts.size(); ++k)
    if (readsOwnOutput(p, k) && !runsInPlace(p, k)) need.push_back(k);
  if (need.empty()) return std::nullopt;

  std::set<std::string> used;
  for (const Stmt& s : p.ast.stmts) {
    used.insert(s.output);
    for (const ExprPtr& l : s.lhs) namesIn(*l, used);
    namesIn(*s.rhs, used);
    for (const RangeDecl& r : s.where) {
      used.insert(r.index);
      namesIn(*r.lo, used);
      namesIn(*r.hi, used);
    }
  }
  SnapshotPlan plan;
  ProgramAst& ast = plan.ast;
  ast.source = p.ast.source;
  std::size_t next = 0;
  for (std::size_t k = 0; k < p.ast.stmts.size(); ++k) {
    Stmt s = p.ast.stmts[k];
    if (next < need.size() && need[next] == k) {
      ++next;
      const TensorInfo& t = p.tensors[static_cast<std::size_t>(p.stmts[k].output)];
      const std::string copy = fresh(s.output + "_old", used);
      ast.stmts.push_back(snapshotStatement(s, t.rank, copy, used));
      plan.copies.emplace_back(copy, s.output);
      s.rhs = rename(s.rhs, s.output, copy);
      for (ExprPtr& l : s.lhs) l = rename(l, s.output, copy);
    }
    ast.stmts.push_back(std::move(s));
  }
  return plan;
}

void markSnapshots(Program& q, const SnapshotPlan& plan) {
  for (const auto& [copy, of] : plan.copies)
    q.tensors[static_cast<std::size_t>(q.findTensor(copy))].snapshotOf = q.findTensor(of);
}

} // namespace einjit::dsl
