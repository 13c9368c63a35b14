// The LLVM emitter's expressions (codegen/llvm/Emitter.h): variables (the vectorized loop's
// as a vector of lanes), parameters, casts (bf16 converted on its bits), integer arithmetic
// (identities folded, repeats reused) and floating-point arithmetic, calls (LLVM intrinsics,
// vector math, libm lane by lane), and range checks that record a failure and clamp.
#include "codegen/llvm/Emitter.h"

#include "codegen/VectorMath.h"

#include "einjit/Error.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PatternMatch.h>

namespace einjit::codegen::llvmgen {

llvm::Type* Emitter::llvmType(Type t) {
  switch (t) {
  case Type::i1: return b_.getInt1Ty();
  case Type::i32: return b_.getInt32Ty();
  case Type::i64: return b_.getInt64Ty();
  case Type::f32: return b_.getFloatTy();
  case Type::f64: return b_.getDoubleTy();
  case Type::bf16: return b_.getInt16Ty(); // the bits; Cast converts
  }
  return nullptr;
}

// Emits e with the vectorized variable bound to its first lane (a scalar).
llvm::Value* Emitter::scalarAtBase(const Expr& e) {
  std::string saved = vecVar_;
  vecVar_.clear();
  vars_[saved] = vecBase_;
  llvm::Value* v = expr(e);
  vars_.erase(saved);
  vecVar_ = saved;
  return v;
}

// --- expressions ---------------------------------------------------------------------------

llvm::Value* Emitter::expr(const Expr& e) {
  switch (e->kind) {
  case NodeKind::IntImm:
    return b_.getInt64(static_cast<std::uint64_t>(static_cast<const IntImm&>(*e).value));
  case NodeKind::FloatImm:
    return llvm::ConstantFP::get(llvmType(e->type), static_cast<const FloatImm&>(*e).value);
  case NodeKind::Var: {
    const std::string& name = static_cast<const Var&>(*e).name;
    if (inVector() && name == vecVar_) {
      std::vector<llvm::Constant*> steps;
      for (unsigned l = 0; l < lanes_; ++l) steps.push_back(b_.getInt64(l));
      return b_.CreateAdd(b_.CreateVectorSplat(lanes_, vecBase_),
                          llvm::ConstantVector::get(steps));
    }
    auto it = vars_.find(name);
    if (it == vars_.end()) throw InternalError("codegen: unbound variable " + name);
    return it->second;
  }
  case NodeKind::Param: {
    const auto& n = static_cast<const Param&>(*e);
    llvm::Value* p = b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), params_,
                                                   static_cast<std::uint64_t>(n.index));
    llvm::Value* v = b_.CreateLoad(b_.getDoubleTy(), p);
    return n.type == Type::f32 ? b_.CreateFPTrunc(v, b_.getFloatTy()) : v;
  }
  case NodeKind::Load: return loadExpr(static_cast<const Load&>(*e));
  case NodeKind::Cast: return castExpr(static_cast<const Cast&>(*e));
  case NodeKind::Unary: {
    const auto& n = static_cast<const Unary&>(*e);
    llvm::Value* a = expr(n.a);
    if (n.op == UnOp::Not) return b_.CreateNot(a);
    return isFloat(n.type) ? b_.CreateFNeg(a) : b_.CreateNeg(a);
  }
  case NodeKind::Binary: return binaryExpr(static_cast<const Binary&>(*e));
  case NodeKind::Select: {
    const auto& n = static_cast<const Select&>(*e);
    llvm::Value *c = expr(n.cond), *a = expr(n.a), *f = expr(n.b);
    if (isVec(c) || isVec(a) || isVec(f)) {
      c = splat(c);
      a = splat(a);
      f = splat(f);
    }
    return b_.CreateSelect(c, a, f);
  }
  case NodeKind::Call: return callExpr(static_cast<const Call&>(*e));
  case NodeKind::Check: return checkExpr(static_cast<const Check&>(*e));
  default: throw InternalError("codegen: statement in expression position");
  }
}

llvm::Type* Emitter::shaped(Type t, llvm::Value* like) {
  llvm::Type* s = llvmType(t);
  return isVec(like) ? llvm::FixedVectorType::get(s, lanes_) : s;
}

