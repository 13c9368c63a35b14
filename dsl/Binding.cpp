#include "dsl/Binding.h"

#include "dsl/InPlace.h"
#include "dsl/Printer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

namespace einjit::dsl {

namespace {

std::string shapeText(const std::vector<std::int64_t>& s) {
  if (s.empty()) return "a scalar";
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

class Binder {
public:
  Binder(const Program& p, BoundProgram& b) : p_(p), b_(b), src_(*p.source) {}

  void arguments(const std::vector<ArgSpec>& args, DType defaultDType) {
    if (args.size() != p_.arguments.size())
      throw InternalError("bind: wrong number of tensor arguments");
    b_.tensors.assign(p_.tensors.size(), ArgSpec{});
    for (std::size_t i = 0; i < args.size(); ++i) {
      int id = p_.arguments[i];
      const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
      const ArgSpec& a = args[i];
      if (t.rank >= 0 && static_cast<int>(a.shape.size()) != t.rank)
        fail(src_, t.firstUse,
             "'" + t.name + "' has rank " + std::to_string(t.rank) + " in the program but the " +
                 "argument has shape " + shapeText(a.shape) + " (rank " +
                 std::to_string(a.shape.size()) + ")");
      for (std::int64_t e : a.shape)
        if (e < 0) fail(src_, t.firstUse, "'" + t.name + "' has a negative extent");
      b_.tensors[static_cast<std::size_t>(id)] = a;
    }
    for (const SizeUse& u : p_.sizeUses) {
      const ArgSpec& a = b_.tensors[static_cast<std::size_t>(u.tensor)];
      const TensorInfo& t = p_.tensors[static_cast<std::size_t>(u.tensor)];
      if (t.isArgument && u.dim >= static_cast<int>(a.shape.size()))
        fail(src_, u.range,
             "dimension " + std::to_string(u.dim) + " is out of range for '" + t.name +
                 "', whose argument has shape " + shapeText(a.shape));
    }
    // The value dtype: that of the first floating-point tensor that carries values, except
    // that bf16 and f32 mix. bf16 is a storage dtype computed in f32 (docs/LANGUAGE.md
    // "dtypes"), so bf16 activations with f32 weights lose nothing by computing in f32, and
    // then the ':=' outputs are f32. f64 mixes with neither: a program widened or narrowed as
    // a whole by one argument's dtype is the mistake this check exists to catch.
    int first = -1;
    for (int id : p_.arguments) {
      const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
      DType d = b_.tensors[static_cast<std::size_t>(id)].dtype;
      bool carriesValues = t.readAsValue || !t.writtenBy.empty();
      if (t.readAsIndex && !isInteger(d))
        fail(src_, t.firstUse,
             "'" + t.name + "' is used to index another tensor, so it must hold integers " +
                 "(i32 or i64), not " + std::string(dtypeName(d)));
      if (carriesValues && isFloat(d) && first < 0) first = id;
    }
    b_.dtype = first >= 0 ? b_.tensors[static_cast<std::size_t>(first)].dtype : defaultDType;
    int setBy = first; // the tensor the note names as fixing the dtype
    if (b_.dtype == DType::bf16)
      for (int id : p_.arguments) {
        const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
        if ((t.readAsValue || !t.writtenBy.empty()) &&
            b_.tensors[static_cast<std::size_t>(id)].dtype == DType::f32) {
          b_.dtype = DType::f32;
          setBy = id;
          break;
        }
      }
    auto fits = [&](DType d) {
      return d == b_.dtype || (d == DType::bf16 && b_.dtype == DType::f32);
    };
    for (int id : p_.arguments) {
      const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
      DType d = b_.tensors[static_cast<std::size_t>(id)].dtype;
      bool written = !t.writtenBy.empty();
      bool mismatch =
          (isFloat(d) && (t.readAsValue || written) && !fits(d)) || (written && !fits(d));
      if (mismatch) {
        std::vector<Note> notes;
        if (setBy >= 0 && setBy != id)
          notes.push_back({p_.tensors[static_cast<std::size_t>(setBy)].firstUse,
                           "'" + p_.tensors[static_cast<std::size_t>(setBy)].name + "' is " +
                               std::string(dtypeName(b_.dtype)) + " here"});
        std::string mixes =
            b_.dtype == DType::f64 || d == DType::f64 ? "; f64 does not mix with f32 or bf16" : "";
        fail(src_, t.firstUse,
             "dtype mismatch: '" + t.name + "' is " + std::string(dtypeName(d)) +
                 " but the program computes in " + std::string(dtypeName(b_.dtype)) + mixes,
             notes);
      }
    }
  }

  void parameters(const std::vector<double>& params) {
    if (params.size() != p_.params.size()) throw InternalError("bind: wrong number of parameters");
    for (std::size_t i = 0; i < params.size(); ++i) {
      const ParamInfo& pi = p_.params[i];
      if (pi.usedInIndex && (!std::isfinite(params[i]) || std::floor(params[i]) != params[i] ||
                             std::fabs(params[i]) > 9.0e15))
        fail(src_, pi.firstUse,
             "parameter '" + pi.name + "' is used in a subscript or a range and must be an " +
                 "integer of magnitude at most 9e15, not " + formatNumber(params[i], false));
    }
    b_.params = params;
  }

  void statement(std::size_t k) {
    try {
      statementRanges(k);
    } catch (const SymOverflow&) {
      fail(src_, p_.stmts[k].ast.range,
           "integer overflow: the ranges of this statement do not fit in 64 bits with these "
           "shapes and parameters");
    }
  }

  void statementRanges(std::size_t k) {
    const Statement& st = p_.stmts[k];
    BoundStatement bs;
    for (std::size_t v = 0; v < st.vars.size(); ++v) {
      const IndexVar& iv = st.vars[v];
      bs.dependent.push_back(iv.dependent);
      bs.loBound.push_back(iv.dependent ? concrete(iv.loBound) : ConcreteBound{});
      bs.hiBound.push_back(iv.dependent ? concrete(iv.hiBound) : ConcreteBound{});
      if (iv.dependent) {
        // Earlier indices are already in lo/hi: the hull over their box.
        std::vector<std::int64_t> hiIncl;
        for (std::size_t u = 0; u < v; ++u) hiIncl.push_back(bs.hi[u] - 1);
        hiIncl.resize(st.vars.size(), 0);
        std::vector<std::int64_t> lo = bs.lo;
        lo.resize(st.vars.size(), 0);
        bs.lo.push_back(bs.loBound.back().interval(lo, hiIncl).first);
        bs.hi.push_back(bs.hiBound.back().interval(lo, hiIncl).second);
      } else {
        bs.lo.push_back(b_.eval(p_, iv.lo));
        bs.hi.push_back(b_.eval(p_, iv.hi));
      }
      if (bs.hi.back() <= bs.lo.back()) bs.empty = true;
    }
    checkBareUses(st);
    if (!bs.empty) {
      for (const BoundsCheck& c : st.boundsChecks)
        if (!readsDependent(st, *c.sub)) checkBounds(st, bs, c);
    }
    if (st.assign == Assign::Define) {
      std::vector<std::int64_t> shape;
      for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
        auto v = static_cast<std::size_t>(st.lhsVars[d]);
        if (bs.lo[v] < 0 && bs.hi[v] > bs.lo[v])
          fail(src_, st.ast.lhs[d]->range,
               "the range of output index '" + st.vars[v].name + "' starts at " +
                   std::to_string(bs.lo[v]) + ", below 0",
               {{{},
                 "shift the index so that it starts at 0 or above, or narrow its 'where' "
                 "range",
                 false}});
        shape.push_back(std::max<std::int64_t>(bs.hi[v], 0));
      }
      b_.tensors[static_cast<std::size_t>(st.output)] = {b_.dtype, shape};
    }
    b_.stmts.push_back(std::move(bs));
  }

private:
  const Program& p_;
  BoundProgram& b_;
  const Source& src_;

  // Subscripts over dependent indices are checked while running (the box hull would reject
  // triangular domains that stay in bounds).
  static bool readsDependent(const Statement& st, const Subscript& s) {
    for (std::size_t v = 0; v < s.coef.size(); ++v)
      if (s.coef[v] != 0 && st.vars[v].dependent) return true;
    return false;
  }

  // Whether `c` is a read of the right-hand side (or of a subscript in it), which runs only
  // where the dependent ranges are non-empty; the left-hand side of '='/'+=' is written at
  // every point of the output indices' box.
  static bool isRead(const Statement& st, const BoundsCheck& c) {
    if (!st.rhs || std::none_of(st.vars.begin(), st.vars.end(),
                                [](const IndexVar& v) { return v.dependent; }))
      return false;
    std::function<bool(const CExpr&)> holds = [&](const CExpr& e) {
      if (&e == c.owner.get()) return true;
      for (const Subscript& s : e.subs)
        if (s.gather && holds(*s.gather)) return true;
      for (const CExprPtr& a : e.args)
        if (a && holds(*a)) return true;
      return false;
    };
    return holds(*st.rhs);
  }

  static bool boundReads(const ConcreteBound& b, int var) {
    for (auto [v, coef] : b.terms)
      if (v == var && coef != 0) return true;
    return std::any_of(b.args.begin(), b.args.end(),
                       [&](const ConcreteBound& a) { return boundReads(a, var); });
  }

  // A value of `s` outside [0, e) at a point of the statement's iteration domain, with every
  // dependent range evaluated at its point (the box check above takes their hull); none if it
  // stays inside. Each index the subscript or a later dependent range reads is enumerated; any
  // other only needs a non-empty range. Past kDomainBudget points the answer is 'none': the
  // interpreter and the JIT check every subscript they cannot prove in bounds while running,
  // so the read is then reported by the call, where it happens.
  std::optional<std::int64_t> reachesOutside(const Statement& st, const BoundStatement& bs, const Subscript& s,
                      std::int64_t e) const {
    constexpr std::int64_t kDomainBudget = 1 << 16;
    const std::size_t n = st.vars.size();
    std::vector<bool> enumerate(n, false);
    for (std::size_t v = 0; v < n; ++v) {
      enumerate[v] = v < s.coef.size() && s.coef[v] != 0;
      for (std::size_t w = v + 1; w < n && !enumerate[v]; ++w)
        if (bs.dependent[w] && (boundReads(bs.loBound[w], static_cast<int>(v)) ||
                                boundReads(bs.hiBound[w], static_cast<int>(v))))
          enumerate[v] = true;
    }
    const std::int64_t base = b_.eval(p_, s.constant);
    std::vector<std::int64_t> at(n, 0);
    std::int64_t visited = 0;
    std::optional<std::int64_t> outside;
    bool gaveUp = false;
    std::function<void(std::size_t)> visit = [&](std::size_t v) {
      if (outside || gaveUp) return;
      if (++visited > kDomainBudget) {
        gaveUp = true;
        return;
      }
      if (v == n) {
        std::int64_t x = base;
        for (std::size_t r = 0; r < s.coef.size(); ++r)
          if (s.coef[r] != 0) x = checkedAdd(x, checkedMul(s.coef[r], at[r]));
        if (x < 0 || x >= e) outside = x;
        return;
      }
      std::int64_t lo = bs.dependent[v] ? bs.loBound[v].eval(at) : bs.lo[v];
      std::int64_t hi = bs.dependent[v] ? bs.hiBound[v].eval(at) : bs.hi[v];
      if (hi <= lo) return;
      if (!enumerate[v]) hi = lo + 1;
      for (std::int64_t x = lo; x < hi && !outside && !gaveUp; ++x) {
        at[v] = x;
        visit(v + 1);
      }
    };
    visit(0);
    return outside;
  }

  // The first index of `s` whose range a bare use fixes.
  static int firstFixed(const Statement& st, const Subscript& s) {
    for (std::size_t v = 0; v < s.coef.size(); ++v)
      if (s.coef[v] != 0 && !st.vars[v].fromWhere)
        for (const BareUse& u : st.bareUses)
          if (u.var == static_cast<int>(v)) return static_cast<int>(v);
    return 0;
  }

  ConcreteBound concrete(const IndexBound& b) const {
    ConcreteBound c;
    c.kind = b.kind;
    if (b.kind == IndexBound::Kind::Affine) {
      for (std::size_t v = 0; v < b.coef.size(); ++v)
        if (b.coef[v] != 0) c.terms.push_back({static_cast<int>(v), b.coef[v]});
      c.constant = b_.eval(p_, b.constant);
    }
    for (const IndexBound& a : b.args) c.args.push_back(concrete(a));
    c.scale = b.scale;
    c.divisor = b.divisor;
    return c;
  }

  std::int64_t extent(int tensor, int dim) const {
    return b_.tensors[static_cast<std::size_t>(tensor)].shape[static_cast<std::size_t>(dim)];
  }

  void checkBareUses(const Statement& st) {
    for (std::size_t i = 0; i < st.bareUses.size(); ++i) {
      const BareUse& a = st.bareUses[i];
      // A 'where' range is authoritative: bare uses are then accesses like any other,
      // checked for bounds, not for agreement.
      if (st.vars[static_cast<std::size_t>(a.var)].fromWhere) continue;
      for (std::size_t j = 0; j < i; ++j) {
        const BareUse& f = st.bareUses[j];
        if (f.var != a.var) continue;
        std::int64_t ea = extent(a.tensor, a.dim), ef = extent(f.tensor, f.dim);
        if (ea == ef) continue;
        const std::string& v = st.vars[static_cast<std::size_t>(a.var)].name;
        const std::string& ta = shownName(p_, a.tensor);
        const std::string& tf = shownName(p_, f.tensor);
        fail(src_, a.range,
             "index '" + v + "' ranges over " + std::to_string(ea) + " (dimension " +
                 std::to_string(a.dim) + " of '" + ta + "') here but over " + std::to_string(ef) +
                 " (dimension " + std::to_string(f.dim) + " of '" + tf + "') elsewhere",
             {{f.range, "'" + v + "' ranges over " + std::to_string(ef) + " here"}});
      }
    }
  }

  void checkBounds(const Statement& st, const BoundStatement& bs, const BoundsCheck& c) {
    const Subscript& s = *c.sub;
    std::int64_t e = extent(c.tensor, c.dim);
    std::int64_t lo = 0, hi = 0;
    bool overflow = false;
    try {
      std::int64_t base = b_.eval(p_, s.constant);
      lo = hi = base;
      for (std::size_t v = 0; v < s.coef.size(); ++v) {
        std::int64_t a = s.coef[v];
        if (a == 0) continue;
        lo = checkedAdd(lo, checkedMul(a, a > 0 ? bs.lo[v] : bs.hi[v] - 1));
        hi = checkedAdd(hi, checkedMul(a, a > 0 ? bs.hi[v] - 1 : bs.lo[v]));
      }
    } catch (const SymOverflow&) {
      overflow = true;
    }
    if (!overflow && lo >= 0 && hi < e) return;
    // The right-hand side is evaluated only where every dependent range is non-empty: a read
    // that leaves the box's hull may stay inside the tensor on the points that are evaluated
    // (a gradient's 'da[u] := dy[u-2k] * b[u]' reads b[u] only where k's range is not empty).
    if (!overflow && isRead(st, c)) {
      std::optional<std::int64_t> reached = reachesOutside(st, bs, s, e);
      if (!reached) return;
      lo = hi = *reached; // the message names a value that an evaluated point reaches
    }
    const std::string& name = shownName(p_, c.tensor);
    std::vector<Note> notes;
    bool fixedByBare = false;
    for (std::size_t v = 0; v < s.coef.size(); ++v) {
      if (s.coef[v] == 0) continue;
      const IndexVar& iv = st.vars[v];
      std::string range =
          iv.name + " in " + std::to_string(bs.lo[v]) + ":" + std::to_string(bs.hi[v]);
      if (iv.fromWhere) {
        notes.push_back({iv.whereRange, "'where' ranges are authoritative: " + range});
        continue;
      }
      for (const BareUse& u : st.bareUses)
        if (u.var == static_cast<int>(v)) {
          notes.push_back({u.range, "a bare use fixes the range: " + range});
          fixedByBare = true;
          break;
        }
    }
    if (fixedByBare)
      notes.push_back({{},
                       "to use only part of that range, give it with 'where', e.g. 'where " +
                           st.vars[static_cast<std::size_t>(firstFixed(st, s))].name + " in lo:hi'",
                       false});
    notes.push_back({{}, "wrap the subscript in pad(...) to read zeros outside the tensor", false});
    std::string reach = overflow ? "beyond 64-bit integers" : std::to_string(lo < 0 ? lo : hi);
    fail(src_, s.range,
         "subscript '" + std::string(src_.slice(s.range)) + "' goes out of bounds: it reaches " +
             reach + " but dimension " + std::to_string(c.dim) + " of '" + name + "' has extent " +
             std::to_string(e),
         notes);
  }
};

} // namespace

std::int64_t ConcreteBound::eval(const std::vector<std::int64_t>& vars) const {
  switch (kind) {
  case IndexBound::Kind::Affine: {
    std::int64_t v = constant;
    for (auto [var, c] : terms)
      v = checkedAdd(v, checkedMul(c, vars[static_cast<std::size_t>(var)]));
    return v;
  }
  case IndexBound::Kind::Max:
  case IndexBound::Kind::Min: {
    std::int64_t v = args[0].eval(vars);
    for (std::size_t i = 1; i < args.size(); ++i) {
      std::int64_t w = args[i].eval(vars);
      v = kind == IndexBound::Kind::Max ? std::max(v, w) : std::min(v, w);
    }
    return v;
  }
  case IndexBound::Kind::FDiv: return floorDiv(args[0].eval(vars), divisor);
  case IndexBound::Kind::CDiv: return ceilDiv(args[0].eval(vars), divisor);
  case IndexBound::Kind::Sum: {
    std::int64_t v = 0;
    for (std::size_t i = 0; i < args.size(); ++i)
      v = checkedAdd(v, checkedMul(scale[i], args[i].eval(vars)));
    return v;
  }
  }
  return 0;
}

int ConcreteBound::direction(int var) const {
  // Combines the directions of parts that are added (or taken the max/min of): monotone
  // parts that agree stay monotone.
  auto join = [](int a, int b) { return a == 0 ? b : b == 0 ? a : a == b ? a : 2; };
  switch (kind) {
  case IndexBound::Kind::Affine: {
    int d = 0;
    for (auto [v, c] : terms)
      if (v == var && c != 0) d = join(d, c > 0 ? 1 : -1);
    return d;
  }
  case IndexBound::Kind::Max:
  case IndexBound::Kind::Min: {
    int d = 0;
    for (const ConcreteBound& a : args) d = join(d, a.direction(var));
    return d;
  }
  case IndexBound::Kind::FDiv:
  case IndexBound::Kind::CDiv: return args[0].direction(var); // divisor > 0
  case IndexBound::Kind::Sum: {
    int d = 0;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const int a = args[i].direction(var);
      d = join(d, a == 2 || scale[i] >= 0 ? (scale[i] == 0 ? 0 : a) : -a);
    }
    return d;
  }
  }
  return 2;
}

