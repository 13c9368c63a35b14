#include "dsl/RangeInference.h"

#include "dsl/Printer.h"

#include <algorithm>
#include <sstream>

namespace einjit::dsl {

namespace {

// 0 <= coef[var]*var + sum(coef[r]*r) + constant <= extent - 1, from one subscript.
struct Constraint {
  const Subscript* sub;
  Sym extent;
  bool bare;
};

struct Collector {
  const Program& p;
  Statement& st;
  std::vector<Constraint> constraints;
  std::vector<std::vector<SourceRange>> padOnlyUses; // per var: uses in pad/clamp/wrap dims

  void walk(const CExprPtr& e) {
    if (e->kind == CKind::Read) {
      const TensorInfo& t = p.tensors[static_cast<std::size_t>(e->tensor)];
      for (std::size_t d = 0; d < e->subs.size(); ++d) {
        const Subscript& s = e->subs[d];
        if (s.gather) {
          walk(s.gather);
          continue;
        }
        if (s.mode != IndexMode::Plain) {
          for (std::size_t v = 0; v < s.coef.size(); ++v)
            if (s.coef[v] != 0) padOnlyUses[v].push_back(s.range);
          continue;
        }
        Sym extent = symSize(t.name, static_cast<int>(d));
        constraints.push_back({&s, extent, s.bareVar().has_value()});
        st.boundsChecks.push_back({e->tensor, static_cast<int>(d), &s, e});
        if (auto v = s.bareVar())
          st.bareUses.push_back({*v, e->tensor, static_cast<int>(d), s.range});
      }
    }
    for (const CExprPtr& a : e->args) walk(a);
  }
};

bool involves(const Subscript& s, int v) { return s.coef[static_cast<std::size_t>(v)] != 0; }

// Marks every index variable that a subscript or a value of `e` reads.
void markUsed(const CExpr& e, std::vector<bool>& used) {
  if (e.kind == CKind::Index) used[static_cast<std::size_t>(e.var)] = true;
  for (const Subscript& s : e.subs) {
    for (std::size_t v = 0; v < s.coef.size(); ++v)
      if (s.coef[v] != 0) used[v] = true;
    if (s.gather) markUsed(*s.gather, used);
  }
  for (const CExprPtr& a : e.args) markUsed(*a, used);
}

// A 'where' index that nothing reads repeats the right-hand side once per value: a sum would
// silently be multiplied by the range's length.
void checkWhereIndicesUsed(const Statement& st, const Source& src) {
  std::vector<bool> used(st.vars.size(), false);
  markUsed(*st.rhs, used);
  if (st.lhs) markUsed(*st.lhs, used);
  for (const IndexVar& iv : st.vars)
    if (iv.dependent) {
      iv.loBound.collectVars(used);
      iv.hiBound.collectVars(used);
    }
  for (std::size_t v = 0; v < st.vars.size(); ++v) {
    const IndexVar& iv = st.vars[v];
    if (used[v] || iv.isOutput || !iv.fromWhere) continue;
    fail(src, iv.firstUse, "index '" + iv.name + "' has a 'where' range but nothing uses it",
         {{{},
           "the right-hand side would be repeated once per value of '" + iv.name +
               "' (a sum multiplied by the length of its range)",
           false},
          {{}, "use it in a subscript or an expression, or remove it from 'where'", false}});
  }
}

} // namespace

void inferRanges(Program& p, int k) {
  Statement& st = p.stmts[static_cast<std::size_t>(k)];
  const Source& src = *p.source;
  const std::size_t n = st.vars.size();
  checkWhereIndicesUsed(st, src);
  Collector c{p, st, {}, std::vector<std::vector<SourceRange>>(n)};
  // The left-hand side of '='/'+=' is an access of an existing tensor like any other (it
  // bounds its indices); that of ':=' defines the shape and bounds nothing.
  if (st.assign != Assign::Define) c.walk(st.lhs);
  c.walk(st.rhs);

  std::vector<bool> resolved(n, false);
  for (std::size_t v = 0; v < n; ++v) resolved[v] = st.vars[v].fromWhere;

  auto readsDependent = [&](const Subscript& s, int v) {
    for (std::size_t r = 0; r < n; ++r)
      if (static_cast<int>(r) != v && s.coef[r] != 0 && st.vars[r].dependent) return true;
    return false;
  };
  auto othersResolved = [&](const Subscript& s, int v) {
    for (std::size_t r = 0; r < n; ++r)
      if (static_cast<int>(r) != v && s.coef[r] != 0 && !resolved[r]) return false;
    return true;
  };
  auto hasBareUse = [&](int v) {
    return std::any_of(c.constraints.begin(), c.constraints.end(),
                       [&](const Constraint& x) { return x.bare && involves(*x.sub, v); });
  };

  // The range of v from every constraint whose other variables are resolved. A bare use fixes
  // the range by itself: the other uses of v are then accesses that Binding proves in bounds,
  // never constraints that narrow it (narrowing would silently drop terms of a sum, or leave
  // elements of an '=' output unwritten).
  auto resolve = [&](int v) {
    std::vector<Sym> los, his;
    const bool fixedByBare = hasBareUse(v);
    for (const Constraint& x : c.constraints) {
      const Subscript& s = *x.sub;
      if (!involves(s, v) || !othersResolved(s, v)) continue;
      if (fixedByBare) {
        if (!x.bare) continue;
        // Bare uses must all agree (Binding checks it), so the first one stands for all.
        los.push_back(symConst(0));
        his.push_back(x.extent);
        break;
      }
      // An index with a range that depends on others has no box to reason with: such uses
      // are checked while running instead.
      if (readsDependent(s, v)) continue;
      std::int64_t a = s.coef[static_cast<std::size_t>(v)];
      // min and max of the other terms over their ranges (hi is exclusive).
      Sym minS = s.constant, maxS = s.constant;
      for (std::size_t r = 0; r < n; ++r) {
        std::int64_t cr = s.coef[r];
        if (static_cast<int>(r) == v || cr == 0) continue;
        const IndexVar& rv = st.vars[r];
        Sym last = symAddConst(rv.hi, -1);
        minS = symAdd(minS, symScale(cr > 0 ? rv.lo : last, cr));
        maxS = symAdd(maxS, symScale(cr > 0 ? last : rv.lo, cr));
      }
      Sym top = symAddConst(x.extent, -1); // largest valid index
      if (a > 0) {
        los.push_back(symCeilDiv(symScale(minS, -1), a));
        his.push_back(symAddConst(symFloorDiv(symSub(top, maxS), a), 1));
      } else {
        std::int64_t m = -a;
        los.push_back(symCeilDiv(symSub(maxS, top), m));
        his.push_back(symAddConst(symFloorDiv(minS, m), 1));
      }
    }
    IndexVar& iv = st.vars[static_cast<std::size_t>(v)];
    if (los.empty())
      fail(src, iv.firstUse, "cannot infer the range of index '" + iv.name + "'",
           {{{}, "its uses involve indices whose 'where' ranges depend on other indices", false},
            {{}, "give it a range with 'where " + iv.name + " in lo:hi'", false}});
    iv.lo = symMax(los);
    iv.hi = symMin(his);
    resolved[static_cast<std::size_t>(v)] = true;
  };

  // Ranges fixed by a bare use first: they are known without any other index.
  for (std::size_t v = 0; v < n; ++v)
    if (!resolved[v] && hasBareUse(static_cast<int>(v))) resolve(static_cast<int>(v));
  for (;;) {
    bool progress = false;
    for (std::size_t v = 0; v < n; ++v) {
      if (resolved[v]) continue;
      int vi = static_cast<int>(v);
      bool bounded = false;
      bool ready = true;
      for (const Constraint& x : c.constraints)
        if (involves(*x.sub, vi)) {
          bounded = true;
          ready = ready && othersResolved(*x.sub, vi);
        }
      if (bounded && ready) {
        resolve(vi);
        progress = true;
      }
    }
    if (std::all_of(resolved.begin(), resolved.end(), [](bool b) { return b; })) break;
    if (progress) continue;
    // Nothing bounds the first unresolved variable on its own.
    for (std::size_t v = 0; v < n; ++v) {
      if (resolved[v]) continue;
      const IndexVar& iv = st.vars[v];
      std::vector<Note> notes;
      bool inAffine =
          std::any_of(c.constraints.begin(), c.constraints.end(),
                      [&](const Constraint& x) { return involves(*x.sub, static_cast<int>(v)); });
      std::string why;
      if (inAffine) {
        why = "it is only used together with other indices whose ranges are not known either";
      } else if (!c.padOnlyUses[v].empty()) {
        why = "it is only used in pad/clamp/wrap subscripts, which do not bound it";
      } else {
        why = "it is used in no subscript that bounds it";
      }
      notes.push_back({{}, why, false});
      notes.push_back({{},
                       "give it a range with 'where " + iv.name +
                           " in lo:hi', or use it alone as a subscript of a tensor",
                       false});
      fail(src, iv.firstUse, "cannot infer the range of index '" + iv.name + "'", notes);
    }
  }

  // ':=' outputs: a range starting below 0 has no element to land in.
  if (st.assign == Assign::Define) {
    TensorInfo& out = p.tensors[static_cast<std::size_t>(st.output)];
    out.extents.clear();
    for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
      const IndexVar& iv = st.vars[static_cast<std::size_t>(st.lhsVars[d])];
      std::int64_t lo;
      if (!iv.fromWhere && symIsConst(iv.lo, &lo) && lo < 0)
        fail(src, st.ast.lhs[d]->range,
             "the range of output index '" + iv.name + "' starts at " + std::to_string(lo) +
                 ", below 0",
             {{{},
               "shift the index so that it starts at 0 or above, or give it a range with "
               "'where " +
                   iv.name + " in 0:...'",
               false}});
      out.extents.push_back(iv.hi);
    }
  }
}

