#include "dsl/Sema.h"

#include "dsl/InPlace.h"
#include "dsl/Parser.h"
#include "dsl/Printer.h"
#include "dsl/RangeInference.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

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

int Statement::numOutputVars() const {
  int n = 0;
  for (const IndexVar& v : vars) n += v.isOutput ? 1 : 0;
  return n;
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

namespace {

bool startsLower(const std::string& n) {
  return !n.empty() && (std::islower(static_cast<unsigned char>(n[0])) || n[0] == '_');
}

bool isIndexMode(const Expr& e, IndexMode* mode) {
  if (e.kind != ExprKind::Call) return false;
  if (e.name == "pad")
    *mode = IndexMode::Pad;
  else if (e.name == "clamp")
    *mode = IndexMode::Clamp;
  else if (e.name == "wrap")
    *mode = IndexMode::Wrap;
  else
    return false;
  return true;
}

std::string functionList() {
  std::string s;
#define FUNCTION(kind, fname, arity) s += std::string(s.empty() ? "" : ", ") + fname;
#include "dsl/Functions.def"
#undef FUNCTION
  return s + ", size(tensor, dim); in subscripts: pad, clamp, wrap";
}

// An affine form under construction: sum(coef[v] * v) + constant, plus at most one gather.
struct AffineForm {
  std::vector<std::int64_t> coef;
  Sym constant = symConst(0);
  CExprPtr gather;
  bool hasVars() const {
    return std::any_of(coef.begin(), coef.end(), [](std::int64_t c) { return c != 0; });
  }
};

class Sema {
public:
  explicit Sema(const ProgramAst& ast) : src_(*ast.source) {
    p_.source = ast.source;
    p_.ast = ast;
  }

  Program run() {
    collectTensorNames();
    for (std::size_t k = 0; k < p_.ast.stmts.size(); ++k) {
      try {
        statement(static_cast<int>(k));
      } catch (const SymOverflow&) {
        fail(src_, p_.ast.stmts[k].range,
             "integer overflow: a coefficient, constant or range bound of this statement does "
             "not fit in 64 bits");
      }
    }
    for (const auto& [id, dim, range] : pendingSizeChecks_) {
      int rank = p_.tensors[static_cast<std::size_t>(id)].rank;
      if (rank >= 0 && dim >= rank)
        fail(src_, range,
             "dimension " + std::to_string(dim) + " is out of range for '" +
                 p_.tensors[static_cast<std::size_t>(id)].name + "' of rank " +
                 std::to_string(rank));
    }
    findOutputs();
    return std::move(p_);
  }

private:
  const Source& src_;
  Program p_;
  std::set<std::string> tensorNames_;
  std::vector<std::set<int>> readsOf_; // per statement: tensors it reads
  // size(t, d) seen before t's rank was known: checked once every statement is analyzed.
  std::vector<std::tuple<int, int, SourceRange>> pendingSizeChecks_;
  // Current statement.
  int k_ = -1;
  Statement* st_ = nullptr;
  std::map<std::string, int> vars_;

  // --- names -------------------------------------------------------------------------------

  void collectTensorNames() {
    std::function<void(const Expr&)> walk = [&](const Expr& e) {
      if (e.kind == ExprKind::Access) tensorNames_.insert(e.name);
      // size(x, d) names a tensor too, possibly one passed only for its shape.
      if (e.kind == ExprKind::Call && e.name == "size" && !e.args.empty() &&
          e.args[0]->kind == ExprKind::Ident)
        tensorNames_.insert(e.args[0]->name);
      for (const auto& a : e.args) walk(*a);
    };
    for (const Stmt& s : p_.ast.stmts) {
      tensorNames_.insert(s.output);
      for (const auto& l : s.lhs) walk(*l);
      walk(*s.rhs);
      for (const RangeDecl& r : s.where) {
        walk(*r.lo);
        walk(*r.hi);
      }
    }
  }

  bool isTensorName(const std::string& n) const { return tensorNames_.count(n) != 0; }

  int tensorId(const std::string& name, SourceRange use, int rank, bool asArgument) {
    int id = p_.findTensor(name);
    if (id < 0) {
      TensorInfo t;
      t.name = name;
      t.rank = rank;
      t.firstUse = use;
      t.isArgument = asArgument;
      p_.tensors.push_back(std::move(t));
      id = static_cast<int>(p_.tensors.size()) - 1;
      if (asArgument) p_.arguments.push_back(id);
      return id;
    }
    TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
    if (rank >= 0) {
      if (t.rank < 0) {
        t.rank = rank;
      } else if (t.rank != rank) {
        fail(src_, use,
             "'" + name + "' is used with " + std::to_string(rank) + " index" +
                 (rank == 1 ? "" : "es") + " here but has rank " + std::to_string(t.rank),
             {{t.firstUse, "'" + name + "' first appears here"}});
      }
    }
    return id;
  }

  int paramId(const std::string& name, SourceRange use, bool inIndex) {
    int id = p_.findParam(name);
    if (id < 0) {
      p_.params.push_back({name, use, inIndex});
      return static_cast<int>(p_.params.size()) - 1;
    }
    if (inIndex) p_.params[static_cast<std::size_t>(id)].usedInIndex = true;
    return id;
  }

  // --- statements --------------------------------------------------------------------------

  void collectVarNames(const Expr& e, bool inSubscript, std::vector<std::string>& order,
                       std::set<std::string>& names) {
    if (e.kind == ExprKind::Ident && inSubscript && startsLower(e.name) && !isTensorName(e.name) &&
        names.insert(e.name).second)
      order.push_back(e.name);
    bool sub = inSubscript || e.kind == ExprKind::Access;
    // size(x, d) names a tensor, not an index.
    if (e.kind == ExprKind::Call && e.name == "size") return;
    for (const auto& a : e.args) collectVarNames(*a, sub, order, names);
  }

  void orderVars(const Expr& e, const std::set<std::string>& names,
                 std::vector<std::string>& order) {
    if (e.kind == ExprKind::Ident && names.count(e.name) &&
        std::find(order.begin(), order.end(), e.name) == order.end())
      order.push_back(e.name);
    if (e.kind == ExprKind::Call && e.name == "size") return;
    for (const auto& a : e.args) orderVars(*a, names, order);
  }

  void statement(int k) {
    const Stmt& s = p_.ast.stmts[static_cast<std::size_t>(k)];
    k_ = k;
    p_.stmts.emplace_back();
    st_ = &p_.stmts.back();
    st_->ast = s;
    st_->reduce = s.reduce;
    st_->assign = s.assign;
    readsOf_.emplace_back();
    vars_.clear();

    // Index variables: left-hand names, subscript names, 'where' names.
    // Left-hand indices: names for ':=' (the shape is theirs); any subscript for '='/'+='.
    std::set<std::string> names;
    std::vector<std::string> lhsNames; // output indices, in order of first appearance
    bool lhsBare = true;
    for (const ExprPtr& l : s.lhs) {
      if (l->kind != ExprKind::Ident) {
        lhsBare = false;
        if (s.assign == Assign::Define)
          fail(src_, l->range,
               "the left-hand side of ':=' takes index names only (such as y[i, j]); found '" +
                   printExpr(*l) + "'",
               {{{},
                 "write into an existing tensor with '=' or '+=' to use other subscripts",
                 false}});
        std::vector<std::string> found;
        collectVarNames(*l, true, found, names);
        for (const auto& n : found)
          if (std::find(lhsNames.begin(), lhsNames.end(), n) == lhsNames.end())
            lhsNames.push_back(n);
        continue;
      }
      if (isTensorName(l->name))
        fail(src_, l->range, "'" + l->name + "' is a tensor and cannot be an index");
      names.insert(l->name);
      if (std::find(lhsNames.begin(), lhsNames.end(), l->name) == lhsNames.end())
        lhsNames.push_back(l->name);
    }
    std::vector<std::string> subscriptNames;
    collectVarNames(*s.rhs, false, subscriptNames, names);
    std::set<std::string> whereNames;
    for (const RangeDecl& r : s.where) {
      if (isTensorName(r.index))
        fail(src_, r.indexRange, "'" + r.index + "' is a tensor and cannot be an index");
      if (!whereNames.insert(r.index).second)
        fail(src_, r.indexRange, "index '" + r.index + "' has two 'where' ranges");
      names.insert(r.index);
    }
    std::vector<std::string> order;
    for (const auto& n : lhsNames)
      if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
    orderVars(*s.rhs, names, order);
    for (const RangeDecl& r : s.where)
      if (std::find(order.begin(), order.end(), r.index) == order.end()) order.push_back(r.index);
    order = orderByRangeDependencies(s, order, names, lhsNames);
    for (const auto& n : order) {
      IndexVar v;
      v.name = n;
      v.isOutput = std::find(lhsNames.begin(), lhsNames.end(), n) != lhsNames.end();
      vars_[n] = static_cast<int>(st_->vars.size());
      st_->vars.push_back(std::move(v));
    }
    if (lhsBare) {
      for (const ExprPtr& l : s.lhs) {
        st_->lhsVars.push_back(vars_[l->name]);
        firstUse(vars_[l->name], l->range);
      }
    }

    // The output, before the right-hand side: arguments are ordered by first appearance.
    output(s);

    st_->lhs = outputAccess(s);
    st_->rhs = value(*s.rhs);

    for (const RangeDecl& r : s.where) {
      IndexVar& v = st_->vars[static_cast<std::size_t>(vars_[r.index])];
      v.fromWhere = true;
      v.whereRange = r.range;
      if (readsIndex(*r.lo) || readsIndex(*r.hi)) {
        v.dependent = true;
        v.loBound = bound(*r.lo);
        v.hiBound = bound(*r.hi);
        v.lo = v.hi = symConst(0);
      } else {
        v.lo = constant(*r.lo, "a range bound");
        v.hi = constant(*r.hi, "a range bound");
      }
      firstUse(vars_[r.index], r.indexRange);
    }

    if (s.assign == Assign::Overwrite) checkWritesOnce(s);

    inferRanges(p_, k);
  }

  // Index names a range bound reads (size() arguments are tensors).
  void boundNames(const Expr& e, const std::set<std::string>& names, std::set<std::string>& out) {
    if (e.kind == ExprKind::Ident && names.count(e.name)) out.insert(e.name);
    if (e.kind == ExprKind::Call && e.name == "size") return;
    for (const auto& a : e.args) boundNames(*a, names, out);
  }

  bool readsIndex(const Expr& e) {
    std::set<std::string> all;
    for (const auto& [n, id] : vars_) all.insert(n);
    std::set<std::string> used;
    boundNames(e, all, used);
    return !used.empty();
  }

  // Stable topological order: an index whose 'where' range reads other indices comes after
  // them. Output indices stay first (they are the outer loops).
  std::vector<std::string> orderByRangeDependencies(const Stmt& s,
                                                    const std::vector<std::string>& order,
                                                    const std::set<std::string>& names,
                                                    const std::vector<std::string>& lhsNames) {
    std::map<std::string, std::set<std::string>> deps;
    std::map<std::string, SourceRange> at;
    for (const RangeDecl& r : s.where) {
      boundNames(*r.lo, names, deps[r.index]);
      boundNames(*r.hi, names, deps[r.index]);
      at[r.index] = r.range;
      if (deps[r.index].count(r.index))
        fail(src_, r.range, "the range of '" + r.index + "' cannot depend on '" + r.index + "'");
    }
    auto isOut = [&](const std::string& n) {
      return std::find(lhsNames.begin(), lhsNames.end(), n) != lhsNames.end();
    };
    for (const auto& [n, d] : deps) {
      if (d.empty() || !isOut(n)) continue;
      if (s.assign == Assign::Define)
        fail(
            src_, at[n],
            "the range of output index '" + n + "' cannot depend on other indices in a ':=' " +
                "statement: the new tensor's shape must be a box",
            {{{}, "write into an existing tensor with '=' or '+=' for a triangular range", false}});
      for (const auto& u : d)
        if (!isOut(u))
          fail(src_, at[n],
               "the range of output index '" + n + "' cannot depend on reduction index '" + u +
                   "'");
    }
    std::vector<std::string> out;
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<std::string> group;
      for (const auto& n : order)
        if (isOut(n) == (pass == 0)) group.push_back(n);
      while (!group.empty()) {
        auto ready = std::find_if(group.begin(), group.end(), [&](const std::string& n) {
          for (const auto& u : deps[n])
            if (std::find(out.begin(), out.end(), u) == out.end()) return false;
          return true;
        });
        if (ready == group.end())
          fail(src_, at[group.front()],
               "the ranges of '" + group.front() +
                   "' and the indices it reads depend on each "
                   "other");
        out.push_back(*ready);
        group.erase(ready);
      }
    }
    return out;
  }

  // A range bound over index variables: max/min/fdiv/cdiv and sums of affine forms.
  IndexBound bound(const Expr& e) {
    IndexBound b;
    if (e.kind == ExprKind::Call && (e.name == "max" || e.name == "min")) {
      if (e.args.size() != 2) fail(src_, e.range, "'" + e.name + "' takes two arguments");
      b.kind = e.name == "max" ? IndexBound::Kind::Max : IndexBound::Kind::Min;
      for (const auto& a : e.args) b.args.push_back(bound(*a));
      return b;
    }
    if (e.kind == ExprKind::Call && (e.name == "fdiv" || e.name == "cdiv")) {
      if (e.args.size() != 2) fail(src_, e.range, "'" + e.name + "' takes two arguments");
      std::int64_t d;
      if (e.args[1]->kind != ExprKind::Number || !e.args[1]->isInteger ||
          (d = static_cast<std::int64_t>(e.args[1]->number)) <= 0)
        fail(src_, e.args[1]->range, "the divisor of '" + e.name + "' must be a positive integer");
      b.kind = e.name == "fdiv" ? IndexBound::Kind::FDiv : IndexBound::Kind::CDiv;
      b.args.push_back(bound(*e.args[0]));
      b.divisor = d;
      return b;
    }
    auto sum = [&](std::vector<IndexBound> args, std::vector<std::int64_t> scale) {
      // All affine: fold into one affine form.
      if (std::all_of(args.begin(), args.end(),
                      [](const IndexBound& a) { return a.kind == IndexBound::Kind::Affine; })) {
        IndexBound f;
        f.coef.assign(st_->vars.size(), 0);
        f.constant = symConst(0);
        for (std::size_t i = 0; i < args.size(); ++i) {
          for (std::size_t v = 0; v < f.coef.size(); ++v)
            f.coef[v] = checkedAdd(f.coef[v], checkedMul(scale[i], args[i].coef[v]));
          f.constant = symAdd(f.constant, symScale(args[i].constant, scale[i]));
        }
        return f;
      }
      IndexBound f;
      f.kind = IndexBound::Kind::Sum;
      f.args = std::move(args);
      f.scale = std::move(scale);
      return f;
    };
    if (e.kind == ExprKind::Binary && (e.binop == BinOp::Add || e.binop == BinOp::Sub))
      return sum({bound(*e.args[0]), bound(*e.args[1])}, {1, e.binop == BinOp::Add ? 1 : -1});
    if (e.kind == ExprKind::Unary && e.unop == UnOp::Neg) return sum({bound(*e.args[0])}, {-1});
    if (e.kind == ExprKind::Binary && e.binop == BinOp::Mul) {
      IndexBound a = bound(*e.args[0]), c = bound(*e.args[1]);
      std::int64_t k;
      auto isConst = [&](const IndexBound& x) {
        return x.kind == IndexBound::Kind::Affine &&
               std::all_of(x.coef.begin(), x.coef.end(), [](std::int64_t v) { return v == 0; }) &&
               symIsConst(x.constant, &k);
      };
      if (isConst(c)) return sum({a}, {k});
      if (isConst(a)) return sum({c}, {k});
    }
    AffineForm f = affine(e, false);
    b.coef = f.coef;
    b.constant = f.constant;
    return b;
  }

  void firstUse(int var, SourceRange r) {
    IndexVar& v = st_->vars[static_cast<std::size_t>(var)];
    if (v.firstUse.end == 0 || r.begin < v.firstUse.begin) v.firstUse = r;
  }

  void output(const Stmt& s) {
    int rank = static_cast<int>(s.lhs.size());
    int id = p_.findTensor(s.output);
    if (s.assign == Assign::Define) {
      if (id >= 0) {
        const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
        if (t.definedBy >= 0)
          fail(src_, s.outputRange,
               "'" + s.output + "' is already defined by statement " +
                   std::to_string(t.definedBy + 1) + "; use '=' or '+=' to write it again",
               {{t.firstUse, "defined here"}});
        fail(src_, s.outputRange,
             "'" + s.output + "' already exists (it is passed in); use '=' or '+=' to write it",
             {{t.firstUse, "'" + s.output + "' first appears here"}});
      }
      id = tensorId(s.output, s.outputRange, rank, false);
      p_.tensors[static_cast<std::size_t>(id)].definedBy = k_;
    } else {
      id = tensorId(s.output, s.outputRange, rank, true);
    }
    p_.tensors[static_cast<std::size_t>(id)].writtenBy.push_back(k_);
    st_->output = id;
  }

  // The left-hand side as an access of the output.
  CExprPtr outputAccess(const Stmt& s) {
    CExpr c{CKind::Read, s.outputBracketed ? SourceRange::join(s.outputRange, s.lhs.back()->range)
                                           : s.outputRange};
    c.tensor = st_->output;
    for (const ExprPtr& l : s.lhs) {
      Subscript sub = subscript(*l);
      // pad() on the left drops writes outside the tensor: meaningful for a scatter ('+='),
      // where the forward domain may reach past the edges (the gradient of a padded read).
      // pad/clamp/wrap on the left are scatters ('+=' only): pad drops writes outside the
      // tensor, clamp and wrap fold them onto the edge or around (the gradients of such reads).
      if (sub.mode != IndexMode::Plain) {
        if (s.assign != Assign::Accumulate)
          fail(src_, l->range,
               std::string(indexModeName(sub.mode)) +
                   "() on the left-hand side needs '+=' (several writes may land on one element "
                   "or outside the tensor)");
        st_->scatter = true;
      }
      if (sub.gather && s.assign != Assign::Accumulate)
        fail(src_, l->range,
             "a gather on the left-hand side (a scatter) may hit an element several times; "
             "write it with '+='");
      if (sub.gather) st_->scatter = true;
      c.subs.push_back(std::move(sub));
    }
    return make(std::move(c));
  }

  // '=' must write each element once: the output indices map injectively to elements when
  // the left-hand coefficient matrix has full column rank.
  void checkWritesOnce(const Stmt& s) {
    if (!writesEachElementOnce(*st_))
      fail(src_, SourceRange::join(s.lhs.front()->range, s.lhs.back()->range),
           "with '=' every element must be written once, but this left-hand side reaches some "
           "elements from several index values",
           {{{}, "accumulate with '+=' instead", false}});
  }

  // --- value expressions -------------------------------------------------------------------

  CExprPtr make(CExpr e) { return std::make_shared<const CExpr>(std::move(e)); }

  int readTensor(const Expr& e, int rank, bool asIndex) {
    // '=' and '+=' may read the tensor they write (InPlace.h); ':=' creates it here.
    const Stmt& s = p_.ast.stmts[static_cast<std::size_t>(k_)];
    if (e.name == s.output && s.assign == Assign::Define)
      fail(src_, e.nameRange.end ? e.nameRange : e.range,
           "'" + e.name + "' is defined by this statement and cannot be read in it",
           {{{}, "to update a tensor in place, pass it in and write it with '=' or '+='", false}});
    int id = tensorId(e.name, e.nameRange.end ? e.nameRange : e.range, rank, true);
    TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
    (asIndex ? t.readAsIndex : t.readAsValue) = true;
    readsOf_.back().insert(id);
    return id;
  }

  CExprPtr read(const Expr& e, bool asIndex) {
    CExpr c{CKind::Read, e.range};
    c.tensor = readTensor(e, static_cast<int>(e.args.size()), asIndex);
    for (const ExprPtr& a : e.args) c.subs.push_back(subscript(*a));
    return make(std::move(c));
  }

  CExprPtr value(const Expr& e) {
    switch (e.kind) {
    case ExprKind::Number: {
      CExpr c{CKind::Const, e.range};
      c.value = e.number;
      return make(std::move(c));
    }
    case ExprKind::Ident: {
      auto v = vars_.find(e.name);
      if (v != vars_.end()) {
        CExpr c{CKind::Index, e.range};
        c.var = v->second;
        return make(std::move(c));
      }
      if (isTensorName(e.name)) {
        CExpr c{CKind::Read, e.range};
        c.tensor = readTensor(e, 0, false);
        return make(std::move(c));
      }
      CExpr c{CKind::Param, e.range};
      c.param = paramId(e.name, e.range, false);
      return make(std::move(c));
    }
    case ExprKind::Access: return read(e, false);
    case ExprKind::Call: {
      IndexMode mode;
      if (isIndexMode(e, &mode))
        fail(src_, e.nameRange,
             "'" + e.name + "(...)' is only allowed as a whole subscript, as in x[" + e.name +
                 "(i-1)]");
      if (e.name == "size") return sizeValue(e);
      auto fn = lookupFunction(e.name);
      if (!fn)
        fail(src_, e.nameRange, "unknown function '" + e.name + "'",
             {{{}, "functions: " + functionList(), false}});
      if (static_cast<int>(e.args.size()) != functionArity(*fn))
        fail(src_, e.range,
             "'" + e.name + "' takes " + std::to_string(functionArity(*fn)) + " argument" +
                 (functionArity(*fn) == 1 ? "" : "s") + ", not " + std::to_string(e.args.size()));
      CExpr c{CKind::Call, e.range};
      c.fn = *fn;
      for (const ExprPtr& a : e.args) c.args.push_back(value(*a));
      return make(std::move(c));
    }
    case ExprKind::Unary:
    case ExprKind::Binary:
    case ExprKind::Ternary: {
      CExpr c{e.kind == ExprKind::Unary    ? CKind::Unary
              : e.kind == ExprKind::Binary ? CKind::Binary
                                           : CKind::Ternary,
              e.range};
      c.unop = e.unop;
      c.binop = e.binop;
      for (const ExprPtr& a : e.args) c.args.push_back(value(*a));
      return make(std::move(c));
    }
    }
    throw InternalError("unknown expression kind");
  }

  // size(x, d): the tensor and the dimension (an integer literal).
  std::pair<int, int> sizeArgs(const Expr& e) {
    if (e.args.size() != 2 || e.args[0]->kind != ExprKind::Ident ||
        e.args[1]->kind != ExprKind::Number || !e.args[1]->isInteger)
      fail(src_, e.range, "size() takes a tensor name and a dimension number, as in size(x, 0)");
    const Expr& t = *e.args[0];
    if (!isTensorName(t.name))
      fail(src_, t.range, "'" + t.name + "' is not a tensor (it is never indexed or assigned)");
    int id = tensorId(t.name, t.range, -1, true);
    if (t.name == p_.ast.stmts[static_cast<std::size_t>(k_)].output &&
        p_.tensors[static_cast<std::size_t>(id)].definedBy == k_)
      fail(src_, t.range, "the shape of '" + t.name + "' is being defined by this statement");
    int dim = static_cast<int>(e.args[1]->number);
    int rank = p_.tensors[static_cast<std::size_t>(id)].rank;
    if (rank < 0) pendingSizeChecks_.emplace_back(id, dim, e.args[1]->range);
    p_.sizeUses.push_back({id, dim, e.range});
    if (rank >= 0 && dim >= rank)
      fail(src_, e.args[1]->range,
           "dimension " + std::to_string(dim) + " is out of range for '" + t.name + "' of rank " +
               std::to_string(rank));
    return {id, dim};
  }

  CExprPtr sizeValue(const Expr& e) {
    auto [id, dim] = sizeArgs(e);
    CExpr c{CKind::Size, e.range};
    c.tensor = id;
    c.dim = dim;
    return make(std::move(c));
  }

  // --- subscripts --------------------------------------------------------------------------

  Subscript subscript(const Expr& e) {
    Subscript s;
    s.range = e.range;
    const Expr* inner = &e;
    if (isIndexMode(e, &s.mode)) {
      if (e.args.size() != 1) fail(src_, e.range, "'" + e.name + "' takes one index expression");
      inner = e.args[0].get();
      IndexMode nested;
      if (isIndexMode(*inner, &nested))
        fail(src_, inner->range, "pad, clamp and wrap cannot be nested");
    }
    AffineForm f = affine(*inner, true);
    s.coef = std::move(f.coef);
    s.coef.resize(st_->vars.size(), 0);
    s.constant = f.constant;
    s.gather = f.gather;
    for (std::size_t v = 0; v < s.coef.size(); ++v)
      if (s.coef[v] != 0) firstUse(static_cast<int>(v), e.range);
    return s;
  }

  [[noreturn]] void notAffine(const Expr& e, const std::string& why) {
    fail(src_, e.range, "subscript is not affine: " + why,
         {{{},
           "a subscript is a sum of integer multiples of index variables and integer "
           "constants or parameters (2i+k-1, N-1-i), optionally wrapped in "
           "pad/clamp/wrap, or a gather x[idx[i]]",
           false}});
  }

  AffineForm affine(const Expr& e, bool gatherAllowed) {
    AffineForm f;
    f.coef.assign(st_->vars.size(), 0);
    switch (e.kind) {
    case ExprKind::Number:
      if (!e.isInteger) notAffine(e, "'" + printExpr(e) + "' is not an integer");
      f.constant = symConst(static_cast<std::int64_t>(e.number));
      return f;
    case ExprKind::Ident: {
      auto v = vars_.find(e.name);
      if (v != vars_.end()) {
        f.coef[static_cast<std::size_t>(v->second)] = 1;
        return f;
      }
      if (isTensorName(e.name))
        fail(src_, e.range,
             "tensor '" + e.name + "' cannot be used as an index this way; write " + e.name +
                 "[...] to gather through it");
      f.constant = symParam(e.name);
      paramId(e.name, e.range, true);
      return f;
    }
    case ExprKind::Access: {
      if (!gatherAllowed)
        notAffine(e, "a gather through '" + e.name +
                         "' must be added to the subscript, not scaled, negated or nested twice");
      f.gather = read(e, true);
      return f;
    }
    case ExprKind::Call: {
      IndexMode mode;
      if (isIndexMode(e, &mode))
        fail(src_, e.range, "'" + e.name + "(...)' must be the whole subscript");
      if (e.name == "size") {
        auto [id, dim] = sizeArgs(e);
        f.constant = symSize(p_.tensors[static_cast<std::size_t>(id)].name, dim);
        return f;
      }
      if (e.name == "max" || e.name == "min" || e.name == "fdiv" || e.name == "cdiv") {
        if (e.args.size() != 2) notAffine(e, "'" + e.name + "' takes two arguments");
        AffineForm a = affine(*e.args[0], false), b = affine(*e.args[1], false);
        if (a.hasVars() || b.hasVars())
          notAffine(e, "'" + e.name + "' of index variables is not affine");
        if (e.name == "max")
          f.constant = symMax({a.constant, b.constant});
        else if (e.name == "min")
          f.constant = symMin({a.constant, b.constant});
        else {
          std::int64_t d;
          if (!symIsConst(b.constant, &d) || d <= 0)
            notAffine(e, "the divisor of '" + e.name + "' must be a positive integer constant");
          f.constant = e.name == "fdiv" ? symFloorDiv(a.constant, d) : symCeilDiv(a.constant, d);
        }
        return f;
      }
      notAffine(e, "'" + e.name + "(...)' is not allowed in a subscript");
    }
    case ExprKind::Unary: {
      if (e.unop != UnOp::Neg) notAffine(e, "'!' is not allowed in a subscript");
      AffineForm a = affine(*e.args[0], false);
      for (auto& c : a.coef) c = checkedMul(c, -1);
      a.constant = symScale(a.constant, -1);
      return a;
    }
    case ExprKind::Binary: {
      if (e.binop == BinOp::Add || e.binop == BinOp::Sub) {
        AffineForm a = affine(*e.args[0], gatherAllowed);
        AffineForm b = affine(*e.args[1], gatherAllowed && e.binop == BinOp::Add);
        std::int64_t sign = e.binop == BinOp::Add ? 1 : -1;
        if (a.gather && b.gather) notAffine(e, "a subscript can gather through one tensor only");
        for (std::size_t v = 0; v < a.coef.size(); ++v)
          a.coef[v] = checkedAdd(a.coef[v], checkedMul(sign, b.coef[v]));
        a.constant = symAdd(a.constant, symScale(b.constant, sign));
        if (b.gather) a.gather = b.gather;
        return a;
      }
      if (e.binop == BinOp::Mul) {
        AffineForm a = affine(*e.args[0], false), b = affine(*e.args[1], false);
        if (a.hasVars() && b.hasVars()) notAffine(e, "product of index variables");
        if (b.hasVars()) std::swap(a, b);
        std::int64_t c;
        if (!symIsConst(b.constant, &c)) {
          if (a.hasVars())
            notAffine(e, "the coefficient of an index variable must be an integer constant, not '" +
                             symPrint(b.constant) + "'");
          if (!symIsConst(a.constant, &c))
            notAffine(e, "a product of two parameters is not supported in a subscript");
          std::swap(a, b);
        }
        for (auto& x : a.coef) x = checkedMul(x, c);
        a.constant = symScale(a.constant, c);
        return a;
      }
      notAffine(e, "operator '" + std::string(binOpSpelling(e.binop)) +
                       "' is not allowed (use fdiv/cdiv of constants for division)");
    }
    case ExprKind::Ternary: notAffine(e, "a conditional is not allowed in a subscript");
    }
    throw InternalError("unknown expression kind");
  }

  // A range bound: integer constants, parameters and extents, no index variables.
  Sym constant(const Expr& e, const char* what) {
    std::function<void(const Expr&)> noVars = [&](const Expr& x) {
      if (x.kind == ExprKind::Ident && vars_.count(x.name))
        fail(src_, x.range, "index '" + x.name + "' cannot appear in " + what);
      if (x.kind == ExprKind::Access)
        fail(src_, x.range, std::string("a tensor element cannot appear in ") + what);
      if (x.kind == ExprKind::Call && x.name == "size") return;
      for (const auto& a : x.args) noVars(*a);
    };
    noVars(e);
    return affine(e, false).constant;
  }

  // --- outputs -----------------------------------------------------------------------------

  void findOutputs() {
    for (std::size_t id = 0; id < p_.tensors.size(); ++id) {
      const TensorInfo& t = p_.tensors[id];
      if (t.writtenBy.empty()) continue;
      int last = t.writtenBy.back();
      bool readLater = false;
      for (std::size_t k = static_cast<std::size_t>(last) + 1; k < readsOf_.size(); ++k)
        readLater |= readsOf_[k].count(static_cast<int>(id)) != 0;
      if (!readLater) p_.outputs.push_back(static_cast<int>(id));
    }
    // In order of their last write, so the last statement's output comes last.
    std::stable_sort(p_.outputs.begin(), p_.outputs.end(), [&](int a, int b) {
      return p_.tensors[static_cast<std::size_t>(a)].writtenBy.back() <
             p_.tensors[static_cast<std::size_t>(b)].writtenBy.back();
    });
  }
};

} // namespace

Program analyze(const ProgramAst& ast) { return Sema(ast).run(); }

Program check(const ProgramAst& ast) { return insertSnapshots(analyze(ast)); }

Program check(const std::string& text, const std::string& name) {
  return check(parse(std::make_shared<Source>(text, name)));
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
