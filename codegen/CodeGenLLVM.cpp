#include "codegen/CodeGenLLVM.h"
#include "codegen/CodeGenParts.h"
#include "codegen/VectorMath.h"
#include "codegen/VectorTranspose.h"

#include "einjit/Error.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PatternMatch.h>
#include <llvm/IR/ValueHandle.h>

#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace einjit::codegen {

using namespace ir;

namespace {

// The buffers a function reads or writes. Its body takes only those as noalias parameters:
// given every buffer of the program, a chain of n statements made n functions of n noalias
// parameters each, and inlining and optimising them grew about as n^3 (the inliner turns each
// noalias parameter into alias scopes on every access).
// The variables an outlined loop reads.
class UsedVars : public Visitor {
public:
  std::set<std::string> names;
  void visitVar(const Var& n) override { names.insert(n.name); }
};

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

class UsedBuffers : public Visitor {
public:
  std::set<std::string> names;
  void visitLoad(const Load& n) override {
    names.insert(n.buffer);
    Visitor::visitLoad(n);
  }
  void visitStore(const Store& n) override {
    names.insert(n.buffer);
    Visitor::visitStore(n);
  }
};
// Functions of at most this many stores (IR.h, iterationBound) are compiled without
// optimization: at a few nanoseconds per store unoptimized, at most about a microsecond a call.
constexpr double kColdIterations = 256;

class Emitter {
public:
  Emitter(llvm::Module& m)
      : m_(m), ctx_(m.getContext()), b_(ctx_), avx512_(m.getModuleFlag(kAvx512Flag) != nullptr) {
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    b_.setFastMathFlags(fmf);
  }

  // Emitting with separate parts (separateParts): only_ is the part being emitted (0: the
  // entry point, whose calls to parts get declarations).
  static constexpr std::size_t kWhole = static_cast<std::size_t>(-1);
  void separate(const std::vector<PartSite>& sites, std::size_t only, const std::string& entry) {
    parts_.clear();
    for (std::size_t k = 0; k < sites.size(); ++k) parts_[sites[k].loop] = k + 1;
    sites_ = sites;
    only_ = only;
    entryName_ = entry;
  }

  // Part k >= 1: the function of an outlined loop, with external linkage, alone in its module.
  void part(const Func& f, const PartSite& site) {
    leftToVectorizer_ = false;
    explicit_ = f.explicitCode;
    strided_ = nullptr;
    lets_.clear();
    innerVars_.clear();
    // The buffers and variables in scope at the loop: their values do not matter here, only
    // which names are bound (the outlined function's arguments are those the loop uses).
    UsedBuffers usedNames;
    usedNames.visit(f.body);
    buffers_.clear();
    vars_.clear();
    for (const BufferArg& b : f.buffers)
      if (usedNames.names.count(b.name)) buffers_[b.name] = {nullptr, llvmType(b.elem)};
    for (const auto& [name, t] : site.locals) buffers_[name] = {nullptr, llvmType(t)};
    for (const std::string& v : site.vars) vars_[v] = nullptr;
    fn_ = nullptr;
    const bool tile = site.body != nullptr;
    const Signature sig = tile ? tileSignature(site) : signature(*site.loop);
    llvm::Function* fn = outlinedFunction(sig, partName(parts_.at(site.loop)), false);
    if (tile)
      defineTile(fn, site, sig);
    else
      defineOutlined(fn, *site.loop, sig);
    if (f.explicitCode && !leftToVectorizer_) fn->addFnAttr(kExplicitCodeAttr);
    if (tile) fn->addFnAttr(kTilePartAttr);
  }

