// The statement lowerer's core: reads, values, subscripts and their checks, stores, ranges and new
// functions.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

const std::string& Lowerer::bufferName(int t) const {
  return ctx_.buffers.names[static_cast<std::size_t>(t)];
}

Type Lowerer::elemType(int t) const {
  return irType(b_.tensors[static_cast<std::size_t>(t)].dtype);
}

std::int64_t Lowerer::extentOf(int t, std::size_t d) const {
  return b_.tensors[static_cast<std::size_t>(t)].shape[d];
}

Expr Lowerer::num(double v) const { return ir::floatImm(vt_, v); }

Expr Lowerer::truth(Expr cond) const { return ir::select(std::move(cond), num(1), num(0)); }

Expr Lowerer::nonzero(Expr v) const { return ir::binary(BinOp::Ne, std::move(v), num(0)); }

Interval Lowerer::interval(const Subscript& s, std::int64_t constant) const {
  return subscriptInterval(s, constant, varRange_);
}

bool Lowerer::subscriptInBounds(const CExpr& e, std::size_t d) const {
  return subscriptInside(p_, b_, varRange_, e, d);
}

Expr Lowerer::offset(const CExpr& acc, Expr* inside, bool* dropped, Expr* emptyCheck) {
  Expr off = ir::intImm(0);
  const auto& stride = ctx_.buffers.strides[static_cast<std::size_t>(acc.tensor)];
  for (std::size_t d = 0; d < acc.subs.size(); ++d) {
    const Subscript& s = acc.subs[d];
    const std::int64_t e = extentOf(acc.tensor, d);
    const std::int64_t c = b_.eval(p_, s.constant);
    Expr idx = subscriptIndex(s, acc.tensor);
    Interval r = interval(s, c);
    const bool proven = (r.known && r.lo >= 0 && r.hi < e) ||
                        (ctx_.trustPlain && s.mode == IndexMode::Plain && !s.gather && e > 0);
    if (!proven) {
      if (e == 0) {
        // Nothing can be read; a plain subscript is out of bounds wherever it is evaluated,
        // so read() and storeOutput() keep this check (the interpreter reports it too).
        if (s.mode == IndexMode::Plain) {
          if (emptyCheck && !*emptyCheck) *emptyCheck = ir::check(ir::intImm(-1), 1);
          noteCheck(acc, d);
        }
        *dropped = true;
      } else {
        switch (s.mode) {
        case IndexMode::Plain:
          idx = ir::check(idx, e);
          noteCheck(acc, d);
          break;
        case IndexMode::Pad: {
          Expr in = ir::binary(BinOp::And, ir::binary(BinOp::Ge, idx, ir::intImm(0)),
                               ir::binary(BinOp::Lt, idx, ir::intImm(e)));
          *inside = *inside ? ir::binary(BinOp::And, *inside, in) : in;
          idx = clampIndex(idx, e);
          break;
        }
        case IndexMode::Clamp: idx = clampIndex(idx, e); break;
        case IndexMode::Wrap: idx = ir::binary(BinOp::EMod, idx, ir::intImm(e)); break;
        }
      }
    }
    off = ir::add(off, ir::mul(idx, ir::intImm(stride[d])));
  }
  if (ctx_.rows.scratch(acc.tensor)) // the group's own block of the scratch
    off = ir::add(off, ir::mul(ctx_.rows.slot,
                               ir::intImm(ctx_.rows.blockElems[static_cast<std::size_t>(acc.tensor)])));
  if (acc.tensor == ctx_.rows.sumOutput) // the group's partial sum
    off = ir::add(off, ir::mul(ctx_.rows.sumSlot, ir::intImm(ctx_.rows.sumElems)));
  return off;
}

Expr Lowerer::subscriptIndex(const Subscript& s, int t) {
  Expr idx = ir::intImm(b_.eval(p_, s.constant));
  for (std::size_t v = 0; v < s.coef.size(); ++v)
    if (s.coef[v] != 0) idx = ir::add(idx, ir::mul(ir::intImm(s.coef[v]), varExpr_[v]));
  const int row = ctx_.rows.var;
  if (row >= 0 && s.coef[static_cast<std::size_t>(row)] != 0 && !ctx_.rows.scratch(t))
    idx = ir::add(idx, ir::mul(ir::intImm(s.coef[static_cast<std::size_t>(row)]), ctx_.rows.base));
  if (s.gather) idx = ir::add(idx, gatherIndex(*s.gather));
  return idx;
}

