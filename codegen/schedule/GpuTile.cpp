// The printer of a GPU statement's schedule: the note `einjit explain` shows for it.
#include "codegen/schedule/GpuTile.h"

#include "codegen/schedule/GpuStatementPlan.h"

namespace einjit::codegen {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// ", 2 slices in flight; tile.A by 16-byte asynchronous copies, tile.B through registers".
std::string staging(const GpuTilePlan& t) {
  std::string s = ", " + str(t.stages) + " slices in flight";
  for (std::size_t q = 0; q < t.operands.size(); ++q) {
    const GpuOperandPlan& o = t.operands[q];
    s += std::string(q ? ", " : "; ") + o.buffer +
         (o.copyBytes > 0 ? " by " + str(o.copyBytes) + "-byte asynchronous copies"
                          : std::string(" through registers"));
    switch (o.index) {
    case GpuOperandPlan::Index::Decomposed: break;
    case GpuOperandPlan::Index::RowOffsets: s += " (row offsets from a table)"; break;
    case GpuOperandPlan::Index::RowTables: s += " (row indices from tables)"; break;
    case GpuOperandPlan::Index::ReductionTables: s += " (reduction indices from tables)"; break;
    }
    if (!o.masked.empty()) s += " (over the hull of (" + o.masked + "), masked to their ranges)";
  }
  return s;
}

} // namespace

std::string describe(const GpuTilePlan& t) {
  std::string s;
  const std::string slices = ", shared-memory slices of " + str(t.BK) + " along (" + t.K + ")" +
                             (t.B.empty() ? "" : ", one tile row per (" + t.B + ")");
  const std::string tile = str(t.BM) + "x" + str(t.BN) + " over (" + t.I + ") x (" + t.J + ")";
  switch (t.kind) {
  case GpuTileKind::Simt:
    s = "GPU tile " + tile + ", " + str(t.TM) + "x" + str(t.TN) + " per thread" + slices +
        staging(t);
    break;
  case GpuTileKind::MmaSync:
    s = "GPU tensor cores (mma.sync m16n8k16 bf16, f32 accumulators): tile " + tile +
        ", 8 warps (" + str(t.WM) + "x" + str(t.WN) + ") of 64x32" + slices + staging(t);
    break;
  case GpuTileKind::Wgmma:
    s = "GPU tensor cores (wgmma m64n" + str(t.WBN) +
        "k16 bf16, sm_90a, f32 accumulators, 128-byte swizzled operands): tile " + tile +
        ", 2 warpgroups " + (t.sideBySide ? "side by side " : "") + "of 64x" + str(t.WBN) + slices +
        staging(t) +
        (t.inFlight ? ", the products of one slice running while the next is issued" : "");
    break;
  }
  if (t.vectoredOutput) s += ", the output stored 16 bytes at a time";
  if (t.splits > 1)
    s += ", split-K: " + str(t.splits) + " ranges of " + str(t.perSplit) +
         " slices, partials added in order";
  return s;
}

namespace {

// "u = 2q + r, h = q + m": the residue phases' split.
std::string phaseSplit(const GpuPhasesPlan& p) {
  std::string split;
  for (const GpuPhasesPlan::Split& x : p.splits)
    split += (split.empty() ? "" : ", ") + x.out + " = " + str(x.g) + "q + r, " + x.red + " = " +
             (x.a == 1 ? "" : str(x.a)) + "q + m";
  return split;
}

} // namespace

std::string describe(const GpuTileSchedule& s) {
  std::string note = describe(s.tile);
  if (s.phases) {
    note = str(s.phases->count) + " residue phases (" + phaseSplit(*s.phases) + "), each: " + note;
    if (s.phases->merged) note += "; the phases in one launch";
  }
  if (s.relayout) {
    const std::string& c = s.relayout->channel;
    note += "; " + s.relayout->tensors + " copied first to " +
            (c.empty() ? std::string("batch-outermost layouts (unit stride on a batch index)")
                       : "layouts with " + c + " fastest, the reduction run with " + c +
                             " last (whole 16-byte vectors)");
  }
  if (s.coreBorder) note = "core/border split; core: " + note + "; borders: one thread each";
  return note;
}

std::string describe(const GpuThreadsPlan& t) {
  switch (t.kind) {
  case GpuThreadsPlan::Kind::InPlace: return "one GPU thread per element, in place";
  case GpuThreadsPlan::Kind::Atomic:
    return "one GPU thread per element of (" + t.indices + "), atomic adds into " +
           (t.wide ? "an f32 copy of " + t.output + ", rounded to bf16 once at the end"
                   : t.output) +
           " (several land on one element: their order, and the sum's last bits, vary between "
           "runs)";
  case GpuThreadsPlan::Kind::OneThread:
    return "one GPU thread: output elements are not independent (" +
           std::string(t.scatter ? "scatter" : "left-hand side") + ")";
  }
  return "";
}

std::string describe(const GpuStatementPlan& p) {
  using Family = GpuStatementPlan::Family;
  switch (p.family) {
  case Family::Split: return "split reduction";
  case Family::Tile:
  case Family::Phases:
  case Family::CoreBorder:
    // The note lowering writes for it, but for the phases' launches merged afterwards.
    return describe(
        GpuTileSchedule{p.tiles.back().tile, p.phases, p.relayout, p.family == Family::CoreBorder});
  case Family::Threads: return "one GPU thread per element";
  case Family::InPlace:
  case Family::Atomic:
  case Family::OneThread: return describe(p.threads);
  }
  return "";
}

} // namespace einjit::codegen
