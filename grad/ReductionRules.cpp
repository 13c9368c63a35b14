// (max), (min) and (*) reductions rewritten as (+) statements whose summand carries the local
// derivative of the reduction as a factor that is not differentiated (G1): the first extreme in
// iteration order, and the product of the other factors, exact with zeros.
#include "grad/GradientBuilder.h"

#include "grad/Derivative.h"
#include "grad/IndexHull.h"

namespace einjit::grad {

using namespace einjit::dsl;
using namespace einjit::grad::syntax;

namespace {

// A copy with fresh nodes: reads in it are not sites, so it is not differentiated.
CExprPtr copy(const CExprPtr& e) {
  CExpr c = *e;
  for (auto& a : c.args) a = copy(a);
  for (auto& s : c.subs)
    if (s.gather) s.gather = copy(s.gather);
  return std::make_shared<const CExpr>(std::move(c));
}

} // namespace

// The reduction indices in groups, in iteration order, each numbered exactly in the value
// dtype: a group's number is its indices' offsets in mixed radix, and f32 holds integers only
// up to 2^24 (one number for all the indices of a 5000 x 5000 maximum would round, and the
// gradient would go to several elements or none). So an index joins the group before it while
// both have constant extents whose product is at most 2^24; an index of symbolic or dependent
// extent is a group of its own, numbered by its value, exact while it stays below 2^24.
std::vector<CExprPtr> GradientBuilder::iterationGroups(const Statement& st) {
  constexpr std::int64_t kExact = std::int64_t{1} << 24;
  std::vector<CExprPtr> groups;
  std::int64_t product = 0; // of the open group's extents; 0: no group open
  for (std::size_t v = 0; v < st.vars.size(); ++v) {
    const IndexVar& r = st.vars[v];
    if (r.isOutput) continue;
    CExpr idx{CKind::Index};
    idx.var = static_cast<int>(v);
    CExprPtr value = std::make_shared<const CExpr>(idx);
    std::int64_t lo = 0, hi = 0;
    const bool fixed = !r.dependent && symIsConst(r.lo, &lo) && symIsConst(r.hi, &hi);
    const std::int64_t extent = fixed ? std::max<std::int64_t>(hi - lo, 1) : 0;
    if (fixed && product > 0 && extent <= kExact / product) {
      groups.back() = simplify(binary(BinOp::Add, binary(BinOp::Mul, groups.back(), constant(
                                                              static_cast<double>(extent))),
                                      binary(BinOp::Sub, value, constant(static_cast<double>(lo)))));
      product *= extent;
      continue;
    }
    groups.push_back(fixed ? simplify(binary(BinOp::Sub, value, constant(static_cast<double>(lo))))
                           : value);
    product = fixed ? extent : 0;
  }
  return groups;
}

// A statement over the forward statement's indices and ranges, into a new tensor.
int GradientBuilder::helperStatement(const Statement& st, const std::string& base, Reduce reduce,
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
  helpers_.push_back(stmts_.size());
  stmts_.push_back(std::move(out));
  return id;
}

// The output's element o as a read of another tensor with the same indices.
CExprPtr GradientBuilder::sameElementOf(const Statement& st, int tensor) {
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
CExprPtr GradientBuilder::selection(const Statement& st) {
  bool reduces = false;
  for (const IndexVar& v : st.vars) reduces = reduces || !v.isOutput;
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
  // The first extreme one group of reduction indices at a time: the smallest group number among
  // the extremes, then the smallest next one among those with that number, ... (ranges that
  // depend on other indices have no box to number the iterations in, so their indices are
  // groups of their own).
  CExprPtr chosen;
  std::vector<CExprPtr> groups = iterationGroups(st);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    CExprPtr cond = chosen ? binary(BinOp::And, isExtreme, chosen) : isExtreme;
    const std::string name = groups.size() == 1 ? "first_" + tensorName(st.output)
                                                : "first" + std::to_string(g + 1) + "_" +
                                                      tensorName(st.output);
    int first = helperStatement(st, name, Reduce::Min, ternary(cond, groups[g], constant(1e300)));
    CExprPtr same = binary(BinOp::Eq, groups[g], sameElementOf(st, first));
    chosen = chosen ? binary(BinOp::And, chosen, same) : same;
  }
  return ternary(chosen, st.rhs, constant(0));
}

// value_y[v - lo_v, ...] := F(v): the summand of every iteration, in a tensor indexed by all
// the statement's indices shifted to start at 0 over their box hulls; returns its read at
// iteration v. Dependent ranges leave holes in the box: there the value is 0 (never read)
// and the reads are padded, as they may leave their tensors.
CExprPtr GradientBuilder::storedValues(const Statement& st) {
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
  helpers_.push_back(stmts_.size());
  stmts_.push_back(std::move(out));
  return std::make_shared<const CExpr>(std::move(read));
}

// (*): d prod / d F(v) is the product of the other factors, correct with zeros: count the
// zeros and multiply the non-zero factors, then pick per factor.
CExprPtr GradientBuilder::product(const Statement& st) {
  const std::string& y = tensorName(st.output);
  CExprPtr f = copy(st.rhs);
  CExprPtr isZero = binary(BinOp::Eq, f, constant(0));
  int zeros = helperStatement(st, "zeros_" + y, Reduce::Add, isZero);
  int rest =
      helperStatement(st, "nonzero_product_" + y, Reduce::Mul, ternary(isZero, constant(1), f));
  CExprPtr nz = sameElementOf(st, zeros), pr = sameElementOf(st, rest);
  CExprPtr others =
      ternary(isZero, ternary(binary(BinOp::Eq, nz, constant(1)), pr, constant(0)),
              ternary(binary(BinOp::Eq, nz, constant(0)), binary(BinOp::Div, pr, f), constant(0)));
  return binary(BinOp::Mul, others, st.rhs);
}

// A symbolic integer as a value (a parameter slot that toExpr prints as the expression).
CExprPtr GradientBuilder::symValue(const Sym& s) {
  std::int64_t k;
  if (symIsConst(s, &k)) return constant(static_cast<double>(k));
  symValues_.push_back(s);
  CExpr c{CKind::Param};
  c.param = -static_cast<int>(symValues_.size());
  return std::make_shared<const CExpr>(std::move(c));
}

} // namespace einjit::grad