Expr Lowerer::gatherIndex(const CExpr& g) {
  Expr v = read(g, false);
  if (!ir::isFloat(v->type)) return ir::cast(Type::i64, v);
  Expr big = ir::floatImm(v->type, 1e15);
  Expr integral = ir::binary(BinOp::And, ir::binary(BinOp::Eq, ir::call(Fn::Floor, {v}), v),
                             ir::binary(BinOp::Lt, ir::call(Fn::Abs, {v}), big));
  checked_ = true;
  checks_.hoistable = false;
  Expr flag = ir::check(ir::select(integral, ir::intImm(0), ir::intImm(-1)), 1);
  return ir::add(ir::cast(Type::i64, v), flag);
}

void Lowerer::noteCheck(const CExpr& access, std::size_t dim) {
  checked_ = true;
  if (hoisting_) return;
  const Statement& st = p_.stmts[stmt_];
  if (!holds(*st.lhs, &access) && !holds(*st.rhs, &access)) {
    checks_.hoistable = false;
    return;
  }
  for (const passes::CheckedSubscript& c : checks_.subscripts)
    if (c.access == &access && c.dim == dim) return;
  checks_.subscripts.push_back({stmt_, &access, dim});
}

ir::Func Lowerer::checkFunction(const passes::CheckedSubscript& c,
                                const std::vector<std::size_t>& box, const std::string& name) {
  const Scoped<bool> hoisting(hoisting_, true);
  const Statement& st = p_.stmts[c.stmt];
  const BoundStatement& bs = b_.stmts[c.stmt];
  const Ranges r = rangesOf(bs);
  setRanges(st, r);
  ir::Func f = newFunc(name);
  auto check = [&] {
    const std::int64_t e = extentOf(c.access->tensor, c.dim);
    return ir::evaluate(e == 0 ? ir::check(ir::intImm(-1), 1)
                               : ir::check(subscriptIndex(c.access->subs[c.dim]), e));
  };
  if (target_.gpu) {
    f.body = threadPerPoint(box, r, [&](Expr&) { return check(); });
  } else {
    Stmt body = check();
    for (std::size_t q = box.size(); q-- > 0;)
      body = loopOver(bs, st, box[q], r, ForKind::Serial, body);
    f.body = body;
  }
  return f;
}

bool Lowerer::holds(const CExpr& e, const CExpr* node) {
  if (&e == node) return true;
  for (const Subscript& s : e.subs)
    if (s.gather && holds(*s.gather, node)) return true;
  for (const CExprPtr& a : e.args)
    if (holds(*a, node)) return true;
  return false;
}

Expr Lowerer::clampIndex(Expr idx, std::int64_t e) {
  return ir::binary(BinOp::Min, ir::binary(BinOp::Max, std::move(idx), ir::intImm(0)),
                    ir::intImm(e - 1));
}

Expr Lowerer::read(const CExpr& e, bool asValue) {
  Expr inside, emptyCheck;
  bool dropped = false;
  Expr off = offset(e, &inside, &dropped, &emptyCheck);
  Type et = elemType(e.tensor);
  if (dropped && emptyCheck) // 0 either way, but the check (which fails) is evaluated
    return asValue ? ir::select(ir::binary(BinOp::Eq, emptyCheck, ir::intImm(0)), num(0), num(0))
                   : emptyCheck;
  if (dropped) return asValue ? num(0) : ir::intImm(0);
  if (const auto u = static_cast<std::size_t>(e.tensor);
      asValue && u < ctx_.forwarded.size() && ctx_.forwarded[u])
    return inside ? ir::select(inside, ctx_.forwarded[u], num(0)) : ctx_.forwarded[u];
  Expr v = ir::load(et, bufferName(e.tensor), off);
  if (!asValue) return v;
  v = ir::cast(vt_, v);
  if (inside) v = ir::select(inside, v, num(0));
  return v;
}

