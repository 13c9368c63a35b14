// The LLVM emitter's memory accesses (codegen/llvm/Emitter.h): addresses (in a loop of explicit
// code that only moves data, pointers stepped by the loop), loads and stores of one element or
// of a vector of lanes (contiguous, masked, a few elements apart as one run picked out by
// shuffles, gathers and scatters otherwise), and non-temporal stores.
#include "codegen/llvm/Emitter.h"

#include "einjit/Error.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Module.h>

#include <optional>

namespace einjit::codegen::llvmgen {

namespace {

// Whether an index reads memory or checks its range (emitted as a branch): neither can be
// moved to a loop's preheader, and a checked index is clamped, not affine.
class NotMovable : public Visitor {
public:
  bool any = false;
  void visitLoad(const Load&) override { any = true; }
  void visitCheck(const Check&) override { any = true; }
};


// The coefficient of `name` where e is affine in it, an expression of e's other variables
// (treated as fixed), constants folded; nothing where e is not affine in it.
std::optional<Expr> coefficientOf(const Expr& e, const std::string& name) {
  if (!dependsOn(e, name)) return intImm(0);
  if (e->kind == NodeKind::Var) return intImm(1);
  if (e->kind != NodeKind::Binary) return std::nullopt;
  const auto& b = static_cast<const Binary&>(*e);
  if (b.type != Type::i64) return std::nullopt;
  switch (b.op) {
  case BinOp::Add:
  case BinOp::Sub: {
    const std::optional<Expr> ca = coefficientOf(b.a, name), cb = coefficientOf(b.b, name);
    if (!ca || !cb) return std::nullopt;
    return binary(b.op, *ca, *cb);
  }
  case BinOp::Mul:
    if (!dependsOn(b.a, name)) {
      const std::optional<Expr> cb = coefficientOf(b.b, name);
      return cb ? std::optional<Expr>(mul(b.a, *cb)) : std::nullopt;
    }
    if (!dependsOn(b.b, name)) {
      const std::optional<Expr> ca = coefficientOf(b.a, name);
      return ca ? std::optional<Expr>(mul(*ca, b.b)) : std::nullopt;
    }
    return std::nullopt;
  default: return std::nullopt;
  }
}

} // namespace

llvm::Value* Emitter::address(const Buf& buf, const Expr& index, bool* contiguous,
                              llvm::Value** idxOut) {
  *contiguous = false;
  if (inVector() && dependsOn(index, vecVar_)) {
    auto c = linearCoefficient(index, vecVar_);
    if (c && *c == 1) {
      *contiguous = true;
      return scalarAddress(buf, index);
    }
    *idxOut = expr(index);
    return b_.CreateInBoundsGEP(buf.elem, buf.ptr, *idxOut); // a vector of pointers
  }
  return scalarAddress(buf, index);
}

// &buf[index] (the vectorized variable at its first lane). In a strength-reduced loop
// (StridedLoop), an index affine in the loop's variable, and in the variables bound inside
// it (unrolled copies, vector steps: constants there), is a pointer that steps with the
// loop, at a constant offset: the pointer starts at the index's part fixed in the loop (one
// pointer per buffer, stride and such part), so the loop needs no index arithmetic and no
// loop strength reduction in code generation, whose cost grows faster than the code
// (docs/ARCHITECTURE.md, "The CPU JIT").
llvm::Value* Emitter::scalarAddress(const Buf& buf, const Expr& index) {
  auto plain = [&] {
    return b_.CreateInBoundsGEP(buf.elem, buf.ptr, inVector() ? scalarAtBase(index) : expr(index));
  };
  StridedLoop* loop = strided_;
  if (!loop || !llvm::isa<llvm::Argument>(buf.ptr)) return plain();
  // The bindings made inside the loop (the lowering's lets, such as a k step of a pair of
  // steps) written out, so that the index shows how it depends on the loop's variable.
  Expr full = index;
  for (std::size_t i = lets_.size(); i-- > loop->lets;)
    full = substitute(full, lets_[i].first, lets_[i].second);
  if (!dependsOn(full, loop->var)) return plain();
  NotMovable notMovable;
  notMovable.visit(full);
  if (notMovable.any) return plain();
  // The coefficient: a constant, or an expression of what the loop does not change (a
  // merged residue phase's stride, a variable of the phase).
  const std::optional<Expr> c = coefficientOf(full, loop->var);
  std::int64_t cc = 0;
  if (!c || (isConst(*c, &cc) && cc == 0)) return plain();
  std::vector<std::pair<std::string, llvm::Value*>> inner;
  for (std::size_t k = loop->inner; k < innerVars_.size(); ++k)
    inner.emplace_back(innerVars_[k], vars_.at(innerVars_[k]));
  if (inVector()) inner.emplace_back(vecVar_, vecBase_);
  for (const auto& v : inner)
    if (dependsOn(*c, v.first)) return plain();
  Expr fixed = substitute(full, loop->var, intImm(0));
  std::int64_t offset = 0;
  for (const auto& [v, value] : inner) {
    if (!dependsOn(fixed, v)) continue;
    const std::optional<std::int64_t> cv = linearCoefficient(fixed, v);
    auto* k = llvm::dyn_cast<llvm::ConstantInt>(value);
    if (!cv || !k) return plain();
    offset += *cv * k->getSExtValue();
    fixed = substitute(fixed, v, intImm(0));
  }
  llvm::PHINode*& phi = loop->pointers[{buf.ptr, print(*c), print(fixed)}];
  if (!phi) {
    const llvm::IRBuilderBase::InsertPoint ip = b_.saveIP();
    const std::string vec = std::exchange(vecVar_, std::string());
    b_.SetInsertPoint(loop->pre->getTerminator());
    llvm::Value* step = expr(*c);
    llvm::Value* start = b_.CreateAdd(b_.CreateMul(loop->lo, step), expr(fixed));
    llvm::Value* first = b_.CreateGEP(buf.elem, buf.ptr, start);
    vecVar_ = vec;
    b_.SetInsertPoint(loop->head, loop->head->getFirstInsertionPt());
    phi = b_.CreatePHI(b_.getPtrTy(), 2, loop->var + ".ptr");
    phi->addIncoming(first, loop->pre);
    b_.restoreIP(ip);
    loop->steps.push_back({phi, buf.elem, step});
  }
  return b_.CreateGEP(buf.elem, phi, b_.getInt64(static_cast<std::uint64_t>(offset)));
}

llvm::Align Emitter::alignOf(llvm::Type* t) {
  return llvm::Align(m_.getDataLayout().getABITypeAlign(t));
}

// Lanes this many elements apart or fewer are read as one contiguous run and picked out of
// it (a stride-2 convolution's window): a few vector loads and shuffles, where a gather
// costs a load per lane (and is slow on AMD). The run spans only elements between the first
// and the last lane, which lie in the same buffer. With 64-byte vectors of lanes the run is
// read as whole vectors (stride x lanes elements), its elements past the last lane masked off
// (a masked load reads nothing there): two loads and one two-source permute for a stride of
// 2, where a run of 31 floats was legalised as pieces of 16, 8, 4, 2 and 1 put together by
// a dozen inserts and shuffles (the README demo's forward packing).
constexpr std::int64_t kShuffledStride = 4;

llvm::Value* Emitter::loadExpr(const Load& n) {
  const Buf& buf = lookup(n.buffer);
  const bool wide =
      buf.elem->getPrimitiveSizeInBits().getFixedValue() * static_cast<std::uint64_t>(lanes_) ==
      512;
  if ((!n.mask || wide) && lanes_ > 1 && inVector() && dependsOn(n.index, vecVar_)) {
    auto c = linearCoefficient(n.index, vecVar_);
    if (c && *c >= 2 && *c <= kShuffledStride) {
      const auto span = static_cast<unsigned>((lanes_ - 1) * *c + 1);
      llvm::Value* base = scalarAddress(buf, n.index);
      llvm::Value* run = nullptr;
      if (wide) {
        // A lane mask (B read in place, its last sliver) spread over the run: element
        // l x stride read where lane l is on, nothing between the lanes or past them.
        const auto whole = static_cast<unsigned>(lanes_ * *c);
        const auto stride = static_cast<unsigned>(*c);
        llvm::SmallVector<llvm::Constant*, 64> on;
        for (unsigned l = 0; l < whole; ++l) on.push_back(b_.getInt1(l < span));
        llvm::Value* mask = llvm::ConstantVector::get(on);
        if (n.mask) {
          llvm::Value* m = splat(expr(n.mask));
          llvm::SmallVector<int, 64> spread;
          for (unsigned l = 0; l < whole; ++l)
            spread.push_back(l % stride == 0 ? static_cast<int>(l / stride)
                                             : static_cast<int>(lanes_));
          mask = b_.CreateShuffleVector(m, llvm::Constant::getNullValue(m->getType()), spread);
        }
        auto* vt = llvm::FixedVectorType::get(buf.elem, whole);
        run = b_.CreateMaskedLoad(vt, base, alignOf(buf.elem), mask,
                                  n.mask ? llvm::Constant::getNullValue(vt)
                                         : static_cast<llvm::Value*>(llvm::PoisonValue::get(vt)));
      } else {
        run = b_.CreateAlignedLoad(llvm::FixedVectorType::get(buf.elem, span), base,
                                   alignOf(buf.elem));
      }
      llvm::SmallVector<int, 16> pick;
      for (unsigned l = 0; l < static_cast<unsigned>(lanes_); ++l)
        pick.push_back(static_cast<int>(l * static_cast<unsigned>(*c)));
      return b_.CreateShuffleVector(run, pick);
    }
  }
  bool contiguous = false;
  llvm::Value* idx = nullptr;
  llvm::Value* addr = address(buf, n.index, &contiguous, &idx);
  auto* vt = llvm::FixedVectorType::get(buf.elem, lanes_);
  if (n.mask) {
    llvm::Value* m = expr(n.mask);
    if (contiguous || isVec(addr)) {
      m = splat(m);
      llvm::Value* zero = llvm::Constant::getNullValue(vt);
      return contiguous ? b_.CreateMaskedLoad(vt, addr, alignOf(buf.elem), m, zero)
                        : b_.CreateMaskedGather(vt, addr, alignOf(buf.elem), m, zero);
    }
    if (isVec(m)) throw InternalError("codegen: a lane mask on a load of one element");
    // One element: read only where the mask holds.
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* readBB = llvm::BasicBlock::Create(ctx_, "load.read", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "load.done", fn_);
    b_.CreateCondBr(m, readBB, done);
    b_.SetInsertPoint(readBB);
    llvm::Value* v = b_.CreateLoad(buf.elem, addr);
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    llvm::PHINode* phi = b_.CreatePHI(buf.elem, 2);
    phi->addIncoming(llvm::Constant::getNullValue(buf.elem), from);
    phi->addIncoming(v, readBB);
    return phi;
  }
  if (contiguous) return b_.CreateAlignedLoad(vt, addr, alignOf(buf.elem));
  if (isVec(addr)) return b_.CreateMaskedGather(vt, addr, alignOf(buf.elem));
  return b_.CreateLoad(buf.elem, addr);
}

void Emitter::storeValue(const std::string& buffer, const Expr& index, llvm::Value* v,
                         llvm::Value* mask, bool nonTemporal) {
  const Buf& buf = lookup(buffer);
  // Lanes a few elements apart, with 64-byte vectors of lanes (a residue phase's tile row,
  // dx[2q + rho]): the lanes spread over whole vectors of the run they span and stored by a
  // masked store, which writes nothing between them (another phase's elements), where a
  // scatter costs a store per lane. A guarded store's lane mask (a row's lanes past its last
  // column) is spread the same way.
  if ((!mask || isVec(mask)) && lanes_ > 1 && inVector() && dependsOn(index, vecVar_) &&
      buf.elem->getPrimitiveSizeInBits().getFixedValue() * static_cast<std::uint64_t>(lanes_) ==
          512) {
    auto c = linearCoefficient(index, vecVar_);
    if (c && *c >= 2 && *c <= kShuffledStride) {
      const auto whole = static_cast<unsigned>(lanes_ * *c);
      llvm::SmallVector<int, 64> spread, spreadMask;
      llvm::SmallVector<llvm::Constant*, 64> on;
      for (unsigned l = 0; l < whole; ++l) {
        const bool lane = l % static_cast<unsigned>(*c) == 0;
        const int from = static_cast<int>(l / static_cast<unsigned>(*c));
        spread.push_back(lane ? from : -1);
        spreadMask.push_back(lane ? from : static_cast<int>(lanes_)); // off: a false lane
        on.push_back(b_.getInt1(lane));
      }
      llvm::Value* m = llvm::ConstantVector::get(on);
      if (mask)
        m = b_.CreateShuffleVector(mask, llvm::Constant::getNullValue(mask->getType()),
                                   spreadMask);
      b_.CreateMaskedStore(b_.CreateShuffleVector(splat(v), spread), scalarAddress(buf, index),
                           alignOf(buf.elem), m);
      return;
    }
  }
  bool contiguous = false;
  llvm::Value* idx = nullptr;
  llvm::Value* addr = address(buf, index, &contiguous, &idx);
  if (contiguous || isVec(addr)) {
    v = splat(v);
    if (contiguous && !mask && nonTemporal) {
      streamStore(v, addr, buf.elem);
    } else if (contiguous && !mask) {
      b_.CreateAlignedStore(v, addr, alignOf(buf.elem));
    } else if (contiguous) {
      b_.CreateMaskedStore(v, addr, alignOf(buf.elem), mask);
    } else {
      b_.CreateMaskedScatter(v, addr, alignOf(buf.elem), mask);
    }
    return;
  }
  if (isVec(v)) throw InternalError("codegen: vector stored to one element of " + buffer);
  b_.CreateStore(v, addr);
}

// A whole vector stored non-temporally (Store::nonTemporal) where its address is aligned to
// its size, an ordinary store otherwise: x86's non-temporal vector store needs the alignment,
// and LLVM splits an unaligned one into 8-byte non-temporal stores. The address is tested
// here, not proven: the row blocks' rows are aligned when the tensor and the row length are.
void Emitter::streamStore(llvm::Value* v, llvm::Value* addr, llvm::Type* elem) {
  const std::uint64_t bytes = m_.getDataLayout().getTypeStoreSize(v->getType()).getFixedValue();
  llvm::Value* low =
      b_.CreateAnd(b_.CreatePtrToInt(addr, b_.getInt64Ty()), b_.getInt64(bytes - 1));
  auto* streamBB = llvm::BasicBlock::Create(ctx_, "store.stream", fn_);
  auto* plainBB = llvm::BasicBlock::Create(ctx_, "store.plain", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "store.done", fn_);
  b_.CreateCondBr(b_.CreateICmpEQ(low, b_.getInt64(0)), streamBB, plainBB);
  b_.SetInsertPoint(streamBB);
  llvm::StoreInst* st = b_.CreateAlignedStore(v, addr, llvm::Align(bytes));
  st->setMetadata(llvm::LLVMContext::MD_nontemporal,
                  llvm::MDNode::get(ctx_, llvm::ConstantAsMetadata::get(b_.getInt32(1))));
  b_.CreateBr(done);
  b_.SetInsertPoint(plainBB);
  b_.CreateAlignedStore(v, addr, alignOf(elem));
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  streamed_ = true;
}

const Emitter::Buf& Emitter::lookup(const std::string& name) {
  auto it = buffers_.find(name);
  if (it == buffers_.end()) throw InternalError("codegen: unknown buffer " + name);
  return it->second;
}

} // namespace einjit::codegen::llvmgen
