// One solved phase of a site as an einjit statement: dX's indices named, the summand
// dY[o(v)] * partial(v) with v replaced by its solution, element masks, the where ranges of the
// phase and of the free indices; and checked expressions turned back into syntax.
#include "grad/GradientBuilder.h"

#include "grad/Derivative.h"

#include <cmath>

namespace einjit::grad {

using namespace einjit::dsl;
using namespace einjit::grad::syntax;

void GradientBuilder::emitSolution(const Statement& st, const CExpr& site, const CExprPtr& partial,
                                   const SiteSolution& sol) {
  int x = site.tensor;
  // Names: dX's index r reuses the forward index when the subscript is that index alone.
  std::vector<std::string> names(sol.slots, "");
  std::set<std::string> taken;
  for (std::size_t r = 0; r < site.subs.size(); ++r)
    if (auto v = site.subs[r].bareVar(); v && sol.rowPivot[r] == *v) {
      names[r] = st.vars[static_cast<std::size_t>(*v)].name;
      taken.insert(names[r]);
    }
  for (std::size_t v = 0; v < st.vars.size(); ++v)
    if (!sol.eliminated[v]) taken.insert(st.vars[v].name);
  for (std::size_t r = 0; r < site.subs.size(); ++r) {
    if (!names[r].empty()) continue;
    for (int i = 0; names[r].empty(); ++i) {
      std::string n = i < 3 ? std::string(1, "uvp"[i]) : "u" + std::to_string(i);
      if (!taken.count(n) && !used_.count(n)) names[r] = n;
    }
    taken.insert(names[r]);
  }
  for (std::size_t v = 0; v < st.vars.size(); ++v) {
    names[site.subs.size() + v] = st.vars[v].name;
    if (!sol.renamed[v] || sol.eliminated[v]) continue;
    for (int i = 0;; ++i) { // a new index from a Euclid step
      std::string m = i == 0 ? "m" : "m" + std::to_string(i);
      if (taken.count(m) || used_.count(m)) continue;
      names[site.subs.size() + v] = m;
      taken.insert(m);
      break;
    }
  }

  Emit emit{names, resolver()};
  emit.padReads = !sol.conditions.empty();
  // The summand: dY[o(v)] * partial(v), with v = sigma(u, z).
  std::vector<Aff> varAff = sol.varAff;
  ExprPtr dy = accessOfOutput(st, dyName_, varAff, emit);
  ExprPtr rhs = summand(dy, partial, st, varAff, emit);
  // Element conditions (>= 0) and unparametrised sub-lattice equalities (== 0) mask the sum.
  ExprPtr cond;
  auto conjoin = [&](const std::vector<Aff>& forms, BinOp op) {
    for (const Aff& c : forms) {
      ExprPtr one = Expr::makeBinary(op, emit.aff(c), num(0));
      cond = cond ? Expr::makeBinary(BinOp::And, cond, one) : one;
    }
  };
  conjoin(sol.conditions, BinOp::Ge);
  conjoin(sol.equalities, BinOp::Eq);
  if (cond) rhs = Expr::makeTernary(cond, rhs, num(0));
  Stmt out;
  out.output = gradOf(x);
  out.outputBracketed = !site.subs.empty();
  for (std::size_t r = 0; r < site.subs.size(); ++r) {
    std::int64_t g = sol.phaseStride[r], rho = sol.phaseOffset[r];
    ExprPtr e = sol.fixed[r] ? emit.aff(sol.lhsAff[r]) : ident(names[r]);
    if (g != 1) e = plusConst(mul(num(g), e), rho);
    if (sol.edge[r] == -1) e = num(0); // clamp edges: one element each
    if (sol.edge[r] == 1) e = symExpr(symAddConst(extentOf(x, static_cast<int>(r)), -1));
    out.lhs.push_back(e);
  }
  out.assign = defined_.count(x) ? Assign::Accumulate : Assign::Define;
  out.rhs = rhs;
  for (std::size_t r = 0; r < site.subs.size(); ++r) {
    if (sol.edge[r] == -1 || sol.edge[r] == 1 || sol.fixed[r]) continue;
    // u = g*q + rho over [L, U]: q in cdiv(L - rho, g) : fdiv(U - rho, g) + 1, where
    // [L, U] is [0, E-1], or [1, E-2] inside a clamp.
    std::int64_t g = sol.phaseStride[r], rho = sol.phaseOffset[r];
    std::int64_t L = sol.edge[r] == 2 ? 1 : 0, top = sol.edge[r] == 2 ? -2 : -1;
    Sym hi =
        symAddConst(symFloorDiv(symAddConst(extentOf(x, static_cast<int>(r)), top - rho), g), 1);
    out.where.push_back({names[r], {}, num(ceilDiv(L - rho, g)), symExpr(hi), {}});
  }
  for (const FreeBound& b : sol.bounds)
    out.where.push_back({names[site.subs.size() + static_cast<std::size_t>(b.var)],
                         {},
                         emit.bound(b.lo, false),
                         emit.bound(b.hi, true),
                         {}});
  defined_.insert(x);
  stmts_.push_back(std::move(out));
}

ExprPtr GradientBuilder::summand(ExprPtr dy, const CExprPtr& partial, const Statement& st,
                                 const std::vector<Aff>& varAff, Emit& emit) {
  if (isConstant(*partial, 1)) return dy;
  if (isConstant(*partial, -1)) return Expr::makeUnary(UnOp::Neg, dy);
  // A branch whose derivative is 0 (the elements a (max) did not select, a branch the forward
  // did not take) contributes exactly 0, also where dY is inf or NaN (0 * inf would be NaN):
  // dY moves into the other branch, `c ? dY * a : 0`. It also leaves the sum's one-hot form
  // visible to the lowering (a '+=' of `j == g ? s : 0` touches one element per g).
  if (partial->kind == CKind::Ternary) {
    const bool zeroThen = isConstant(*partial->args[1], 0),
               zeroElse = isConstant(*partial->args[2], 0);
    if (zeroThen != zeroElse) {
      ExprPtr taken = summand(dy, zeroElse ? partial->args[1] : partial->args[2], st, varAff, emit);
      ExprPtr c = toExpr(partial->args[0], st, varAff, emit);
      return zeroElse ? Expr::makeTernary(c, taken, num(0)) : Expr::makeTernary(c, num(0), taken);
    }
  }
  return mul(dy, toExpr(partial, st, varAff, emit));
}

// dY[o(v)]: the output's left-hand indices are bare variables (':=').
// dY read where the statement wrote: its left-hand subscripts with v = sigma(u, z) (a padded
// left-hand side, which drops writes, reads zeros there).
ExprPtr GradientBuilder::accessOfOutput(const Statement& st, const std::string& name,
                                        const std::vector<Aff>& varAff, Emit& emit) {
  if (st.lhs->subs.empty()) return ident(name);
  std::vector<ExprPtr> idx;
  for (const Subscript& s : st.lhs->subs) idx.push_back(subscriptExpr(s, st, varAff, emit));
  return Expr::makeAccess(name, idx);
}

// Syntax over the forward statement's own indices (helper statements, scatters).
std::pair<Emit, std::vector<Aff>> GradientBuilder::forwardFrame(const Statement& st) const {
  std::vector<std::string> names;
  for (const IndexVar& v : st.vars) names.push_back(v.name);
  std::vector<Aff> varAff;
  for (std::size_t v = 0; v < st.vars.size(); ++v) varAff.push_back(Aff::unit(st.vars.size(), v));
  return {Emit{names, resolver()}, varAff};
}

// Every forward index with its range, as where clauses of `out`.
void GradientBuilder::forwardRanges(const Statement& st, Stmt& out) {
  for (std::size_t v = 0; v < st.vars.size(); ++v) {
    auto [lo, hi] = rangeOf(st, v);
    out.where.push_back({st.vars[v].name, {}, lo, hi, {}});
  }
}

// The where range of index v of a forward statement, as written or inferred.
std::pair<ExprPtr, ExprPtr> GradientBuilder::rangeOf(const Statement& st, std::size_t v) {
  const IndexVar& iv = st.vars[v];
  if (iv.dependent)
    for (const RangeDecl& r : st.ast.where)
      if (r.index == iv.name) return {r.lo, r.hi};
  return {symExpr(resolve(iv.lo)), symExpr(resolve(iv.hi))};
}

// A checked expression as syntax, with the forward indices replaced by their solutions.
ExprPtr GradientBuilder::toExpr(const CExprPtr& e, const Statement& st,
                                const std::vector<Aff>& varAff, Emit& emit) {
  switch (e->kind) {
  case CKind::Const: {
    double v = e->value;
    // The range test first: converting a double outside int64 is undefined (1e300 is one).
    bool isInt = std::abs(v) < 9e15 && v == static_cast<double>(static_cast<long long>(v));
    ExprPtr n = Expr::makeNumber(v < 0 ? -v : v, isInt);
    return v < 0 ? Expr::makeUnary(UnOp::Neg, n) : n;
  }
  case CKind::Index: return emit.aff(varAff[static_cast<std::size_t>(e->var)]);
  case CKind::Param:
    if (e->param < 0) return symExpr(resolve(symValues_[static_cast<std::size_t>(-e->param - 1)]));
    return ident(p_.params[static_cast<std::size_t>(e->param)].name);
  case CKind::Size: return fn("size", {ident(tensorName(e->tensor)), num(e->dim)});
  case CKind::Read: {
    const std::string name = readName(e->tensor);
    if (e->subs.empty()) return ident(name);
    std::vector<ExprPtr> idx;
    for (const Subscript& s : e->subs) idx.push_back(subscriptExpr(s, st, varAff, emit));
    return Expr::makeAccess(name, idx);
  }
  case CKind::Unary: return Expr::makeUnary(e->unop, toExpr(e->args[0], st, varAff, emit));
  case CKind::Binary:
    return Expr::makeBinary(e->binop, toExpr(e->args[0], st, varAff, emit),
                            toExpr(e->args[1], st, varAff, emit));
  case CKind::Ternary:
    return Expr::makeTernary(toExpr(e->args[0], st, varAff, emit),
                             toExpr(e->args[1], st, varAff, emit),
                             toExpr(e->args[2], st, varAff, emit));
  case CKind::Call: {
    std::vector<ExprPtr> args;
    for (const auto& a : e->args) args.push_back(toExpr(a, st, varAff, emit));
    return fn(std::string(functionName(e->fn)), std::move(args));
  }
  }
  return num(0);
}

ExprPtr GradientBuilder::subscriptExpr(const Subscript& s, const Statement& st,
                                       const std::vector<Aff>& varAff, Emit& emit) {
  Aff a = composeSubscript(s, varAff);
  ExprPtr e = emit.aff(a);
  std::int64_t k;
  if (s.gather) {
    ExprPtr g = toExpr(s.gather, st, varAff, emit);
    e = !a.hasSlots() && symIsConst(a.k, &k) && k == 0 ? g : add(g, e);
  }
  if (s.mode != IndexMode::Plain) return fn(std::string(indexModeName(s.mode)), {e});
  return s.gather ? e : emit.subscript(e);
}

} // namespace einjit::grad
