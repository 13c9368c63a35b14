#pragma once
// differentiate(program, wrt): the gradient program, as einjit statements.
//
// For every requested input X the result computes dX from the gradients of the program's
// outputs (new inputs named d<Y>, or d<Y>_<n> when that name is taken) and the forward
// inputs. Each contribution to dX is its own statement in gather form: dX's indices are the
// outer loops, each element written once, the rest a reduction with exact bounds solved from
// the index equations (docs/GRADIENTS.md: unit pivots, Fourier-Motzkin bounds). Intermediate
// results the gradients read are recomputed first (except saved ones, below), and the chain rule
// runs through the statements in reverse order.
//
// Sites are solved with unit pivots (G2a), residue phases (G2b/G3), Euclid steps (G2c),
// sub-lattices (G2d), clamp() edges and wrap() over one period, with exact Fourier-Motzkin
// bounds (G4). A gather's gradient is a scatter by nature (Gradient::scatters); a site the
// solver cannot handle becomes a masked gather over the whole forward domain
// (Gradient::masked).
#include "dsl/Program.h"

#include <cstddef>
#include <string>
#include <vector>

namespace einjit::grad {

struct Gradient {
  dsl::ProgramAst program;              // the gradient program (print it, check it, run it)
  std::vector<std::string> outputGrads; // d<Y> input name per forward program output
  std::vector<std::string> inputGrads;  // dX output name per requested input, in wrt order
  std::vector<std::string> scatters;    // a line per contribution emitted as a scatter
  // A line per contribution the solver could not put into loops over dX's elements with exact
  // bounds: a masked sum over the whole forward domain per element of dX (correct and safe in
  // parallel, but |dX| times the forward's work).
  std::vector<std::string> masked;
};

// The most operations the partial derivatives of one statement may have, written out (past it
// differentiate() throws an einjit::Error at the statement; docs/LANGUAGE.md, "Limits").
inline constexpr std::size_t kMaxGradientSize = std::size_t{1} << 20;

// wrt: names of tensor arguments of `program` (empty: every floating-point input read as a
// value). Throws einjit::Error for what cannot be differentiated.
// scatterOnly: emit every contribution as the naive scatter over the forward domain instead
// (the reference the gather form is tested against).
Gradient differentiate(const dsl::Program& program, const std::vector<std::string>& wrt,
                       bool scatterOnly = false);

// Options::saved: marks the named tensors of the program saved (TensorInfo::saved). A saved
// tensor is an input of the gradient program, which reads it instead of recomputing it (and
// the statements only it needed): the caller passes what the forward call stored. Each must be
// the value of one ':=' statement that no other statement writes, so that the value stored is
// the one every read in the program saw. Throws einjit::Error (with a caret at the statement
// at fault) for a name the program assigns no such value to.
void markSaved(dsl::Program& program, const std::vector<std::string>& names);

} // namespace einjit::grad
