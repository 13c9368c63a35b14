// The LLVM emitter's statements and loops (codegen/llvm/Emitter.h): stores, branches, stack
// buffers, prefetches, and the loops of the IR: outlined, unrolled, explicitly vectorized,
// bindings of one iteration, and loops left to LLVM (hinted to its vectorizer or kept rolled).
#include "codegen/llvm/Emitter.h"
#include "codegen/VectorTranspose.h"

#include "einjit/Error.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

namespace einjit::codegen::llvmgen {

namespace {

// Whether a statement computes with floating-point values (a product's micro-kernel), or only
// moves them (a packing loop: loads, stores, index arithmetic).
class Computes : public Visitor {
public:
  bool any = false;
  void visitBinary(const Binary& n) override {
    any = any || isFloat(n.type);
    Visitor::visitBinary(n);
  }
  void visitUnary(const Unary& n) override {
    any = any || isFloat(n.type);
    Visitor::visitUnary(n);
  }
  void visitCall(const Call& n) override {
    any = true;
    Visitor::visitCall(n);
  }
};

} // namespace

// --- statements ----------------------------------------------------------------------------

void Emitter::stmt(const Stmt& s) {
  switch (s->kind) {
  case NodeKind::Block:
    for (const Stmt& x : static_cast<const Block&>(*s).stmts) stmt(x);
    return;
  case NodeKind::Store: {
    const auto& n = static_cast<const Store&>(*s);
    if (n.atomicAdd) throw InternalError("codegen: an atomic GPU scatter in CPU code");
    storeValue(n.buffer, n.index, expr(n.value), nullptr, n.nonTemporal);
    return;
  }
  case NodeKind::IfThen: {
    const auto& n = static_cast<const IfThen&>(*s);
    llvm::Value* c = expr(n.cond);
    if (isVec(c)) { // vectorizable() admitted only a guarded store
      const auto& st = static_cast<const Store&>(*n.then);
      storeValue(st.buffer, st.index, expr(st.value), c);
      return;
    }
    auto* thenBB = llvm::BasicBlock::Create(ctx_, "then", fn_);
    auto* elseBB = n.otherwise ? llvm::BasicBlock::Create(ctx_, "else", fn_) : nullptr;
    auto* done = llvm::BasicBlock::Create(ctx_, "endif", fn_);
    b_.CreateCondBr(c, thenBB, elseBB ? elseBB : done);
    b_.SetInsertPoint(thenBB);
    stmt(n.then);
    b_.CreateBr(done);
    if (elseBB) {
      b_.SetInsertPoint(elseBB);
      stmt(n.otherwise);
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
    return;
  }
  case NodeKind::Allocate: {
    const auto& n = static_cast<const Allocate&>(*s);
    llvm::IRBuilder<> eb(entry_, entry_->begin());
    llvm::Type* et = llvmType(n.elem);
    auto* arr = llvm::ArrayType::get(et, static_cast<std::uint64_t>(n.size));
    llvm::AllocaInst* a = eb.CreateAlloca(arr, nullptr, n.buffer);
    a->setAlignment(llvm::Align(64));
    buffers_[n.buffer] = {a, et};
    stmt(n.body);
    buffers_.erase(n.buffer);
    return;
  }
  case NodeKind::For: forStmt(static_cast<const For&>(*s)); return;
  case NodeKind::Evaluate: expr(static_cast<const Evaluate&>(*s).value); return;
  case NodeKind::Prefetch: {
    // llvm.prefetch(address, write, locality 3: keep in every level, data): prefetchw on
    // x86 where the CPU has it, else prefetcht0; never a fault. Ahead of a later read:
    // (read, locality 2): prefetcht1.
    const auto& n = static_cast<const Prefetch&>(*s);
    const Buf& buf = lookup(n.buffer);
    llvm::Value* addr = b_.CreateGEP(buf.elem, buf.ptr, expr(n.index));
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {addr->getType()},
                       {addr, b_.getInt32(n.ahead ? 0 : 1), b_.getInt32(n.ahead ? 2 : 3),
                        b_.getInt32(1)});
    return;
  }
  case NodeKind::Barrier: throw InternalError("codegen: a GPU barrier in CPU code");
  case NodeKind::Mma:
  case NodeKind::Wgmma: throw InternalError("codegen: a tensor-core product in CPU code");
  case NodeKind::CopyAsync:
  case NodeKind::CopyVector:
  case NodeKind::AsyncCommit:
  case NodeKind::AsyncWait: throw InternalError("codegen: an asynchronous GPU copy in CPU code");
  default: throw InternalError("codegen: expression in statement position");
  }
}

// Explicit vectors are safe when every store in the body writes a distinct element per lane
// (an affine index with a nonzero coefficient) and nothing but stores, guarded stores and
// blocks appear.
bool Emitter::vectorizable(const Stmt& s, const std::string& v, std::int64_t width) {
  switch (s->kind) {
  case NodeKind::Block:
    for (const Stmt& x : static_cast<const Block&>(*s).stmts)
      if (!vectorizable(x, v, width)) return false;
    return true;
  case NodeKind::For: return transposable(static_cast<const For&>(*s), v, width);
  case NodeKind::Store: {
    auto c = linearCoefficient(static_cast<const Store&>(*s).index, v);
    return c && *c != 0;
  }
  case NodeKind::IfThen: {
    const auto& n = static_cast<const IfThen&>(*s);
    return !n.otherwise && n.then->kind == NodeKind::Store && vectorizable(n.then, v);
  }
  default: return false;
  }
}

// A loop over a store's lanes inside a vector loop (width lanes of v), the store contiguous
// along the lanes and not along v (a packed panel's lanes far apart, its positions contiguous
// in the operand: lower/CpuGemmPacking.cpp): width lanes at a time, one vector along v each,
// transposed in registers (VectorTranspose.h) and stored as one vector across the lanes per
// element of v, instead of a scalar load and store per element.
bool Emitter::transposable(const For& n, const std::string& v, std::int64_t width) {
  std::int64_t lo = 0, hi = 0;
  if (n.forKind != ForKind::Unrolled || !isConst(n.lo, &lo) || !isConst(n.hi, &hi) ||
      width < 2 || (width & (width - 1)) != 0 || hi <= lo || (hi - lo) % width != 0 ||
      n.body->kind != NodeKind::Store)
    return false;
  const auto& st = static_cast<const Store&>(*n.body);
  const auto along = linearCoefficient(st.index, v), across = linearCoefficient(st.index, n.var);
  return !st.atomicAdd && along && *along != 0 && across && *across == 1;
}

void Emitter::transposedStores(const For& n, std::int64_t lo) {
  std::int64_t hi = 0;
  isConst(n.hi, &hi);
  const auto& st = static_cast<const Store&>(*n.body);
  const std::string vec = vecVar_;
  llvm::Value* base = vecBase_;
  const auto width = static_cast<std::int64_t>(lanes_);
  for (std::int64_t x = lo; x < hi; x += width) {
    std::vector<llvm::Value*> rows;
    innerVars_.push_back(n.var);
    for (std::int64_t i = 0; i < width; ++i) {
      vars_[n.var] = b_.getInt64(static_cast<std::uint64_t>(x + i));
      rows.push_back(splat(expr(st.value)));
    }
    innerVars_.pop_back();
    vars_.erase(n.var);
    const std::vector<llvm::Value*> cols = transposeVectors(b_, rows, avx512_ ? 512 : 0);
    // Column j: the lanes x.. as the vector, v at its j-th value (bound as an inner variable,
    // so that a strided loop's pointers see a constant offset where v's base is one).
    vecVar_ = n.var;
    vecBase_ = b_.getInt64(static_cast<std::uint64_t>(x));
    innerVars_.push_back(vec);
    for (std::int64_t j = 0; j < width; ++j) {
      vars_[vec] = b_.CreateAdd(base, b_.getInt64(static_cast<std::uint64_t>(j)));
      storeValue(st.buffer, st.index, cols[static_cast<std::size_t>(j)], nullptr,
                 st.nonTemporal);
    }
    innerVars_.pop_back();
    vars_.erase(vec);
    vecVar_ = vec;
    vecBase_ = base;
  }
}

constexpr std::int64_t kMaxWrittenVectorSteps = 8;

void Emitter::forStmt(const For& n) {
  if ((n.forKind == ForKind::Outlined || parts_.count(&n)) && !inVector()) {
    outlined(n);
    return;
  }
  std::int64_t lo = 0, hi = 0;
  const bool constant = isConst(n.lo, &lo) && isConst(n.hi, &hi);
  if (inVector()) {
    transposedStores(n, lo); // vectorizable() admitted only these
    return;
  }
  if (n.forKind == ForKind::Unrolled && constant && !inVector()) {
    innerVars_.push_back(n.var);
    for (std::int64_t x = lo; x < hi; ++x) {
      vars_[n.var] = b_.getInt64(static_cast<std::uint64_t>(x));
      stmt(n.body);
    }
    innerVars_.pop_back();
    vars_.erase(n.var);
    return;
  }
  if (n.forKind == ForKind::Vectorized && constant && n.width > 1 && !inVector() &&
      (hi - lo) % n.width == 0 && vectorizable(n.body, n.var, n.width)) {
    vecVar_ = n.var;
    lanes_ = static_cast<unsigned>(n.width);
    ++explicitVectorLoops_;
    // A few vector steps are written out; more run as a loop, so that the size of the
    // emitted code (and the compile time) does not grow with the shape.
    if ((hi - lo) / n.width <= kMaxWrittenVectorSteps) {
      for (std::int64_t x = lo; x < hi; x += n.width) {
        vecBase_ = b_.getInt64(static_cast<std::uint64_t>(x));
        stmt(n.body);
      }
    } else {
      loop(n.var, b_.getInt64(static_cast<std::uint64_t>(lo)),
           b_.getInt64(static_cast<std::uint64_t>(hi)), n.width, LoopHint::None, [&](llvm::Value* x) {
             vecBase_ = x;
             stmt(n.body);
           });
      ++workLoops_;
    }
    vecVar_.clear();
    return;
  }
  // A loop of one iteration binds a variable (the IR has no let; the packed GEMM's nests are
  // mostly such loops): no loop is emitted, so LLVM's loop passes do not spend most of a
  // kernel's compile time on proving what the IR already says.
  if (n.forKind != ForKind::Parallel && oneIteration(n)) {
    vars_[n.var] = expr(n.lo);
    lets_.emplace_back(n.var, n.lo);
    stmt(n.body);
    lets_.pop_back();
    vars_.erase(n.var);
    return;
  }
  llvm::Value* loV = expr(n.lo);
  llvm::Value* hiV = expr(n.hi);
  if (n.forKind == ForKind::Parallel) {
    loV = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, loV, begin_);
    hiV = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, hiV, end_);
  }
  const LoopHint hint = n.forKind == ForKind::Vectorized ? LoopHint::Vectorize
                        : n.forKind == ForKind::Rolled   ? LoopHint::KeepRolled
                                                         : LoopHint::None;
  Computes computes;
  computes.visit(n.body);
  loop(
      n.var, loV, hiV, 1, hint,
      [&](llvm::Value* x) {
        vars_[n.var] = x;
        stmt(n.body);
        vars_.erase(n.var);
      },
      explicit_ && !computes.any);
}

