#pragma once
// Operators on IR expressions, so that building index arithmetic reads like arithmetic:
// `base + w * stride`, `e / 8`, `e % 64`, `min(lo + n, hi)`, `lt(e, n)`. Each is exactly the
// ir:: constructor it names (ir::add, ir::binary, ...), which folds integer constants; an
// integer operand is an i64 constant (ir::intImm). Comparisons are functions (`lt`, `le`, ...)
// rather than operators: Expr is a shared_ptr, whose `<` and `==` compare pointers and must
// keep doing so (ordered containers of expressions).
#include "codegen/IR.h"

namespace einjit::codegen::ir {

inline Expr operator+(Expr a, Expr b) { return add(std::move(a), std::move(b)); }
inline Expr operator-(Expr a, Expr b) { return sub(std::move(a), std::move(b)); }
inline Expr operator*(Expr a, Expr b) { return mul(std::move(a), std::move(b)); }
inline Expr operator/(Expr a, Expr b) { return binary(BinOp::Div, std::move(a), std::move(b)); }
inline Expr operator%(Expr a, Expr b) { return binary(BinOp::Mod, std::move(a), std::move(b)); }
inline Expr operator^(Expr a, Expr b) { return binary(BinOp::Xor, std::move(a), std::move(b)); }

inline Expr operator+(Expr a, std::int64_t b) { return std::move(a) + intImm(b); }
inline Expr operator-(Expr a, std::int64_t b) { return std::move(a) - intImm(b); }
inline Expr operator*(Expr a, std::int64_t b) { return std::move(a) * intImm(b); }
inline Expr operator/(Expr a, std::int64_t b) { return std::move(a) / intImm(b); }
inline Expr operator%(Expr a, std::int64_t b) { return std::move(a) % intImm(b); }
inline Expr operator+(std::int64_t a, Expr b) { return intImm(a) + std::move(b); }
inline Expr operator*(std::int64_t a, Expr b) { return intImm(a) * std::move(b); }

inline Expr min(Expr a, Expr b) { return binary(BinOp::Min, std::move(a), std::move(b)); }
inline Expr max(Expr a, Expr b) { return binary(BinOp::Max, std::move(a), std::move(b)); }
inline Expr min(Expr a, std::int64_t b) { return min(std::move(a), intImm(b)); }
inline Expr max(Expr a, std::int64_t b) { return max(std::move(a), intImm(b)); }

inline Expr lt(Expr a, Expr b) { return binary(BinOp::Lt, std::move(a), std::move(b)); }
inline Expr le(Expr a, Expr b) { return binary(BinOp::Le, std::move(a), std::move(b)); }
inline Expr gt(Expr a, Expr b) { return binary(BinOp::Gt, std::move(a), std::move(b)); }
inline Expr ge(Expr a, Expr b) { return binary(BinOp::Ge, std::move(a), std::move(b)); }
inline Expr lt(Expr a, std::int64_t b) { return lt(std::move(a), intImm(b)); }

// Binds `name` to `value` in `body`: a loop of one iteration (the IR has no let).
inline Stmt let(const std::string& name, Expr value, Stmt body) {
  Expr hi = add(value, intImm(1));
  return forLoop(name, std::move(value), std::move(hi), ForKind::Serial, std::move(body));
}

} // namespace einjit::codegen::ir
