#include "grad/Derivative.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace einjit::grad {

using namespace einjit::dsl;

namespace {

CExprPtr node(CExpr e) { return std::make_shared<const CExpr>(std::move(e)); }

bool isConst(const CExprPtr& e, double* v = nullptr) {
  if (e->kind != CKind::Const) return false;
  if (v) *v = e->value;
  return true;
}

// The derivative of a call with respect to its argument i (times that argument's derivative,
// applied by the caller). `held`: a read of a tensor holding the call's value, or null.
CExprPtr callPartial(const CExpr& e, std::size_t i, const CExprPtr& held) {
  const CExprPtr& a = e.args[0];
  auto one = [] { return constant(1); };
  // The call's own value: read where a tensor holds it, else computed again.
  auto self = [&] { return held ? held : call(e.fn, {a}); };
  switch (e.fn) {
  case Fn::Exp: return self();
  case Fn::Log: return binary(BinOp::Div, one(), a);
  case Fn::Sqrt: return binary(BinOp::Div, constant(0.5), self());
  case Fn::Tanh: {
    CExprPtr t = self();
    return binary(BinOp::Sub, one(), binary(BinOp::Mul, t, t));
  }
  case Fn::Sigmoid: {
    CExprPtr s = self();
    return binary(BinOp::Mul, s, binary(BinOp::Sub, one(), s));
  }
  case Fn::Relu: return binary(BinOp::Gt, a, constant(0));
  case Fn::Abs:
    return binary(BinOp::Sub, binary(BinOp::Gt, a, constant(0)), binary(BinOp::Lt, a, constant(0)));
  case Fn::Pow: {
    const CExprPtr& b = e.args[1];
    if (i == 0) // b * a^(b-1)
      return binary(BinOp::Mul, b, call(Fn::Pow, {a, binary(BinOp::Sub, b, one())}));
    return binary(BinOp::Mul, call(Fn::Pow, {a, b}), call(Fn::Log, {a})); // a^b log a
  }
  case Fn::Min:   // the interpreter returns b only when b < a
  case Fn::Max: { // ... and b only when b > a
    BinOp takesB = e.fn == Fn::Min ? BinOp::Lt : BinOp::Gt;
    CExprPtr pickB = binary(takesB, e.args[1], a);
    return i == 1 ? pickB : binary(BinOp::Sub, one(), pickB);
  }
  case Fn::Sin: return call(Fn::Cos, {a});
  case Fn::Cos: return unary(UnOp::Neg, call(Fn::Sin, {a}));
  case Fn::Erf: // 2/sqrt(pi) exp(-a^2)
    return binary(BinOp::Mul, constant(2.0 / std::sqrt(M_PI)),
                  call(Fn::Exp, {unary(UnOp::Neg, binary(BinOp::Mul, a, a))}));
  case Fn::Atan:
    return binary(BinOp::Div, one(), binary(BinOp::Add, one(), binary(BinOp::Mul, a, a)));
  case Fn::Atan2: { // atan2(y, x): x / (x^2 + y^2) for y, -y / (x^2 + y^2) for x
    const CExprPtr& x = e.args[1];
    CExprPtr r2 = binary(BinOp::Add, binary(BinOp::Mul, x, x), binary(BinOp::Mul, a, a));
    return i == 0 ? binary(BinOp::Div, x, r2) : binary(BinOp::Div, unary(UnOp::Neg, a), r2);
  }
  case Fn::Log2: return binary(BinOp::Div, constant(1 / std::log(2.0)), a);
  case Fn::Log10: return binary(BinOp::Div, constant(1 / std::log(10.0)), a);
  case Fn::Log1p: return binary(BinOp::Div, one(), binary(BinOp::Add, one(), a));
  case Fn::Expm1: return call(Fn::Exp, {a});
  case Fn::Cbrt: { // 1 / (3 cbrt(a)^2)
    CExprPtr c = self();
    return binary(BinOp::Div, one(), binary(BinOp::Mul, constant(3), binary(BinOp::Mul, c, c)));
  }
  case Fn::Round:
  case Fn::Sign: return constant(0);
  case Fn::ToF32:
  case Fn::ToF64: return one();
  case Fn::Floor:
  case Fn::Ceil:
  case Fn::FDiv:
  case Fn::CDiv:
  case Fn::ToI32:
  case Fn::ToI64: return constant(0);
  }
  return constant(0);
}

} // namespace