// bf16 <-> f32 on the bits (scalars or vectors): the top half of a float; rounding to
// nearest even, NaN kept quiet.
llvm::Value* Emitter::bf16ToFloat(llvm::Value* h) {
  llvm::Value* u = b_.CreateZExt(h, shaped(Type::i32, h));
  return b_.CreateBitCast(b_.CreateShl(u, constLike(u, 16)), shaped(Type::f32, h));
}
llvm::Value* Emitter::floatToBf16(llvm::Value* f) {
  llvm::Value* u = b_.CreateBitCast(f, shaped(Type::i32, f));
  llvm::Value* hi = b_.CreateLShr(u, constLike(u, 16));
  llvm::Value* odd = b_.CreateAnd(hi, constLike(u, 1));
  llvm::Value* rounded =
      b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(u, constLike(u, 0x7fff)), odd), constLike(u, 16));
  llvm::Value* isNan =
      b_.CreateICmpUGT(b_.CreateAnd(u, constLike(u, 0x7fffffff)), constLike(u, 0x7f800000));
  llvm::Value* bits = b_.CreateSelect(isNan, b_.CreateOr(hi, constLike(u, 0x40)), rounded);
  return b_.CreateTrunc(bits, shaped(Type::bf16, f));
}

llvm::Value* Emitter::castExpr(const Cast& n) {
  Type from = n.value->type, to = n.type;
  if (from == Type::bf16 || to == Type::bf16) { // through f32
    if (from == to) return expr(n.value);
    if (from == Type::bf16) {
      llvm::Value* f = bf16ToFloat(expr(n.value));
      return to == Type::f32 ? f : castValue(f, Type::f32, to);
    }
    llvm::Value* v = expr(n.value);
    return floatToBf16(from == Type::f32 ? v : castValue(v, from, Type::f32));
  }
  return castValue(expr(n.value), from, to);
}

llvm::Value* Emitter::castValue(llvm::Value* v, Type from, Type to) {
  llvm::Type* dst = shaped(to, v);
  if (isFloat(from) && isFloat(to)) return b_.CreateFPCast(v, dst);
  if (!isFloat(from) && isFloat(to))
    return from == Type::i1 ? b_.CreateUIToFP(v, dst) : b_.CreateSIToFP(v, dst);
  if (isFloat(from)) // saturating, NaN -> 0, like the interpreter
    return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {dst, v->getType()}, {v});
  return b_.CreateSExtOrTrunc(v, dst);
}

// The lowering's index arithmetic repeats itself: each access computes its subscript again
// (the same products and sums of the same loop variables) and writes `x / 1`, `x % 1`,
// `x + 0`. An integer operation by its identity is its operand, and one that the block being
// emitted already computed (at its end: nothing emitted since moved it) is that value: the
// middle end, whose cost follows the instructions it is given, then starts from about half
// of a product's instructions, and finds what early-cse would have found.
bool Emitter::sameIntOpKind(BinOp op) {
  return op == BinOp::Add || op == BinOp::Sub || op == BinOp::Mul || op == BinOp::Div ||
         op == BinOp::Mod || op == BinOp::Min || op == BinOp::Max;
}
llvm::Value* Emitter::intIdentity(BinOp op, llvm::Value* a, llvm::Value* c) const {
  using namespace llvm::PatternMatch;
  switch (op) {
  case BinOp::Add:
    if (match(c, m_Zero())) return a;
    if (match(a, m_Zero())) return c;
    return nullptr;
  case BinOp::Sub: return match(c, m_Zero()) ? a : nullptr;
  case BinOp::Mul:
    if (match(c, m_One())) return a;
    if (match(a, m_One())) return c;
    return nullptr;
  case BinOp::Div:
  case BinOp::FloorDiv:
  case BinOp::CeilDiv: return match(c, m_One()) ? a : nullptr;
  case BinOp::Mod:
  case BinOp::EMod: return match(c, m_One()) ? llvm::Constant::getNullValue(a->getType()) : nullptr;
  default: return nullptr;
  }
}
llvm::Value* Emitter::emittedIntOp(BinOp op, llvm::Value* a, llvm::Value* c) {
  auto it = intOps_.find({static_cast<int>(op), a, c});
  if (it == intOps_.end()) return nullptr;
  auto* i = llvm::dyn_cast_or_null<llvm::Instruction>(static_cast<llvm::Value*>(it->second));
  llvm::BasicBlock* block = b_.GetInsertBlock();
  if (!i || i->getParent() != block || b_.GetInsertPoint() != block->end()) return nullptr;
  const auto* call = llvm::dyn_cast<llvm::CallInst>(i);
  const bool same = call ? call->arg_size() == 2 && call->getArgOperand(0) == a && call->getArgOperand(1) == c
                         : i->getNumOperands() == 2 && i->getOperand(0) == a && i->getOperand(1) == c;
  return same ? i : nullptr;
}

