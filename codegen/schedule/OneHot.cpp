#include "codegen/schedule/OneHot.h"

#include "codegen/Schedule.h"

#include <cmath>
#include <functional>

namespace einjit::codegen {

namespace {

using dsl::CExpr;
using dsl::CKind;

// Whether e's value may change with index v: it reads v, or a tensor at a subscript that
// moves with v.
bool dependsOn(const CExpr& e, int v) {
  if (e.kind == CKind::Index && e.var == v) return true;
  for (const dsl::Subscript& s : e.subs) {
    if (static_cast<std::size_t>(v) < s.coef.size() && s.coef[static_cast<std::size_t>(v)] != 0)
      return true;
    if (s.gather && dependsOn(*s.gather, v)) return true;
  }
  for (const dsl::CExprPtr& a : e.args)
    if (dependsOn(*a, v)) return true;
  return false;
}

// The conjuncts of c (through &&).
void conjuncts(const CExpr& c, std::vector<const CExpr*>& out) {
  if (c.kind == CKind::Binary && c.binop == dsl::BinOp::And) {
    conjuncts(*c.args[0], out);
    conjuncts(*c.args[1], out);
    return;
  }
  out.push_back(&c);
}

} // namespace

std::optional<OneHot> planOneHot(const dsl::Program& p, const dsl::BoundProgram& b, std::size_t k,
                                 const Target& t) {
  const dsl::Statement& st = p.stmts[k];
  const dsl::BoundStatement& bs = b.stmts[k];
  if (t.gpu || st.assign != dsl::Assign::Accumulate || st.reduce != dsl::Reduce::Add ||
      st.scatter || st.lhsVars.empty() || !independentOutputs(st) ||
      st.numOutputVars() != static_cast<int>(st.vars.size()))
    return std::nullopt;
  for (std::size_t v = 0; v < st.vars.size(); ++v)
    if (bs.dependent[v]) return std::nullopt;
  const CExpr& rhs = *st.rhs;
  if (rhs.kind != CKind::Ternary || rhs.args[2]->kind != CKind::Const || rhs.args[2]->value != 0 ||
      std::signbit(rhs.args[2]->value))
    return std::nullopt;
  // Values of j that the compute type holds exactly.
  const double exact = computeDType(b.dtype) == DType::f64 ? 0x1p53 : 0x1p24;
  std::vector<const CExpr*> terms;
  conjuncts(*rhs.args[0], terms);
  for (const CExpr* c : terms) {
    if (c->kind != CKind::Binary || c->binop != dsl::BinOp::Eq) continue;
    for (int side = 0; side < 2; ++side) {
      const CExpr& idx = *c->args[static_cast<std::size_t>(side)];
      const CExpr& g = *c->args[static_cast<std::size_t>(1 - side)];
      if (idx.kind != CKind::Index || idx.var < 0 || idx.var >= st.numOutputVars()) continue;
      const auto v = static_cast<std::size_t>(idx.var);
      if (dependsOn(g, idx.var)) continue;
      if (static_cast<double>(bs.hi[v]) > exact || static_cast<double>(bs.lo[v]) < -exact) continue;
      OneHot h;
      h.var = idx.var;
      h.at = &g;
      h.why = "one-hot along " + st.vars[v].name + ": evaluated only where " + st.vars[v].name +
              " equals the value it is compared with";
      return h;
    }
  }
  return std::nullopt;
}

} // namespace einjit::codegen