std::pair<std::int64_t, std::int64_t>
ConcreteBound::interval(const std::vector<std::int64_t>& lo,
                        const std::vector<std::int64_t>& hiIncl) const {
  switch (kind) {
  case IndexBound::Kind::Affine: {
    std::int64_t a = constant, b = constant;
    for (auto [var, c] : terms) {
      auto v = static_cast<std::size_t>(var);
      a = checkedAdd(a, checkedMul(c, c > 0 ? lo[v] : hiIncl[v]));
      b = checkedAdd(b, checkedMul(c, c > 0 ? hiIncl[v] : lo[v]));
    }
    return {a, b};
  }
  case IndexBound::Kind::Max:
  case IndexBound::Kind::Min: {
    auto r = args[0].interval(lo, hiIncl);
    for (std::size_t i = 1; i < args.size(); ++i) {
      auto w = args[i].interval(lo, hiIncl);
      if (kind == IndexBound::Kind::Max)
        r = {std::max(r.first, w.first), std::max(r.second, w.second)};
      else
        r = {std::min(r.first, w.first), std::min(r.second, w.second)};
    }
    return r;
  }
  case IndexBound::Kind::FDiv: {
    auto r = args[0].interval(lo, hiIncl);
    return {floorDiv(r.first, divisor), floorDiv(r.second, divisor)};
  }
  case IndexBound::Kind::CDiv: {
    auto r = args[0].interval(lo, hiIncl);
    return {ceilDiv(r.first, divisor), ceilDiv(r.second, divisor)};
  }
  case IndexBound::Kind::Sum: {
    std::int64_t a = 0, b = 0;
    for (std::size_t i = 0; i < args.size(); ++i) {
      auto r = args[i].interval(lo, hiIncl);
      std::int64_t s = scale[i];
      a = checkedAdd(a, checkedMul(s, s > 0 ? r.first : r.second));
      b = checkedAdd(b, checkedMul(s, s > 0 ? r.second : r.first));
    }
    return {a, b};
  }
  }
  return {0, 0};
}

