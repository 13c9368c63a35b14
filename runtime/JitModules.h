// What the JIT reads off an emitted module (runtime/JitModules.cpp).
#pragma once

namespace llvm {
class Module;
}

namespace einjit::runtime {

// Whether the module computes with floating-point values (a product's micro-kernel), or only
// moves them (packings; an edge tile's copies count as moving).
bool computes(const llvm::Module& m);
// Whether the module is a register-tile loop compiled apart from its function
// (codegen::kTilePartAttr).
bool tilePart(const llvm::Module& m);
// Whether every function the module defines for outside use is explicit code
// (codegen::kExplicitCodeAttr).
bool explicitCode(const llvm::Module& m);

} // namespace einjit::runtime