std::string printBound(const IndexBound& b, const Statement& st) {
  switch (b.kind) {
  case IndexBound::Kind::Affine: {
    std::string out;
    for (std::size_t v = 0; v < b.coef.size(); ++v) {
      std::int64_t c = b.coef[v];
      if (c == 0) continue;
      std::int64_t mag = c < 0 ? -c : c;
      out += out.empty() ? (c < 0 ? "-" : "") : (c < 0 ? " - " : " + ");
      if (mag != 1) out += std::to_string(mag) + "*";
      out += st.vars[v].name;
    }
    std::int64_t k;
    if (symIsConst(b.constant, &k)) {
      if (out.empty()) return std::to_string(k);
      if (k > 0) out += " + " + std::to_string(k);
      if (k < 0) out += " - " + std::to_string(-k);
      return out;
    }
    const std::string& c = symPrint(b.constant);
    if (out.empty()) return c;
    return c[0] == '-' ? out + " - " + c.substr(1) : out + " + " + c;
  }
  case IndexBound::Kind::Max:
  case IndexBound::Kind::Min: {
    std::string out = b.kind == IndexBound::Kind::Max ? "max(" : "min(";
    for (std::size_t i = 0; i < b.args.size(); ++i)
      out += (i ? ", " : "") + printBound(b.args[i], st);
    return out + ")";
  }
  case IndexBound::Kind::FDiv:
  case IndexBound::Kind::CDiv:
    return std::string(b.kind == IndexBound::Kind::FDiv ? "fdiv(" : "cdiv(") +
           printBound(b.args[0], st) + ", " + std::to_string(b.divisor) + ")";
  case IndexBound::Kind::Sum: {
    std::string out;
    for (std::size_t i = 0; i < b.args.size(); ++i) {
      std::int64_t c = b.scale[i], mag = c < 0 ? -c : c;
      out += i == 0 ? (c < 0 ? "-" : "") : (c < 0 ? " - " : " + ");
      if (mag != 1) out += std::to_string(mag) + "*";
      bool paren =
          b.args[i].kind == IndexBound::Kind::Affine || b.args[i].kind == IndexBound::Kind::Sum;
      out += paren ? "(" + printBound(b.args[i], st) + ")" : printBound(b.args[i], st);
    }
    return out;
  }
  }
  return "?";
}

std::string describeRanges(const Program& p) {
  std::ostringstream os;
  for (const Statement& s : p.stmts) {
    os << printStmt(s.ast) << '\n';
    for (const IndexVar& v : s.vars) {
      if (v.dependent)
        os << "  " << v.name << " in " << printBound(v.loBound, s) << ':'
           << printBound(v.hiBound, s) << '\n';
      else
        os << "  " << v.name << " in " << symPrint(v.lo) << ':' << symPrint(v.hi) << '\n';
    }
  }
  return os.str();
}

} // namespace einjit::dsl