std::int64_t BoundProgram::eval(const Program& p, const Sym& s) const {
  SymEnv env;
  env.size = [&](const std::string& tensor, int dim) -> std::int64_t {
    int id = p.findTensor(tensor);
    if (id < 0) throw InternalError("range bound names unknown tensor " + tensor);
    const auto& shape = tensors[static_cast<std::size_t>(id)].shape;
    if (dim < 0 || static_cast<std::size_t>(dim) >= shape.size())
      fail(*p.source, p.tensors[static_cast<std::size_t>(id)].firstUse,
           "size(" + tensor + ", " + std::to_string(dim) + ") is out of range for its shape");
    return shape[static_cast<std::size_t>(dim)];
  };
  env.param = [&](const std::string& name) -> std::int64_t {
    int id = p.findParam(name);
    if (id < 0) throw InternalError("range bound names unknown parameter " + name);
    double v = params[static_cast<std::size_t>(id)];
    if (std::floor(v) != v || !std::isfinite(v) || std::fabs(v) > 9.0e15)
      fail(*p.source, p.params[static_cast<std::size_t>(id)].firstUse,
           "parameter '" + name + "' is used in a range and must be an integer");
    return static_cast<std::int64_t>(v);
  };
  return symEval(s, env);
}

std::pair<std::int64_t, std::int64_t> gatherValueRange(const Program& p, const BoundProgram& b,
                                                       int indexTensor) {
  std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  std::int64_t hi = std::numeric_limits<std::int64_t>::max();
  bool found = false;
  for (std::size_t k = 0; k < p.stmts.size(); ++k) {
    const Statement& st = p.stmts[k];
    const BoundStatement& bs = b.stmts[k];
    std::function<void(const CExpr&)> walk = [&](const CExpr& e) {
      for (std::size_t d = 0; d < e.subs.size(); ++d) {
        const Subscript& s = e.subs[d];
        if (!s.gather) continue;
        walk(*s.gather);
        if (s.gather->tensor != indexTensor) continue;
        found = true;
        // min and max of the subscript's affine part over the box.
        std::int64_t amin = b.eval(p, s.constant), amax = amin;
        for (std::size_t v = 0; v < s.coef.size(); ++v) {
          std::int64_t c = s.coef[v];
          if (c == 0 || bs.empty) continue;
          amin = checkedAdd(amin, checkedMul(c, c > 0 ? bs.lo[v] : bs.hi[v] - 1));
          amax = checkedAdd(amax, checkedMul(c, c > 0 ? bs.hi[v] - 1 : bs.lo[v]));
        }
        std::int64_t extent = b.tensors[static_cast<std::size_t>(e.tensor)].shape[d];
        lo = std::max(lo, checkedMul(amin, -1));
        hi = std::min(hi, checkedAdd(extent - 1, checkedMul(amax, -1)));
      }
      for (const CExprPtr& a : e.args) walk(*a);
    };
    try {
      walk(*st.rhs);
      if (st.lhs) walk(*st.lhs);
    } catch (const SymOverflow&) {
      return {0, -1};
    }
  }
  if (!found) return {0, -1};
  return {lo, hi};
}

std::vector<Note> parameterNotes(const Program& p, int param) {
  const ParamInfo& prm = p.params[static_cast<std::size_t>(param)];
  if (!prm.usedInIndex || prm.name.empty() ||
      !std::isupper(static_cast<unsigned char>(prm.name[0])))
    return {};
  return {{prm.firstUse, "'" + prm.name + "' is a scalar parameter, not an index: a name in a " +
                             "subscript that begins with an upper-case letter is a parameter " +
                             "(pass its value); to loop over it, write it in lower case or give " +
                             "it a range with 'where " + prm.name + " in lo:hi'"}};
}

BoundProgram bind(const Program& p, const std::vector<ArgSpec>& args,
                  const std::vector<double>& params, DType defaultDType) {
  BoundProgram b;
  Binder binder(p, b);
  binder.arguments(args, defaultDType);
  binder.parameters(params);
  for (std::size_t k = 0; k < p.stmts.size(); ++k) binder.statement(k);
  return b;
}

} // namespace einjit::dsl
