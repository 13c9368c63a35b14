// The reverse sweep of differentiate(): which tensors carry gradient, the sites of each forward
// statement last to first (reads of one element merged), and the final program (the forward
// statements the gradient reads, recomputed, then the gradient statements).
#include "grad/GradientBuilder.h"
#include "grad/ShiftInvariance.h"

#include "dsl/Printer.h"
#include "grad/Derivative.h"
#include "grad/UnusedIndices.h"

#include <algorithm>

namespace einjit::grad {

using namespace einjit::dsl;
using namespace einjit::grad::syntax;

GradientBuilder::GradientBuilder(const Program& p, const std::vector<std::string>& wrt,
                                 bool scatterOnly)
    : p_(p), src_(*p.source), scatterOnly_(scatterOnly) {
  for (const TensorInfo& t : p.tensors) used_.insert(t.name);
  for (const ParamInfo& prm : p.params) used_.insert(prm.name);
  for (const Statement& st : p.stmts)
    for (const IndexVar& v : st.vars) used_.insert(v.name);
  chooseWrt(wrt);
}

Gradient GradientBuilder::run() {
  if (wrtIds_.empty())
    throw Error("nothing to differentiate: the program reads no floating-point tensor argument "
                "as a value (a tensor used only through size() has no gradient)");
  // Which tensors carry gradient: the requested inputs and every result computed from them.
  needs_.assign(p_.tensors.size(), false);
  for (int id : wrtIds_) needs_[static_cast<std::size_t>(id)] = true;
  // A tensor the outputs do not depend on (ShiftInvariance.h) carries none: its reads are no
  // sites, and the statement that computes it is not differentiated.
  const std::vector<bool> invariant = shiftInvariant(p_);
  for (const Statement& st : p_.stmts)
    if (readsNeeding(st) && !invariant[static_cast<std::size_t>(st.output)])
      needs_[static_cast<std::size_t>(st.output)] = true;
  // Output gradients are inputs of the gradient program.
  gradName_.assign(p_.tensors.size(), "");
  for (int id : p_.outputs) {
    std::string n = fresh("d" + p_.tensors[static_cast<std::size_t>(id)].name);
    gradName_[static_cast<std::size_t>(id)] = n;
    passedIn_.insert(id);
    g_.outputGrads.push_back(n);
  }
  for (std::size_t k = p_.stmts.size(); k-- > 0;) {
    cur_ = k;
    try {
      statement(k);
    } catch (const SymOverflow&) {
      fail(src_, p_.stmts[k].ast.range,
           "cannot differentiate this statement: solving its index equations leaves 64-bit "
           "integers (coefficients or constants too large)");
    }
  }
  cur_ = static_cast<std::size_t>(-1);
  // Inputs that no contribution reached have a zero gradient.
  for (int id : wrtIds_) {
    const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
    if (!defined_.count(id)) zeroFill(id);
    g_.inputGrads.push_back(gradOf(id));
    (void)t;
  }
  assemble();
  return std::move(g_);
}

std::string GradientBuilder::fresh(const std::string& base) {
  std::string n = base;
  for (int i = 1; used_.count(n); ++i) n = base + "_" + std::to_string(i);
  used_.insert(n);
  return n;
}

void GradientBuilder::chooseWrt(const std::vector<std::string>& wrt) {
  if (wrt.empty()) {
    for (int id : p_.arguments) {
      const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
      if (t.readAsValue && !t.readAsIndex && t.writtenBy.empty()) wrtIds_.push_back(id);
    }
    return;
  }
  for (const std::string& n : wrt) {
    int id = p_.findTensor(n);
    std::string args;
    for (int a : p_.arguments)
      args += (args.empty() ? "" : ", ") + p_.tensors[static_cast<std::size_t>(a)].name;
    if (id < 0 || !p_.tensors[static_cast<std::size_t>(id)].isArgument)
      throw Error("cannot differentiate with respect to '" + n +
                  "': it is not a tensor argument of the program (arguments: " + args + ")");
    const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
    if (t.readAsIndex)
      fail(src_, t.firstUse,
           "cannot differentiate with respect to '" + n + "': it holds integer indices");
    if (!t.writtenBy.empty())
      fail(src_, t.firstUse,
           "cannot differentiate with respect to '" + n + "': the program writes it");
    if (std::find(wrtIds_.begin(), wrtIds_.end(), id) == wrtIds_.end()) wrtIds_.push_back(id);
  }
}

bool GradientBuilder::readsNeeding(const Statement& st) const {
  bool found = false;
  std::function<void(const CExprPtr&)> walk = [&](const CExprPtr& e) {
    if (e->kind == CKind::Read && needs_[static_cast<std::size_t>(e->tensor)]) found = true;
    for (const auto& a : e->args) walk(a);
  };
  walk(st.rhs);
  return found;
}

std::string GradientBuilder::gradOf(int tensor) {
  std::string& n = gradName_[static_cast<std::size_t>(tensor)];
  if (n.empty()) n = fresh("d" + p_.tensors[static_cast<std::size_t>(tensor)].name);
  return n;
}

// Statements before k that write tensor t.
bool GradientBuilder::writtenBefore(int t, std::size_t k) const {
  for (int j : p_.tensors[static_cast<std::size_t>(t)].writtenBy)
    if (static_cast<std::size_t>(j) < k) return true;
  return false;
}

// Whether the statement's output holds, at every element it writes, exactly the value of its
// right-hand side there, in the gradient program too: an element-wise ':=' (no reduction index)
// of a tensor no other statement writes (so the gradient program's recomputed forward leaves
// it as this statement wrote it) and the caller does not pass in. Then a derivative written in
// terms of the call's own value (exp(u)' = exp(u)) reads the output instead of computing the
// call again.
bool GradientBuilder::holdsItsValue(const Statement& st) const {
  const TensorInfo& out = p_.tensors[static_cast<std::size_t>(st.output)];
  if (st.assign != Assign::Define || st.scatter || out.isArgument || out.writtenBy.size() != 1 ||
      st.rhs->kind != CKind::Call || st.lhsVars.empty())
    return false;
  return std::all_of(st.vars.begin(), st.vars.end(), [](const IndexVar& v) { return v.isOutput; });
}

void GradientBuilder::statement(std::size_t k) {
  const Statement& st = p_.stmts[k];
  int y = st.output;
  if (!defined_.count(y) && !passedIn_.count(y)) return; // no gradient reaches this version
  // The gradient of the version this statement makes; its summand's reads get it.
  dyName_ = gradName_[static_cast<std::size_t>(y)];
  // Versions (docs/GRADIENTS.md): an '=' or '+=' over a tensor that an earlier statement
  // computed from differentiated inputs makes a new version of it, and the old version's
  // gradient comes from this one passed back through the statement. '+=' with (+) passes it
  // unchanged (the same gradient tensor goes on collecting the reads of the old version).
  // An '=' that writes every element hides the old values from everything after it: the old
  // version's gradient is only what reads of it contribute, from here on a new tensor (this
  // statement's summand still reads the gradient of the new version, dyName_). An '=' that
  // keeps some elements would pass the gradient on with the covered elements zeroed, which
  // is not done.
  const bool oldVersion = st.assign != Assign::Define && writtenBefore(y, k) && needsGrad(y);
  if (oldVersion && st.assign == Assign::Overwrite) {
    if (!coversWhole(st))
      fail(src_, st.ast.assignRange,
           "cannot differentiate this '=': it overwrites some of the values of '" +
               tensorName(y) + "' that an earlier statement computed and keeps the others "
               "(write every element, use '+=', or compute the result into a new tensor with "
               "':=')");
    gradName_[static_cast<std::size_t>(y)] = fresh("d" + tensorName(y));
    defined_.erase(y);
    passedIn_.erase(y);
  }
  // (max)/(min)/(*) '+=' combine with the old value, which the statement loses.
  if (st.assign == Assign::Accumulate && st.reduce != Reduce::Add &&
      (oldVersion || readsNeeding(st)))
    fail(src_, st.ast.assignRange,
         "cannot differentiate '+=' with a (" + std::string(reduceSpelling(st.reduce)) +
             ") reduction: the value it combines with is overwritten (write the reduction "
             "into a new tensor with ':=' and combine it in a second statement)");
  if (!readsNeeding(st)) return;
  // Every read of a tensor that carries gradient is a site, except reads of a value no
  // statement computed yet (an argument's old value, before the program writes it).
  std::vector<const CExpr*> sites;
  std::function<void(const CExprPtr&)> walk = [&](const CExprPtr& e) {
    const bool written = e->kind == CKind::Read &&
                         !p_.tensors[static_cast<std::size_t>(e->tensor)].writtenBy.empty();
    if (e->kind == CKind::Read && needsGrad(e->tensor) && (!written || writtenBefore(e->tensor, k)))
      sites.push_back(e.get());
    for (const auto& a : e->args) walk(a);
  };
  walk(st.rhs);
  // Reads of the statement's own output (in place: the old version) last: with '+=' their
  // contribution goes into the gradient tensor that the other reads' contributions read as dY.
  std::stable_partition(sites.begin(), sites.end(),
                        [&](const CExpr* s) { return s->tensor != y; });
  // (max)/(min) and (*) become a (+) statement whose summand carries the local derivative
  // of the reduction as a factor that is not differentiated itself.
  Statement sum = st;
  sum.reduce = Reduce::Add;
  if (st.reduce == Reduce::Max || st.reduce == Reduce::Min) sum.rhs = selection(st);
  if (st.reduce == Reduce::Mul) sum.rhs = product(st);
  // Reads of the same element (x[i] * x[i]) are one contribution with the partials added.
  // The statement's subexpressions are simplified once; each derivative's simplifier (its
  // memo holds what that derivative builds, and goes with it) finds them done.
  Simplifier forward;
  forward(sum.rhs);
  if (sum.rhs == st.rhs && holdsItsValue(st)) forward.holds(sum.rhs.get(), st.lhs);
  std::vector<bool> merged(sites.size(), false);
  std::size_t size = 0; // of the partial derivatives so far, written out
  // Each read's partial derivative can be as large as the statement (a product of n factors
  // has n partials of n - 1 factors each): the bound keeps the gradient program, and the time
  // to build and compile it, within reach.
  auto bound = [&](std::size_t more) {
    if (size + more > kMaxGradientSize)
      fail(src_, st.ast.range,
           "cannot differentiate this statement: its gradient would have more than " +
               std::to_string(kMaxGradientSize) + " operations (" +
               std::to_string(sites.size()) +
               " reads of differentiated tensors, each with a partial derivative about as large "
               "as the statement); split it into several statements, e.g. partial products "
               "into tensors of their own");
  };
  for (std::size_t a = 0; a < sites.size(); ++a) {
    if (merged[a]) continue;
    CExprPtr partial = Simplifier(&forward).derivative(sum.rhs, sites[a]);
    // The partials of reads of one element are added as they come, so that equal terms
    // combine at once (a product of n equal factors: one term n * f^(n-1), not n terms).
    // `grown` bounds what was added since partial was last measured.
    std::size_t grown = printedSize(partial, kMaxGradientSize + 1);
    bound(grown);
    for (std::size_t b = a + 1; b < sites.size(); ++b)
      if (!merged[b] && sameExpr(*sites[a], *sites[b])) {
        merged[b] = true;
        CExprPtr d = Simplifier(&forward).derivative(sum.rhs, sites[b]);
        grown += printedSize(d, kMaxGradientSize + 1);
        partial = sumOfSimplified(partial, d);
        if (size + grown > kMaxGradientSize) {
          grown = printedSize(partial, kMaxGradientSize + 1);
          bound(grown);
        }
      }
    grown = printedSize(partial, kMaxGradientSize + 1);
    bound(grown);
    size += grown;
    contribution(sum, *sites[a], partial);
  }
}

int GradientBuilder::addTensor(const std::string& name) {
  extraTensors_.push_back(name);
  return static_cast<int>(p_.tensors.size() + extraTensors_.size() - 1);
}

const std::string& GradientBuilder::tensorName(int id) const {
  auto i = static_cast<std::size_t>(id);
  return i < p_.tensors.size() ? p_.tensors[i].name : extraTensors_[i - p_.tensors.size()];
}

bool GradientBuilder::needsGrad(int id) const {
  return static_cast<std::size_t>(id) < needs_.size() && needs_[static_cast<std::size_t>(id)];
}

void GradientBuilder::contribution(const Statement& st, const CExpr& site,
                                   const CExprPtr& partial) {
  if (isConstant(*partial, 0)) return;
  ownGradient(site.tensor);
  bool gathers = false, wraps = false;
  for (const Subscript& s : site.subs) {
    gathers = gathers || s.gather != nullptr;
    wraps = wraps || s.mode == IndexMode::Wrap;
  }
  if (scatterOnly_ || gathers) {
    scatter(st, site, partial,
            scatterOnly_ ? "scatter-only reference" : "a gather's gradient is a scatter");
    return;
  }
  if (!wraps) {
    gatherForm(st, site, partial);
    return;
  }
  // wrap(): where the wrapped index runs over exactly one period, it is a bijection for
  // fixed other indices, and the statement is solved over t = wrap(phi) instead.
  Statement st2 = st;
  CExpr site2 = site;
  CExprPtr partial2 = partial;
  std::string why;
  if (!unwrap(st2, site2, partial2, why)) {
    maskedGather(st, site, partial, why);
    return;
  }
  gatherForm(st2, site2, partial2);
}

// The extent of a tensor; for a ':=' result, in terms of what it was computed from, so the
// gradient program does not recompute intermediates only to learn their shapes.
Sym GradientBuilder::extentOf(int tensor, int dim) {
  return resolve(symSize(p_.tensors[static_cast<std::size_t>(tensor)].name, dim));
}

Sym GradientBuilder::resolve(const Sym& s) const {
  return symSubstitute(s, [&](const SymNode& atom) -> Sym {
    if (atom.kind != SymKind::Size) return nullptr;
    // Remembered: in a chain of n statements each extent resolves through all earlier ones,
    // which is n^2 resolutions (and n^3 name lookups) when each is done again.
    auto key = std::make_pair(atom.tensor, atom.dim);
    if (auto it = resolved_.find(key); it != resolved_.end()) return it->second;
    Sym r;
    int id = p_.findTensor(atom.tensor);
    if (id >= 0) {
      const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
      if (t.definedBy >= 0 && static_cast<std::size_t>(atom.dim) < t.extents.size())
        r = resolve(t.extents[static_cast<std::size_t>(atom.dim)]);
    }
    resolved_.emplace(key, r);
    return r;
  });
}

std::function<Sym(const Sym&)> GradientBuilder::resolver() const {
  return [this](const Sym& s) { return resolve(s); };
}

// Forward statements whose results the gradient statements read, in forward order, then
// the gradient statements.
void GradientBuilder::assemble() {
  for (Stmt& s : stmts_) foldUnusedIndices(s);
  std::set<std::string> read, values; // every tensor read; those read as values
  // A copy of an earlier version needs the forward statements up to the one it copies after.
  std::map<std::string, const VersionCopy*> copied;
  for (const VersionCopy& c : copies_) copied[c.name] = &c;
  std::map<int, int> upTo; // tensor: the last statement writing it that a copy needs
  std::function<void(const Expr&)> names = [&](const Expr& e) {
    if (e.kind == ExprKind::Access || e.kind == ExprKind::Ident) {
      if (auto c = copied.find(e.name); c != copied.end()) {
        int& last = upTo.try_emplace(c->second->tensor, -1).first->second;
        last = std::max(last, c->second->after);
      } else {
        read.insert(e.name);
        values.insert(e.name);
      }
    }
    if (e.kind == ExprKind::Call && e.name == "size" && !e.args.empty()) {
      read.insert(e.args[0]->name);
      return;
    }
    for (const auto& a : e.args) names(*a);
  };
  auto collect = [&](const Stmt& s) {
    names(*s.rhs);
    for (const auto& l : s.lhs) names(*l);
    for (const auto& r : s.where) {
      names(*r.lo);
      names(*r.hi);
    }
  };
  for (const Stmt& s : stmts_) collect(s);
  std::vector<bool> keep(p_.stmts.size(), false);
  for (std::size_t k = p_.stmts.size(); k-- > 0;) {
    const Statement& st = p_.stmts[k];
    const std::string& out = p_.tensors[static_cast<std::size_t>(st.output)].name;
    // An argument read only for its shape is passed in, not recomputed; so is a saved tensor.
    auto copy = upTo.find(st.output);
    const bool forCopy = copy != upTo.end() && static_cast<int>(k) <= copy->second;
    if (p_.tensors[static_cast<std::size_t>(st.output)].saved ||
        (!values.count(out) && !forCopy &&
         (!read.count(out) || p_.tensors[static_cast<std::size_t>(st.output)].isArgument)))
      continue;
    keep[k] = true;
    collect(st.ast);
  }
  dropNeedlessCopies(keep);
  // The gradient program takes the forward inputs as they were before the forward call: a
  // tensor the program changes in place has no such value any more after it.
  for (int id : p_.arguments) {
    const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
    if (!t.writtenBy.empty() && values.count(t.name))
      fail(src_, p_.stmts[static_cast<std::size_t>(t.writtenBy[0])].ast.outputRange,
           "cannot differentiate this program: its gradient needs the values of '" + t.name +
               "', which the program changes in place (compute the result into a new tensor "
               "with ':=')");
  }
  g_.program.source = p_.source;
  for (std::size_t k = 0; k < p_.stmts.size(); ++k) {
    if (!keep[k]) continue;
    g_.program.stmts.push_back(p_.stmts[k].ast);
    for (const VersionCopy& c : copies_)
      if (static_cast<std::size_t>(c.after) == k) g_.program.stmts.push_back(versionCopy(c));
  }
  // The helper statements of (max)/(min)/(*) next, in their order: they read only forward
  // values (final before the gradient statements, which write only gradients and helpers), so
  // running them first changes no value, and they sit beside the forward statements that read
  // the same tensors (a softmax's first_m reads x as its recomputed exp(x - m) does: one pass
  // along the row for both in a row loop, where after the gradient statements it was a second
  // pass over x).
  std::vector<bool> helper(stmts_.size(), false);
  for (std::size_t h : helpers_) helper[h] = true;
  for (std::size_t k = 0; k < stmts_.size(); ++k)
    if (helper[k]) g_.program.stmts.push_back(std::move(stmts_[k]));
  for (std::size_t k = 0; k < stmts_.size(); ++k)
    if (!helper[k]) g_.program.stmts.push_back(std::move(stmts_[k]));
}

Gradient differentiate(const Program& program, const std::vector<std::string>& wrt,
                       bool scatterOnly) {
  return GradientBuilder(program, wrt, scatterOnly).run();
}

void markSaved(Program& program, const std::vector<std::string>& names) {
  const Source& src = *program.source;
  for (const std::string& n : names) {
    const int id = program.findTensor(n);
    if (id < 0 || program.tensors[static_cast<std::size_t>(id)].snapshotOf >= 0 ||
        (program.tensors[static_cast<std::size_t>(id)].writtenBy.empty() &&
         !program.tensors[static_cast<std::size_t>(id)].isArgument)) {
      std::string assigned;
      for (const TensorInfo& t : program.tensors)
        if (!t.writtenBy.empty() && !t.isArgument && t.snapshotOf < 0)
          assigned += (assigned.empty() ? "" : ", ") + t.name;
      throw Error("cannot save '" + n + "' for the gradient: the program assigns no tensor of "
                  "that name (it assigns: " + assigned + ")");
    }
    TensorInfo& t = program.tensors[static_cast<std::size_t>(id)];
    if (t.isArgument && t.writtenBy.empty())
      fail(src, t.firstUse,
           "cannot save '" + n + "' for the gradient: it is an argument of the program, which "
           "the gradient program takes anyway");
    if (t.isArgument)
      fail(src, program.stmts[static_cast<std::size_t>(t.writtenBy[0])].ast.outputRange,
           "cannot save '" + n + "' for the gradient: the program changes this argument in "
           "place; a saved tensor is the value of one ':=' statement");
    if (t.writtenBy.size() > 1)
      fail(src, program.stmts[static_cast<std::size_t>(t.writtenBy[1])].ast.outputRange,
           "cannot save '" + n + "' for the gradient: this statement writes it again after its "
           "':='; a saved tensor is the value of one ':=' statement (write the final value "
           "into a tensor of its own and save that)");
    t.saved = true;
  }
}

} // namespace einjit::grad