CExprPtr constant(double v) {
  CExpr c{CKind::Const};
  c.value = v;
  return node(std::move(c));
}
CExprPtr binary(BinOp op, CExprPtr a, CExprPtr b) {
  CExpr c{CKind::Binary};
  c.binop = op;
  c.args = {std::move(a), std::move(b)};
  return node(std::move(c));
}
CExprPtr unary(UnOp op, CExprPtr a) {
  CExpr c{CKind::Unary};
  c.unop = op;
  c.args = {std::move(a)};
  return node(std::move(c));
}
CExprPtr call(Fn f, std::vector<CExprPtr> args) {
  CExpr c{CKind::Call};
  c.fn = f;
  c.args = std::move(args);
  return node(std::move(c));
}
CExprPtr ternary(CExprPtr c0, CExprPtr a, CExprPtr b) {
  CExpr c{CKind::Ternary};
  c.args = {std::move(c0), std::move(a), std::move(b)};
  return node(std::move(c));
}
bool isConstant(const CExpr& e, double v) { return e.kind == CKind::Const && e.value == v; }

void Simplifier::holds(const CExpr* node, CExprPtr value) { held_[node] = std::move(value); }

CExprPtr Simplifier::heldValue(const CExpr* node) const {
  if (auto it = held_.find(node); it != held_.end()) return it->second;
  return shared_ ? shared_->heldValue(node) : nullptr;
}

CExprPtr Simplifier::derivative(const CExprPtr& e, const CExpr* site) {
  // Most of a statement does not contain the site: its derivative is 0 at once, without
  // building and simplifying the rule's expression (which simplifies to 0 as well).
  if (!zero_) zero_ = constant(0);
  switch (e->kind) {
  case CKind::Read: return e.get() == site ? constant(1) : zero_;
  case CKind::Const:
  case CKind::Index:
  case CKind::Param:
  case CKind::Size: return zero_;
  case CKind::Unary: {
    if (e->unop == UnOp::Not) return zero_;
    CExprPtr d = derivative(e->args[0], site);
    return d == zero_ ? zero_ : (*this)(unary(UnOp::Neg, d));
  }
  case CKind::Ternary: {
    CExprPtr d1 = derivative(e->args[1], site), d2 = derivative(e->args[2], site);
    if (d1 == zero_ && d2 == zero_) return zero_;
    return (*this)(ternary(e->args[0], d1, d2));
  }
  case CKind::Binary: {
    const CExprPtr &a = e->args[0], &b = e->args[1];
    CExprPtr da = derivative(a, site), db = derivative(b, site);
    if (da == zero_ && db == zero_) return zero_;
    switch (e->binop) {
    case BinOp::Add: return (*this)(binary(BinOp::Add, da, db));
    case BinOp::Sub: return (*this)(binary(BinOp::Sub, da, db));
    case BinOp::Mul:
      return (*this)(binary(BinOp::Add, binary(BinOp::Mul, da, b), binary(BinOp::Mul, a, db)));
    case BinOp::Div: // da/b - a*db/(b*b)
      return (*this)(
          binary(BinOp::Sub, binary(BinOp::Div, da, b),
                 binary(BinOp::Div, binary(BinOp::Mul, a, db), binary(BinOp::Mul, b, b))));
    case BinOp::Mod: // fmod(a,b) = a - b*trunc(a/b): da - db*trunc(a/b), trunc = (a - fmod)/b
      return (*this)(binary(
          BinOp::Sub, da, binary(BinOp::Mul, db, binary(BinOp::Div, binary(BinOp::Sub, a, e), b))));
    case BinOp::Pow: {
      // d a^b = b a^(b-1) da + a^b log(a) db (the second term only when b varies).
      CExprPtr t1 = binary(
          BinOp::Mul,
          binary(BinOp::Mul, b, binary(BinOp::Pow, a, binary(BinOp::Sub, b, constant(1)))), da);
      CExprPtr db2 = (*this)(db);
      if (isConstant(*db2, 0)) return (*this)(t1);
      CExprPtr t2 = binary(BinOp::Mul, binary(BinOp::Mul, e, call(Fn::Log, {a})), db2);
      return (*this)(binary(BinOp::Add, t1, t2));
    }
    default: return constant(0); // comparisons and logic
    }
  }
  case CKind::Call: {
    CExprPtr sum = constant(0);
    for (std::size_t i = 0; i < e->args.size(); ++i) {
      CExprPtr di = (*this)(derivative(e->args[i], site));
      if (isConst(di) && di->value == 0) continue;
      sum = binary(BinOp::Add, sum, binary(BinOp::Mul, callPartial(*e, i, heldValue(e.get())), di));
    }
    return (*this)(sum);
  }
  }
  return constant(0);
}


