// Structural checks on a lowered function, run before any backend sees it.
#include "codegen/IR.h"

#include "einjit/Error.h"

#include <map>
#include <set>

namespace einjit::codegen::ir {

namespace {

class Verifier : public Visitor {
public:
  explicit Verifier(const Func& f) : f_(f) {
    for (const BufferArg& b : f.buffers) declare(b.name, b.elem);
  }

  void visitVar(const Var& n) override {
    if (!vars_.count(n.name)) fail("variable '" + n.name + "' used outside its loop");
  }
  void visitLoad(const Load& n) override {
    expectType(n.index, Type::i64, "load index");
    auto it = buffers_.find(n.buffer);
    if (it == buffers_.end()) fail("load from undeclared buffer '" + n.buffer + "'");
    if (it->second != n.type) fail("load type differs from buffer '" + n.buffer + "'");
    if (n.mask) expectType(n.mask, Type::i1, "load mask");
    Visitor::visitLoad(n);
  }
  void visitStore(const Store& n) override {
    expectType(n.index, Type::i64, "store index");
    auto it = buffers_.find(n.buffer);
    if (it == buffers_.end()) fail("store to undeclared buffer '" + n.buffer + "'");
    const Type want = n.atomicAdd && it->second == Type::bf16 ? Type::f32 : it->second;
    if (n.value->type != want) fail("store type differs from buffer '" + n.buffer + "'");
    if (n.atomicAdd && want != Type::f32 && want != Type::f64)
      fail("atomic add into a non-float buffer '" + n.buffer + "'");
    Visitor::visitStore(n);
  }
  void visitBinary(const Binary& n) override {
    if (n.a->type != n.b->type) fail("binary operands of different types");
    bool intOnly = n.op == BinOp::FloorDiv || n.op == BinOp::CeilDiv || n.op == BinOp::EMod ||
                   n.op == BinOp::Xor;
    if (intOnly && n.a->type != Type::i64)
      fail("integer operator on " + std::string(typeName(n.a->type)));
    Visitor::visitBinary(n);
  }
  void visitSelect(const Select& n) override {
    expectType(n.cond, Type::i1, "select condition");
    Visitor::visitSelect(n);
  }
  void visitCheck(const Check& n) override {
    if (n.extent <= 0) fail("check with an empty extent");
    Visitor::visitCheck(n);
  }
  void visitIfThen(const IfThen& n) override {
    expectType(n.cond, Type::i1, "if condition");
    Visitor::visitIfThen(n);
  }
  void visitFor(const For& n) override {
    expectType(n.lo, Type::i64, "loop bound");
    expectType(n.hi, Type::i64, "loop bound");
    visit(n.lo);
    visit(n.hi);
    if (vars_.count(n.var)) fail("loop variable '" + n.var + "' shadows an outer one");
    if (n.forKind == ForKind::Parallel && ++parallelLoops_ > 1) fail("two parallel loops");
    if (n.forKind == ForKind::Unrolled && (!isConst(n.lo) || !isConst(n.hi)))
      fail("unrolled loop '" + n.var + "' without constant bounds");
    if (n.forKind == ForKind::Vectorized && n.width < 1) fail("vector width below 1");
    vars_.insert(n.var);
    visit(n.body);
    vars_.erase(n.var);
  }
  void visitAllocate(const Allocate& n) override {
    if (buffers_.count(n.buffer)) fail("local buffer '" + n.buffer + "' declared twice");
    if (n.size <= 0) fail("local buffer '" + n.buffer + "' of size 0");
    declare(n.buffer, n.elem);
    if (n.shared) shared_.insert(n.buffer);
    visit(n.body);
    shared_.erase(n.buffer);
    buffers_.erase(n.buffer);
  }
  void visitWgmma(const Wgmma& n) override {
    for (const WgmmaOperand* o : {&n.a, &n.b}) {
      auto it = buffers_.find(o->buffer);
      if (it == buffers_.end() || it->second != Type::bf16 || !shared_.count(o->buffer))
        fail("warpgroup product from '" + o->buffer + "', not a bf16 shared buffer");
    }
    auto acc = buffers_.find(n.acc);
    if (acc == buffers_.end() || acc->second != Type::f32 || shared_.count(n.acc))
      fail("warpgroup product into '" + n.acc + "', not a local f32 buffer");
    Visitor::visitWgmma(n);
  }
  // A copy's two buffers: declared, of one element type.
  void copyBetween(const std::string& src, const std::string& dst, const std::string& what) {
    auto d = buffers_.find(dst), s = buffers_.find(src);
    if (d == buffers_.end() || s == buffers_.end())
      fail(what + " between undeclared buffers '" + src + "' and '" + dst + "'");
    if (d->second != s->second) fail(what + " between buffers of different types");
  }
  void visitPrefetch(const Prefetch& n) override {
    expectType(n.index, Type::i64, "prefetch index");
    if (!buffers_.count(n.buffer)) fail("prefetch of undeclared buffer '" + n.buffer + "'");
    Visitor::visitPrefetch(n);
  }
  void visitCopyVector(const CopyVector& n) override {
    expectType(n.dstIndex, Type::i64, "vector copy index");
    expectType(n.srcIndex, Type::i64, "vector copy index");
    copyBetween(n.src, n.dst, "vector copy");
    Visitor::visitCopyVector(n);
  }
  void visitCopyAsync(const CopyAsync& n) override {
    if (n.cond) expectType(n.cond, Type::i1, "copy condition");
    copyBetween(n.src, n.dst, "asynchronous copy");
    if (!shared_.count(n.dst)) fail("asynchronous copy into '" + n.dst + "', not a shared buffer");
    Visitor::visitCopyAsync(n);
  }

private:
  const Func& f_;
  std::set<std::string> shared_;
  std::set<std::string> vars_;
  std::map<std::string, Type> buffers_;
  int parallelLoops_ = 0;

  void declare(const std::string& name, Type t) {
    if (!buffers_.emplace(name, t).second) fail("buffer '" + name + "' declared twice");
  }
  void expectType(const Expr& e, Type t, const std::string& what) {
    if (e->type != t)
      fail(what + " '" + print(e) + "' has type " + std::string(typeName(e->type)) + ", not " +
           std::string(typeName(t)));
  }
  [[noreturn]] void fail(const std::string& msg) {
    throw InternalError("IR verifier: " + msg + " in\n" + print(f_));
  }
};

} // namespace

void verify(const Func& f) {
  Verifier v(f);
  v.visit(f.body);
}

} // namespace einjit::codegen::ir
