#pragma once
// CodeGenLLVM: loop-nest IR functions -> LLVM IR through IRBuilder. Only translation happens
// here; every decision (loop order, tiles, vector widths, parallel loops) was made by the
// schedule.
//
// Each ir::Func becomes `void <prefix><name>(ptr buffers, ptr params, i64 begin, i64 end,
// ptr status)`, a wrapper around an always-inlined body whose buffer arguments are noalias
// (the runtime guarantees that outputs overlap nothing). Vectorized loops with a constant
// extent that is a multiple of their width, whose stores hit distinct elements per lane,
// become explicit <W x T> operations (contiguous loads and stores, gathers otherwise);
// other Vectorized loops become scalar loops carrying llvm.loop.vectorize.enable. Floating-
// point operations carry the `contract` flag (fused multiply-add).
#include "codegen/IR.h"

#include <cstddef>
#include <string>
#include <vector>

namespace llvm {
class Module;
}

namespace einjit::codegen {

// The string attribute of the entry point of a function marked ir::Func::explicitCode whose
// code leaves LLVM's vectorizers nothing to do: every loop is an explicit vector loop, contains
// other loops, or is marked rolled (no loop carries llvm.loop.vectorize.enable, no innermost
// loop is scalar). The JIT compiles such functions with a short pipeline instead of O3.
inline constexpr const char* kExplicitCodeAttr = "einjit-explicit-code";

// The string attribute of a part that is one of its function's register-tile loops
// (separateParts): such a function is large, and the JIT generates the part's code as it did
// in the function's one module before the tile loops compiled apart (without loop strength
// reduction, runtime/Jit.cpp).
inline constexpr const char* kTilePartAttr = "einjit-tile-part";

// The string attribute of a part that copies a single tile loop's edge tile out (findParts in
// CodeGenParts.h): code that runs only on the edge tile, compiled with the packing functions
// (runtime/Jit.cpp) although it may add (into an output that accumulates).
inline constexpr const char* kEdgePartAttr = "einjit-edge-part";

// Whether an edge tile's copy compiles apart (separateParts); EINJIT_JIT_EDGE_PARTS=0: no (to
// compare with the copy in its caller's module).
bool edgeParts();

// A module flag the JIT sets when the target CPU has AVX-512 (512-bit vectors' exponentials
// are then scaled by vscalef: VectorMath.h).
inline constexpr const char* kAvx512Flag = "einjit-avx512";

// Whether f is emitted `optnone` (body and entry point): ir::iterationBound bounds it to a few
// hundred stores (an edge tile, a border, the combine of a split reduction's partials), where
// optimizing costs more compile time than it can save at run time.
bool unoptimized(const ir::Func& f);

void emitLLVM(const std::vector<ir::Func>& funcs, const std::string& prefix, llvm::Module& m);

// An optimized function's outlined loops (ForKind::Outlined) that are emitted once and do enough
// work, and in explicit code its register-tile loops where it has several (a packed product's core
// and edge tile variants; codegen/CodeGenParts.h), compile apart, so that a large function compiles
// on several threads: part 0 is the entry point with everything else, calling part k (1 <= k <=
// separateParts(f)) through an external declaration `<prefix><name>.part<k>`, which emitLLVMPart(f,
// prefix, k, m) defines alone in its own module. The parts must be loaded together (one JITDylib).
// Zero for functions compiled unoptimized.
std::size_t separateParts(const ir::Func& f);
void emitLLVMPart(const ir::Func& f, const std::string& prefix, std::size_t part, llvm::Module& m);

} // namespace einjit::codegen
