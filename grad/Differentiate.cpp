#include "grad/Differentiate.h"

#include "dsl/Printer.h"
#include "grad/Derivative.h"
#include "grad/IndexHull.h"
#include "grad/IndexSolver.h"
#include "grad/Syntax.h"
#include "grad/UnusedIndices.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace einjit::grad {

using namespace einjit::dsl;
using namespace einjit::grad::syntax;

namespace {

// --- the gradient builder ---------------------------------------------------------------------

class Builder {
public:
  Builder(const Program& p, const std::vector<std::string>& wrt, bool scatterOnly)
      : p_(p), src_(*p.source), scatterOnly_(scatterOnly) {
    for (const TensorInfo& t : p.tensors) used_.insert(t.name);
    for (const ParamInfo& prm : p.params) used_.insert(prm.name);
    for (const Statement& st : p.stmts)
      for (const IndexVar& v : st.vars) used_.insert(v.name);
    chooseWrt(wrt);
  }

  Gradient run() {
    if (wrtIds_.empty())
      throw Error("nothing to differentiate: the program reads no floating-point tensor argument "
                  "as a value (a tensor used only through size() has no gradient)");
    // Which tensors carry gradient: the requested inputs and every result computed from them.
    needs_.assign(p_.tensors.size(), false);
    for (int id : wrtIds_) needs_[static_cast<std::size_t>(id)] = true;
    for (const Statement& st : p_.stmts)
      if (readsNeeding(st)) needs_[static_cast<std::size_t>(st.output)] = true;
    // Output gradients are inputs of the gradient program.
    gradName_.assign(p_.tensors.size(), "");
    for (int id : p_.outputs) {
      std::string n = fresh("d" + p_.tensors[static_cast<std::size_t>(id)].name);
      gradName_[static_cast<std::size_t>(id)] = n;
      g_.outputGrads.push_back(n);
    }
    for (std::size_t k = p_.stmts.size(); k-- > 0;) {
      try {
        statement(k);
      } catch (const SymOverflow&) {
        fail(src_, p_.stmts[k].ast.range,
             "cannot differentiate this statement: solving its index equations leaves 64-bit "
             "integers (coefficients or constants too large)");
      }
    }
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

private:
  const Program& p_;
  const Source& src_;
  bool scatterOnly_;
  std::set<std::string> used_;
  std::vector<int> wrtIds_;
  std::vector<bool> needs_;
  std::vector<std::string> gradName_;
  std::set<int> defined_; // tensors whose gradient statement exists (':=' emitted)
  std::vector<Stmt> stmts_;
  std::vector<std::string> extraTensors_; // tensors the gradient program adds (first_y, ...)
  std::vector<Sym> symValues_;            // Param nodes with param < 0 stand for these
  Gradient g_;

  std::string fresh(const std::string& base) {
    std::string n = base;
    for (int i = 1; used_.count(n); ++i) n = base + "_" + std::to_string(i);
    used_.insert(n);
    return n;
  }

  void chooseWrt(const std::vector<std::string>& wrt) {
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

  bool readsNeeding(const Statement& st) const {
    bool found = false;
    std::function<void(const CExprPtr&)> walk = [&](const CExprPtr& e) {
      if (e->kind == CKind::Read && needs_[static_cast<std::size_t>(e->tensor)]) found = true;
      for (const auto& a : e->args) walk(a);
    };
    walk(st.rhs);
    return found;
  }

  std::string gradOf(int tensor) {
    std::string& n = gradName_[static_cast<std::size_t>(tensor)];
    if (n.empty()) n = fresh("d" + p_.tensors[static_cast<std::size_t>(tensor)].name);
    return n;
  }

  // --- one forward statement ----------------------------------------------------------------

  // Statements before k that write tensor t.
  bool writtenBefore(int t, std::size_t k) const {
    for (int j : p_.tensors[static_cast<std::size_t>(t)].writtenBy)
      if (static_cast<std::size_t>(j) < k) return true;
    return false;
  }

  void statement(std::size_t k) {
    const Statement& st = p_.stmts[k];
    int y = st.output;
    if (gradName_[static_cast<std::size_t>(y)].empty() ||
        (!defined_.count(y) &&
         std::find(p_.outputs.begin(), p_.outputs.end(), y) == p_.outputs.end()))
      return; // no gradient reaches this statement's output
    if (!readsNeeding(st)) return;
    // '+=' adds to what earlier statements wrote: the gradient of the final value flows to
    // every writer unchanged (gradient programs are built this way). '=' hides the earlier
    // values of the elements it covers: their gradient would be dY with those elements zeroed,
    // so '=' is differentiated only when nothing before it wrote the tensor (its old value is
    // then an argument's, which carries no gradient).
    if (st.assign == Assign::Overwrite && writtenBefore(y, k))
      fail(src_, st.ast.assignRange,
           "cannot differentiate this '=': it overwrites values of '" + tensorName(y) +
               "' that an earlier statement computed (use '+=' or a new tensor with ':=')");
    // (max)/(min)/(*) '+=' combine with the old value, which the statement loses.
    if (st.assign == Assign::Accumulate && st.reduce != Reduce::Add)
      fail(src_, st.ast.assignRange,
           "cannot differentiate '+=' with a (" + std::string(reduceSpelling(st.reduce)) +
               ") reduction: the value it combines with is overwritten (write the reduction "
               "into a new tensor with ':=' and combine it in a second statement)");
    // Every read of a tensor that carries gradient is a site, except reads of a value no
    // statement computed yet (an argument's old value, before the program writes it).
    std::vector<const CExpr*> sites;
    std::function<void(const CExprPtr&)> walk = [&](const CExprPtr& e) {
      const bool written = e->kind == CKind::Read &&
                           !p_.tensors[static_cast<std::size_t>(e->tensor)].writtenBy.empty();
      if (e->kind == CKind::Read && needsGrad(e->tensor) &&
          (!written || writtenBefore(e->tensor, k)))
        sites.push_back(e.get());
      for (const auto& a : e->args) walk(a);
    };
    walk(st.rhs);
    // (max)/(min) and (*) become a (+) statement whose summand carries the local derivative
    // of the reduction as a factor that is not differentiated itself.
    Statement sum = st;
    sum.reduce = Reduce::Add;
    if (st.reduce == Reduce::Max || st.reduce == Reduce::Min) sum.rhs = selection(st);
    if (st.reduce == Reduce::Mul) sum.rhs = product(st);
    // Reads of the same element (x[i] * x[i]) are one contribution with the partials added.
    std::vector<bool> merged(sites.size(), false);
    for (std::size_t a = 0; a < sites.size(); ++a) {
      if (merged[a]) continue;
      CExprPtr partial = derivative(sum.rhs, sites[a]);
      for (std::size_t b = a + 1; b < sites.size(); ++b)
        if (!merged[b] && sameExpr(*sites[a], *sites[b])) {
          merged[b] = true;
          partial = binary(BinOp::Add, partial, derivative(sum.rhs, sites[b]));
        }
      contribution(sum, *sites[a], simplify(partial));
    }
  }

  // --- (max), (min), (*) ----------------------------------------------------------------------

  // The reduction's iteration order as one number: sum_j (r_j - lo_j) * prod_{l>j} (hi_l - lo_l).
  CExprPtr iterationNumber(const Statement& st) {
    CExprPtr lin = constant(0);
    std::vector<std::size_t> reds;
    for (std::size_t v = 0; v < st.vars.size(); ++v)
      if (!st.vars[v].isOutput) reds.push_back(v);
    for (std::size_t j = 0; j < reds.size(); ++j) {
      const IndexVar& r = st.vars[reds[j]];
      CExpr idx{CKind::Index};
      idx.var = static_cast<int>(reds[j]);
      CExprPtr term = binary(BinOp::Sub, std::make_shared<const CExpr>(idx), symValue(r.lo));
      for (std::size_t l = j + 1; l < reds.size(); ++l) {
        const IndexVar& q = st.vars[reds[l]];
        term = binary(BinOp::Mul, term, binary(BinOp::Sub, symValue(q.hi), symValue(q.lo)));
      }
      lin = binary(BinOp::Add, lin, term);
    }
    return simplify(lin);
  }

  // A statement over the forward statement's indices and ranges, into a new tensor.
  int helperStatement(const Statement& st, const std::string& base, Reduce reduce,
                      const CExprPtr& rhs) {
    int id = addTensor(fresh(base));
    auto [emit, varAff] = forwardFrame(st);
    Stmt out;
    out.reduce = reduce;
    out.output = tensorName(id);
    out.outputBracketed = !st.lhsVars.empty();
    for (int v : st.lhsVars) out.lhs.push_back(ident(st.vars[static_cast<std::size_t>(v)].name));
    out.assign = Assign::Define;
    out.rhs = toExpr(rhs, st, varAff, emit);
    forwardRanges(st, out);
    stmts_.push_back(std::move(out));
    return id;
  }

  // The output's element o as a read of another tensor with the same indices.
  CExprPtr sameElementOf(const Statement& st, int tensor) {
    CExpr c = *st.lhs;
    c.tensor = tensor;
    return std::make_shared<const CExpr>(std::move(c));
  }

  // (max)/(min): the gradient goes to the first extreme in iteration order. first[o] is the
  // smallest iteration number whose value equals the extreme of output o; the summand is masked
  // to it. The values compared must come from one kernel: a summand that computes may round
  // differently in two (one fuses a multiply-add), and no value would match its recomputed
  // extreme, losing that output's gradient. So such a summand is stored once (value_y) and its
  // extreme taken over the stored values; a plain read is compared as it is (the extreme is
  // one of the elements read, unchanged).
  CExprPtr selection(const Statement& st) {
    bool reduces = false, dependent = false;
    for (const IndexVar& v : st.vars) {
      reduces = reduces || !v.isOutput;
      dependent = dependent || (v.dependent && !v.isOutput);
    }
    if (!reduces) return st.rhs; // one value per output element: it is the extreme
    const std::string extremeName =
        (st.reduce == Reduce::Max ? "max_" : "min_") + tensorName(st.output);
    const TensorInfo& out = p_.tensors[static_cast<std::size_t>(st.output)];
    CExprPtr value, extreme;
    if (st.rhs->kind == CKind::Read) {
      value = copy(st.rhs);
      // The output itself, unless other statements change it too (a tensor passed in and
      // changed in place: the gradient program has its values from before the call).
      extreme = st.lhs;
      if (out.isArgument || out.writtenBy.size() > 1)
        extreme = sameElementOf(st, helperStatement(st, extremeName, st.reduce, value));
    } else {
      value = storedValues(st);
      extreme = sameElementOf(st, helperStatement(st, extremeName, st.reduce, value));
    }
    CExprPtr isExtreme = binary(BinOp::Eq, value, extreme);
    if (!dependent) {
      CExprPtr lin = iterationNumber(st);
      int first = helperStatement(st, "first_" + tensorName(st.output), Reduce::Min,
                                  ternary(isExtreme, lin, constant(1e300)));
      return ternary(binary(BinOp::Eq, lin, sameElementOf(st, first)), st.rhs, constant(0));
    }
    // Ranges that depend on other indices have no box to number the iterations in: find the
    // first extreme one reduction index at a time (the smallest r1 among the extremes, then the
    // smallest r2 among those with that r1, ...).
    CExprPtr chosen;
    for (std::size_t v = 0; v < st.vars.size(); ++v) {
      if (st.vars[v].isOutput) continue;
      CExpr idx{CKind::Index};
      idx.var = static_cast<int>(v);
      CExprPtr r = std::make_shared<const CExpr>(idx);
      CExprPtr cond = chosen ? binary(BinOp::And, isExtreme, chosen) : isExtreme;
      int first = helperStatement(st, "first_" + st.vars[v].name + "_" + tensorName(st.output),
                                  Reduce::Min, ternary(cond, r, constant(1e300)));
      CExprPtr same = binary(BinOp::Eq, r, sameElementOf(st, first));
      chosen = chosen ? binary(BinOp::And, chosen, same) : same;
    }
    return ternary(chosen, st.rhs, constant(0));
  }

  // value_y[v - lo_v, ...] := F(v): the summand of every iteration, in a tensor indexed by all
  // the statement's indices shifted to start at 0 over their box hulls; returns its read at
  // iteration v. Dependent ranges leave holes in the box: there the value is 0 (never read)
  // and the reads are padded, as they may leave their tensors.
  CExprPtr storedValues(const Statement& st) {
    std::vector<std::pair<Sym, Sym>> hull = indexHulls(st);
    int id = addTensor(fresh("value_" + tensorName(st.output)));
    const std::size_t n = st.vars.size();
    Stmt out;
    out.output = tensorName(id);
    out.outputBracketed = true;
    out.assign = Assign::Define;
    std::vector<std::string> names;
    std::vector<Aff> varAff;
    CExpr read{CKind::Read};
    read.tensor = id;
    for (std::size_t v = 0; v < n; ++v) {
      std::int64_t k;
      bool fromZero = symIsConst(hull[v].first, &k) && k == 0;
      names.push_back(fromZero ? st.vars[v].name : fresh(st.vars[v].name));
      Aff a = Aff::unit(n, v);
      a.k = hull[v].first;
      varAff.push_back(a);
      out.lhs.push_back(ident(names.back()));
      out.where.push_back(
          {names.back(), {}, num(0), symExpr(resolve(symSub(hull[v].second, hull[v].first))), {}});
      Subscript sub;
      sub.coef.assign(n, 0);
      sub.coef[v] = 1;
      sub.constant = symScale(hull[v].first, -1);
      read.subs.push_back(std::move(sub));
    }
    Emit emit{names, resolver()};
    ExprPtr inRange;
    for (std::size_t v = 0; v < n; ++v)
      if (st.vars[v].dependent) {
        ExprPtr c = inDependentRange(st, v, varAff, emit);
        inRange = inRange ? Expr::makeBinary(BinOp::And, inRange, c) : c;
      }
    emit.padReads = inRange != nullptr;
    out.rhs = toExpr(copy(st.rhs), st, varAff, emit);
    if (inRange) out.rhs = Expr::makeTernary(inRange, out.rhs, num(0));
    stmts_.push_back(std::move(out));
    return std::make_shared<const CExpr>(std::move(read));
  }

  // (*): d prod / d F(v) is the product of the other factors, correct with zeros: count the
  // zeros and multiply the non-zero factors, then pick per factor.
  CExprPtr product(const Statement& st) {
    const std::string& y = tensorName(st.output);
    CExprPtr f = copy(st.rhs);
    CExprPtr isZero = binary(BinOp::Eq, f, constant(0));
    int zeros = helperStatement(st, "zeros_" + y, Reduce::Add, isZero);
    int rest =
        helperStatement(st, "nonzero_product_" + y, Reduce::Mul, ternary(isZero, constant(1), f));
    CExprPtr nz = sameElementOf(st, zeros), pr = sameElementOf(st, rest);
    CExprPtr others = ternary(
        isZero, ternary(binary(BinOp::Eq, nz, constant(1)), pr, constant(0)),
        ternary(binary(BinOp::Eq, nz, constant(0)), binary(BinOp::Div, pr, f), constant(0)));
    return binary(BinOp::Mul, others, st.rhs);
  }

  // A copy with fresh nodes: reads in it are not sites, so it is not differentiated.
  static CExprPtr copy(const CExprPtr& e) {
    CExpr c = *e;
    for (auto& a : c.args) a = copy(a);
    for (auto& s : c.subs)
      if (s.gather) s.gather = copy(s.gather);
    return std::make_shared<const CExpr>(std::move(c));
  }

  // A symbolic integer as a value (a parameter slot that toExpr prints as the expression).
  CExprPtr symValue(const Sym& s) {
    std::int64_t k;
    if (symIsConst(s, &k)) return constant(static_cast<double>(k));
    symValues_.push_back(s);
    CExpr c{CKind::Param};
    c.param = -static_cast<int>(symValues_.size());
    return std::make_shared<const CExpr>(std::move(c));
  }

  int addTensor(const std::string& name) {
    extraTensors_.push_back(name);
    return static_cast<int>(p_.tensors.size() + extraTensors_.size() - 1);
  }

  const std::string& tensorName(int id) const {
    auto i = static_cast<std::size_t>(id);
    return i < p_.tensors.size() ? p_.tensors[i].name : extraTensors_[i - p_.tensors.size()];
  }

  bool needsGrad(int id) const {
    return static_cast<std::size_t>(id) < needs_.size() && needs_[static_cast<std::size_t>(id)];
  }

  void contribution(const Statement& st, const CExpr& site, const CExprPtr& partial) {
    if (isConstant(*partial, 0)) return;
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

  // The contribution of a site without gathers or wraps, solved into gather form: one
  // statement, or residue/clamp phases after a zero fill; a masked gather where it cannot be.
  void gatherForm(const Statement& st, const CExpr& site, const CExprPtr& partial) {
    int x = site.tensor;
    std::vector<std::vector<Sym>> extents;
    for (int r = 0; r < static_cast<int>(site.subs.size()); ++r) {
      extents.push_back({extentOf(x, r)});
      if (auto v = site.subs[static_cast<std::size_t>(r)].bareVar())
        for (const BareUse& b : st.bareUses)
          if (b.var == *v) extents.back().push_back(extentOf(b.tensor, b.dim));
    }
    std::vector<std::pair<Sym, Sym>> ranges;
    for (const IndexVar& v : st.vars) ranges.push_back({resolve(v.lo), resolve(v.hi)});
    std::vector<SiteSolution> phases;
    std::string why;
    if (!solvePhases(st, site, extents, ranges, {}, phases, why, 0)) {
      maskedGather(st, site, partial, why);
      return;
    }
    // One statement, unless residue phases split dX: then it is zero-filled first and each
    // reachable phase adds its elements (each element still written once per phase).
    bool split =
        phases.size() != 1 ||
        std::any_of(phases[0].phaseStride.begin(), phases[0].phaseStride.end(),
                    [](std::int64_t g) { return g != 1; }) ||
        std::any_of(phases[0].edge.begin(), phases[0].edge.end(), [](int e) { return e != 0; }) ||
        std::any_of(phases[0].fixed.begin(), phases[0].fixed.end(), [](bool f) { return f; });
    if (split && !defined_.count(x)) zeroFill(x);
    for (const SiteSolution& sol : phases) emitSolution(st, site, partial, sol);
  }

  // Solves a site, splitting dimensions into residue phases as the solver asks (jointly when
  // it names several); impossible phases are dropped. False when some phase has no solution.
  bool solvePhases(const Statement& st, const CExpr& site,
                   const std::vector<std::vector<Sym>>& extents,
                   const std::vector<std::pair<Sym, Sym>>& ranges, std::vector<Split> split,
                   std::vector<SiteSolution>& out, std::string& why, int depth) {
    split.resize(site.subs.size());
    // A clamp() dimension is solved in three parts: its low edge, its high edge, the inside.
    for (std::size_t d = 0; d < site.subs.size(); ++d)
      if (site.subs[d].mode == IndexMode::Clamp && split[d].edge == 0) {
        for (int edge : {-1, 1, 2}) {
          std::vector<Split> s2 = split;
          s2[d].edge = edge;
          if (!solvePhases(st, site, extents, ranges, s2, out, why, depth)) return false;
        }
        return true;
      }
    SiteSolution sol = solveSite(st, site, extents, ranges, split);
    if (sol.solved) {
      if (!sol.impossible) out.push_back(std::move(sol));
      return true;
    }
    why = sol.why;
    if (sol.splitModulus == 0 || depth > 6) return false;
    // Slot q_d of a dimension split as u = s*q + o splits further modulo m: u = s*m*q' +
    // (s*r + o) for each r < m (m = 1 never occurs).
    std::int64_t combos = 1;
    for (std::int64_t m : sol.splitModuli) {
      combos *= m;
      if (combos > 256) {
        why += " (too many joint phases)";
        return false;
      }
    }
    for (std::int64_t c = 0; c < combos; ++c) {
      std::vector<Split> s2 = split;
      std::int64_t rest = c;
      for (std::size_t i = 0; i < sol.splitDims.size(); ++i) {
        std::size_t d = sol.splitDims[i];
        std::int64_t m = sol.splitModuli[i];
        s2[d] = {checkedMul(split[d].stride, m), split[d].stride * (rest % m) + split[d].offset,
                 split[d].edge};
        rest /= m;
      }
      if (!solvePhases(st, site, extents, ranges, s2, out, why, depth + 1)) return false;
    }
    return true;
  }

  void emitSolution(const Statement& st, const CExpr& site, const CExprPtr& partial,
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
    ExprPtr dy = accessOfOutput(st, gradOf(st.output), varAff, emit);
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

  ExprPtr summand(ExprPtr dy, const CExprPtr& partial, const Statement& st,
                  const std::vector<Aff>& varAff, Emit& emit) {
    if (isConstant(*partial, 1)) return dy;
    if (isConstant(*partial, -1)) return Expr::makeUnary(UnOp::Neg, dy);
    return mul(dy, toExpr(partial, st, varAff, emit));
  }

  // The extent of a tensor; for a ':=' result, in terms of what it was computed from, so the
  // gradient program does not recompute intermediates only to learn their shapes.
  Sym extentOf(int tensor, int dim) {
    return resolve(symSize(p_.tensors[static_cast<std::size_t>(tensor)].name, dim));
  }

  Sym resolve(const Sym& s) const {
    return symSubstitute(s, [&](const SymNode& atom) -> Sym {
      if (atom.kind != SymKind::Size) return nullptr;
      int id = p_.findTensor(atom.tensor);
      if (id < 0) return nullptr;
      const TensorInfo& t = p_.tensors[static_cast<std::size_t>(id)];
      if (t.definedBy < 0 || static_cast<std::size_t>(atom.dim) >= t.extents.size()) return nullptr;
      return resolve(t.extents[static_cast<std::size_t>(atom.dim)]);
    });
  }

  std::function<Sym(const Sym&)> resolver() const {
    return [this](const Sym& s) { return resolve(s); };
  }

  // dY[o(v)]: the output's left-hand indices are bare variables (':=').
  // dY read where the statement wrote: its left-hand subscripts with v = sigma(u, z) (a padded
  // left-hand side, which drops writes, reads zeros there).
  ExprPtr accessOfOutput(const Statement& st, const std::string& name,
                         const std::vector<Aff>& varAff, Emit& emit) {
    if (st.lhs->subs.empty()) return ident(name);
    std::vector<ExprPtr> idx;
    for (const Subscript& s : st.lhs->subs) idx.push_back(subscriptExpr(s, st, varAff, emit));
    return Expr::makeAccess(name, idx);
  }

  // Syntax over the forward statement's own indices (helper statements, scatters).
  std::pair<Emit, std::vector<Aff>> forwardFrame(const Statement& st) const {
    std::vector<std::string> names;
    for (const IndexVar& v : st.vars) names.push_back(v.name);
    std::vector<Aff> varAff;
    for (std::size_t v = 0; v < st.vars.size(); ++v) varAff.push_back(Aff::unit(st.vars.size(), v));
    return {Emit{names, resolver()}, varAff};
  }

  // Every forward index with its range, as where clauses of `out`.
  void forwardRanges(const Statement& st, Stmt& out) {
    for (std::size_t v = 0; v < st.vars.size(); ++v) {
      auto [lo, hi] = rangeOf(st, v);
      out.where.push_back({st.vars[v].name, {}, lo, hi, {}});
    }
  }

  // The where range of index v of a forward statement, as written or inferred.
  std::pair<ExprPtr, ExprPtr> rangeOf(const Statement& st, std::size_t v) {
    const IndexVar& iv = st.vars[v];
    if (iv.dependent)
      for (const RangeDecl& r : st.ast.where)
        if (r.index == iv.name) return {r.lo, r.hi};
    return {symExpr(resolve(iv.lo)), symExpr(resolve(iv.hi))};
  }

  // A checked expression as syntax, with the forward indices replaced by their solutions.
  ExprPtr toExpr(const CExprPtr& e, const Statement& st, const std::vector<Aff>& varAff,
                 Emit& emit) {
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
      if (e->param < 0)
        return symExpr(resolve(symValues_[static_cast<std::size_t>(-e->param - 1)]));
      return ident(p_.params[static_cast<std::size_t>(e->param)].name);
    case CKind::Size: return fn("size", {ident(tensorName(e->tensor)), num(e->dim)});
    case CKind::Read: {
      const std::string& name = tensorName(e->tensor);
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

  ExprPtr subscriptExpr(const Subscript& s, const Statement& st, const std::vector<Aff>& varAff,
                        Emit& emit) {
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

  // --- fallbacks and fills ----------------------------------------------------------------

  void zeroFill(int x) {
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

  // dX[phi(v)] += dY[o(v)] * partial(v) over the forward domain.
  // --- wrap() reads --------------------------------------------------------------------------

  bool sameExtent(const Sym& a, const Sym& b) const {
    std::int64_t k;
    return symIsConst(symSub(resolve(a), resolve(b)), &k) && k == 0;
  }

  // Rewrites st/site/partial over t = wrap(phi) in place of one index v per wrapped dimension.
  // phi = s*v + c(w) with s = +-1 and v over exactly [0, E), E the wrapped extent: for fixed
  // other indices w, v -> wrap(phi) is a bijection of [0, E), with inverse
  // v = wrap(s*(t - c(w))). Every other use of v must be bare in a dimension of extent E (it
  // becomes that wrap), or the same wrapped subscript (it becomes t). False, with the reason,
  // when the statement does not have this shape.
  bool unwrap(Statement& st, CExpr& site, CExprPtr& partial, std::string& why) {
    std::vector<bool> taken(st.vars.size(), false);
    for (std::size_t d = 0; d < site.subs.size(); ++d) {
      const Subscript e = site.subs[d];
      if (e.mode != IndexMode::Wrap) continue;
      Sym period = extentOf(site.tensor, static_cast<int>(d));
      int v = -1;
      for (std::size_t c = 0; c < e.coef.size() && v < 0; ++c)
        if ((e.coef[c] == 1 || e.coef[c] == -1) && !taken[c] && !st.vars[c].dependent &&
            sameExtent(st.vars[c].lo, symConst(0)) && sameExtent(st.vars[c].hi, period) &&
            !boundsRead(st, c))
          v = static_cast<int>(c);
      if (v < 0) {
        why = "dimension " + std::to_string(d) +
              " of a wrap() read: no index with coefficient +-1 runs over exactly one period";
        return false;
      }
      auto vi = static_cast<std::size_t>(v);
      taken[vi] = true;
      // v = wrap(s*(t - c(w) - k)), with t in v's slot.
      Subscript inverse = e;
      std::int64_t s = e.coef[vi];
      for (std::size_t c = 0; c < inverse.coef.size(); ++c)
        inverse.coef[c] = c == vi ? s : -s * e.coef[c];
      inverse.constant = symScale(e.constant, -s);
      Subscript t;
      t.coef.assign(e.coef.size(), 0);
      t.coef[vi] = 1;
      t.constant = symConst(0);
      t.range = e.range;
      auto rewrite = [&](int tensor, std::size_t dim, Subscript& sub) -> bool {
        if (sub.coef[vi] == 0 && !sub.gather) return true;
        if (sub.gather) return false; // v (or anything) inside a gathered subscript
        Sym ext = extentOf(tensor, static_cast<int>(dim));
        if (sub.mode == IndexMode::Wrap && sub.coef == e.coef &&
            sameExtent(sub.constant, e.constant) && sameExtent(ext, period)) {
          sub = t; // the wrapped read itself
          return true;
        }
        if (sub.mode == IndexMode::Plain && sub.bareVar() == v && sameExtent(ext, period)) {
          inverse.range = sub.range;
          sub = inverse;
          return true;
        }
        return false;
      };
      bool ok = true;
      CExpr lhs = *st.lhs;
      for (std::size_t r = 0; r < lhs.subs.size(); ++r)
        ok = ok && rewrite(lhs.tensor, r, lhs.subs[r]);
      st.lhs = std::make_shared<const CExpr>(std::move(lhs));
      for (std::size_t r = 0; r < site.subs.size(); ++r)
        ok = ok && (r == d ? (site.subs[r] = t, true) : rewrite(site.tensor, r, site.subs[r]));
      partial = rewriteReads(partial, vi, rewrite, ok);
      if (!ok) {
        why = "index '" + st.vars[vi].name + "' of a wrap() read is also used otherwise";
        return false;
      }
      st.vars[vi].isOutput = false; // t is not an output index
    }
    return true;
  }

  // Whether another index's dependent range reads index v.
  static bool boundsRead(const Statement& st, std::size_t v) {
    for (const IndexVar& w : st.vars) {
      if (!w.dependent) continue;
      std::vector<bool> reads(st.vars.size(), false);
      w.loBound.collectVars(reads);
      w.hiBound.collectVars(reads);
      if (reads[v]) return true;
    }
    return false;
  }

  // e with every read's subscripts passed through `rewrite`; ok turns false when one fails or
  // index v is used as a value.
  template <typename F>
  static CExprPtr rewriteReads(const CExprPtr& e, std::size_t v, F& rewrite, bool& ok) {
    CExpr c = *e;
    if (c.kind == CKind::Index && c.var == static_cast<int>(v)) ok = false;
    for (std::size_t r = 0; r < c.subs.size(); ++r) ok = ok && rewrite(c.tensor, r, c.subs[r]);
    for (auto& a : c.args) a = rewriteReads(a, v, rewrite, ok);
    return std::make_shared<const CExpr>(std::move(c));
  }

  // The contribution in gather form without solving anything: dX[u] sums the summand over the
  // whole forward domain, masked to the iterations whose subscripts land on u. Each element is
  // written once (safe in parallel) but the work is |dX| times the forward's, so it is listed
  // in Gradient::masked; it is the fallback for sites the solver cannot handle.
  void maskedGather(const Statement& st, const CExpr& site, const CExprPtr& partial,
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
    ExprPtr dy = accessOfOutput(st, gradOf(st.output), varAff, emit);
    out.rhs = summand(dy, partial, st, varAff, emit);
    if (cond) out.rhs = Expr::makeTernary(cond, out.rhs, num(0));
    forwardRanges(st, out);
    foldUnusedIndices(out);
    g_.masked.push_back(printStmt(out) + "   # " + why);
    defined_.insert(x);
    stmts_.push_back(std::move(out));
  }

  void scatter(const Statement& st, const CExpr& site, const CExprPtr& partial,
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
    ExprPtr dy = accessOfOutput(st, gradOf(st.output), varAff, emit);
    out.rhs = summand(dy, partial, st, varAff, emit);
    forwardRanges(st, out);
    foldUnusedIndices(out);
    g_.scatters.push_back(printStmt(out) + "   # " + why);
    stmts_.push_back(std::move(out));
  }

  // --- the final program ------------------------------------------------------------------

  // Forward statements whose results the gradient statements read, in forward order, then
  // the gradient statements.
  void assemble() {
    for (Stmt& s : stmts_) foldUnusedIndices(s);
    std::set<std::string> read, values; // every tensor read; those read as values
    std::function<void(const Expr&)> names = [&](const Expr& e) {
      if (e.kind == ExprKind::Access || e.kind == ExprKind::Ident) {
        read.insert(e.name);
        values.insert(e.name);
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
      // An argument read only for its shape is passed in, not recomputed.
      if (!values.count(out) &&
          (!read.count(out) || p_.tensors[static_cast<std::size_t>(st.output)].isArgument))
        continue;
      keep[k] = true;
      collect(st.ast);
    }
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
    for (std::size_t k = 0; k < p_.stmts.size(); ++k)
      if (keep[k]) g_.program.stmts.push_back(p_.stmts[k].ast);
    for (Stmt& s : stmts_) g_.program.stmts.push_back(std::move(s));
  }
};

} // namespace

Gradient differentiate(const Program& program, const std::vector<std::string>& wrt,
                       bool scatterOnly) {
  return Builder(program, wrt, scatterOnly).run();
}

} // namespace einjit::grad
