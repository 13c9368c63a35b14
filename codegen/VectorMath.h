#pragma once
// Elementary functions emitted inline as LLVM IR, for scalars and <W x T> vectors alike. LLVM
// lowers `llvm.exp` on a vector to one libm call per lane (x86 has no vector math library
// here), which made every exponential-heavy row (softmax and its gradient) compute-bound; an
// inline polynomial vectorises with the loop around it.
#include <llvm/IR/IRBuilder.h>

namespace einjit::codegen {

// e^x for f32 or f64 (scalar or vector) x: Cody-Waite reduction x = n ln2 + r with
// |r| <= ln2/2, a Taylor polynomial of e^r (degree 7 for f32, 13 for f64: truncation below a
// tenth of an ulp), scaled by 2^n in two halves so that subnormal results stay exact to
// rounding. Within 2 ulp of the correctly rounded value; exp(+inf) = inf, exp(-inf) = 0,
// NaN stays NaN, overflow gives inf and underflow 0.
// `scalef`: the target has AVX-512 (CodeGenLLVM.h, kAvx512Flag); a 512-bit vector is then scaled
// by one vscalefps / vscalefpd (2^n from n as a float, rounded once, subnormals included)
// instead of the two halves' eight integer and multiply instructions (of about thirty): a
// softmax's row loop is made of exponentials.
llvm::Value* emitExp(llvm::IRBuilder<>& b, llvm::Value* x, bool scalef = false);

} // namespace einjit::codegen
