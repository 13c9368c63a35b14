#pragma once
// The packed GEMM plan's output staged in a contiguous partial and its reduction split across
// threads (GemmPlan::staged, GemmPlan::kParts; docs/CPU_SCHEDULES.md, "The reduction split
// across tasks"): decided on a statement's plan once the plan itself is made.
#include "codegen/schedule/GemmPlan.h"

#include <functional>
#include <optional>

namespace einjit::codegen {

// Plan g of a statement (bound as bs) for target t, its output staged or its reduction split
// where that pays. `replan(target)`: the statement's plan for another target (the split takes
// the one-thread plan).
GemmPlan withParts(GemmPlan g, const dsl::BoundStatement& bs, DType dtype, const Target& t,
                   const std::function<std::optional<GemmPlan>(const Target&)>& replan);

} // namespace einjit::codegen
