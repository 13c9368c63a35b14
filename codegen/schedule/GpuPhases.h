#pragma once
// The residue-phases family. A strided convolution's input gradient, dx[u] := dy[h] * k[u - 2h]
// with h in max(0, cdiv(u - 2, 2)):min(N, fdiv(u, 2) + 1), fills a sliver of h's hull. Split u
// into residue phases u = g*q + rho (g: the divisor in h's bounds) and write h = a*q + m: in each
// phase m runs over a few values (dx[2q+rho] := dy[q+m] * k[rho - 2m]), a dense contraction that
// the tile masks. planPhases decides every phase (tileGroups) before any is emitted: all tile,
// or none does.
#include "codegen/Target.h"
#include "codegen/schedule/GpuAccess.h"
#include "codegen/schedule/GpuPlanInput.h"
#include "codegen/schedule/GpuStatementPlan.h"

namespace einjit::codegen::gpuschedule {

// The statement in a residue phase: every subscript's coefficient on u moves to q (times g, its
// constant gains rho times it) and h's to q (times a) and m.
dsl::Statement phaseStatement(const dsl::Statement& st, const std::vector<PhaseSub>& subs);

// The statement's residue phases (in.phases) as tiles over context c (the call's buffers or the
// layout copies'): the plan's family, tiles (one per non-empty phase) and GpuPhasesPlan, or false
// with the plan unchanged where the phases hold too little work, are too many (kMaxPhases) or
// some phase takes no tile.
bool planPhases(const GpuTileContext& c, const Target& t, const GpuStatementInput& in,
                GpuStatementPlan& plan);

} // namespace einjit::codegen::gpuschedule
