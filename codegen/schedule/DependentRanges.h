#pragma once
// Reduction ranges that depend on output indices (the solved gradients' max/min bounds,
// docs/GRADIENTS.md): the facts both devices plan with, as functions of the statement and its
// box, emitting nothing. Where the ranges fill their hulls (meanShare: a GPU tile masks them),
// where every range is its hull (coreRanges: the core of a core/border split), and the residue
// phases of a strided gradient (residuePhases: the GPU tiles and the CPU's packed phases).
#include "codegen/schedule/AccessBounds.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace einjit::codegen {

// A residue phase of a strided reduction (residuePhases): slot `out` holds q with the original
// index u = g*q + rho, and slot `red` holds m with the original h = a*q + m.
struct PhaseSub {
  std::size_t out = 0, red = 0;
  std::int64_t g = 1, rho = 0, a = 0;
  std::int64_t hullLo = 0, hullHi = 0; // h's original hull
};

// The indices that dependent index v's bounds read.
std::vector<std::size_t> boundReads(const dsl::Statement& st, std::size_t v);

// The range [lo, hi) of dependent index v at the values `vals` of the indices (slots) it reads;
// inside residue phases `phase`, of m for q (see PhaseSub).
std::pair<std::int64_t, std::int64_t> dependentRange(const dsl::BoundStatement& bs, std::size_t v,
                                                     const std::vector<std::int64_t>& vals,
                                                     const std::vector<PhaseSub>& phase);

// The mean length of dependent index v's range over the values of the indices it reads (`read`,
// over box r), relative to its hull (0 when there are too many values to count).
double meanShare(const dsl::BoundStatement& bs, const Box& r, std::size_t v,
                 const std::vector<std::size_t>& read, const std::vector<PhaseSub>& phase);

// The largest divisor of a floor or ceiling division in bound b.
std::int64_t divisorOf(const dsl::ConcreteBound& b);

// Residue phases at most, on either device (the product of g over the split indices): each phase
// is code of its own (a tile's launch on the GPU; packing functions and a product part on the
// CPU, unless their code merges), so their count bounds the code a statement compiles into. 16
// takes a stride of up to 4 along two indices, the strided convolutions' gradients.
inline constexpr std::int64_t kMaxPhases = 16;

// The residue phases of a statement's strided dependent reductions: each reduction index whose
// bounds divide by g >= 2 and read one output index u of at least 4g values (with rho unset);
// nothing where any dependent range is of another kind.
std::vector<PhaseSub> residuePhases(const dsl::Statement& st, const dsl::BoundStatement& bs,
                                    const Box& ranges);

// The core of a core/border split (docs/GRADIENTS.md, G6): per output index that dependent
// reduction ranges read, the longest run of its values where every such range takes its full
// (box) extent; a bound monotone in the index is searched by bisection. None when the
// statement has other dependences (a bound that reads several indices, a reduction index or a
// dependent output index) or no core.
std::optional<Box> coreRanges(const dsl::Statement& st, const dsl::BoundStatement& bs,
                              const Box& ranges);

// The statement's binding over box `core`, every range its box's (none dependent).
dsl::BoundStatement coreBox(const dsl::BoundStatement& bs, const Box& core);

} // namespace einjit::codegen
