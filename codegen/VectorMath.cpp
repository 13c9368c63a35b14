#include "codegen/VectorMath.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <cmath>

namespace einjit::codegen {

llvm::Value* emitExp(llvm::IRBuilder<>& b, llvm::Value* x, bool scalef) {
  llvm::Type* t = x->getType();
  const bool f64 = t->getScalarType()->isDoubleTy();
  const unsigned bits = f64 ? 64 : 32, mantissa = f64 ? 52 : 23;
  const std::int64_t bias = f64 ? 1023 : 127;
  llvm::Type* it = b.getIntNTy(bits);
  if (auto* v = llvm::dyn_cast<llvm::FixedVectorType>(t))
    it = llvm::FixedVectorType::get(it, v->getNumElements());
  auto c = [&](double v) { return llvm::ConstantFP::get(t, v); };
  auto ci = [&](std::int64_t v) {
    return llvm::ConstantInt::get(it, static_cast<std::uint64_t>(v));
  };
  // Beyond these the result is inf or 0 (with n fitting the two half scales below); NaN
  // passes minnum/maxnum as the bound and is put back at the end.
  const double hi = f64 ? 710.0 : 89.0, lo = f64 ? -746.0 : -104.0;
  llvm::Value* xc = b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, x, c(lo));
  xc = b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, xc, c(hi));
  // n = round(x / ln2) by adding 1.5 * 2^mantissa: n sits in the low bits of the sum, so its
  // integer value is the difference of the two bit patterns (no float-to-int conversion,
  // which AVX2 lacks for f64 vectors).
  const double shifter = 1.5 * std::ldexp(1.0, static_cast<int>(mantissa));
  llvm::Value* sum = b.CreateFAdd(b.CreateFMul(xc, c(1.0 / std::log(2.0))), c(shifter));
  llvm::Value* n = b.CreateFSub(sum, c(shifter));
  llvm::Value* k = b.CreateSub(b.CreateBitCast(sum, it), b.CreateBitCast(c(shifter), it));
  // r = x - n ln2, ln2 split so that n * hi is exact (fdlibm's split; Cephes' for f32).
  const double ln2hi = f64 ? 6.93147180369123816490e-01 : 0.693359375;
  const double ln2lo = f64 ? 1.90821492927058770002e-10 : -2.12194440e-4;
  llvm::Value* r = b.CreateFSub(xc, b.CreateFMul(n, c(ln2hi)));
  r = b.CreateFSub(r, b.CreateFMul(n, c(ln2lo)));
  // e^r = sum r^k / k!, Horner from the highest degree.
  const int degree = f64 ? 13 : 7;
  double fact = 1;
  for (int q = 2; q <= degree; ++q) fact *= q;
  llvm::Value* p = c(1.0 / fact);
  for (int q = degree - 1; q >= 0; --q) {
    fact /= q + 1;
    p = b.CreateFAdd(b.CreateFMul(p, r), c(1.0 / fact));
  }
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t);
  if (scalef && vt && vt->getPrimitiveSizeInBits() == 512) {
    // vscalef(p, n) = p * 2^floor(n), n integral here; all lanes, current rounding (4).
    const auto id = f64 ? llvm::Intrinsic::x86_avx512_mask_scalef_pd_512
                        : llvm::Intrinsic::x86_avx512_mask_scalef_ps_512;
    llvm::Value* y = b.CreateIntrinsic(
        id, {}, {p, n, llvm::PoisonValue::get(t), b.getIntN(vt->getNumElements(), (1ull << vt->getNumElements()) - 1), b.getInt32(4)});
    return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
  }
  // 2^n as two normal powers 2^(n>>1) and 2^(n - (n>>1)).
  llvm::Value* n1 = b.CreateAShr(k, ci(1));
  llvm::Value* n2 = b.CreateSub(k, n1);
  auto pow2 = [&](llvm::Value* e) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, ci(bias)), ci(mantissa)), t);
  };
  llvm::Value* y = b.CreateFMul(b.CreateFMul(p, pow2(n1)), pow2(n2));
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

} // namespace einjit::codegen