namespace {

// A sum as terms c*t (t non-constant, or null for the constant part), flattened through +, -
// and negation, with equal terms combined in order of first appearance.
void collectTerms(const CExprPtr& e, double sign, std::vector<std::pair<double, CExprPtr>>& out) {
  double v;
  if (isConst(e, &v)) {
    out.push_back({sign * v, nullptr});
    return;
  }
  if (e->kind == CKind::Binary && (e->binop == BinOp::Add || e->binop == BinOp::Sub)) {
    collectTerms(e->args[0], sign, out);
    collectTerms(e->args[1], e->binop == BinOp::Add ? sign : -sign, out);
    return;
  }
  if (e->kind == CKind::Unary && e->unop == UnOp::Neg) {
    collectTerms(e->args[0], -sign, out);
    return;
  }
  if (e->kind == CKind::Binary && e->binop == BinOp::Mul && isConst(e->args[0], &v)) {
    out.push_back({sign * v, e->args[1]});
    return;
  }
  out.push_back({sign, e});
}

CExprPtr combineTerms(const CExprPtr& sum) {
  std::vector<std::pair<double, CExprPtr>> raw, terms;
  collectTerms(sum, 1, raw);
  double k = 0;
  for (const auto& [c, t] : raw) {
    if (!t) {
      k += c;
      continue;
    }
    auto it = std::find_if(terms.begin(), terms.end(),
                           [&](const auto& p) { return sameExpr(*p.second, *t); });
    if (it == terms.end())
      terms.push_back({c, t});
    else
      it->first += c;
  }
  CExprPtr acc;
  for (const auto& [c, t] : terms) {
    if (c == 0) continue;
    double mag = std::fabs(c);
    CExprPtr term = mag == 1 ? t : binary(BinOp::Mul, constant(mag), t);
    if (!acc)
      acc = c < 0 ? unary(UnOp::Neg, term) : term;
    else
      acc = binary(c < 0 ? BinOp::Sub : BinOp::Add, acc, term);
  }
  if (!acc) return constant(k);
  if (k != 0) acc = binary(k < 0 ? BinOp::Sub : BinOp::Add, acc, constant(std::fabs(k)));
  return acc;
}

} // namespace

CExprPtr sumOfSimplified(const CExprPtr& a, const CExprPtr& b) {
  double x = 0, y = 0;
  bool ca = isConst(a, &x), cb = isConst(b, &y);
  if (ca && cb) return constant(x + y);
  if (ca && x == 0) return b;
  if (cb && y == 0) return a;
  return combineTerms(binary(BinOp::Add, a, b));
}

