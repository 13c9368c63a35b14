// The small definitions behind Program.h: the function table, subscripts, lookups.
#include "dsl/Program.h"

namespace einjit::dsl {

std::optional<Fn> lookupFunction(std::string_view name) {
#define FUNCTION(kind, fname, arity)                                                               \
  if (name == fname) return Fn::kind;
#include "dsl/Functions.def"
#undef FUNCTION
  return std::nullopt;
}

std::string_view functionName(Fn f) {
  switch (f) {
#define FUNCTION(kind, fname, arity)                                                               \
  case Fn::kind:                                                                                   \
    return fname;
#include "dsl/Functions.def"
#undef FUNCTION
  }
  return "?";
}

int functionArity(Fn f) {
  switch (f) {
#define FUNCTION(kind, fname, arity)                                                               \
  case Fn::kind:                                                                                   \
    return arity;
#include "dsl/Functions.def"
#undef FUNCTION
  }
  return 0;
}

std::string_view indexModeName(IndexMode m) {
  switch (m) {
  case IndexMode::Plain: return "";
  case IndexMode::Pad: return "pad";
  case IndexMode::Clamp: return "clamp";
  case IndexMode::Wrap: return "wrap";
  }
  return "";
}

std::optional<int> Subscript::bareVar() const {
  if (gather || mode != IndexMode::Plain) return std::nullopt;
  std::int64_t c;
  if (!symIsConst(constant, &c) || c != 0) return std::nullopt;
  int found = -1;
  for (std::size_t v = 0; v < coef.size(); ++v) {
    if (coef[v] == 0) continue;
    if (coef[v] != 1 || found >= 0) return std::nullopt;
    found = static_cast<int>(v);
  }
  if (found < 0) return std::nullopt;
  return found;
}

void IndexBound::collectVars(std::vector<bool>& vars) const {
  for (std::size_t v = 0; v < coef.size() && v < vars.size(); ++v)
    if (coef[v] != 0) vars[v] = true;
  for (const IndexBound& a : args) a.collectVars(vars);
}

bool sameExpr(const CExpr& a, const CExpr& b) {
  if (a.kind != b.kind || a.value != b.value || a.var != b.var || a.param != b.param ||
      a.tensor != b.tensor || a.dim != b.dim || a.unop != b.unop || a.binop != b.binop ||
      a.fn != b.fn || a.subs.size() != b.subs.size() || a.args.size() != b.args.size())
    return false;
  for (std::size_t i = 0; i < a.subs.size(); ++i) {
    const Subscript &s = a.subs[i], &t = b.subs[i];
    if (s.mode != t.mode || s.coef != t.coef || symPrint(s.constant) != symPrint(t.constant) ||
        (s.gather == nullptr) != (t.gather == nullptr) ||
        (s.gather && !sameExpr(*s.gather, *t.gather)))
      return false;
  }
  for (std::size_t i = 0; i < a.args.size(); ++i)
    if (!sameExpr(*a.args[i], *b.args[i])) return false;
  return true;
}

void usedVars(const CExpr& e, std::vector<bool>& used) {
  if (e.kind == CKind::Index) used[static_cast<std::size_t>(e.var)] = true;
  for (const Subscript& sub : e.subs) {
    for (std::size_t v = 0; v < sub.coef.size(); ++v)
      if (sub.coef[v] != 0) used[v] = true;
    if (sub.gather) usedVars(*sub.gather, used);
  }
  for (const auto& a : e.args) usedVars(*a, used);
}

int Statement::numOutputVars() const {
  int n = 0;
  for (const IndexVar& v : vars) n += v.isOutput ? 1 : 0;
  return n;
}

void eachRead(const Statement& st, const std::function<void(const CExpr&)>& f) {
  std::function<void(const CExpr&)> walk = [&](const CExpr& e) {
    if (e.kind == CKind::Read) f(e);
    for (const Subscript& s : e.subs)
      if (s.gather) walk(*s.gather);
    for (const CExprPtr& a : e.args) walk(*a);
  };
  walk(*st.rhs);
  for (const Subscript& s : st.lhs->subs)
    if (s.gather) walk(*s.gather);
}

int Program::findTensor(std::string_view name) const {
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name) return static_cast<int>(i);
  return -1;
}

int Program::findParam(std::string_view name) const {
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i].name == name) return static_cast<int>(i);
  return -1;
}

} // namespace einjit::dsl