Expr Lowerer::value(const CExpr& e, const ReadAs* readAs) {
  auto arg = [&](std::size_t i) { return value(*e.args[i], readAs); };
  switch (e.kind) {
  case CKind::Const: return num(e.value);
  case CKind::Index: {
    Expr v = varExpr_[static_cast<std::size_t>(e.var)];
    if (e.var == ctx_.rows.var) v = ir::add(v, ctx_.rows.base);
    // On the CPU through i32 where the index's range fits: the same value, and x86 converts a
    // vector of i32 to floating point in one instruction, where a vector of i64 (before
    // AVX-512) takes one scalar conversion per lane.
    const auto u = static_cast<std::size_t>(e.var);
    if (!target_.gpu && u < varRange_.size() && varRange_[u].known &&
        varRange_[u].lo >= std::numeric_limits<std::int32_t>::min() &&
        varRange_[u].hi <= std::numeric_limits<std::int32_t>::max())
      v = ir::cast(Type::i32, v);
    return ir::cast(vt_, v);
  }
  case CKind::Param: return ir::param(vt_, e.param);
  case CKind::Size:
    return num(static_cast<double>(extentOf(e.tensor, static_cast<std::size_t>(e.dim))));
  case CKind::Read: return readAs ? (*readAs)(e) : read(e, true);
  case CKind::Unary:
    if (e.unop == UnOp::Neg) return ir::unary(ir::UnOp::Neg, arg(0));
    return truth(ir::binary(BinOp::Eq, arg(0), num(0)));
  case CKind::Binary: {
    Expr a = arg(0), b = arg(1);
    switch (e.binop) {
    case dsl::BinOp::Add: return ir::binary(BinOp::Add, a, b);
    case dsl::BinOp::Sub: return ir::binary(BinOp::Sub, a, b);
    case dsl::BinOp::Mul: return ir::binary(BinOp::Mul, a, b);
    case dsl::BinOp::Div: return ir::binary(BinOp::Div, a, b);
    case dsl::BinOp::Mod: return ir::binary(BinOp::Mod, a, b);
    case dsl::BinOp::Pow: return ir::binary(BinOp::Pow, a, b);
    case dsl::BinOp::Lt: return truth(ir::binary(BinOp::Lt, a, b));
    case dsl::BinOp::Le: return truth(ir::binary(BinOp::Le, a, b));
    case dsl::BinOp::Gt: return truth(ir::binary(BinOp::Gt, a, b));
    case dsl::BinOp::Ge: return truth(ir::binary(BinOp::Ge, a, b));
    case dsl::BinOp::Eq: return truth(ir::binary(BinOp::Eq, a, b));
    case dsl::BinOp::Ne: return truth(ir::binary(BinOp::Ne, a, b));
    case dsl::BinOp::And: return truth(ir::binary(BinOp::And, nonzero(a), nonzero(b)));
    case dsl::BinOp::Or: return truth(ir::binary(BinOp::Or, nonzero(a), nonzero(b)));
    }
    throw InternalError("lower: binary operator");
  }
  case CKind::Ternary: return ir::select(nonzero(arg(0)), arg(1), arg(2));
  case CKind::Call: {
    switch (e.fn) {
    case Fn::ToF32: return ir::cast(vt_, ir::cast(Type::f32, arg(0)));
    case Fn::ToF64: return arg(0);
    case Fn::ToI32: return ir::cast(vt_, ir::cast(Type::i32, arg(0)));
    case Fn::ToI64: return ir::cast(vt_, ir::cast(Type::i64, arg(0)));
    case Fn::Min: return ir::binary(BinOp::Min, arg(0), arg(1));
    case Fn::Max: return ir::binary(BinOp::Max, arg(0), arg(1));
    case Fn::FDiv: return ir::call(Fn::Floor, {ir::binary(BinOp::Div, arg(0), arg(1))});
    case Fn::CDiv: return ir::call(Fn::Ceil, {ir::binary(BinOp::Div, arg(0), arg(1))});
    default: {
      std::vector<Expr> args;
      for (std::size_t i = 0; i < e.args.size(); ++i) args.push_back(arg(i));
      return ir::call(e.fn, std::move(args));
    }
    }
  }
  }
  throw InternalError("lower: expression kind");
}

