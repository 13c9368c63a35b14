#pragma once
// Semantic analysis: resolves the names of a ProgramAst into tensors, index variables and
// scalar parameters, classifies subscripts, and builds the checked expression trees.
//
// Name rules (documented in docs/LANGUAGE.md):
//  - a name used with brackets anywhere, or assigned by a statement, is a tensor;
//  - index variables of a statement are its left-hand indices, its 'where' indices, and the
//    names inside its subscripts that start with a lower-case letter or '_';
//  - any other name is a runtime scalar parameter (so "x[N-1-i]" reads N as a parameter).
#include "dsl/Program.h"

namespace einjit::dsl {

// Resolves names and builds the checked statements; ranges are left for inferRanges.
Program analyze(const ProgramAst& ast);

} // namespace einjit::dsl