llvm::Value* Emitter::binaryExpr(const Binary& n) {
  llvm::Value *a = expr(n.a), *c = expr(n.b);
  unify(a, c);
  const bool fl = isFloat(n.a->type);
  if (!fl && n.a->type != Type::i1) {
    if (llvm::Value* v = intIdentity(n.op, a, c)) return v;
    if (sameIntOpKind(n.op)) {
      if (llvm::Value* v = emittedIntOp(n.op, a, c)) return v;
      llvm::Value* v = binary(n.op, false, a, c);
      if (llvm::isa<llvm::Instruction>(v)) intOps_[{static_cast<int>(n.op), a, c}] = v;
      return v;
    }
  }
  return binary(n.op, fl, a, c);
}
llvm::Value* Emitter::binary(BinOp op, bool fl, llvm::Value* a, llvm::Value* c) {
  switch (op) {
  case BinOp::Add: return fl ? b_.CreateFAdd(a, c) : b_.CreateAdd(a, c);
  case BinOp::Sub: return fl ? b_.CreateFSub(a, c) : b_.CreateSub(a, c);
  case BinOp::Mul: return fl ? b_.CreateFMul(a, c) : b_.CreateMul(a, c);
  case BinOp::Div: return fl ? b_.CreateFDiv(a, c) : b_.CreateSDiv(a, c);
  case BinOp::Mod: return fl ? b_.CreateFRem(a, c) : b_.CreateSRem(a, c);
  case BinOp::Pow: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, c);
  case BinOp::Min:
    if (!fl) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, c);
    return b_.CreateSelect(b_.CreateFCmpOLT(c, a), c, a);
  case BinOp::Max:
    if (!fl) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a, c);
    return b_.CreateSelect(b_.CreateFCmpOGT(c, a), c, a);
  case BinOp::FloorDiv:
  case BinOp::CeilDiv: { // divisor > 0
    llvm::Value* q = b_.CreateSDiv(a, c);
    llvm::Value* r = b_.CreateSRem(a, c);
    if (op == BinOp::FloorDiv)
      return b_.CreateSub(q, b_.CreateZExt(b_.CreateICmpSLT(r, constLike(r, 0)), q->getType()));
    return b_.CreateAdd(q, b_.CreateZExt(b_.CreateICmpSGT(r, constLike(r, 0)), q->getType()));
  }
  case BinOp::Xor: return b_.CreateXor(a, c);
  case BinOp::EMod: {
    llvm::Value* r = b_.CreateSRem(a, c);
    return b_.CreateSelect(b_.CreateICmpSLT(r, constLike(r, 0)), b_.CreateAdd(r, c), r);
  }
  case BinOp::Lt: return fl ? b_.CreateFCmpOLT(a, c) : b_.CreateICmpSLT(a, c);
  case BinOp::Le: return fl ? b_.CreateFCmpOLE(a, c) : b_.CreateICmpSLE(a, c);
  case BinOp::Gt: return fl ? b_.CreateFCmpOGT(a, c) : b_.CreateICmpSGT(a, c);
  case BinOp::Ge: return fl ? b_.CreateFCmpOGE(a, c) : b_.CreateICmpSGE(a, c);
  case BinOp::Eq: return fl ? b_.CreateFCmpOEQ(a, c) : b_.CreateICmpEQ(a, c);
  case BinOp::Ne: return fl ? b_.CreateFCmpUNE(a, c) : b_.CreateICmpNE(a, c);
  case BinOp::And: return b_.CreateAnd(a, c);
  case BinOp::Or: return b_.CreateOr(a, c);
  }
  throw InternalError("codegen: binary operator");
}

// A libm function applied lane by lane.
llvm::Value* Emitter::libm(const char* f32, const char* f64, llvm::Value* a) {
  llvm::Type* s = a->getType()->getScalarType();
  llvm::FunctionCallee fn =
      m_.getOrInsertFunction(s->isFloatTy() ? f32 : f64, llvm::FunctionType::get(s, {s}, false));
  if (!isVec(a)) return b_.CreateCall(fn, {a});
  llvm::Value* r = llvm::PoisonValue::get(a->getType());
  for (unsigned l = 0; l < lanes_; ++l)
    r = b_.CreateInsertElement(r, b_.CreateCall(fn, {b_.CreateExtractElement(a, l)}), l);
  return r;
}

// A two-argument libm function applied lane by lane.
llvm::Value* Emitter::libm2(const char* f32, const char* f64, llvm::Value* a, llvm::Value* b) {
  llvm::Type* s = a->getType()->getScalarType();
  llvm::FunctionCallee fn = m_.getOrInsertFunction(s->isFloatTy() ? f32 : f64,
                                                   llvm::FunctionType::get(s, {s, s}, false));
  if (!isVec(a)) return b_.CreateCall(fn, {a, b});
  llvm::Value* r = llvm::PoisonValue::get(a->getType());
  for (unsigned l = 0; l < lanes_; ++l)
    r = b_.CreateInsertElement(
        r, b_.CreateCall(fn, {b_.CreateExtractElement(a, l), b_.CreateExtractElement(b, l)}), l);
  return r;
}