Expr Lowerer::identity(Reduce r) const {
  switch (r) {
  case Reduce::Add: return num(0);
  case Reduce::Mul: return num(1);
  case Reduce::Max: return num(-std::numeric_limits<double>::infinity());
  case Reduce::Min: return num(std::numeric_limits<double>::infinity());
  }
  return num(0);
}

Expr Lowerer::combine(Reduce r, const Expr& acc, const Expr& v) {
  switch (r) {
  case Reduce::Add: return ir::binary(BinOp::Add, acc, v);
  case Reduce::Mul: return ir::binary(BinOp::Mul, acc, v);
  case Reduce::Max: return ir::select(ir::binary(BinOp::Gt, v, acc), v, acc);
  case Reduce::Min: return ir::select(ir::binary(BinOp::Lt, v, acc), v, acc);
  }
  return acc;
}

Expr Lowerer::combineTree(Reduce r, std::vector<Expr> lanes) {
  while (lanes.size() > 1) {
    std::vector<Expr> next;
    for (std::size_t l = 0; l + 1 < lanes.size(); l += 2)
      next.push_back(combine(r, lanes[l], lanes[l + 1]));
    if (lanes.size() % 2) next.push_back(lanes.back());
    lanes = std::move(next);
  }
  return lanes[0];
}

Stmt Lowerer::storeOutput(const Statement& st, const Expr& v) {
  Expr inside, emptyCheck;
  bool dropped = false;
  Expr off = offset(*st.lhs, &inside, &dropped, &emptyCheck);
  if (dropped) return emptyCheck ? ir::evaluate(emptyCheck) : nullptr;
  const std::string& name = bufferName(st.output);
  Type et = elemType(st.output);
  Expr val = v;
  Stmt s;
  if (ctx_.atomic) // a bf16 output's adds are f32 (into its wide copy, when it has one)
    s = ir::atomicAdd(ctx_.wide.empty() ? name : ctx_.wide, off,
                      ir::cast(et == Type::bf16 ? Type::f32 : et, v));
  else if (st.assign == Assign::Accumulate || st.output == ctx_.rows.sumOutput)
    val = combine(st.reduce, ir::cast(vt_, ir::load(et, name, off)), v);
  if (ctx_.rows.forwards(st) && !inside && !s) {
    // No store (RowRun::forwarded): the later reads of this element take the value, as the
    // element type holds it.
    const auto u = static_cast<std::size_t>(st.output);
    if (ctx_.forwarded.size() <= u) ctx_.forwarded.resize(u + 1);
    ctx_.forwarded[u] = ir::cast(vt_, ir::cast(et, val));
    return nullptr;
  }
  std::string to = name;
  if (&st == ctx_.rows.storesBy) {
    // A staged output's last write (RowRun::staged): what it adds to came from the scratch;
    // the result goes to the tensor's own rows.
    const auto u = static_cast<std::size_t>(st.output);
    const Scoped<std::int64_t> own(ctx_.rows.blockElems[u], 0);
    inside = nullptr;
    off = offset(*st.lhs, &inside, &dropped, &emptyCheck);
    to = ctx_.rows.storesBuffer;
  }
  if (!s)
    s = ctx_.rows.streams(st) ? ir::streamStore(to, off, ir::cast(et, val))
                              : ir::store(to, off, ir::cast(et, val));
  return inside ? ir::ifThen(inside, s) : s;
}

