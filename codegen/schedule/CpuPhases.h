#pragma once
// The residue-phases family on the CPU: a strided gradient's residue phases (CpuStatementInput::
// phases, residuePhases), each a statement of its own over (q, m) that the packed contraction
// takes. planGemmPhases decides every phase before any is emitted: all take the packed path, or
// none does.
#include "codegen/Target.h"
#include "codegen/schedule/CpuPlanInput.h"

#include <vector>

namespace einjit::codegen::cpuschedule {

// The phases (one per non-empty residue), each with its packed plan; empty where the statement
// has no residue phases, they are too many, some phase reads a gather or takes no packed plan,
// or together they hold too little work for the packed path (kGemmMinFlops).
std::vector<CpuGemmPhase> planGemmPhases(const CpuStatementInput& in, const Target& t);

} // namespace einjit::codegen::cpuschedule