// hi is lo + 1 (as ir::add builds it, constants folded).
bool Emitter::oneIteration(const For& n) {
  std::int64_t lo = 0, hi = 0;
  if (isConst(n.lo, &lo) && isConst(n.hi, &hi)) return hi == lo + 1;
  if (n.hi->kind == NodeKind::Binary) {
    const auto& b = static_cast<const Binary&>(*n.hi);
    std::int64_t one = 0;
    if (b.op == BinOp::Add && b.a == n.lo && isConst(b.b, &one) && one == 1) return true;
  }
  return print(n.hi) == print(add(n.lo, intImm(1)));
}

// for (x = lo; x < hi; x += step) body(x), hinted to LLVM's loop passes if asked.
// `stepPointers`: a loop of explicit code that only moves data (a packing loop) addresses its
// buffers through pointers of its own (StridedLoop). The micro-kernels' loops are left to
// LLVM (its unroller and code generation's loop strength reduction tune them).
void Emitter::loop(const std::string& name, llvm::Value* lo, llvm::Value* hi, std::int64_t step,
                   LoopHint hint, const std::function<void(llvm::Value*)>& body,
                   bool stepPointers) {
  // A loop left to LLVM's vectorizers: hinted, or innermost with scalar code.
  const std::int64_t loopsBefore = ++loops_, vectorsBefore = explicitVectorLoops_;
  const std::int64_t workBefore = workLoops_;
  const bool vectorBody = inVector();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx_, name + ".head", fn_);
  auto* bodyBlock = llvm::BasicBlock::Create(ctx_, name + ".body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, name + ".exit", fn_);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode* x = b_.CreatePHI(b_.getInt64Ty(), 2, name);
  x->addIncoming(lo, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(x, hi), bodyBlock, exit);
  b_.SetInsertPoint(bodyBlock);
  StridedLoop strided{name, pre, head, lo, lets_.size(), innerVars_.size(), {}, {}};
  StridedLoop* outer = strided_;
  strided_ = stepPointers && !vectorBody && hint != LoopHint::Vectorize ? &strided : nullptr;
  body(x);
  strided_ = outer;
  if (hint == LoopHint::Vectorize ||
      (hint == LoopHint::None && !vectorBody && loops_ == loopsBefore &&
       explicitVectorLoops_ == vectorsBefore))
    leftToVectorizer_ = true;
  // A loop around a loop that carries the work is not unrolled: each copy of a hinted inner
  // loop would be vectorized on its own (vector body, epilogue, remainder), and each copy of
  // an explicit vector loop unrolled again, multiplying the compile time for no gain (the
  // inner loop carries the work: a row block's copy of 8 rows of 4,096 elements was 8 copies).
  const bool aroundHinted = hint == LoopHint::None && workLoops_ > workBefore;
  if (hint == LoopHint::Vectorize) ++workLoops_;
  llvm::Value* next = b_.CreateAdd(x, b_.getInt64(static_cast<std::uint64_t>(step)), "",
                                   /*HasNUW=*/false, /*HasNSW=*/true);
  for (const StridedLoop::Step& s : strided.steps)
    s.phi->addIncoming(b_.CreateGEP(s.elem, s.phi,
                                    step == 1 ? s.coefficient
                                              : b_.CreateMul(s.coefficient, b_.getInt64(static_cast<std::uint64_t>(step)))),
                       b_.GetInsertBlock());
  llvm::BranchInst* latch = b_.CreateBr(head);
  x->addIncoming(next, b_.GetInsertBlock());
  if (aroundHinted) {
    llvm::Metadata* ops[] = {
        nullptr, llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")})};
    llvm::MDNode* self = llvm::MDNode::getDistinct(ctx_, ops);
    self->replaceOperandWith(0, self);
    latch->setMetadata(llvm::LLVMContext::MD_loop, self);
  } else if (hint != LoopHint::None) {
    auto flag = [&](const char* key, bool on) -> llvm::Metadata* {
      llvm::Metadata* kv[] = {llvm::MDString::get(ctx_, key),
                              llvm::ConstantAsMetadata::get(on ? b_.getTrue() : b_.getFalse())};
      return llvm::MDNode::get(ctx_, kv);
    };
    std::vector<llvm::Metadata*> ops{nullptr};
    if (hint == LoopHint::Vectorize)
      ops.push_back(flag("llvm.loop.vectorize.enable", true));
    else {
      ops.push_back(flag("llvm.loop.vectorize.enable", false));
      ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")}));
    }
    llvm::MDNode* self = llvm::MDNode::getDistinct(ctx_, ops);
    self->replaceOperandWith(0, self);
    latch->setMetadata(llvm::LLVMContext::MD_loop, self);
  }
  b_.SetInsertPoint(exit);
}

} // namespace einjit::codegen::llvmgen
