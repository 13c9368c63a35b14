// The entry points of codegen/CodeGenLLVM.h: which functions are compiled unoptimized or in
// separate parts, and the emission of a module's functions or of one part, each by one
// Emitter (codegen/llvm/Emitter.h, whose files hold the translation itself).
#include "codegen/CodeGenLLVM.h"
#include "codegen/CodeGenParts.h"
#include "codegen/llvm/Emitter.h"

#include "einjit/Error.h"

namespace einjit::codegen {

using namespace ir;
using llvmgen::Emitter;

namespace {

// Functions of at most this many stores (IR.h, iterationBound) are compiled without
// optimization: at a few nanoseconds per store unoptimized, at most about a microsecond a call.
constexpr double kColdIterations = 256;

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
