// What is not solved into gather form: zero fills of gradients that phases split or no
// contribution reaches, the masked gather (sites the solver cannot handle) and the scatter (a
// gather's gradient), G8.
#include "grad/GradientBuilder.h"

#include "dsl/Printer.h"
#include "grad/UnusedIndices.h"

namespace einjit::grad {

using namespace einjit::dsl;
using namespace einjit::grad::syntax;

void GradientBuilder::zeroFill(int x) {
  const TensorInfo& t = p_.tensors[static_cast<std::size_t>(x)];
  Stmt out;
  out.output = gradOf(x);
  out.outputBracketed = t.rank > 0;
  std::vector<std::string> names;
  for (int r = 0; r < t.rank; ++r) {
    std::string n = "u" + std::to_string(r);
    out.lhs.push_back(ident(n));
    out.where.push_back({n, {}, num(0), symExpr(extentOf(x, r)), {}});
  }
  out.assign = Assign::Define;
  out.rhs = num(0);
  defined_.insert(x);
  stmts_.push_back(std::move(out));
}

// The contribution in gather form without solving anything: dX[u] sums the summand over the
// whole forward domain, masked to the iterations whose subscripts land on u. Each element is
// written once (safe in parallel) but the work is |dX| times the forward's, so it is listed
// in Gradient::masked; it is the fallback for sites the solver cannot handle.
void GradientBuilder::maskedGather(const Statement& st, const CExpr& site, const CExprPtr& partial,
                                   const std::string& why) {
  int x = site.tensor;
  auto [emit, varAff] = forwardFrame(st);
  Stmt out;
  out.output = gradOf(x);
  out.outputBracketed = !site.subs.empty();
  ExprPtr cond;
  std::set<std::string> taken;
  for (const IndexVar& v : st.vars) taken.insert(v.name);
  for (std::size_t r = 0; r < site.subs.size(); ++r) {
    std::string u;
    for (int i = 0; u.empty(); ++i) {
      std::string n = i == 0 ? "u" : "u" + std::to_string(i);
      if (!taken.count(n) && !used_.count(n)) u = n;
    }
    taken.insert(u);
    const Subscript& s = site.subs[r];
    ExprPtr e = emit.aff(composeSubscript(s, varAff));
    ExprPtr ext = symExpr(extentOf(x, static_cast<int>(r)));
    if (s.mode == IndexMode::Clamp)
      e = fn("max", {num(0), fn("min", {e, Expr::makeBinary(BinOp::Sub, ext, num(1))})});
    if (s.mode == IndexMode::Wrap) { // ((e % E) + E) % E: % is fmod
      e = Expr::makeBinary(BinOp::Mod, add(Expr::makeBinary(BinOp::Mod, e, ext), ext), ext);
    }
    ExprPtr one = Expr::makeBinary(BinOp::Eq, e, ident(u));
    cond = cond ? Expr::makeBinary(BinOp::And, cond, one) : one;
    out.lhs.push_back(ident(u));
    out.where.push_back({u, {}, num(0), ext, {}});
  }
  out.assign = defined_.count(x) ? Assign::Accumulate : Assign::Define;
  ExprPtr dy = accessOfOutput(st, dyName_, varAff, emit);
  out.rhs = summand(dy, partial, st, varAff, emit);
  if (cond) out.rhs = Expr::makeTernary(cond, out.rhs, num(0));
  forwardRanges(st, out);
  foldUnusedIndices(out);
  g_.masked.push_back(printStmt(out) + "   # " + why);
  defined_.insert(x);
  stmts_.push_back(std::move(out));
}

// dX[phi(v)] += dY[o(v)] * partial(v) over the forward domain.
void GradientBuilder::scatter(const Statement& st, const CExpr& site, const CExprPtr& partial,
                              const std::string& why) {
  int x = site.tensor;
  // The scatter's indices are the forward ones; an index that lands on its left-hand side
  // may have a dependent range only over other such indices.
  std::vector<bool> onLeft(st.vars.size(), false);
  for (const Subscript& s : site.subs)
    for (std::size_t v = 0; v < s.coef.size(); ++v) onLeft[v] = onLeft[v] || s.coef[v] != 0;
  for (std::size_t v = 0; v < st.vars.size(); ++v) {
    if (!onLeft[v] || !st.vars[v].dependent) continue;
    std::vector<bool> reads(st.vars.size(), false);
    st.vars[v].loBound.collectVars(reads);
    st.vars[v].hiBound.collectVars(reads);
    for (std::size_t u = 0; u < reads.size(); ++u)
      if (reads[u] && !onLeft[u])
        fail(src_, st.vars[v].whereRange,
             "cannot differentiate this read: its gradient needs a scatter (" + why +
                 "), which cannot express the range of '" + st.vars[v].name + "'");
  }
  if (!defined_.count(x)) zeroFill(x);
  auto [emit, varAff] = forwardFrame(st);
  Stmt out;
  out.output = gradOf(x);
  out.outputBracketed = !site.subs.empty();
  for (const Subscript& s : site.subs) out.lhs.push_back(subscriptExpr(s, st, varAff, emit));
  out.assign = Assign::Accumulate;
  ExprPtr dy = accessOfOutput(st, dyName_, varAff, emit);
  out.rhs = summand(dy, partial, st, varAff, emit);
  forwardRanges(st, out);
  foldUnusedIndices(out);
  g_.scatters.push_back(printStmt(out) + "   # " + why);
  stmts_.push_back(std::move(out));
}

} // namespace einjit::grad