Expr Lowerer::boundExpr(const ConcreteBound& c) const {
  switch (c.kind) {
  case IndexBound::Kind::Affine: {
    Expr e = ir::intImm(c.constant);
    for (auto [v, k] : c.terms)
      e = ir::add(e, ir::mul(ir::intImm(k), varExpr_[static_cast<std::size_t>(v)]));
    return e;
  }
  case IndexBound::Kind::Max:
  case IndexBound::Kind::Min: {
    Expr e = boundExpr(c.args[0]);
    BinOp op = c.kind == IndexBound::Kind::Max ? BinOp::Max : BinOp::Min;
    for (std::size_t i = 1; i < c.args.size(); ++i) e = ir::binary(op, e, boundExpr(c.args[i]));
    return e;
  }
  case IndexBound::Kind::FDiv:
    return ir::binary(BinOp::FloorDiv, boundExpr(c.args[0]), ir::intImm(c.divisor));
  case IndexBound::Kind::CDiv:
    return ir::binary(BinOp::CeilDiv, boundExpr(c.args[0]), ir::intImm(c.divisor));
  case IndexBound::Kind::Sum: {
    Expr e = ir::intImm(0);
    for (std::size_t i = 0; i < c.args.size(); ++i)
      e = ir::add(e, ir::mul(ir::intImm(c.scale[i]), boundExpr(c.args[i])));
    return e;
  }
  }
  return ir::intImm(0);
}

auto Lowerer::rangesOf(const BoundStatement& bs) -> Ranges {
  Ranges r;
  for (std::size_t v = 0; v < bs.lo.size(); ++v) r.push_back({bs.lo[v], bs.hi[v]});
  return r;
}

void Lowerer::setRanges(const Statement& st, const Ranges& r) {
  varExpr_.clear();
  varRange_.clear();
  for (std::size_t v = 0; v < st.vars.size(); ++v) {
    varExpr_.push_back(v < ctx_.pinned.size() && ctx_.pinned[v] ? ir::intImm(r[v].first)
                                                                : ir::var(st.vars[v].name));
    varRange_.push_back({r[v].second > r[v].first, r[v].first, r[v].second - 1});
    if (v < ctx_.provenRanges.size()) {
      const auto& [lo, hi] = ctx_.provenRanges[v];
      varRange_.back() = {hi > lo, lo, hi - 1};
    }
  }
  // In a row block the row index is local; accesses are proven over the run's rows.
  if (ctx_.rows.var >= 0 && static_cast<std::size_t>(ctx_.rows.var) < varRange_.size())
    varRange_[static_cast<std::size_t>(ctx_.rows.var)] = {true, ctx_.rows.lo, ctx_.rows.hi - 1};
}

ir::Func Lowerer::newFunc(const std::string& name) {
  ir::Func f;
  f.name = name;
  for (std::size_t t = 0; t < p_.tensors.size(); ++t)
    f.buffers.push_back({p_.tensors[t].name, elemType(static_cast<int>(t))});
  return f;
}

double Lowerer::workOf(const Ranges& r, std::size_t from) {
  double w = 1;
  for (std::size_t v = from; v < r.size(); ++v)
    w *= static_cast<double>(std::max<std::int64_t>(r[v].second - r[v].first, 1));
  return w;
}

Stmt Lowerer::loopOver(const BoundStatement& bs, const Statement& st, std::size_t v,
                       const Ranges& r, ForKind kind, Stmt body, int width) {
  Expr lo = ir::intImm(r[v].first), hi = ir::intImm(r[v].second);
  if (bs.dependent[v]) {
    lo = ir::binary(BinOp::Max, boundExpr(bs.loBound[v]), lo);
    hi = ir::binary(BinOp::Min, boundExpr(bs.hiBound[v]), hi);
  }
  return ir::forLoop(st.vars[v].name, lo, hi, kind, std::move(body), width);
}

int Lowerer::vectorWidth() const {
  return std::max(1, target_.vectorBytes / (vt_ == Type::f64 ? 8 : 4));
}