  void func(const Func& f, const std::string& prefix) {
    leftToVectorizer_ = false;
    explicit_ = f.explicitCode;
    strided_ = nullptr;
    lets_.clear();
    innerVars_.clear();
    llvm::Type* ptr = b_.getPtrTy();
    llvm::Type* i64 = b_.getInt64Ty();
    // The body: one noalias pointer per buffer it uses (slot used[j] of the buffer array).
    UsedBuffers usedNames;
    usedNames.visit(f.body);
    std::vector<std::size_t> used;
    for (std::size_t i = 0; i < f.buffers.size(); ++i)
      if (usedNames.names.count(f.buffers[i].name)) used.push_back(i);
    const unsigned nb = static_cast<unsigned>(used.size());
    std::vector<llvm::Type*> implArgs(nb, ptr);
    implArgs.insert(implArgs.end(), {ptr, i64, i64, ptr});
    auto* implTy = llvm::FunctionType::get(b_.getVoidTy(), implArgs, false);
    auto* impl = llvm::Function::Create(implTy, llvm::Function::InternalLinkage,
                                        prefix + f.name + ".body", m_);
    // A function that runs only a few iterations (an edge tile, a border, a combine of a split
    // reduction's partials) gains nothing from O3 but costs most of a program's compile time
    // (unrolled and vectorized copies of loops of a few iterations): it is compiled without
    // optimization, body and entry alike.
    const bool cold = unoptimized(f);
    impl->addFnAttr(cold ? llvm::Attribute::NoInline : llvm::Attribute::AlwaysInline);
    if (cold) impl->addFnAttr(llvm::Attribute::OptimizeNone);
    impl->addFnAttr(llvm::Attribute::NoUnwind);
    for (unsigned j = 0; j < nb; ++j) impl->addParamAttr(j, llvm::Attribute::NoAlias);
    impl->addParamAttr(nb + 3, llvm::Attribute::NoAlias);
    llvm::BasicBlock* start = beginBody(impl);
    for (unsigned j = 0; j < nb; ++j)
      buffers_[f.buffers[used[j]].name] = {impl->getArg(j), llvmType(f.buffers[used[j]].elem)};
    params_ = impl->getArg(nb);
    begin_ = impl->getArg(nb + 1);
    end_ = impl->getArg(nb + 2);
    status_ = impl->getArg(nb + 3);
    stmt(f.body);
    endBody(start);

    // The entry point: unpacks the buffer array.
    auto* outerTy = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, i64, i64, ptr}, false);
    auto* outer =
        llvm::Function::Create(outerTy, llvm::Function::ExternalLinkage, prefix + f.name, m_);
    outer->addFnAttr(llvm::Attribute::NoUnwind);
    if (f.explicitCode && !leftToVectorizer_) outer->addFnAttr(kExplicitCodeAttr);
    if (cold) {
      outer->addFnAttr(llvm::Attribute::NoInline);
      outer->addFnAttr(llvm::Attribute::OptimizeNone);
    }
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", outer));
    std::vector<llvm::Value*> args;
    for (std::size_t i : used) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(ptr, outer->getArg(0), i);
      args.push_back(b_.CreateLoad(ptr, slot));
    }
    for (unsigned i = 1; i < 5; ++i) args.push_back(outer->getArg(i));
    b_.CreateCall(impl, args);
    b_.CreateRetVoid();
  }

