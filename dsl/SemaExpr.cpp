#include "dsl/Sema.h"

#include "dsl/Printer.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace einjit::dsl {

namespace {

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

} // namespace

bool Sema::AffineForm::hasVars() const {
  return std::any_of(coef.begin(), coef.end(), [](std::int64_t c) { return c != 0; });
}

CExprPtr Sema::make(CExpr e) { return std::make_shared<const CExpr>(std::move(e)); }

int Sema::readTensor(const Expr& e, int rank, bool asIndex) {
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

CExprPtr Sema::read(const Expr& e, bool asIndex) {
  CExpr c{CKind::Read, e.range};
  c.tensor = readTensor(e, static_cast<int>(e.args.size()), asIndex);
  for (const ExprPtr& a : e.args) c.subs.push_back(subscript(*a));
  return make(std::move(c));
}

CExprPtr Sema::value(const Expr& e) {
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
std::pair<int, int> Sema::sizeArgs(const Expr& e) {
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
  int rank = p_.tensors[static_cast<std::size_t>(id)].rank;
  // Literals reach 2^53 but a rank is an int: a dimension past int's range is out of range for
  // any tensor, whether or not its rank is known yet.
  const auto dim64 = static_cast<std::int64_t>(e.args[1]->number);
  if (dim64 >= std::numeric_limits<int>::max())
    fail(src_, e.args[1]->range,
         "dimension " + std::to_string(dim64) + " is out of range for '" + t.name + "'" +
             (rank >= 0 ? " of rank " + std::to_string(rank) : std::string()));
  const int dim = static_cast<int>(dim64);
  if (rank < 0) pendingSizeChecks_.emplace_back(id, dim, e.args[1]->range);
  p_.sizeUses.push_back({id, dim, e.range});
  if (rank >= 0 && dim >= rank)
    fail(src_, e.args[1]->range,
         "dimension " + std::to_string(dim) + " is out of range for '" + t.name + "' of rank " +
             std::to_string(rank));
  return {id, dim};
}

CExprPtr Sema::sizeValue(const Expr& e) {
  auto [id, dim] = sizeArgs(e);
  CExpr c{CKind::Size, e.range};
  c.tensor = id;
  c.dim = dim;
  return make(std::move(c));
}

Subscript Sema::subscript(const Expr& e) {
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

void Sema::notAffine(const Expr& e, const std::string& why) {
  fail(src_, e.range, "subscript is not affine: " + why,
       {{{},
         "a subscript is a sum of integer multiples of index variables and integer "
         "constants or parameters (2i+k-1, N-1-i), optionally wrapped in "
         "pad/clamp/wrap, or a gather x[idx[i]]",
         false}});
}

Sema::AffineForm Sema::affine(const Expr& e, bool gatherAllowed) {
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

// A range bound over index variables: max/min/fdiv/cdiv and sums of affine forms.
IndexBound Sema::bound(const Expr& e) {
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

// A range bound: integer constants, parameters and extents, no index variables.
Sym Sema::constant(const Expr& e, const char* what) {
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

} // namespace einjit::dsl
