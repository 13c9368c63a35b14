#pragma once
// Binding: a checked Program plus the shapes and dtypes of one call's arguments and the
// values of its scalar parameters -> concrete ranges, output shapes and dtypes.
//
// Every check that needs shapes happens here, before anything runs or is allocated: ranks,
// dtypes, integer parameters in subscripts, bare uses that disagree, accesses that a 'where'
// range (or a cyclic inference) pushes out of bounds, ':=' output ranges below 0. Each is an
// einjit::Error with a caret at the offending part of the program.
#include "dsl/Program.h"

#include "einjit/DType.h"

namespace einjit::dsl {

struct ArgSpec {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
};

// An IndexBound with its symbols evaluated: a function of the index variables' values.
struct ConcreteBound {
  IndexBound::Kind kind = IndexBound::Kind::Affine;
  std::vector<std::pair<int, std::int64_t>> terms; // Affine: (variable, coefficient)
  std::int64_t constant = 0;
  std::vector<ConcreteBound> args;
  std::vector<std::int64_t> scale;
  std::int64_t divisor = 1;
  std::int64_t eval(const std::vector<std::int64_t>& vars) const;
  // How the bound moves as variable `var` grows, the others fixed: 1 never down, -1 never
  // up, 0 constant, 2 either (a max or min of bounds that move apart).
  int direction(int var) const;
  // Smallest and largest value over the box lo[v] <= var v <= hiIncl[v].
  std::pair<std::int64_t, std::int64_t> interval(const std::vector<std::int64_t>& lo,
                                                 const std::vector<std::int64_t>& hiIncl) const;
};

struct BoundStatement {
  // Per index variable, half-open. For a dependent index, the hull of its ranges over the
  // values of the indices it reads.
  std::vector<std::int64_t> lo, hi;
  std::vector<bool> dependent;                 // the range is evaluated per iteration
  std::vector<ConcreteBound> loBound, hiBound; // for dependent indices
  bool empty = false; // no iteration evaluates the right-hand side (an empty range or hull)
};

struct BoundProgram {
  DType dtype = DType::f32;     // the value dtype; ':=' outputs get it
  std::vector<ArgSpec> tensors; // per tensor id: arguments as passed, ':=' outputs computed
  std::vector<double> params;   // per parameter id
  std::vector<BoundStatement> stmts;
  // Evaluates a range bound with these shapes and parameters.
  std::int64_t eval(const Program& p, const Sym& s) const;
};

// The values an integer index tensor may hold so that every gather through it stays inside
// the gathered dimension for all values of the other terms of its subscript, inclusive
// ([lo, hi]; lo > hi when no value does). Gathers under pad/clamp/wrap count the same (the
// values then read inside the tensor). For tools that make up valid inputs (gradcheck, run).
std::pair<std::int64_t, std::int64_t> gatherValueRange(const Program& p, const BoundProgram& b,
                                                       int indexTensor);

// Notes for a diagnostic about parameter `param` (a missing value): a name in a subscript that
// begins with an upper-case letter is a parameter, which surprises whoever meant an index.
std::vector<Note> parameterNotes(const Program& p, int param);

// args: one per Program::arguments entry, in that order; params: one per Program::params.
BoundProgram bind(const Program& p, const std::vector<ArgSpec>& args,
                  const std::vector<double>& params, DType defaultDType = DType::f32);

} // namespace einjit::dsl