private:
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  const bool avx512_; // the module is for a CPU with AVX-512 (kAvx512Flag)
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  llvm::Value *params_ = nullptr, *begin_ = nullptr, *end_ = nullptr, *status_ = nullptr;
  struct Buf {
    llvm::Value* ptr;
    llvm::Type* elem;
  };
  std::map<std::string, Buf> buffers_;
  std::map<std::string, llvm::Value*> vars_;
  // The integer operations emitted (binaryExpr): operator and operands to the result.
  std::map<std::tuple<int, llvm::Value*, llvm::Value*>, llvm::WeakVH> intOps_;
  // Whether the body being emitted has a non-temporal store (endBody fences them).
  bool streamed_ = false;
  // The outlined loops compiled as parts of their own (numbered from 1), the part emitted, and
  // the entry point's name that parts' names extend.
  std::map<const For*, std::size_t> parts_;
  std::vector<PartSite> sites_;
  std::size_t only_ = kWhole;
  std::string entryName_;
  std::string partName(std::size_t k) const { return entryName_ + ".part" + std::to_string(k); }
  // Whether the function being emitted has a loop that LLVM's vectorizers may transform (the
  // JIT gives it the full O3 pipeline; kExplicitCodeAttr otherwise), and the counts of loops
  // and explicit vector loops emitted so far, which tell whether a loop is innermost and scalar,
  // and of loops that carry the work (hinted to the vectorizer, or explicit vector loops of
  // more than kMaxWrittenVectorSteps steps), which tell whether a loop is around one.
  bool leftToVectorizer_ = false;
  std::int64_t loops_ = 0, explicitVectorLoops_ = 0, workLoops_ = 0;
  // Whether the function being emitted is explicit code (ir::Func::explicitCode), and the
  // innermost loop being emitted whose accesses step pointers of their own (scalarAddress):
  // one pointer per buffer and coefficient of the loop's variable, created where first used.
  bool explicit_ = false;
  struct StridedLoop {
    std::string var;
    llvm::BasicBlock *pre, *head;
    llvm::Value* lo;
    std::size_t lets; // lets_ bound outside the loop
    std::size_t inner;  // innerVars_ bound outside the loop
    // By buffer, coefficient (printed) and the index's part fixed in the loop.
    std::map<std::tuple<llvm::Value*, std::string, std::string>, llvm::PHINode*> pointers;
    struct Step {
      llvm::PHINode* phi;
      llvm::Type* elem;
      llvm::Value* coefficient; // fixed in the loop (computed before it)
    };
    std::vector<Step> steps; // in creation order (the IR is deterministic)
  };
  StridedLoop* strided_ = nullptr;
  // The loops of one iteration being emitted (forStmt's bindings): variable and value.
  std::vector<std::pair<std::string, Expr>> lets_;
  // The variables of the unrolled loops being emitted (constants in each copy).
  std::vector<std::string> innerVars_;
  // The explicitly vectorized loop being emitted: its variable, lanes, and first lane's value.
  std::string vecVar_;
  unsigned lanes_ = 0;
  llvm::Value* vecBase_ = nullptr;

  llvm::Type* llvmType(Type t) {
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

  bool inVector() const { return !vecVar_.empty(); }
  bool isVec(llvm::Value* v) const { return v->getType()->isVectorTy(); }
  llvm::Value* splat(llvm::Value* v) {
    if (!inVector() || isVec(v)) return v;
    return b_.CreateVectorSplat(lanes_, v);
  }
  // Both operands scalar, or both vectors.
  void unify(llvm::Value*& a, llvm::Value*& c) {
    if (isVec(a) != isVec(c)) {
      a = splat(a);
      c = splat(c);
    }
  }
  llvm::Value* constLike(llvm::Value* like, double v) {
    llvm::Type* t = like->getType()->getScalarType();
    llvm::Value* c = t->isFloatingPointTy()
                         ? llvm::ConstantFP::get(t, v)
                         : llvm::ConstantInt::get(t, static_cast<std::int64_t>(v), true);
    return isVec(like) ? b_.CreateVectorSplat(lanes_, c) : c;
  }

  // Emits e with the vectorized variable bound to its first lane (a scalar).
  llvm::Value* scalarAtBase(const Expr& e) {
    std::string saved = vecVar_;
    vecVar_.clear();
    vars_[saved] = vecBase_;
    llvm::Value* v = expr(e);
    vars_.erase(saved);
    vecVar_ = saved;
    return v;
  }

  // --- expressions ---------------------------------------------------------------------------

  llvm::Value* expr(const Expr& e) {
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

  llvm::Value* address(const Buf& buf, const Expr& index, bool* contiguous, llvm::Value** idxOut) {
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
  llvm::Value* scalarAddress(const Buf& buf, const Expr& index) {
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

  llvm::Align alignOf(llvm::Type* t) { return llvm::Align(m_.getDataLayout().getABITypeAlign(t)); }

  // Lanes this many elements apart or fewer are read as one contiguous run and picked out of
  // it (a stride-2 convolution's window): a few vector loads and shuffles, where a gather
  // costs a load per lane (and is slow on AMD). The run spans only elements between the first
  // and the last lane, which lie in the same buffer. With 64-byte vectors of lanes the run is
  // read as whole vectors (stride x lanes elements), its elements past the last lane masked off
  // (a masked load reads nothing there): two loads and one two-source permute for a stride of
  // 2, where a run of 31 floats was legalised as pieces of 16, 8, 4, 2 and 1 put together by
  // a dozen inserts and shuffles (the README demo's forward packing).
  static constexpr std::int64_t kShuffledStride = 4;

  llvm::Value* loadExpr(const Load& n) {
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

  void storeValue(const std::string& buffer, const Expr& index, llvm::Value* v, llvm::Value* mask,
                  bool nonTemporal = false) {
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
  void streamStore(llvm::Value* v, llvm::Value* addr, llvm::Type* elem) {
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

  const Buf& lookup(const std::string& name) {
    auto it = buffers_.find(name);
    if (it == buffers_.end()) throw InternalError("codegen: unknown buffer " + name);
    return it->second;
  }

  llvm::Type* shaped(Type t, llvm::Value* like) {
    llvm::Type* s = llvmType(t);
    return isVec(like) ? llvm::FixedVectorType::get(s, lanes_) : s;
  }

  // bf16 <-> f32 on the bits (scalars or vectors): the top half of a float; rounding to
  // nearest even, NaN kept quiet.
  llvm::Value* bf16ToFloat(llvm::Value* h) {
    llvm::Value* u = b_.CreateZExt(h, shaped(Type::i32, h));
    return b_.CreateBitCast(b_.CreateShl(u, constLike(u, 16)), shaped(Type::f32, h));
  }
  llvm::Value* floatToBf16(llvm::Value* f) {
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

  llvm::Value* castExpr(const Cast& n) {
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

  llvm::Value* castValue(llvm::Value* v, Type from, Type to) {
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
  static bool sameIntOpKind(BinOp op) {
    return op == BinOp::Add || op == BinOp::Sub || op == BinOp::Mul || op == BinOp::Div ||
           op == BinOp::Mod || op == BinOp::Min || op == BinOp::Max;
  }
  llvm::Value* intIdentity(BinOp op, llvm::Value* a, llvm::Value* c) const {
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
  llvm::Value* emittedIntOp(BinOp op, llvm::Value* a, llvm::Value* c) {
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

  llvm::Value* binaryExpr(const Binary& n) {
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
  llvm::Value* binary(BinOp op, bool fl, llvm::Value* a, llvm::Value* c) {
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
  llvm::Value* libm(const char* f32, const char* f64, llvm::Value* a) {
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
  llvm::Value* libm2(const char* f32, const char* f64, llvm::Value* a, llvm::Value* b) {
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

  llvm::Value* callExpr(const Call& n) {
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

  llvm::Value* checkExpr(const Check& n) {
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

  // --- statements ----------------------------------------------------------------------------

  void stmt(const Stmt& s) {
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
  bool vectorizable(const Stmt& s, const std::string& v, std::int64_t width = 0) {
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
  static bool transposable(const For& n, const std::string& v, std::int64_t width) {
    std::int64_t lo = 0, hi = 0;
    if (n.forKind != ForKind::Unrolled || !isConst(n.lo, &lo) || !isConst(n.hi, &hi) ||
        width < 2 || (width & (width - 1)) != 0 || hi <= lo || (hi - lo) % width != 0 ||
        n.body->kind != NodeKind::Store)
      return false;
    const auto& st = static_cast<const Store&>(*n.body);
    const auto along = linearCoefficient(st.index, v), across = linearCoefficient(st.index, n.var);
    return !st.atomicAdd && along && *along != 0 && across && *across == 1;
  }
  void transposedStores(const For& n, std::int64_t lo) {
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

  // The emitter's state for a new function body: allocas go to its entry block, code to its
  // start block; no buffers or variables yet. endBody closes it (the entry falls into start).
  llvm::BasicBlock* beginBody(llvm::Function* fn) {
    fn_ = fn;
    entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn);
    auto* start = llvm::BasicBlock::Create(ctx_, "start", fn);
    b_.SetInsertPoint(start);
    buffers_.clear();
    vars_.clear();
    streamed_ = false;
    return start;
  }
  void endBody(llvm::BasicBlock* start) {
    // Non-temporal stores are weakly ordered: they are made visible before the function
    // returns, so that whatever runs after it (another task, the next function) reads them.
    if (streamed_) b_.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
    streamed_ = false;
    b_.CreateRetVoid();
    b_.SetInsertPoint(entry_);
    b_.CreateBr(start);
  }

  // An outlined loop: a noinline function of the buffers and variables it uses (the status
  // and parameters passed on), called here. A part compiled apart (separateParts) is defined
  // in its own module and only declared here.
  struct Signature {
    std::vector<std::string> buffers, vars;
  };
  Signature signature(const For& n) const {
    UsedBuffers bufs;
    UsedVars vars;
    bufs.visit(n.lo);
    bufs.visit(n.hi);
    bufs.visit(n.body);
    vars.visit(n.lo);
    vars.visit(n.hi);
    vars.visit(n.body);
    Signature sig;
    for (const std::string& b : bufs.names)
      if (buffers_.count(b)) sig.buffers.push_back(b);
    for (const std::string& v : vars.names)
      if (vars_.count(v)) sig.vars.push_back(v);
    return sig;
  }
  llvm::Function* outlinedFunction(const Signature& sig, const std::string& name, bool internal) {
    llvm::Type* ptr = b_.getPtrTy();
    std::vector<llvm::Type*> types(sig.buffers.size(), ptr);
    types.insert(types.end(), sig.vars.size(), b_.getInt64Ty());
    types.insert(types.end(), {ptr, ptr});
    auto* fnTy = llvm::FunctionType::get(b_.getVoidTy(), types, false);
    auto* fn = llvm::Function::Create(
        fnTy, internal ? llvm::Function::InternalLinkage : llvm::Function::ExternalLinkage, name, m_);
    fn->addFnAttr(llvm::Attribute::NoInline);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    // Its copies are short runs: calls to memcpy or memset would cost more than they move.
    fn->addFnAttr("no-builtins");
    if (fn_ && fn_->hasFnAttribute(llvm::Attribute::OptimizeNone))
      fn->addFnAttr(llvm::Attribute::OptimizeNone);
    for (unsigned j = 0; j < sig.buffers.size(); ++j) fn->addParamAttr(j, llvm::Attribute::NoAlias);
    return fn;
  }
  // A tile part's arguments: the buffers its body uses, and the enclosing loops' variables
  // that it takes (PartSite::passed; the part binds each to atName(var)).
  Signature tileSignature(const PartSite& site) const {
    UsedBuffers bufs;
    bufs.visit(site.body);
    Signature sig;
    for (const std::string& b : bufs.names)
      if (buffers_.count(b)) sig.buffers.push_back(b);
    sig.vars = site.passed;
    return sig;
  }
  void outlined(const For& n) {
    const auto part = parts_.find(&n);
    const bool apart = part != parts_.end();
    const PartSite* tile =
        apart && sites_[part->second - 1].body ? &sites_[part->second - 1] : nullptr;
    const Signature sig = tile ? tileSignature(*tile) : signature(n);
    llvm::Function* fn = outlinedFunction(
        sig, apart ? partName(part->second) : (fn_->getName() + "." + n.var).str(), !apart);
    std::vector<llvm::Value*> args;
    for (const std::string& b : sig.buffers) args.push_back(buffers_.at(b).ptr);
    for (const std::string& v : sig.vars) args.push_back(vars_.at(v));
    args.push_back(params_);
    args.push_back(status_);
    b_.CreateCall(fn, args);
    if (apart) { // defined by its own module; a loop of the caller's all the same (a loop
      ++loops_;  // around the call is not innermost scalar code left to the vectorizers)
      return;
    }
    defineOutlined(fn, n, sig);
  }
  // A tile part's function: its body (PartSite::body) with the enclosing loops' variables
  // passed in.
  void defineTile(llvm::Function* fn, const PartSite& site, const Signature& sig) {
    const auto buffers = std::move(buffers_); // those in scope at the loop (part)
    llvm::BasicBlock* start = beginBody(fn);
    unsigned a = 0;
    for (const std::string& b : sig.buffers) buffers_[b] = {fn->getArg(a++), buffers.at(b).elem};
    for (const std::string& v : sig.vars) vars_[atName(v)] = fn->getArg(a++);
    params_ = fn->getArg(a++);
    status_ = fn->getArg(a++);
    stmt(site.body);
    endBody(start);
  }
  // The function's body, with the emitter's state of its own.
  void defineOutlined(llvm::Function* fn, const For& n, const Signature& sig) {
    const llvm::IRBuilderBase::InsertPoint ip = b_.saveIP();
    auto savedBuffers = std::move(buffers_);
    auto savedVars = std::move(vars_);
    llvm::Function* savedFn = fn_;
    llvm::BasicBlock* savedEntry = entry_;
    llvm::Value *savedParams = params_, *savedStatus = status_;
    const bool savedStreamed = std::exchange(streamed_, false);
    StridedLoop* savedStrided = std::exchange(strided_, nullptr); // the caller's loop
    auto savedLets = std::move(lets_);
    lets_.clear();
    auto savedInner = std::move(innerVars_);
    innerVars_.clear();
    llvm::BasicBlock* start = beginBody(fn);
    unsigned a = 0;
    for (const std::string& b : sig.buffers) buffers_[b] = {fn->getArg(a++), savedBuffers.at(b).elem};
    for (const std::string& v : sig.vars) vars_[v] = fn->getArg(a++);
    params_ = fn->getArg(a++);
    status_ = fn->getArg(a++);
    For inner = n;
    if (n.forKind == ForKind::Outlined) inner.forKind = ForKind::Rolled; // a tile loop keeps it
    forStmt(inner);
    endBody(start);
    streamed_ = savedStreamed;
    strided_ = savedStrided;
    lets_ = std::move(savedLets);
    innerVars_ = std::move(savedInner);
    fn_ = savedFn;
    entry_ = savedEntry;
    params_ = savedParams;
    status_ = savedStatus;
    buffers_ = std::move(savedBuffers);
    vars_ = std::move(savedVars);
    b_.restoreIP(ip);
  }

  void forStmt(const For& n) {
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

  static constexpr std::int64_t kMaxWrittenVectorSteps = 8;

  // hi is lo + 1 (as ir::add builds it, constants folded).
  static bool oneIteration(const For& n) {
    std::int64_t lo = 0, hi = 0;
    if (isConst(n.lo, &lo) && isConst(n.hi, &hi)) return hi == lo + 1;
    if (n.hi->kind == NodeKind::Binary) {
      const auto& b = static_cast<const Binary&>(*n.hi);
      std::int64_t one = 0;
      if (b.op == BinOp::Add && b.a == n.lo && isConst(b.b, &one) && one == 1) return true;
    }
    return print(n.hi) == print(add(n.lo, intImm(1)));
  }

  enum class LoopHint { None, Vectorize, KeepRolled };

  // for (x = lo; x < hi; x += step) body(x), hinted to LLVM's loop passes if asked.
  // `stepPointers`: a loop of explicit code that only moves data (a packing loop) addresses its
  // buffers through pointers of its own (StridedLoop). The micro-kernels' loops are left to
  // LLVM (its unroller and code generation's loop strength reduction tune them).
  void loop(const std::string& name, llvm::Value* lo, llvm::Value* hi, std::int64_t step,
            LoopHint hint, const std::function<void(llvm::Value*)>& body,
            bool stepPointers = false) {
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
};

} // namespace

bool unoptimized(const Func& f) {
  const std::optional<double> n = iterationBound(f.body);
  return n && *n <= kColdIterations;
}

void emitLLVM(const std::vector<Func>& funcs, const std::string& prefix, llvm::Module& m) {
  Emitter e(m);
  for (const Func& f : funcs) e.func(f, prefix);
}

std::size_t separateParts(const Func& f) {
  if (unoptimized(f)) return 0;
  return findParts(f.body, f.explicitCode).size();
}

void emitLLVMPart(const Func& f, const std::string& prefix, std::size_t part, llvm::Module& m) {
  const std::vector<PartSite> sites = findParts(f.body, f.explicitCode);
  if (part > sites.size())
    throw InternalError("codegen: " + f.name + " has no part " + std::to_string(part));
  Emitter e(m);
  e.separate(sites, part, prefix + f.name);
  if (part == 0)
    e.func(f, prefix);
  else
    e.part(f, sites[part - 1]);
}

} // namespace einjit::codegen
