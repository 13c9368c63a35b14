// The LLVM emitter's functions (codegen/llvm/Emitter.h): each ir::Func's entry point and its
// always-inlined body, outlined loops as noinline functions of what they use, and the parts
// compiled apart (codegen/CodeGenParts.h): an outlined loop or a register-tile loop defined
// alone in a module of its own, declared in the entry point's.
#include "codegen/llvm/Emitter.h"

#include "einjit/Error.h"

#include <llvm/IR/Module.h>

#include <set>

namespace einjit::codegen::llvmgen {

namespace {

// The variables an outlined loop reads.
class UsedVars : public Visitor {
public:
  std::set<std::string> names;
  void visitVar(const Var& n) override { names.insert(n.name); }
};

// The buffers a function reads or writes. Its body takes only those as noalias parameters:
// given every buffer of the program, a chain of n statements made n functions of n noalias
// parameters each, and inlining and optimising them grew about as n^3 (the inliner turns each
// noalias parameter into alias scopes on every access).
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

} // namespace

Emitter::Emitter(llvm::Module& m)
    : m_(m), ctx_(m.getContext()), b_(ctx_), avx512_(m.getModuleFlag(kAvx512Flag) != nullptr) {
  llvm::FastMathFlags fmf;
  fmf.setAllowContract(true);
  b_.setFastMathFlags(fmf);
}

void Emitter::separate(const std::vector<PartSite>& sites, std::size_t only,
                       const std::string& entry) {
  parts_.clear();
  for (std::size_t k = 0; k < sites.size(); ++k) parts_[sites[k].loop] = k + 1;
  sites_ = sites;
  only_ = only;
  entryName_ = entry;
}

// Part k >= 1: the function of an outlined loop, with external linkage, alone in its module.
void Emitter::part(const Func& f, const PartSite& site) {
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
  if (site.edge) fn->addFnAttr(kEdgePartAttr);
}

void Emitter::func(const Func& f, const std::string& prefix) {
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

// The emitter's state for a new function body: allocas go to its entry block, code to its
// start block; no buffers or variables yet. endBody closes it (the entry falls into start).
llvm::BasicBlock* Emitter::beginBody(llvm::Function* fn) {
  fn_ = fn;
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn);
  auto* start = llvm::BasicBlock::Create(ctx_, "start", fn);
  b_.SetInsertPoint(start);
  buffers_.clear();
  vars_.clear();
  streamed_ = false;
  return start;
}
void Emitter::endBody(llvm::BasicBlock* start) {
  // Non-temporal stores are weakly ordered: they are made visible before the function
  // returns, so that whatever runs after it (another task, the next function) reads them.
  if (streamed_) b_.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
  streamed_ = false;
  b_.CreateRetVoid();
  b_.SetInsertPoint(entry_);
  b_.CreateBr(start);
}

Emitter::Signature Emitter::signature(const For& n) const {
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

llvm::Function* Emitter::outlinedFunction(const Signature& sig, const std::string& name,
                                          bool internal) {
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
Emitter::Signature Emitter::tileSignature(const PartSite& site) const {
  UsedBuffers bufs;
  bufs.visit(site.body);
  Signature sig;
  for (const std::string& b : bufs.names)
    if (buffers_.count(b)) sig.buffers.push_back(b);
  sig.vars = site.passed;
  return sig;
}

void Emitter::outlined(const For& n) {
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
void Emitter::defineTile(llvm::Function* fn, const PartSite& site, const Signature& sig) {
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
void Emitter::defineOutlined(llvm::Function* fn, const For& n, const Signature& sig) {
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

} // namespace einjit::codegen::llvmgen
