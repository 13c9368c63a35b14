#pragma once
// The form in which a packed micro-kernel computes an element-wise summand where the target
// runs one form faster than another with the same bits (docs/CPU_SCHEDULES.md, "Element-wise
// summands where 512-bit operations are split").
#include "dsl/Program.h"

namespace einjit::codegen {

// `summand` with every subtraction that has A's read `a` as its minuend, `a - e`, written
// `e - a`, where the sign that drops can be carried: through products (the summand's sign,
// multiplied into `scale`) and squares (no sign). The same bits: a difference rounds
// symmetrically (fl(e - a) = -fl(a - e), zero included: x - x is +0 either way), a product or
// a fused multiply-add of negated operands is the negated result, and so is a sum of negated
// terms, which `scale` then negates back; only a NaN's payload may differ. The distance
// layer's `(w - x)^2` becomes `(x - w)^2`, its gradient `dy * (w - x)` with scale -2 becomes
// `dy * (x - w)` with scale 2. Returns `summand` itself where nothing changes.
dsl::CExprPtr broadcastAsSubtrahend(const dsl::CExprPtr& summand, const dsl::CExpr& a,
                                    double& scale);

// Whether, with `a` as A and the summand so rewritten, every read of `a` is a subtraction's
// subtrahend: x86 then folds A's broadcast into that subtraction's memory operand
// (`vsubps (a){1to16}, e, d`) in a micro-kernel one vector wide, where two vectors share it
// as a separate broadcast instruction (on AMD Zen 4 a zmm broadcast takes an FP pipe).
bool broadcastFolds(const dsl::CExprPtr& summand, const dsl::CExpr& a);

} // namespace einjit::codegen