CExprPtr Simplifier::compute(const CExprPtr& e) {
  switch (e->kind) {
  case CKind::Unary: {
    CExprPtr a = (*this)(e->args[0]);
    double v;
    if (isConst(a, &v)) return constant(e->unop == UnOp::Neg ? -v : (v == 0 ? 1 : 0));
    if (e->unop == UnOp::Neg && a->kind == CKind::Unary && a->unop == UnOp::Neg) return a->args[0];
    return a == e->args[0] ? e : unary(e->unop, a);
  }
  case CKind::Binary: {
    CExprPtr a = (*this)(e->args[0]), b = (*this)(e->args[1]);
    double x = 0, y = 0;
    bool ca = isConst(a, &x), cb = isConst(b, &y);
    switch (e->binop) {
    case BinOp::Add: return sumOfSimplified(a, b);
    case BinOp::Sub:
      if (ca && cb) return constant(x - y);
      if (cb && y == 0) return a;
      if (ca && x == 0) return (*this)(unary(UnOp::Neg, b));
      return combineTerms(binary(BinOp::Sub, a, b));
    case BinOp::Mul:
      if (ca && cb) return constant(x * y);
      if ((ca && x == 0) || (cb && y == 0)) return constant(0);
      if (ca && x == 1) return b;
      if (cb && y == 1) return a;
      if (ca && x == -1) return (*this)(unary(UnOp::Neg, b));
      if (cb && y == -1) return (*this)(unary(UnOp::Neg, a));
      if (cb && !ca) std::swap(a, b), std::swap(x, y), std::swap(ca, cb); // constant first
      if (ca && b->kind == CKind::Binary && b->binop == BinOp::Mul && isConst(b->args[0], &y))
        return (*this)(binary(BinOp::Mul, constant(x * y), b->args[1]));
      break;
    case BinOp::Div:
      if (ca && x == 0) return constant(0);
      if (cb && y == 1) return a;
      break;
    case BinOp::Pow:
      if (ca && cb) return constant(std::pow(x, y));
      if (cb && y == 1) return a;
      if (cb && y == 0) return constant(1);
      break;
    default: break;
    }
    if (a == e->args[0] && b == e->args[1]) return e;
    return binary(e->binop, a, b);
  }
  case CKind::Ternary: {
    CExprPtr c = (*this)(e->args[0]), a = (*this)(e->args[1]), b = (*this)(e->args[2]);
    double x = 0, y = 0;
    if (isConst(c, &x)) return x != 0 ? a : b;
    if (isConst(a, &x) && isConst(b, &y) && x == y) return a;
    if (c == e->args[0] && a == e->args[1] && b == e->args[2]) return e;
    return ternary(c, a, b);
  }
  case CKind::Call: {
    std::vector<CExprPtr> args;
    bool same = true;
    for (const auto& a : e->args) {
      args.push_back((*this)(a));
      same = same && args.back() == a;
    }
    return same ? e : call(e->fn, std::move(args));
  }
  default: return e;
  }
}

CExprPtr Simplifier::operator()(const CExprPtr& e) {
  if (auto it = memo_.find(e.get()); it != memo_.end()) return it->second;
  if (shared_)
    if (auto it = shared_->memo_.find(e.get()); it != shared_->memo_.end()) return it->second;
  CExprPtr r = compute(e);
  pinned_.push_back(e);
  memo_.emplace(e.get(), r);
  // A result is its own simplification: derivative() builds each level on the simplified
  // levels below, which must not be walked again.
  if (r != e) {
    pinned_.push_back(r);
    memo_.emplace(r.get(), r);
  }
  return r;
}

std::size_t printedSize(const CExprPtr& e, std::size_t cap) {
  std::unordered_map<const CExpr*, std::size_t> memo;
  std::function<std::size_t(const CExpr&)> size = [&](const CExpr& x) -> std::size_t {
    if (auto it = memo.find(&x); it != memo.end()) return it->second;
    std::size_t n = 1;
    auto add = [&](std::size_t m) { n = std::min(cap, n + m); };
    for (const Subscript& s : x.subs)
      if (s.gather) add(size(*s.gather));
    for (const CExprPtr& a : x.args) add(size(*a));
    memo.emplace(&x, n);
    return n;
  };
  return size(*e);
}

CExprPtr simplify(const CExprPtr& e) { return Simplifier()(e); }

CExprPtr derivative(const CExprPtr& e, const CExpr* site) {
  return Simplifier().derivative(e, site);
}

} // namespace einjit::grad
