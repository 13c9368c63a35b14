#include "codegen/schedule/GpuStatementPlan.h"

#include "codegen/schedule/GpuCoreBorder.h"
#include "codegen/schedule/GpuPhases.h"
#include "codegen/schedule/GpuTileGroups.h"
#include "codegen/schedule/GpuTileSchedule.h"
#include "dsl/InPlace.h"

namespace einjit::codegen::gpuschedule {

using namespace einjit::dsl;

namespace {

// A '+=' sum whose left-hand side may hit an element several times (a gather's gradient, a
// scatter, or a non-injective affine one) and that does not read its output: one thread per
// element of the output indices, adding its sum atomically (f32, f64, or bf16 through an f32
// copy).
bool atomicScatter(const BoundProgram& b, const Statement& st) {
  if (st.assign != Assign::Accumulate || st.reduce != Reduce::Add) return false;
  const ir::Type et = irType(b.tensors[static_cast<std::size_t>(st.output)].dtype);
  if (et != ir::Type::f32 && et != ir::Type::f64 && et != ir::Type::bf16) return false;
  return !readsOwnOutput(st);
}

// The tile's context over the layout copies: their strides, their own (aligned) allocations,
// the channel index run last.
GpuTileContext overCopies(const GpuTileContext& c, const GpuRelayoutPlan& relaid) {
  GpuTileContext copies = c;
  auto redirect = [&](const GpuRelayoutCopy& m) {
    const auto t = static_cast<std::size_t>(m.tensor);
    copies.buffers.strides[t] = m.strides;
    copies.buffers.aligned[t] = true; // a scratch allocation of its own
  };
  for (const GpuRelayoutCopy& m : relaid.inputs) redirect(m);
  if (relaid.output) redirect(*relaid.output);
  copies.kLast = relaid.kLast;
  return copies;
}

} // namespace

GpuStatementInput gpuStatementInput(const Program& p, const BoundProgram& b, std::size_t k,
                                    const StatementSchedule& sched, const Box& ranges,
                                    const GpuBuffers& buffers) {
  const Statement& st = p.stmts[k];
  const BoundStatement& bs = b.stmts[k];
  GpuStatementInput in;
  in.program = &p;
  in.binding = &b;
  in.stmt = k;
  in.base = "s" + std::to_string(k);
  in.ranges = ranges;
  in.buffers = buffers;
  in.buffers.aligned.resize(p.tensors.size(), false);
  in.split = sched.splitChunks > 0;
  in.independent = independentOutputs(st);
  in.inPlace = !in.independent && runsInPlace(p, k);
  in.atomic = atomicScatter(b, st);
  if (in.independent && !in.split) {
    in.relayout = relayoutPlan(p, b, st, bs, in.buffers.strides, coversOutput(b, st, bs, sched));
    in.phases = residuePhases(st, bs, ranges);
    in.core = coreRanges(st, bs, ranges);
  }
  return in;
}

GpuStatementPlan planGpuStatement(const GpuStatementInput& in, const Target& t) {
  using Family = GpuStatementPlan::Family;
  const Program& p = *in.program;
  const Statement& st = p.stmts[in.stmt];
  GpuStatementPlan plan;
  if (in.split) {
    plan.family = Family::Split;
    return plan;
  }
  if (in.independent) {
    const GpuTileContext call{in.program, in.binding, in.buffers, -1, {}};
    auto tile = [&](const GpuTileContext& c) {
      std::optional<GpuTilePart> part =
          planTilePart(c, t, st, in.binding->stmts[in.stmt], in.ranges, in.base);
      if (!part) return false;
      plan.family = Family::Tile;
      plan.tiles = {std::move(*part)};
      return true;
    };
    // The copies are part of the plan only where the family planned over them applies.
    auto overCopiesOf = [&](const auto& family) {
      if (in.relayout && family(overCopies(call, *in.relayout))) plan.relayout = in.relayout;
      return plan.relayout.has_value();
    };
    auto phases = [&](const GpuTileContext& c) { return planPhases(c, t, in, plan); };
    if (!overCopiesOf(tile) && !tile(call) && !overCopiesOf(phases) && !phases(call) &&
        !planCoreSplit(call, t, in, plan))
      plan.family = Family::Threads;
  } else if (in.inPlace) {
    // In place: each thread's loads of the element it writes precede its store, and no
    // thread touches another's element (dsl/InPlace.h).
    plan.family = Family::InPlace;
    plan.threads = GpuThreadsPlan{GpuThreadsPlan::Kind::InPlace};
  } else if (in.atomic) {
    const auto out = static_cast<std::size_t>(st.output);
    std::vector<std::size_t> outputs(static_cast<std::size_t>(st.numOutputVars()));
    for (std::size_t v = 0; v < outputs.size(); ++v) outputs[v] = v;
    plan.family = Family::Atomic;
    plan.threads =
        GpuThreadsPlan{GpuThreadsPlan::Kind::Atomic, groupNames(st, outputs), p.tensors[out].name,
                       in.binding->tensors[out].dtype == DType::bf16};
  } else {
    plan.family = Family::OneThread;
    plan.threads = GpuThreadsPlan{GpuThreadsPlan::Kind::OneThread};
    plan.threads.scatter = st.scatter;
  }
  return plan;
}

} // namespace einjit::codegen::gpuschedule
