#include "dsl/SymExpr.h"

#include "einjit/Error.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace einjit::dsl {

std::int64_t floorDiv(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
std::int64_t ceilDiv(std::int64_t a, std::int64_t b) { return -floorDiv(checkedMul(a, -1), b); }

namespace {

std::string printLin(const SymNode& n) {
  std::string out;
  bool first = true;
  for (const auto& [t, c] : n.terms) {
    std::int64_t mag = c < 0 ? -c : c;
    if (first)
      out += c < 0 ? "-" : "";
    else
      out += c < 0 ? " - " : " + ";
    if (mag != 1) out += std::to_string(mag) + "*";
    out += t->key;
    first = false;
  }
  if (first) return std::to_string(n.constant);
  if (n.constant > 0) out += " + " + std::to_string(n.constant);
  if (n.constant < 0) out += " - " + std::to_string(-n.constant);
  return out;
}

Sym finish(SymNode n) {
  switch (n.kind) {
  case SymKind::Lin: n.key = printLin(n); break;
  case SymKind::Size: n.key = "size(" + n.tensor + "," + std::to_string(n.dim) + ")"; break;
  case SymKind::Param: n.key = n.tensor; break;
  case SymKind::Max:
  case SymKind::Min: {
    n.key = n.kind == SymKind::Max ? "max(" : "min(";
    for (std::size_t i = 0; i < n.args.size(); ++i) n.key += (i ? ", " : "") + n.args[i]->key;
    n.key += ")";
    break;
  }
  case SymKind::FDiv:
  case SymKind::CDiv:
    n.key = std::string(n.kind == SymKind::FDiv ? "fdiv(" : "cdiv(") + n.args[0]->key + ", " +
            std::to_string(n.divisor) + ")";
    break;
  }
  return std::make_shared<const SymNode>(std::move(n));
}

// The linear view of any node: a Lin node itself, or 1*node.
SymNode asLin(const Sym& s) {
  if (s->kind == SymKind::Lin) return *s;
  SymNode n{SymKind::Lin};
  n.terms.push_back({s, 1});
  return n;
}

// Canonical Lin: merge equal terms, drop zero coefficients, sort; a lone 1*term is the term.
Sym normalize(SymNode n) {
  std::map<std::string, std::pair<Sym, std::int64_t>> merged;
  for (auto& [t, c] : n.terms) {
    auto [it, inserted] = merged.try_emplace(t->key, t, c);
    if (!inserted) it->second.second = checkedAdd(it->second.second, c);
  }
  n.terms.clear();
  for (auto& [k, tc] : merged)
    if (tc.second != 0) n.terms.push_back(tc);
  // Positive terms first, so "size(x,0) - size(w,0) + 1" rather than "-size(w,0) + ...".
  std::stable_sort(n.terms.begin(), n.terms.end(),
                   [](const auto& a, const auto& b) { return a.second > 0 && b.second < 0; });
  if (n.constant == 0 && n.terms.size() == 1 && n.terms[0].second == 1) return n.terms[0].first;
  return finish(std::move(n));
}

Sym symExtremum(SymKind kind, std::vector<Sym> args) {
  // Flatten nested max/max, fold constants, drop duplicates.
  std::vector<Sym> flat;
  bool haveConst = false;
  std::int64_t best = 0;
  for (const Sym& a : args) {
    std::vector<Sym> parts = a->kind == kind ? a->args : std::vector<Sym>{a};
    for (const Sym& p : parts) {
      std::int64_t v;
      if (symIsConst(p, &v)) {
        best = !haveConst ? v : kind == SymKind::Max ? std::max(best, v) : std::min(best, v);
        haveConst = true;
      } else if (std::none_of(flat.begin(), flat.end(),
                              [&](const Sym& f) { return f->key == p->key; })) {
        flat.push_back(p);
      }
    }
  }
  if (haveConst) flat.push_back(symConst(best));
  // Arguments that differ only by a constant: keep the larger (max) or smaller (min) one.
  std::vector<Sym> kept;
  for (const Sym& a : flat) {
    SymNode la = asLin(a);
    bool replaced = false;
    for (Sym& k : kept) {
      SymNode lk = asLin(k);
      SymNode da = la, dk = lk;
      da.constant = dk.constant = 0;
      if (normalize(da)->key != normalize(dk)->key) continue;
      bool better = kind == SymKind::Max ? la.constant > lk.constant : la.constant < lk.constant;
      if (better) k = a;
      replaced = true;
      break;
    }
    if (!replaced) kept.push_back(a);
  }
  flat = std::move(kept);
  if (flat.empty()) throw InternalError("symbolic max/min of nothing");
  if (flat.size() == 1) return flat[0];
  std::sort(flat.begin(), flat.end(), [](const Sym& a, const Sym& b) { return a->key < b->key; });
  SymNode n{kind};
  n.args = std::move(flat);
  return finish(std::move(n));
}

Sym symDiv(SymKind kind, const Sym& a, std::int64_t d) {
  if (d <= 0) throw InternalError("symbolic division by a non-positive constant");
  if (d == 1) return a;
  SymNode lin = asLin(a);
  // Exact when every coefficient is a multiple of d (floor = ceil then).
  bool termsDivisible = std::all_of(lin.terms.begin(), lin.terms.end(),
                                    [&](const auto& tc) { return tc.second % d == 0; });
  if (termsDivisible) {
    // fdiv(d*X + c, d) = X + fdiv(c, d)
    SymNode out{SymKind::Lin};
    for (auto& [t, c] : lin.terms) out.terms.push_back({t, c / d});
    out.constant = kind == SymKind::FDiv ? floorDiv(lin.constant, d) : ceilDiv(lin.constant, d);
    return normalize(std::move(out));
  }
  SymNode n{kind};
  n.args = {a};
  n.divisor = d;
  return finish(std::move(n));
}

} // namespace

Sym symConst(std::int64_t c) {
  SymNode n{SymKind::Lin};
  n.constant = c;
  return finish(std::move(n));
}
Sym symSize(const std::string& tensor, int dim) {
  SymNode n{SymKind::Size};
  n.tensor = tensor;
  n.dim = dim;
  return finish(std::move(n));
}
Sym symParam(const std::string& name) {
  SymNode n{SymKind::Param};
  n.tensor = name;
  return finish(std::move(n));
}
Sym symAdd(const Sym& a, const Sym& b) {
  SymNode x = asLin(a), y = asLin(b);
  x.constant = checkedAdd(x.constant, y.constant);
  for (auto& t : y.terms) x.terms.push_back(t);
  return normalize(std::move(x));
}
Sym symScale(const Sym& a, std::int64_t c) {
  SymNode x = asLin(a);
  x.constant = checkedMul(x.constant, c);
  for (auto& t : x.terms) t.second = checkedMul(t.second, c);
  return normalize(std::move(x));
}
Sym symSub(const Sym& a, const Sym& b) { return symAdd(a, symScale(b, -1)); }
Sym symAddConst(const Sym& a, std::int64_t c) { return symAdd(a, symConst(c)); }
Sym symMax(std::vector<Sym> args) { return symExtremum(SymKind::Max, std::move(args)); }
Sym symMin(std::vector<Sym> args) { return symExtremum(SymKind::Min, std::move(args)); }
Sym symFloorDiv(const Sym& a, std::int64_t d) { return symDiv(SymKind::FDiv, a, d); }
Sym symCeilDiv(const Sym& a, std::int64_t d) { return symDiv(SymKind::CDiv, a, d); }

bool symIsConst(const Sym& s, std::int64_t* value) {
  if (s->kind != SymKind::Lin || !s->terms.empty()) return false;
  if (value) *value = s->constant;
  return true;
}

const std::string& symPrint(const Sym& s) { return s->key; }

Sym symSubstitute(const Sym& s, const std::function<Sym(const SymNode&)>& atom) {
  switch (s->kind) {
  case SymKind::Size:
  case SymKind::Param: {
    Sym r = atom(*s);
    return r ? r : s;
  }
  case SymKind::Lin: {
    Sym acc = symConst(s->constant);
    for (const auto& [t, c] : s->terms) acc = symAdd(acc, symScale(symSubstitute(t, atom), c));
    return acc;
  }
  case SymKind::Max:
  case SymKind::Min: {
    std::vector<Sym> args;
    for (const Sym& a : s->args) args.push_back(symSubstitute(a, atom));
    return s->kind == SymKind::Max ? symMax(std::move(args)) : symMin(std::move(args));
  }
  case SymKind::FDiv: return symFloorDiv(symSubstitute(s->args[0], atom), s->divisor);
  case SymKind::CDiv: return symCeilDiv(symSubstitute(s->args[0], atom), s->divisor);
  }
  return s;
}

std::int64_t symEval(const Sym& s, const SymEnv& env) {
  switch (s->kind) {
  case SymKind::Lin: {
    std::int64_t v = s->constant;
    for (const auto& [t, c] : s->terms) v = checkedAdd(v, checkedMul(c, symEval(t, env)));
    return v;
  }
  case SymKind::Size: return env.size(s->tensor, s->dim);
  case SymKind::Param: return env.param(s->tensor);
  case SymKind::Max:
  case SymKind::Min: {
    std::int64_t v = symEval(s->args[0], env);
    for (std::size_t i = 1; i < s->args.size(); ++i) {
      std::int64_t w = symEval(s->args[i], env);
      v = s->kind == SymKind::Max ? std::max(v, w) : std::min(v, w);
    }
    return v;
  }
  case SymKind::FDiv: return floorDiv(symEval(s->args[0], env), s->divisor);
  case SymKind::CDiv: return ceilDiv(symEval(s->args[0], env), s->divisor);
  }
  return 0;
}

} // namespace einjit::dsl
