#pragma once
// The LLVM emitter shared by the files of codegen/llvm/ (internal to codegen/; the entry points
// are codegen/CodeGenLLVM.h's, in CodeGenLLVM.cpp). One Emitter translates loop-nest IR
// functions into one llvm::Module; its state is declared here, and its methods are defined in
// the file of their family:
//   llvm/EmitExpressions.cpp  expressions: variables, parameters, casts (bf16 on the bits),
//                             integer and floating-point arithmetic, calls to intrinsics,
//                             vector math and libm, range checks
//   llvm/EmitMemory.cpp       memory: addresses (pointers stepped by a loop), loads and stores,
//                             contiguous, masked, strided runs, gathers and scatters,
//                             non-temporal stores
//   llvm/EmitLoops.cpp        statements and loops: unrolled, explicitly vectorized, one-
//                             iteration bindings, loops hinted to LLVM's loop passes
//   llvm/EmitFunctions.cpp    functions: entry points and bodies, outlined loops, the parts
//                             compiled apart (CodeGenParts.h) and their signatures
#include "codegen/CodeGenLLVM.h"
#include "codegen/CodeGenParts.h"
#include "codegen/IR.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/ValueHandle.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace einjit::codegen::llvmgen {

using namespace ir;

class Emitter {
public:
  Emitter(llvm::Module& m);

  // Emitting with separate parts (separateParts): only_ is the part being emitted (0: the
  // entry point, whose calls to parts get declarations).
  static constexpr std::size_t kWhole = static_cast<std::size_t>(-1);
  void separate(const std::vector<PartSite>& sites, std::size_t only, const std::string& entry);
  void part(const Func& f, const PartSite& site);
  void func(const Func& f, const std::string& prefix);

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

  // --- expressions (EmitExpressions.cpp) -----------------------------------------------------
  llvm::Type* llvmType(Type t);
  llvm::Value* scalarAtBase(const Expr& e);
  llvm::Value* expr(const Expr& e);
  llvm::Type* shaped(Type t, llvm::Value* like);
  llvm::Value* bf16ToFloat(llvm::Value* h);
  llvm::Value* floatToBf16(llvm::Value* f);
  llvm::Value* castExpr(const Cast& n);
  llvm::Value* castValue(llvm::Value* v, Type from, Type to);
  static bool sameIntOpKind(BinOp op);
  llvm::Value* intIdentity(BinOp op, llvm::Value* a, llvm::Value* c) const;
  llvm::Value* emittedIntOp(BinOp op, llvm::Value* a, llvm::Value* c);
  llvm::Value* binaryExpr(const Binary& n);
  llvm::Value* binary(BinOp op, bool fl, llvm::Value* a, llvm::Value* c);
  llvm::Value* libm(const char* f32, const char* f64, llvm::Value* a);
  llvm::Value* libm2(const char* f32, const char* f64, llvm::Value* a, llvm::Value* b);
  llvm::Value* callExpr(const Call& n);
  llvm::Value* checkExpr(const Check& n);

  // --- memory (EmitMemory.cpp) ---------------------------------------------------------------
  llvm::Value* address(const Buf& buf, const Expr& index, bool* contiguous, llvm::Value** idxOut);
  llvm::Value* scalarAddress(const Buf& buf, const Expr& index);
  llvm::Align alignOf(llvm::Type* t);
  llvm::Value* loadExpr(const Load& n);
  void storeValue(const std::string& buffer, const Expr& index, llvm::Value* v, llvm::Value* mask,
                  bool nonTemporal = false);
  void streamStore(llvm::Value* v, llvm::Value* addr, llvm::Type* elem);
  const Buf& lookup(const std::string& name);

  // --- statements and loops (EmitLoops.cpp) --------------------------------------------------
  void stmt(const Stmt& s);
  bool vectorizable(const Stmt& s, const std::string& v, std::int64_t width = 0);
  static bool transposable(const For& n, const std::string& v, std::int64_t width);
  void transposedStores(const For& n, std::int64_t lo);
  void forStmt(const For& n);
  static bool oneIteration(const For& n);
  enum class LoopHint { None, Vectorize, KeepRolled };
  void loop(const std::string& name, llvm::Value* lo, llvm::Value* hi, std::int64_t step,
            LoopHint hint, const std::function<void(llvm::Value*)>& body,
            bool stepPointers = false);

  // --- function bodies, outlined loops and parts (EmitFunctions.cpp) -------------------------
  llvm::BasicBlock* beginBody(llvm::Function* fn);
  void endBody(llvm::BasicBlock* start);
  // An outlined loop: a noinline function of the buffers and variables it uses (the status
  // and parameters passed on), called here. A part compiled apart (separateParts) is defined
  // in its own module and only declared here.
  struct Signature {
    std::vector<std::string> buffers, vars;
  };
  Signature signature(const For& n) const;
  llvm::Function* outlinedFunction(const Signature& sig, const std::string& name, bool internal);
  Signature tileSignature(const PartSite& site) const;
  void outlined(const For& n);
  void defineTile(llvm::Function* fn, const PartSite& site, const Signature& sig);
  void defineOutlined(llvm::Function* fn, const For& n, const Signature& sig);
};

} // namespace einjit::codegen::llvmgen
