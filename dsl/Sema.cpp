#include "dsl/Sema.h"

#include "dsl/InPlace.h"
#include "dsl/Printer.h"

#include <algorithm>
#include <cctype>
#include <functional>

namespace einjit::dsl {

namespace {

bool startsLower(const std::string& n) {
  return !n.empty() && (std::islower(static_cast<unsigned char>(n[0])) || n[0] == '_');
}

} // namespace

Sema::Sema(const ProgramAst& ast) : src_(*ast.source) {
  p_.source = ast.source;
  p_.ast = ast;
  collectTensorNames();
}

Program Sema::finish() {
  for (const auto& [id, dim, range] : pendingSizeChecks_) {
    int rank = p_.tensors[static_cast<std::size_t>(id)].rank;
    if (rank >= 0 && dim >= rank)
      fail(src_, range,
           "dimension " + std::to_string(dim) + " is out of range for '" +
               p_.tensors[static_cast<std::size_t>(id)].name + "' of rank " + std::to_string(rank));
  }
  findOutputs();
  return std::move(p_);
}

void Sema::collectTensorNames() {
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

bool Sema::isTensorName(const std::string& n) const { return tensorNames_.count(n) != 0; }

int Sema::tensorId(const std::string& name, SourceRange use, int rank, bool asArgument) {
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

int Sema::paramId(const std::string& name, SourceRange use, bool inIndex) {
  int id = p_.findParam(name);
  if (id < 0) {
    p_.params.push_back({name, use, inIndex});
    return static_cast<int>(p_.params.size()) - 1;
  }
  if (inIndex) p_.params[static_cast<std::size_t>(id)].usedInIndex = true;
  return id;
}

void Sema::collectVarNames(const Expr& e, bool inSubscript, std::vector<std::string>& order,
                           std::set<std::string>& names) {
  if (e.kind == ExprKind::Ident && inSubscript && startsLower(e.name) && !isTensorName(e.name) &&
      names.insert(e.name).second)
    order.push_back(e.name);
  bool sub = inSubscript || e.kind == ExprKind::Access;
  // size(x, d) names a tensor, not an index.
  if (e.kind == ExprKind::Call && e.name == "size") return;
  for (const auto& a : e.args) collectVarNames(*a, sub, order, names);
}

void Sema::orderVars(const Expr& e, const std::set<std::string>& names,
                     std::vector<std::string>& order) {
  if (e.kind == ExprKind::Ident && names.count(e.name) &&
      std::find(order.begin(), order.end(), e.name) == order.end())
    order.push_back(e.name);
  if (e.kind == ExprKind::Call && e.name == "size") return;
  for (const auto& a : e.args) orderVars(*a, names, order);
}

void Sema::statement(int k) {
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
        if (std::find(lhsNames.begin(), lhsNames.end(), n) == lhsNames.end()) lhsNames.push_back(n);
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
}

// Index names a range bound reads (size() arguments are tensors).
void Sema::boundNames(const Expr& e, const std::set<std::string>& names,
                      std::set<std::string>& out) {
  if (e.kind == ExprKind::Ident && names.count(e.name)) out.insert(e.name);
  if (e.kind == ExprKind::Call && e.name == "size") return;
  for (const auto& a : e.args) boundNames(*a, names, out);
}

bool Sema::readsIndex(const Expr& e) {
  std::set<std::string> all;
  for (const auto& [n, id] : vars_) all.insert(n);
  std::set<std::string> used;
  boundNames(e, all, used);
  return !used.empty();
}

// Stable topological order: an index whose 'where' range reads other indices comes after
// them. Output indices stay first (they are the outer loops).
std::vector<std::string> Sema::orderByRangeDependencies(const Stmt& s,
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
      fail(src_, at[n],
           "the range of output index '" + n + "' cannot depend on other indices in a ':=' " +
               "statement: the new tensor's shape must be a box",
           {{{}, "write into an existing tensor with '=' or '+=' for a triangular range", false}});
    for (const auto& u : d)
      if (!isOut(u))
        fail(src_, at[n],
             "the range of output index '" + n + "' cannot depend on reduction index '" + u + "'");
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

void Sema::firstUse(int var, SourceRange r) {
  IndexVar& v = st_->vars[static_cast<std::size_t>(var)];
  if (v.firstUse.end == 0 || r.begin < v.firstUse.begin) v.firstUse = r;
}

void Sema::output(const Stmt& s) {
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
CExprPtr Sema::outputAccess(const Stmt& s) {
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
void Sema::checkWritesOnce(const Stmt& s) {
  if (!writesEachElementOnce(*st_))
    fail(src_, SourceRange::join(s.lhs.front()->range, s.lhs.back()->range),
         "with '=' every element must be written once, but this left-hand side reaches some "
         "elements from several index values",
         {{{}, "accumulate with '+=' instead", false}});
}

void Sema::findOutputs() {
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

} // namespace einjit::dsl
