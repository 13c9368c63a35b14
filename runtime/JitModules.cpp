// What the JIT reads off an emitted module to choose its pipeline and its compile thread
// (runtime/Jit.cpp): whether it computes or only moves values, whether it is a tile loop
// compiled apart, whether all of it is explicit code.
#include "runtime/JitModules.h"

#include "codegen/CodeGenLLVM.h"

#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>

namespace einjit::runtime {

// Whether the module computes with floating-point values (a product), or only moves them. An
// edge tile's copy (codegen::kEdgePartAttr) counts as moving: it runs on the edge tile only, so
// it goes with the packing functions (mergeMovers) and their cheaper code generation.
bool computes(const llvm::Module& m) {
  for (const llvm::Function& f : m) {
    if (f.hasFnAttribute(codegen::kEdgePartAttr)) continue;
    for (const llvm::BasicBlock& bb : f)
      for (const llvm::Instruction& i : bb) {
        if (i.getType()->isFPOrFPVectorTy() && (llvm::isa<llvm::BinaryOperator>(i) ||
                                                 llvm::isa<llvm::UnaryOperator>(i)))
          return true;
        if (const auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i))
          if (call->getIntrinsicID() == llvm::Intrinsic::fma ||
              call->getIntrinsicID() == llvm::Intrinsic::fmuladd)
            return true;
      }
  }
  return false;
}

// Whether the module is a register-tile loop compiled apart from its function
// (codegen::kTilePartAttr): its function had several tile loops, so it was above
// kLsrInstructionLimit, and the tile loop is generated as it was there.
bool tilePart(const llvm::Module& m) {
  for (const llvm::Function& f : m)
    if (!f.isDeclaration() && f.hasFnAttribute(codegen::kTilePartAttr)) return true;
  return false;
}

bool explicitCode(const llvm::Module& m) {
  bool any = false;
  for (const llvm::Function& f : m) {
    if (f.isDeclaration() || f.hasLocalLinkage()) continue;
    if (!f.hasFnAttribute(codegen::kExplicitCodeAttr)) return false;
    any = true;
  }
  return any;
}

} // namespace einjit::runtime
