#include "codegen/schedule/GpuStatementPlan.h"

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

} // namespace

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
    Box core;
    if (coreRanges(st, bs, ranges, core)) in.core = std::move(core);
  }
  return in;
}

} // namespace einjit::codegen::gpuschedule
