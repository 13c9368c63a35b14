// Tensors written by several statements (a ':=' then '+=' / '=', an argument updated in place):
// each write makes a new version, and the reverse sweep keeps one gradient per version
// (docs/GRADIENTS.md, "Versions"). Here: the gradient program's own copy of a passed-in output
// gradient before anything is added to it, whether an '=' overwrites every element of its
// tensor, and the copies of earlier versions that partial derivatives read.
#include "grad/GradientBuilder.h"

#include "dsl/Printer.h"

namespace einjit::grad {

using namespace einjit::dsl;
using namespace einjit::grad::syntax;

namespace {

// X[u0, ...] := from[u0, ...] over X's extents (name X), or the scalar form.
Stmt copyStatement(const std::string& to, const std::string& from, int rank,
                   const std::function<Sym(int)>& extent) {
  Stmt out;
  out.output = to;
  out.outputBracketed = rank > 0;
  std::vector<ExprPtr> idx;
  for (int r = 0; r < rank; ++r) {
    std::string n = "u" + std::to_string(r);
    out.lhs.push_back(ident(n));
    idx.push_back(ident(n));
    out.where.push_back({n, {}, num(0), symExpr(extent(r)), {}});
  }
  out.assign = Assign::Define;
  out.rhs = rank > 0 ? Expr::makeAccess(from, idx) : ident(from);
  return out;
}

} // namespace

// The output gradients are inputs of the gradient program; an earlier version of the same
// tensor (read before a later '+=') needs that gradient plus what its reads contribute. The
// sum goes into a copy: writing the caller's tensor would change the gradient it passed in.
void GradientBuilder::ownGradient(int x) {
  if (!passedIn_.count(x)) return;
  const std::string from = gradName_[static_cast<std::size_t>(x)];
  const std::string to = fresh(from);
  gradName_[static_cast<std::size_t>(x)] = to;
  stmts_.push_back(copyStatement(to, from, p_.tensors[static_cast<std::size_t>(x)].rank,
                                 [&](int r) { return extentOf(x, r); }));
  passedIn_.erase(x);
  defined_.insert(x);
}

// The '=' statement writes every element of its tensor: bare, distinct left-hand indices, each
// over the whole extent of its dimension. Then no element keeps its old value, and the old
// version's gradient is only what its reads contribute.
bool GradientBuilder::coversWhole(const Statement& st) const {
  const TensorInfo& t = p_.tensors[static_cast<std::size_t>(st.output)];
  if (st.scatter || st.lhs->subs.size() != static_cast<std::size_t>(t.rank)) return false;
  if (t.rank == 0) return true;
  if (st.lhsVars.size() != st.lhs->subs.size()) return false;
  std::set<int> seen;
  for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
    const int v = st.lhsVars[d];
    const IndexVar& iv = st.vars[static_cast<std::size_t>(v)];
    if (!seen.insert(v).second || iv.dependent) return false;
    const Sym extent = t.definedBy >= 0 ? t.extents[d] : symSize(t.name, static_cast<int>(d));
    if (!sameExtent(iv.lo, symConst(0)) || !sameExtent(iv.hi, extent)) return false;
  }
  return true;
}

// The name under which the statement being differentiated reads `tensor`'s values: the tensor
// itself when the read sees its final version (the one the gradient program's recomputed
// forward leaves), else a copy taken right after the write that made the version read. A
// ':=' statement's own output (read by its (max)/(min) helpers) is the version it makes; every
// other read sees the version before the statement (in-place reads see the old value).
// Arguments keep their name: the gradient program has no value of a tensor the program
// changes in place, and assemble() reports that.
std::string GradientBuilder::readName(int tensor) {
  if (cur_ >= p_.stmts.size() || static_cast<std::size_t>(tensor) >= p_.tensors.size())
    return tensorName(tensor);
  const TensorInfo& t = p_.tensors[static_cast<std::size_t>(tensor)];
  const Statement& st = p_.stmts[cur_];
  const bool own = st.output == tensor && st.assign == Assign::Define;
  int last = -1; // the write that made the version read
  for (int j : t.writtenBy)
    if (static_cast<std::size_t>(j) < cur_ || (own && static_cast<std::size_t>(j) == cur_))
      last = j;
  if (t.isArgument || last < 0 || last == t.writtenBy.back()) return t.name;
  for (const VersionCopy& c : copies_)
    if (c.tensor == tensor && c.after == last) return c.name;
  std::size_t n = 0;
  while (t.writtenBy[n] != last) ++n;
  copies_.push_back({tensor, last, fresh(t.name + "_v" + std::to_string(n + 1))});
  return copies_.back().name;
}

namespace {

ExprPtr renamed(const ExprPtr& e, const std::string& from, const std::string& to) {
  if (!e) return e;
  bool same = !((e->kind == ExprKind::Access || e->kind == ExprKind::Ident) && e->name == from);
  std::vector<ExprPtr> args;
  for (const ExprPtr& a : e->args) {
    args.push_back(renamed(a, from, to));
    same = same && args.back() == a;
  }
  if (same) return e;
  auto c = std::make_shared<Expr>(*e);
  if ((c->kind == ExprKind::Access || c->kind == ExprKind::Ident) && c->name == from) c->name = to;
  c->args = std::move(args);
  return c;
}

} // namespace

// A copy taken after the last statement writing its tensor that the gradient program keeps
// holds what the tensor itself holds there: its reads read the tensor, and the copy goes.
void GradientBuilder::dropNeedlessCopies(const std::vector<bool>& keep) {
  for (VersionCopy& c : copies_) {
    bool later = false;
    for (int j : p_.tensors[static_cast<std::size_t>(c.tensor)].writtenBy)
      later = later || (j > c.after && keep[static_cast<std::size_t>(j)]);
    if (later) continue;
    const std::string& t = tensorName(c.tensor);
    for (Stmt& s : stmts_) {
      s.rhs = renamed(s.rhs, c.name, t);
      for (ExprPtr& l : s.lhs) l = renamed(l, c.name, t);
      for (RangeDecl& r : s.where) {
        r.lo = renamed(r.lo, c.name, t);
        r.hi = renamed(r.hi, c.name, t);
      }
    }
    c.after = -1; // not emitted
  }
}

Stmt GradientBuilder::versionCopy(const VersionCopy& c) {
  return copyStatement(c.name, tensorName(c.tensor),
                       p_.tensors[static_cast<std::size_t>(c.tensor)].rank,
                       [&](int r) { return extentOf(c.tensor, r); });
}

} // namespace einjit::grad
