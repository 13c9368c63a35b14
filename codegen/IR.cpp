#include "codegen/IR.h"

#include "einjit/Error.h"

#include <limits>

namespace einjit::codegen::ir {

bool isFloat(Type t) { return t == Type::f32 || t == Type::f64; }

std::string_view typeName(Type t) {
  switch (t) {
  case Type::i1: return "bool";
  case Type::i32: return "i32";
  case Type::i64: return "i64";
  case Type::f32: return "f32";
  case Type::f64: return "f64";
  case Type::bf16: return "bf16";
  }
  return "?";
}

int typeBytes(Type t) {
  switch (t) {
  case Type::i1: return 1;
  case Type::bf16: return 2;
  case Type::i32:
  case Type::f32: return 4;
  case Type::i64:
  case Type::f64: return 8;
  }
  return 0;
}

std::string_view binOpName(BinOp op) {
  switch (op) {
  case BinOp::Add: return "+";
  case BinOp::Sub: return "-";
  case BinOp::Mul: return "*";
  case BinOp::Div: return "/";
  case BinOp::Mod: return "fmod";
  case BinOp::Pow: return "pow";
  case BinOp::Min: return "min";
  case BinOp::Max: return "max";
  case BinOp::FloorDiv: return "fdiv";
  case BinOp::CeilDiv: return "cdiv";
  case BinOp::EMod: return "emod";
  case BinOp::Xor: return "^";
  case BinOp::Lt: return "<";
  case BinOp::Le: return "<=";
  case BinOp::Gt: return ">";
  case BinOp::Ge: return ">=";
  case BinOp::Eq: return "==";
  case BinOp::Ne: return "!=";
  case BinOp::And: return "&&";
  case BinOp::Or: return "||";
  }
  return "?";
}

bool isComparison(BinOp op) {
  return op == BinOp::Lt || op == BinOp::Le || op == BinOp::Gt || op == BinOp::Ge ||
         op == BinOp::Eq || op == BinOp::Ne;
}

std::string_view forKindName(ForKind k) {
  switch (k) {
  case ForKind::Serial: return "for";
  case ForKind::Parallel: return "parallel for";
  case ForKind::Vectorized: return "vectorized for";
  case ForKind::Unrolled: return "unrolled for";
  case ForKind::GpuBlock: return "gpu_block for";
  case ForKind::GpuThread: return "gpu_thread for";
  case ForKind::Rolled: return "rolled for";
  case ForKind::Outlined: return "outlined for";
  }
  return "?";
}

// --- constructors ----------------------------------------------------------------------------

bool isConst(const Expr& e, std::int64_t* value) {
  if (e->kind != NodeKind::IntImm) return false;
  if (value) *value = static_cast<const IntImm&>(*e).value;
  return true;
}

Expr intImm(std::int64_t v) { return std::make_shared<IntImm>(v); }
Expr floatImm(Type t, double v) { return std::make_shared<FloatImm>(t, v); }
Expr var(const std::string& name) { return std::make_shared<Var>(name); }
Expr param(Type t, int index) { return std::make_shared<Param>(t, index); }
Expr load(Type t, const std::string& buffer, Expr index) {
  return std::make_shared<Load>(t, buffer, std::move(index));
}
Expr maskedLoad(Type t, const std::string& buffer, Expr index, Expr mask) {
  return std::make_shared<Load>(t, buffer, std::move(index), std::move(mask));
}
Expr cast(Type t, Expr v) {
  if (v->type == t) return v;
  // bf16 -> f32 is exact, so converting back gives the bf16 value itself.
  if (t == Type::bf16 && v->kind == NodeKind::Cast &&
      static_cast<const Cast&>(*v).value->type == Type::bf16)
    return static_cast<const Cast&>(*v).value;
  return std::make_shared<Cast>(t, std::move(v));
}
Expr unary(UnOp op, Expr a) {
  Type t = a->type;
  return std::make_shared<Unary>(t, op, std::move(a));
}

namespace {

std::int64_t foldInt(BinOp op, std::int64_t a, std::int64_t b, bool* ok) {
  *ok = true;
  switch (op) {
  case BinOp::Add: return dsl::checkedAdd(a, b);
  case BinOp::Sub: return dsl::checkedAdd(a, -b);
  case BinOp::Mul: return dsl::checkedMul(a, b);
  case BinOp::Min: return std::min(a, b);
  case BinOp::Max: return std::max(a, b);
  case BinOp::FloorDiv:
    if (b > 0) return dsl::floorDiv(a, b);
    break;
  case BinOp::CeilDiv:
    if (b > 0) return dsl::ceilDiv(a, b);
    break;
  case BinOp::EMod:
    if (b > 0) return ((a % b) + b) % b;
    break;
  case BinOp::Xor: return a ^ b;
  case BinOp::Div: // truncating, as C and LLVM's sdiv/srem
  case BinOp::Mod:
    if (b != 0 && !(a == std::numeric_limits<std::int64_t>::min() && b == -1))
      return op == BinOp::Div ? a / b : a % b;
    break;
  default: break;
  }
  *ok = false;
  return 0;
}

} // namespace

Expr binary(BinOp op, Expr a, Expr b) {
  if (a->type != b->type)
    throw InternalError("ir: binary '" + std::string(binOpName(op)) + "' on " +
                        std::string(typeName(a->type)) + " and " + std::string(typeName(b->type)));
  std::int64_t x = 0, y = 0;
  bool ca = isConst(a, &x), cb = isConst(b, &y);
  if (ca && cb) {
    bool ok = false;
    try {
      std::int64_t r = foldInt(op, x, y, &ok);
      if (ok) return intImm(r);
    } catch (const dsl::SymOverflow&) {
    }
  }
  if (a->type == Type::i64) {
    if (op == BinOp::Add && ca && x == 0) return b;
    if ((op == BinOp::Add || op == BinOp::Sub) && cb && y == 0) return a;
    if (op == BinOp::Mul && ((ca && x == 0) || (cb && y == 0))) return intImm(0);
    if (op == BinOp::Mul && ca && x == 1) return b;
    if (op == BinOp::Mul && cb && y == 1) return a;
    if ((op == BinOp::FloorDiv || op == BinOp::CeilDiv) && cb && y == 1) return a;
  }
  Type t = isComparison(op) || op == BinOp::And || op == BinOp::Or ? Type::i1 : a->type;
  return std::make_shared<Binary>(t, op, std::move(a), std::move(b));
}

Expr add(Expr a, Expr b) { return binary(BinOp::Add, std::move(a), std::move(b)); }
Expr sub(Expr a, Expr b) { return binary(BinOp::Sub, std::move(a), std::move(b)); }
Expr mul(Expr a, Expr b) { return binary(BinOp::Mul, std::move(a), std::move(b)); }

Expr select(Expr c, Expr a, Expr b) {
  if (c->type != Type::i1 || a->type != b->type) throw InternalError("ir: select types");
  return std::make_shared<Select>(std::move(c), std::move(a), std::move(b));
}

Expr call(dsl::Fn fn, std::vector<Expr> args) {
  Type t = args.at(0)->type;
  return std::make_shared<Call>(t, fn, std::move(args));
}

Expr check(Expr index, std::int64_t extent) {
  return std::make_shared<Check>(std::move(index), extent);
}

Stmt forLoop(const std::string& v, Expr lo, Expr hi, ForKind k, Stmt body, int width) {
  return std::make_shared<For>(v, std::move(lo), std::move(hi), k, width, std::move(body));
}

Stmt block(std::vector<Stmt> s) {
  std::vector<Stmt> flat;
  for (Stmt& x : s) {
    if (!x) continue;
    if (x->kind == NodeKind::Block) {
      for (const Stmt& y : static_cast<const Block&>(*x).stmts) flat.push_back(y);
    } else {
      flat.push_back(std::move(x));
    }
  }
  if (flat.size() == 1) return flat[0];
  return std::make_shared<Block>(std::move(flat));
}

Stmt store(const std::string& buffer, Expr index, Expr value) {
  return std::make_shared<Store>(buffer, std::move(index), std::move(value));
}
Stmt atomicAdd(const std::string& buffer, Expr index, Expr value) {
  return std::make_shared<Store>(buffer, std::move(index), std::move(value), true);
}
Stmt streamStore(const std::string& buffer, Expr index, Expr value) {
  return std::make_shared<Store>(buffer, std::move(index), std::move(value), false, true);
}
Stmt ifThen(Expr c, Stmt t, Stmt e) {
  return std::make_shared<IfThen>(std::move(c), std::move(t), std::move(e));
}
Stmt allocate(const std::string& buffer, Type t, std::int64_t size, Stmt body, bool shared) {
  return std::make_shared<Allocate>(buffer, t, size, std::move(body), shared);
}
Stmt barrier(bool asyncProxy) { return std::make_shared<Barrier>(asyncProxy); }
Stmt wgmma(WgmmaOperand a, WgmmaOperand b, int n, int steps, const std::string& acc, Expr accBase,
           int pending) {
  if (n < 8 || n > 256 || n % 8 != 0 || steps < 1)
    throw InternalError("ir: a warpgroup product is m64nNk16 with N in 8..256 (multiples of 8)");
  if (pending < 0 || pending > 7)
    throw InternalError("ir: a warpgroup keeps 0..7 groups of products in flight");
  return std::make_shared<Wgmma>(std::move(a), std::move(b), n, steps, acc, std::move(accBase),
                                 pending);
}
Stmt mma(MmaOperand a, MmaOperand b, int mt, int nt, const std::string& acc, Expr accBase) {
  if (mt < 1 || nt < 1) throw InternalError("ir: an empty warp tile of tensor-core products");
  return std::make_shared<Mma>(std::move(a), std::move(b), mt, nt, acc, std::move(accBase));
}
namespace {
void copyBytes(int bytes, const std::string& what) {
  if (bytes != 4 && bytes != 8 && bytes != 16)
    throw InternalError("ir: " + what + " moves 4, 8 or 16 bytes");
}
} // namespace
Stmt copyAsync(const std::string& dst, Expr dstIndex, const std::string& src, Expr srcIndex,
               int bytes, Expr cond) {
  copyBytes(bytes, "an asynchronous copy");
  return std::make_shared<CopyAsync>(dst, std::move(dstIndex), src, std::move(srcIndex), bytes,
                                     std::move(cond));
}
Stmt copyVector(const std::string& dst, Expr dstIndex, const std::string& src, Expr srcIndex,
                int bytes) {
  copyBytes(bytes, "a vector copy");
  return std::make_shared<CopyVector>(dst, std::move(dstIndex), src, std::move(srcIndex), bytes);
}
Stmt asyncCommit() { return std::make_shared<AsyncCommit>(); }
Stmt asyncWait(int pending, bool products) {
  if (pending < 0 || pending > 7) throw InternalError("ir: an asynchronous wait for 0..7 groups");
  return std::make_shared<AsyncWait>(pending, products);
}
Stmt evaluate(Expr value) { return std::make_shared<Evaluate>(std::move(value)); }
Stmt prefetch(const std::string& buffer, Expr index, bool ahead) {
  return std::make_shared<Prefetch>(buffer, std::move(index), ahead);
}

// --- visitor ---------------------------------------------------------------------------------

void Visitor::visit(const Expr& e) {
  switch (e->kind) {
#define EXPR(name)                                                                                 \
  case NodeKind::name:                                                                             \
    visit##name(static_cast<const name&>(*e));                                                     \
    return;
#include "codegen/IR.def"
  default: throw InternalError("ir: statement where an expression belongs");
  }
}

void Visitor::visit(const Stmt& s) {
  switch (s->kind) {
#define STMT(name)                                                                                 \
  case NodeKind::name:                                                                             \
    visit##name(static_cast<const name&>(*s));                                                     \
    return;
#include "codegen/IR.def"
  default: throw InternalError("ir: expression where a statement belongs");
  }
}

void Visitor::visitIntImm(const IntImm&) {}
void Visitor::visitFloatImm(const FloatImm&) {}
void Visitor::visitVar(const Var&) {}
void Visitor::visitParam(const Param&) {}
void Visitor::visitLoad(const Load& n) {
  visit(n.index);
  if (n.mask) visit(n.mask);
}
void Visitor::visitCast(const Cast& n) { visit(n.value); }
void Visitor::visitUnary(const Unary& n) { visit(n.a); }
void Visitor::visitBinary(const Binary& n) {
  visit(n.a);
  visit(n.b);
}
void Visitor::visitSelect(const Select& n) {
  visit(n.cond);
  visit(n.a);
  visit(n.b);
}
void Visitor::visitCall(const Call& n) {
  for (const Expr& a : n.args) visit(a);
}
void Visitor::visitCheck(const Check& n) { visit(n.index); }
void Visitor::visitFor(const For& n) {
  visit(n.lo);
  visit(n.hi);
  visit(n.body);
}
void Visitor::visitBlock(const Block& n) {
  for (const Stmt& s : n.stmts) visit(s);
}
void Visitor::visitStore(const Store& n) {
  visit(n.index);
  visit(n.value);
}
void Visitor::visitIfThen(const IfThen& n) {
  visit(n.cond);
  visit(n.then);
  if (n.otherwise) visit(n.otherwise);
}
void Visitor::visitAllocate(const Allocate& n) { visit(n.body); }
void Visitor::visitBarrier(const Barrier&) {}
void Visitor::visitWgmma(const Wgmma& n) {
  visit(n.a.base);
  visit(n.b.base);
  visit(n.accBase);
}
void Visitor::visitMma(const Mma& n) {
  visit(n.a.base);
  visit(n.b.base);
  visit(n.accBase);
}
void Visitor::visitCopyAsync(const CopyAsync& n) {
  visit(n.dstIndex);
  visit(n.srcIndex);
  if (n.cond) visit(n.cond);
}
void Visitor::visitCopyVector(const CopyVector& n) {
  visit(n.dstIndex);
  visit(n.srcIndex);
}
void Visitor::visitAsyncCommit(const AsyncCommit&) {}
void Visitor::visitAsyncWait(const AsyncWait&) {}
void Visitor::visitEvaluate(const Evaluate& n) { visit(n.value); }
void Visitor::visitPrefetch(const Prefetch& n) { visit(n.index); }

// --- mutator ---------------------------------------------------------------------------------

Expr Mutator::mutate(const Expr& e) {
  switch (e->kind) {
#define EXPR(name)                                                                                 \
  case NodeKind::name:                                                                             \
    return mutate##name(e, static_cast<const name&>(*e));
#include "codegen/IR.def"
  default: throw InternalError("ir: statement where an expression belongs");
  }
}

Stmt Mutator::mutate(const Stmt& s) {
  if (!s) return s;
  switch (s->kind) {
#define STMT(name)                                                                                 \
  case NodeKind::name:                                                                             \
    return mutate##name(s, static_cast<const name&>(*s));
#include "codegen/IR.def"
  default: throw InternalError("ir: expression where a statement belongs");
  }
}

Expr Mutator::mutateIntImm(const Expr& self, const IntImm&) { return self; }
Expr Mutator::mutateFloatImm(const Expr& self, const FloatImm&) { return self; }
Expr Mutator::mutateVar(const Expr& self, const Var&) { return self; }
Expr Mutator::mutateParam(const Expr& self, const Param&) { return self; }
Expr Mutator::mutateLoad(const Expr& self, const Load& n) {
  Expr i = mutate(n.index);
  Expr m = n.mask ? mutate(n.mask) : nullptr;
  return i == n.index && m == n.mask ? self : std::make_shared<Load>(n.type, n.buffer, i, m);
}
Expr Mutator::mutateCast(const Expr& self, const Cast& n) {
  Expr v = mutate(n.value);
  return v == n.value ? self : cast(n.type, v);
}
Expr Mutator::mutateUnary(const Expr& self, const Unary& n) {
  Expr a = mutate(n.a);
  return a == n.a ? self : unary(n.op, a);
}
Expr Mutator::mutateBinary(const Expr& self, const Binary& n) {
  Expr a = mutate(n.a), b = mutate(n.b);
  return a == n.a && b == n.b ? self : binary(n.op, a, b);
}
Expr Mutator::mutateSelect(const Expr& self, const Select& n) {
  Expr c = mutate(n.cond), a = mutate(n.a), b = mutate(n.b);
  return c == n.cond && a == n.a && b == n.b ? self : select(c, a, b);
}
Expr Mutator::mutateCall(const Expr& self, const Call& n) {
  std::vector<Expr> args;
  bool same = true;
  for (const Expr& a : n.args) {
    args.push_back(mutate(a));
    same = same && args.back() == a;
  }
  return same ? self : call(n.fn, std::move(args));
}
Expr Mutator::mutateCheck(const Expr& self, const Check& n) {
  Expr i = mutate(n.index);
  return i == n.index ? self : check(i, n.extent);
}
Stmt Mutator::mutateFor(const Stmt& self, const For& n) {
  Expr lo = mutate(n.lo), hi = mutate(n.hi);
  Stmt body = mutate(n.body);
  if (lo == n.lo && hi == n.hi && body == n.body) return self;
  return forLoop(n.var, lo, hi, n.forKind, body, n.width);
}
Stmt Mutator::mutateBlock(const Stmt& self, const Block& n) {
  std::vector<Stmt> s;
  bool same = true;
  for (const Stmt& x : n.stmts) {
    s.push_back(mutate(x));
    same = same && s.back() == x;
  }
  return same ? self : block(std::move(s));
}
Stmt Mutator::mutateStore(const Stmt& self, const Store& n) {
  Expr i = mutate(n.index), v = mutate(n.value);
  if (i == n.index && v == n.value) return self;
  return n.atomicAdd     ? atomicAdd(n.buffer, i, v)
         : n.nonTemporal ? streamStore(n.buffer, i, v)
                         : store(n.buffer, i, v);
}
Stmt Mutator::mutateIfThen(const Stmt& self, const IfThen& n) {
  Expr c = mutate(n.cond);
  Stmt t = mutate(n.then), e = mutate(n.otherwise);
  return c == n.cond && t == n.then && e == n.otherwise ? self : ifThen(c, t, e);
}
Stmt Mutator::mutateAllocate(const Stmt& self, const Allocate& n) {
  Stmt b = mutate(n.body);
  return b == n.body ? self : allocate(n.buffer, n.elem, n.size, b, n.shared);
}
Stmt Mutator::mutateBarrier(const Stmt& self, const Barrier&) { return self; }
Stmt Mutator::mutateWgmma(const Stmt& self, const Wgmma& n) {
  WgmmaOperand a = n.a, b = n.b;
  a.base = mutate(n.a.base);
  b.base = mutate(n.b.base);
  Expr c = mutate(n.accBase);
  return a.base == n.a.base && b.base == n.b.base && c == n.accBase
             ? self
             : wgmma(std::move(a), std::move(b), n.n, n.steps, n.acc, c, n.pending);
}
Stmt Mutator::mutateMma(const Stmt& self, const Mma& n) {
  MmaOperand a = n.a, b = n.b;
  a.base = mutate(n.a.base);
  b.base = mutate(n.b.base);
  Expr c = mutate(n.accBase);
  return a.base == n.a.base && b.base == n.b.base && c == n.accBase
             ? self
             : mma(std::move(a), std::move(b), n.mt, n.nt, n.acc, c);
}
Stmt Mutator::mutateCopyAsync(const Stmt& self, const CopyAsync& n) {
  Expr d = mutate(n.dstIndex), s = mutate(n.srcIndex), c = n.cond ? mutate(n.cond) : n.cond;
  return d == n.dstIndex && s == n.srcIndex && c == n.cond
             ? self
             : copyAsync(n.dst, d, n.src, s, n.bytes, c);
}
Stmt Mutator::mutateCopyVector(const Stmt& self, const CopyVector& n) {
  Expr d = mutate(n.dstIndex), s = mutate(n.srcIndex);
  return d == n.dstIndex && s == n.srcIndex ? self : copyVector(n.dst, d, n.src, s, n.bytes);
}
Stmt Mutator::mutateAsyncCommit(const Stmt& self, const AsyncCommit&) { return self; }
Stmt Mutator::mutateAsyncWait(const Stmt& self, const AsyncWait&) { return self; }
Stmt Mutator::mutateEvaluate(const Stmt& self, const Evaluate& n) {
  Expr v = mutate(n.value);
  return v == n.value ? self : evaluate(v);
}
Stmt Mutator::mutatePrefetch(const Stmt& self, const Prefetch& n) {
  Expr i = mutate(n.index);
  return i == n.index ? self : prefetch(n.buffer, i, n.ahead);
}

// --- queries ---------------------------------------------------------------------------------

namespace {

class Substitute : public Mutator {
public:
  Substitute(const std::string& name, const Expr& value) : name_(name), value_(value) {}
  Expr mutateVar(const Expr& self, const Var& n) override {
    return n.name == name_ ? value_ : self;
  }

private:
  const std::string& name_;
  const Expr& value_;
};

class MaskLoads : public Mutator {
public:
  explicit MaskLoads(const Expr& mask) : mask_(mask) {}
  Expr mutateLoad(const Expr&, const Load& n) override {
    Expr i = mutate(n.index);
    Expr m = n.mask ? binary(BinOp::And, mutate(n.mask), mask_) : mask_;
    return maskedLoad(n.type, n.buffer, i, m);
  }

private:
  const Expr& mask_;
};

class Uses : public Visitor {
public:
  explicit Uses(const std::string& name) : name_(name) {}
  bool found = false;
  void visitVar(const Var& n) override { found = found || n.name == name_; }

private:
  const std::string& name_;
};

} // namespace

Expr substitute(const Expr& e, const std::string& name, const Expr& value) {
  Substitute s(name, value);
  return s.mutate(e);
}

Stmt substitute(const Stmt& st, const std::string& name, const Expr& value) {
  Substitute s(name, value);
  return s.mutate(st);
}

Expr maskLoads(const Expr& e, const Expr& mask) {
  MaskLoads m(mask);
  return m.mutate(e);
}

bool dependsOn(const Expr& e, const std::string& name) {
  Uses u(name);
  u.visit(e);
  return u.found;
}

std::optional<std::int64_t> linearCoefficient(const Expr& e, const std::string& name) {
  if (!dependsOn(e, name)) return 0;
  if (e->kind == NodeKind::Var) return 1;
  if (e->kind != NodeKind::Binary) return std::nullopt;
  const auto& b = static_cast<const Binary&>(*e);
  if (b.type != Type::i64) return std::nullopt;
  auto ca = linearCoefficient(b.a, name), cb = linearCoefficient(b.b, name);
  if (!ca || !cb) return std::nullopt;
  std::int64_t k = 0;
  switch (b.op) {
  case BinOp::Add: return *ca + *cb;
  case BinOp::Sub: return *ca - *cb;
  case BinOp::Mul:
    if (*ca == 0 && isConst(b.a, &k)) return k * *cb;
    if (*cb == 0 && isConst(b.b, &k)) return k * *ca;
    return std::nullopt;
  default: return std::nullopt;
  }
}

} // namespace einjit::codegen::ir
