#pragma once
// The tile family: a '+' contraction whose right-hand side is a product L * R, R holding every
// factor that uses the output's fastest index (the column index). tileGroups decides the index
// groups (I x J tiles over K, one tile row per value of B, the dependent reduction indices each
// side masks, the indices of one value); tileInput gathers what the tile planners read
// (GpuPlanInput); planTilePart gives the tile of a statement as a plan's part, its schedule
// decided (planSimtTile or planTensorCoreTile). Free functions of values: nothing is emitted and
// the lowerer is not consulted.
#include "codegen/Target.h"
#include "codegen/schedule/GpuAccess.h"
#include "codegen/schedule/GpuPlanInput.h"
#include "codegen/schedule/GpuStatementPlan.h"

#include <optional>
#include <string>

namespace einjit::codegen::gpuschedule {

// The groups of a tile of statement st over box r (bs: its binding, whose dependent ranges the
// tile masks), or nothing where no tile applies: not a '+' contraction separable into L and R,
// a group empty, a dependent range that reads both sides or fills less than half its hull
// (maskedRanges), a masked side's partner not proven inside, too little work (worthTile; a
// residue phase is weighed whole), or an output none of whose elements can be written.
std::optional<GpuTileGroups> tileGroups(const GpuTileContext& c, const dsl::Statement& st,
                                        const dsl::BoundStatement& bs, const Box& r);

// The access analysis of a tile's operands and output over its box, as its planners read it.
GpuPlanInput tileInput(const GpuTileContext& c, const dsl::Statement& st, const Box& r,
                       const GpuTileGroups& g);

// The tile of statement st over box r as a part of a plan (function `name`), its groups and its
// schedule decided; nothing where tileGroups finds none.
std::optional<GpuTilePart> planTilePart(const GpuTileContext& c, const Target& t,
                                        const dsl::Statement& st, const dsl::BoundStatement& bs,
                                        const Box& r, const std::string& name);

} // namespace einjit::codegen::gpuschedule
