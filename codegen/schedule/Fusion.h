#pragma once
// Fusion of element-wise statements: consecutive statements that run over one iteration space
// (the same indices with the same ranges, no reduction) become one loop nest whose body runs
// each statement's update of an element in program order, so that a chain such as an Adam
// step (m, then v, then p) makes one pass over memory instead of one per statement.
//
// Program order puts every element of statement A before any element of a later statement B;
// the fused loop instead runs A's and B's updates of one element together, elements in any
// order and on any number of threads. That gives the same result exactly when every read, in
// any statement of the group, of a tensor that a statement of the group writes is at the very
// element that statement writes (the same subscripts), and two statements that write one
// tensor write it at the same subscripts. Each member must itself update its elements
// independently (no scatter, one write per element, reads of its own output only at the
// element written: dsl/InPlace.h), read no gathered subscript and have no range that depends
// on another index. A snapshot statement `x_old[i] := x[i]` before `x[i] = x_old[i+1]` is
// therefore never fused with it.
//
// The decision is a value of its own, made from the bound program before lowering; the CPU
// and the GPU lowering both follow it (one loop nest, one GPU thread per element) and
// `einjit explain` prints it with each statement's schedule.
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <string>
#include <vector>

namespace einjit::codegen {

struct FusionPlan {
  // Per statement: the last statement of the group it belongs to (itself when alone), and
  // the first.
  std::vector<std::size_t> first, last;
  // Per statement: the decision in words for `einjit explain`; empty when the statement is
  // not element-wise or has no element-wise neighbour to fuse with.
  std::vector<std::string> notes;
  bool fused(std::size_t k) const { return first[k] != last[k]; }
};

FusionPlan planFusion(const dsl::Program& p, const dsl::BoundProgram& b);

// A packed GEMM's epilogue (CPU): the element-wise statements right after a contraction that
// run in its tile stores, on each tile of the output while it is in cache, instead of in a
// pass of their own over the whole output (`y[i,j] := relu(t[i,j] + b[i])` after
// `t[i,j] := w[k,i] * x[k,j]`). Statement k + 1 and the element-wise group it starts
// (FusionPlan) qualify when each runs over statement k's output indices with their ranges,
// position by position, reads what statement k writes only at the element it writes, and
// writes nothing statement k reads; statement k is a `:=` reduction with plain subscripts on
// its left. Whether statement k takes the packed path is the lowering's to say (it runs the
// epilogue only there).
struct EpiloguePlan {
  std::size_t last = 0;   // the epilogue's last statement; k when there is none
  std::string note;       // for `einjit explain`: appended to statement k's note
  std::string memberNote; // ... and each member's note
};
EpiloguePlan planEpilogue(const dsl::Program& p, const dsl::BoundProgram& b, std::size_t k,
                          const FusionPlan& fusion);

} // namespace einjit::codegen
