#pragma once
// An index of a generated statement that nothing reads (no subscript, no value, no other
// index's range) repeats the right-hand side once per value. The language rejects such a
// 'where' index (it is nearly always a user's mistake), so a generated statement states the
// repetition explicitly instead: the index is dropped from 'where' and the right-hand side is
// combined with its count, max(hi - lo, 0), by the statement's reduction (a '+' sum is
// multiplied by it, a '*' product raised to its power). The gradient builder emits such
// statements only with '+': a term that does not involve one of the forward reduction indices
// (the gradient of x[n,i] in "y[n,i] := x[n, wrap(i+k-2)] * w[k] + x[n,i]" is size(w,0)*dy).
#include "dsl/Ast.h"

namespace einjit::grad {

void foldUnusedIndices(dsl::Stmt& s);

} // namespace einjit::grad
