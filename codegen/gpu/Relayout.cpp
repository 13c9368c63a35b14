// Scratch copies of tensors in another layout around a GPU tile: the copies that
// gpuschedule::relayoutPlan decided (batch-outermost, channel-fast) and the statement's plan
// holds (the tile family planned over their layouts: schedule/GpuStatementPlan.cpp), emitted
// with the tile (emitOverCopies).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

std::int64_t Lowerer::elementsOf(int t) const {
  std::int64_t count = 1;
  for (std::int64_t e : b_.tensors[static_cast<std::size_t>(t)].shape) count *= e;
  return count;
}

void Lowerer::relayoutCopy(int t, const std::string& from, const std::vector<std::int64_t>& fs,
                           const std::string& to, const std::vector<std::int64_t>& ts,
                           const std::string& name) {
  const auto& shape = b_.tensors[static_cast<std::size_t>(t)].shape;
  const std::int64_t count = elementsOf(t);
  if (count == 0) return;
  const Type et = elemType(t);
  const int ds = gpuschedule::fastestDim(shape, fs), dd = gpuschedule::fastestDim(shape, ts);
  // The other dimensions, the destination's slowest first.
  std::vector<std::size_t> rest;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (static_cast<int>(d) != ds && static_cast<int>(d) != dd) rest.push_back(d);
  std::stable_sort(rest.begin(), rest.end(),
                   [&](std::size_t x, std::size_t y) { return std::abs(ts[x]) > std::abs(ts[y]); });
  // Adds each dimension's offsets in both layouts, decomposing g over dims (the last fastest).
  auto offsets = [&](const std::vector<std::size_t>& dims, Expr g, Expr& fo, Expr& to_) {
    for (std::size_t q = dims.size(); q-- > 0;) {
      const std::size_t d = dims[q];
      Expr v = ir::binary(BinOp::Mod, g, ir::intImm(shape[d]));
      g = ir::binary(BinOp::Div, g, ir::intImm(shape[d]));
      fo = ir::add(fo, ir::mul(v, ir::intImm(fs[d])));
      to_ = ir::add(to_, ir::mul(v, ir::intImm(ts[d])));
    }
  };
  // (relayoutPlan copies only into a layout with another fastest dimension.)
  if (ds < 0 || dd < 0 || ds == dd) throw InternalError("relayoutCopy: no transpose");
  ir::Func f = newFunc(name);
  Expr blk = ir::var("gpu.block"), thr = ir::var("gpu.thread");
  const auto s = static_cast<std::size_t>(ds), d = static_cast<std::size_t>(dd);
  const auto [TS, TD] = gpuschedule::relayoutTile(shape[s], shape[d]);
  const std::int64_t nS = (shape[s] + TS - 1) / TS, nD = (shape[d] + TD - 1) / TD;
  std::int64_t blocks = nS * nD;
  for (std::size_t q : rest) blocks *= shape[q];
  Expr td = ir::binary(BinOp::Mod, blk, ir::intImm(nD));
  Expr tsI =
      nS == 1 ? ir::intImm(0)
              : ir::binary(BinOp::Mod, ir::binary(BinOp::Div, blk, ir::intImm(nD)), ir::intImm(nS));
  Expr fo = ir::intImm(0), to_ = ir::intImm(0);
  offsets(rest, ir::binary(BinOp::Div, blk, ir::intImm(nS * nD)), fo, to_);
  const std::string tile = "relayout.tile";
  const std::int64_t threads = target_.gpuBlock;
  const std::int64_t elems = TS * TD, reps = (elems + threads - 1) / threads, pitch = TS + 1;
  // One pass over the tile, reading (along the source's fastest) or writing (along the
  // destination's): the thread's elements e, at (sv, dv) in the tile.
  auto pass = [&](bool write) {
    Expr e = ir::add(thr, ir::mul(ir::var("relayout.q"), ir::intImm(threads)));
    Expr sv = write ? ir::binary(BinOp::Div, e, ir::intImm(TD))
                    : ir::binary(BinOp::Mod, e, ir::intImm(TS));
    Expr dv = write ? ir::binary(BinOp::Mod, e, ir::intImm(TD))
                    : ir::binary(BinOp::Div, e, ir::intImm(TS));
    Expr gs = ir::add(ir::mul(tsI, ir::intImm(TS)), sv),
         gd = ir::add(ir::mul(td, ir::intImm(TD)), dv);
    Expr valid = both(ir::binary(BinOp::Lt, gs, ir::intImm(shape[s])),
                      ir::binary(BinOp::Lt, gd, ir::intImm(shape[d])));
    if (elems % threads != 0) valid = both(ir::binary(BinOp::Lt, e, ir::intImm(elems)), valid);
    Expr slot = ir::add(ir::mul(dv, ir::intImm(pitch)), sv);
    Stmt body = write ? ir::store(to,
                                  ir::add(to_, ir::add(ir::mul(gs, ir::intImm(ts[s])),
                                                       ir::mul(gd, ir::intImm(ts[d])))),
                                  ir::load(et, tile, slot))
                      : ir::store(tile, slot,
                                  ir::load(et, from,
                                           ir::add(fo, ir::add(ir::mul(gs, ir::intImm(fs[s])),
                                                               ir::mul(gd, ir::intImm(fs[d]))))));
    return ir::forLoop("relayout.q", ir::intImm(0), ir::intImm(reps), ForKind::Unrolled,
                       ir::ifThen(valid, body));
  };
  f.body = blockLaunch(
      ir::allocate(tile, et, TD * pitch, ir::block({pass(false), ir::barrier(), pass(true)}), true),
      blocks, threads);
  out_.funcs.push_back(std::move(f));
}

GpuTileSchedule Lowerer::emitOverCopies(const Statement& st, const GpuRelayoutPlan& relaid,
                                        const std::string& base,
                                        const std::function<GpuTileSchedule()>& emit) {
  const BufferMap original = ctx_.buffers;
  // Tensor m's copy: its scratch buffer and (copyIn) the function that fills it, then its
  // accesses go to the copy.
  auto redirect = [&](const GpuRelayoutCopy& m, bool copyIn) {
    const auto t = static_cast<std::size_t>(m.tensor);
    const std::string buf = base + "." + p_.tensors[t].name + ".relaid";
    out_.scratch.push_back({buf, elemType(m.tensor), elementsOf(m.tensor)});
    if (copyIn)
      relayoutCopy(m.tensor, ctx_.buffers.names[t], ctx_.buffers.strides[t], buf, m.strides,
                   base + "_relayout_" + p_.tensors[t].name);
    ctx_.buffers.names[t] = buf;
    ctx_.buffers.strides[t] = m.strides;
    ctx_.buffers.aligned[t] = true;
  };
  GpuTileSchedule tile;
  {
    const Scoped<BufferMap> copies(ctx_.buffers, original);
    for (const GpuRelayoutCopy& m : relaid.inputs) redirect(m, true);
    if (relaid.output) redirect(*relaid.output, relaid.outputIn);
    tile = emit();
    if (relaid.output) {
      const auto t = static_cast<std::size_t>(st.output);
      relayoutCopy(st.output, ctx_.buffers.names[t], ctx_.buffers.strides[t], original.names[t],
                   original.strides[t], base + "_relayout_back");
    }
  }
  tile.relayout = relaid;
  return tile;
}

} // namespace einjit::codegen::lowering