Stmt Lowerer::elementBody(const Statement& st, const BoundStatement& bs, const Ranges& r,
                          bool vectorize) {
  const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
  const std::size_t n = st.vars.size();
  const std::string acc = "acc";
  // One term: the identity combined with it, which for max and min turns NaN into the
  // identity ("NaN never replaces the accumulator"); + and * store the term itself.
  if (n == nOut)
    return storeOutput(st, st.reduce == Reduce::Max || st.reduce == Reduce::Min
                               ? combine(st.reduce, identity(st.reduce), value(*st.rhs))
                               : value(*st.rhs));
  Expr a = ir::load(vt_, acc, ir::intImm(0));
  Stmt inner = ir::store(acc, ir::intImm(0), combine(st.reduce, a, value(*st.rhs)));
  for (std::size_t v = n; v-- > nOut;) {
    bool innermost = v == n - 1;
    inner = loopOver(bs, st, v, r, innermost && vectorize ? ForKind::Vectorized : ForKind::Serial,
                     inner, innermost && vectorize ? vectorWidth() : 1);
  }
  Stmt out = storeOutput(st, a);
  if (!out) return nullptr;
  return ir::allocate(acc, vt_, 1,
                      ir::block({ir::store(acc, ir::intImm(0), identity(st.reduce)), inner, out}));
}

Stmt Lowerer::elementBodies(const Statement& st, const BoundStatement& bs, const Ranges& r,
                            bool vectorize) {
  if (ctx_.fusedThrough <= stmt_) return elementBody(st, bs, r, vectorize);
  // The members share the first statement's index values (varExpr_): Fusion.h admits only
  // statements with the same indices and ranges, position by position.
  const std::size_t first = stmt_;
  std::vector<Stmt> parts;
  ctx_.forwarded.clear(); // (values of the previous loop body's elements)
  for (std::size_t k = first; k <= ctx_.fusedThrough; ++k) {
    stmt_ = k;
    if (Stmt s = elementBody(p_.stmts[k], b_.stmts[k], r, vectorize)) parts.push_back(s);
  }
  ctx_.forwarded.clear();
  stmt_ = first;
  return parts.empty() ? nullptr : ir::block(parts);
}

std::vector<std::size_t> Lowerer::outputIndices(const Statement& st) {
  std::vector<std::size_t> v(static_cast<std::size_t>(st.numOutputVars()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

Expr Lowerer::flatOutput(const Statement& st, const Ranges& r) const {
  Expr o = ir::intImm(0);
  for (std::size_t v = 0; v < static_cast<std::size_t>(st.numOutputVars()); ++v)
    o = ir::add(ir::mul(o, ir::intImm(r[v].second - r[v].first)),
                ir::sub(varExpr_[v], ir::intImm(r[v].first)));
  return o;
}

void Lowerer::flattenProduct(const CExpr& e, std::vector<const CExpr*>& out) {
  gpuschedule::flattenProduct(e, out);
}

void Lowerer::decompose(const std::vector<std::size_t>& group, const Ranges& r, const Expr& g) {
  constexpr std::int64_t kNarrow = std::int64_t{1} << 30;
  std::int64_t total = 1;
  for (std::size_t v : group) // saturating at 2^30: no overflow
    total =
        std::min(kNarrow, total * std::clamp<std::int64_t>(r[v].second - r[v].first, 1, kNarrow));
  const bool narrow = target_.gpu && group.size() > 1 && total < kNarrow;
  auto c = [narrow](std::int64_t x) {
    return narrow ? ir::cast(Type::i32, ir::intImm(x)) : ir::intImm(x);
  };
  const Expr gn = narrow ? ir::cast(Type::i32, g) : g;
  std::int64_t div = 1;
  for (std::size_t q = group.size(); q-- > 0;) {
    const std::size_t v = group[q];
    const std::int64_t ext = r[v].second - r[v].first;
    Expr e = div == 1 ? gn : ir::binary(BinOp::Div, gn, c(div));
    if (q > 0) e = ir::binary(BinOp::Mod, e, c(ext));
    varExpr_[v] = ir::add(ir::intImm(r[v].first), narrow ? ir::cast(Type::i64, e) : e);
    div *= ext;
  }
}

Expr Lowerer::both(const Expr& a, const Expr& b) {
  return !a ? b : !b ? a : ir::binary(BinOp::And, a, b);
}

std::string Lowerer::varNames(const Statement& st, const std::vector<std::size_t>& group) {
  return gpuschedule::groupNames(st, group);
}

std::int64_t Lowerer::extentOfGroup(const std::vector<std::size_t>& group, const Ranges& r) {
  return gpuschedule::groupExtent(group, r);
}

} // namespace einjit::codegen::lowering