llvm::Value* Emitter::callExpr(const Call& n) {
  using dsl::Fn;
  llvm::Value* a = expr(n.args[0]);
  auto unaryIntrinsic = [&](llvm::Intrinsic::ID id) { return b_.CreateUnaryIntrinsic(id, a); };
  switch (n.fn) {
  case Fn::Exp: return emitExp(b_, a, avx512_);
  case Fn::Log: return unaryIntrinsic(llvm::Intrinsic::log);
  case Fn::Sqrt: return unaryIntrinsic(llvm::Intrinsic::sqrt);
  case Fn::Sin: return unaryIntrinsic(llvm::Intrinsic::sin);
  case Fn::Cos: return unaryIntrinsic(llvm::Intrinsic::cos);
  case Fn::Abs: return unaryIntrinsic(llvm::Intrinsic::fabs);
  case Fn::Floor: return unaryIntrinsic(llvm::Intrinsic::floor);
  case Fn::Ceil: return unaryIntrinsic(llvm::Intrinsic::ceil);
  case Fn::Tanh: return libm("tanhf", "tanh", a);
  case Fn::Erf: return libm("erff", "erf", a);
  case Fn::Atan: return libm("atanf", "atan", a);
  case Fn::Atan2: {
    llvm::Value* c = expr(n.args[1]);
    unify(a, c);
    return libm2("atan2f", "atan2", a, c);
  }
  case Fn::Log2: return unaryIntrinsic(llvm::Intrinsic::log2);
  case Fn::Log10: return unaryIntrinsic(llvm::Intrinsic::log10);
  case Fn::Log1p: return libm("log1pf", "log1p", a);
  case Fn::Expm1: return libm("expm1f", "expm1", a);
  case Fn::Cbrt: return libm("cbrtf", "cbrt", a);
  case Fn::Round: return unaryIntrinsic(llvm::Intrinsic::round); // half away from zero
  case Fn::Sign: { // x > 0 ? 1 : x < 0 ? -1 : x (keeps -0 and NaN)
    llvm::Value* zero = constLike(a, 0.0);
    llvm::Value* neg = b_.CreateSelect(b_.CreateFCmpOLT(a, zero), constLike(a, -1.0), a);
    return b_.CreateSelect(b_.CreateFCmpOGT(a, zero), constLike(a, 1.0), neg);
  }
  case Fn::Sigmoid: {
    llvm::Value* one = constLike(a, 1.0);
    llvm::Value* ex = emitExp(b_, b_.CreateFNeg(a), avx512_);
    return b_.CreateFDiv(one, b_.CreateFAdd(one, ex));
  }
  case Fn::Relu: {
    llvm::Value* zero = constLike(a, 0.0);
    return b_.CreateSelect(b_.CreateFCmpOGT(a, zero), a, zero);
  }
  case Fn::Pow: {
    llvm::Value* c = expr(n.args[1]);
    unify(a, c);
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, c);
  }
  default: break;
  }
  throw InternalError("codegen: function " + std::string(dsl::functionName(n.fn)) +
                      " should have been lowered");
}

llvm::Value* Emitter::checkExpr(const Check& n) {
  llvm::Value* idx = expr(n.index);
  llvm::Value* zero = constLike(idx, 0);
  llvm::Value* ext = constLike(idx, static_cast<double>(n.extent));
  llvm::Value* bad = b_.CreateOr(b_.CreateICmpSLT(idx, zero), b_.CreateICmpSGE(idx, ext));
  if (isVec(bad)) bad = b_.CreateOrReduce(bad);
  auto* fail = llvm::BasicBlock::Create(ctx_, "check.fail", fn_);
  auto* cont = llvm::BasicBlock::Create(ctx_, "check.ok", fn_);
  auto* w = llvm::MDBuilder(ctx_).createBranchWeights(1, 1 << 20);
  b_.CreateCondBr(bad, fail, cont, w);
  b_.SetInsertPoint(fail);
  // Tasks of a parallel loop may fail at once: a relaxed atomic store.
  llvm::StoreInst* st = b_.CreateStore(b_.getInt32(1), status_);
  st->setAtomic(llvm::AtomicOrdering::Monotonic);
  st->setAlignment(llvm::Align(4));
  b_.CreateBr(cont);
  b_.SetInsertPoint(cont);
  llvm::Value* lo = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, idx, zero);
  return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, lo,
                                  constLike(idx, static_cast<double>(n.extent - 1)));
}

} // namespace einjit::codegen::llvmgen
