// A GPU statement (not a split reduction) by the family order of docs/ARCHITECTURE.md: for
// independent outputs the first tile family that applies, else one thread per element; in
// place; atomic adds for scatters; else one thread.
#include "codegen/lower/Lowerer.h"

#include "dsl/InPlace.h"

namespace einjit::codegen::lowering {

void Lowerer::gpuStatement(std::size_t k, StatementSchedule& sched, const Ranges& ranges,
                           const std::string& base) {
  const Statement& st = p_.stmts[k];
  const BoundStatement& bs = b_.stmts[k];
  const TilePlanner tiled = [&] { return plannedTile(st, bs, ranges, base); };
  const TilePlanner phases = [&] { return phaseTiles(st, bs, ranges, base); };
  auto plain = [](const TilePlanner& plan) -> std::optional<GpuTileSchedule> {
    if (const TileEmission emit = plan()) return emit();
    return std::nullopt;
  };
  // A tile over copies in other layouts, a plain one, the same for residue phases; else a
  // tile of the core of a core/border split. Each is decided before it emits anything.
  const bool indep = independentOutputs(st);
  std::optional<GpuTileSchedule> tile;
  if (indep &&
      ((tile = relayoutTiled(st, bs, sched, ranges, base, tiled)) || (tile = plain(tiled)) ||
       (tile = relayoutTiled(st, bs, sched, ranges, base, phases)) || (tile = plain(phases)) ||
       (tile = gpuCoreSplit(st, bs, ranges, base)))) {
    sched.gpuTile = std::move(tile);
    out_.notes.back() = describe(*sched.gpuTile);
    if (sched.gpuTile->phases)
      phaseLaunches_.push_back({out_.notes.size() - 1, *sched.gpuTile, base + "_phases"});
  } else if (indep) {
    emitGpuGeneric(st, bs, ranges, base);
  } else if (dsl::runsInPlace(p_, k)) {
    // In place: each thread's loads of the element it writes precede its store, and no
    // thread touches another's element (dsl/InPlace.h).
    out_.notes.back() = describe(GpuThreadsPlan{GpuThreadsPlan::Kind::InPlace});
    emitGpuGeneric(st, bs, ranges, base);
  } else if (atomicScatter(st)) {
    const bool wide = elemType(st.output) == Type::bf16;
    out_.notes.back() =
        describe(GpuThreadsPlan{GpuThreadsPlan::Kind::Atomic, varNames(st, outputIndices(st)),
                                p_.tensors[static_cast<std::size_t>(st.output)].name, wide});
    const Scoped<std::string> into(ctx_.wide,
                                   wide ? beginWideScatter(st, bs, ranges, base) : std::string());
    {
      const Scoped<bool> atomic(ctx_.atomic, true);
      emitGpuGeneric(st, bs, ranges, base);
    }
    if (wide) endWideScatter(st, bs, ranges, base);
  } else {
    GpuThreadsPlan one{GpuThreadsPlan::Kind::OneThread};
    one.scatter = st.scatter;
    out_.notes.back() = describe(one);
    emitGeneric(st, bs, sched, ranges, base);
  }
}

} // namespace einjit::codegen::lowering
