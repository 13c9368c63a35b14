// Scratch copies of tensors in another layout around a GPU tile (batch-outermost, channel-fast).
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

std::vector<bool> Lowerer::batchIndices(const Statement& st, const Ranges& r) const {
  std::vector<bool> batch(st.vars.size(), false);
  if (st.reduce != Reduce::Add || st.lhsVars.empty()) return batch;
  std::vector<const CExpr*> factors;
  flattenProduct(*st.rhs, factors);
  if (factors.size() < 2) return batch;
  for (int lv : st.lhsVars) {
    const auto v = static_cast<std::size_t>(lv);
    if (r[v].second - r[v].first < 2) continue;
    bool all = true;
    for (const CExpr* f : factors) {
      std::vector<bool> used(st.vars.size(), false);
      usedVars(*f, used);
      all = all && used[v];
    }
    batch[v] = all;
  }
  return batch;
}

int Lowerer::fastestDim(const std::vector<std::int64_t>& shape,
                        const std::vector<std::int64_t>& str) {
  int best = -1;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] >= 2 && str[d] != 0 &&
        (best < 0 || std::abs(str[d]) < std::abs(str[static_cast<std::size_t>(best)])))
      best = static_cast<int>(d);
  return best;
}

bool Lowerer::batchSubscript(const CExpr& a, std::size_t d, const std::vector<bool>& batch) {
  const Subscript& s = a.subs[d];
  if (s.gather || s.mode != IndexMode::Plain) return false;
  bool any = false;
  for (std::size_t v = 0; v < s.coef.size(); ++v) {
    if (s.coef[v] == 0) continue;
    if (!batch[v]) return false;
    any = true;
  }
  return any;
}

bool Lowerer::batchFast(const CExpr& a, const std::vector<bool>& batch) const {
  const auto t = static_cast<std::size_t>(a.tensor);
  const auto& shape = b_.tensors[t].shape;
  bool other = false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] >= 2 && strides_[t][d] == 0) return false;
    other = other || (shape[d] >= 2 && !batchSubscript(a, d, batch));
  }
  const int d = fastestDim(shape, strides_[t]);
  if (!other) return false;
  return d >= 0 && batchSubscript(a, static_cast<std::size_t>(d), batch);
}

std::vector<std::int64_t>
Lowerer::denseStrides(int t, const std::function<bool(std::size_t)>& outer) const {
  const auto& shape = b_.tensors[static_cast<std::size_t>(t)].shape;
  const auto& old = strides_[static_cast<std::size_t>(t)];
  std::vector<std::size_t> order(shape.size());
  for (std::size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (outer(x) != outer(y)) return outer(x);
    return std::abs(old[x]) > std::abs(old[y]);
  });
  std::vector<std::int64_t> str(shape.size(), 0);
  std::int64_t step = 1;
  for (std::size_t q = order.size(); q-- > 0;) {
    str[order[q]] = step;
    step *= std::max<std::int64_t>(shape[order[q]], 1);
  }
  return str;
}

std::vector<std::int64_t> Lowerer::batchOuter(const CExpr& a,
                                              const std::vector<bool>& batch) const {
  return denseStrides(a.tensor, [&](std::size_t d) { return batchSubscript(a, d, batch); });
}

std::vector<std::int64_t> Lowerer::withFastest(int t, std::size_t last) const {
  return denseStrides(t, [last](std::size_t d) { return d != last; });
}

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
  const int ds = fastestDim(shape, fs), dd = fastestDim(shape, ts);
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
  // (batchFast: the source's fastest dimension is a batch one, the destination's is not.)
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

int Lowerer::channelIndex(const Statement& st, const BoundStatement& bs, const Ranges& r,
                          const std::vector<const CExpr*>& factors) const {
  if (b_.dtype != DType::bf16 || st.reduce != Reduce::Add || factors.size() != 2) return -1;
  for (std::size_t v = 0; v < static_cast<std::size_t>(st.numOutputVars()); ++v)
    if (bs.dependent[v]) return -1;
  auto extent = [&](std::size_t v) { return r[v].second - r[v].first; };
  // Some windowed factor reads less than a 16-byte vector contiguously along the reduction
  // (its run: the last moving reduction index with unit stride, extended while each earlier
  // one moves by the extent of those after it).
  bool shortRun = false;
  for (const CExpr* f : factors) {
    if (f->kind != CKind::Read || f->tensor == st.output) return -1;
    bool window = false;
    for (const Subscript& sub : f->subs) {
      int moving = 0;
      for (std::size_t v = 0; v < sub.coef.size(); ++v)
        moving += sub.coef[v] != 0 && extent(v) >= 2;
      window = window || moving >= 2;
    }
    if (!window) continue;
    const auto& str = strides_[static_cast<std::size_t>(f->tensor)];
    std::int64_t run = 1;
    for (std::size_t v = st.vars.size(); v-- > static_cast<std::size_t>(st.numOutputVars());) {
      if (extent(v) < 2) continue;
      std::int64_t coef = 0;
      for (std::size_t d = 0; d < f->subs.size(); ++d) coef += f->subs[d].coef[v] * str[d];
      if (coef != run) break;
      run *= extent(v);
    }
    shortRun = shortRun || run < 8;
  }
  if (!shortRun) return -1;
  for (std::size_t v = static_cast<std::size_t>(st.numOutputVars()); v < st.vars.size(); ++v) {
    if (bs.dependent[v] || extent(v) < 16 || extent(v) % 8 != 0) continue;
    bool ok = true;
    for (const CExpr* f : factors) ok = ok && channelDim(*f, v) != -2;
    if (ok) return static_cast<int>(v);
  }
  return -1;
}

int Lowerer::channelDim(const CExpr& f, std::size_t v) {
  int dim = -1;
  for (std::size_t d = 0; d < f.subs.size(); ++d) {
    const Subscript& sub = f.subs[d];
    if (sub.gather) return -2;
    if (sub.coef[v] == 0) continue;
    if (dim >= 0 || sub.coef[v] != 1 || sub.mode != IndexMode::Plain) return -2;
    for (std::size_t u = 0; u < sub.coef.size(); ++u)
      if (u != v && sub.coef[u] != 0) return -2;
    dim = static_cast<int>(d);
  }
  return dim;
}

auto Lowerer::relayoutTiled(const Statement& st, const BoundStatement& bs,
                            const StatementSchedule& sched, const Ranges& r,
                            const std::string& base, const TilePlanner& plan)
    -> std::optional<GpuTileSchedule> {
  std::vector<const CExpr*> factors;
  flattenProduct(*st.rhs, factors);
  std::vector<Relaid> in;
  std::optional<Relaid> out;
  GpuRelayoutPlan relaid;
  int kLast = -1;
  const std::vector<bool> batch = batchIndices(st, r);
  auto add = [&](const CExpr* f, std::vector<std::int64_t> str) {
    for (const Relaid& m : in)
      if (m.access->tensor == f->tensor) return;
    in.push_back({f, std::move(str)});
  };
  for (const CExpr* f : factors)
    if (f->kind == CKind::Read && f->tensor != st.output && batchFast(*f, batch))
      add(f, batchOuter(*f, batch));
  if (batchFast(*st.lhs, batch)) out = Relaid{st.lhs.get(), batchOuter(*st.lhs, batch)};
  if (!in.empty() || out) {
    relaid.channel.clear(); // batch-outermost layouts (unit stride on a batch index)
  } else if (const int c = channelIndex(st, bs, r, factors); c >= 0) {
    const auto v = static_cast<std::size_t>(c);
    for (const CExpr* f : factors) {
      const int d = channelDim(*f, v);
      if (d < 0) continue;
      if (fastestDim(b_.tensors[static_cast<std::size_t>(f->tensor)].shape,
                     strides_[static_cast<std::size_t>(f->tensor)]) != d)
        add(f, withFastest(f->tensor, static_cast<std::size_t>(d)));
    }
    kLast = c;
    relaid.channel = st.vars[v].name;
  }
  if (in.empty() && !out) return std::nullopt;
  const Strides savedStrides = strides_;
  const Aligned16 savedAligned = aligned_;
  const std::vector<std::string> savedNames = names_;
  auto restore = [&] {
    strides_ = savedStrides;
    aligned_ = savedAligned;
    names_ = savedNames;
  };
  // Tensor m's accesses go to its copy; with `emitCopy`, the copy's scratch buffer and (copyIn)
  // the function that fills it are emitted first.
  auto redirect = [&](const Relaid& m, bool emitCopy, bool copyIn) {
    const auto t = static_cast<std::size_t>(m.access->tensor);
    const std::string buf = base + "." + p_.tensors[t].name + ".relaid";
    if (emitCopy) {
      out_.scratch.push_back({buf, elemType(m.access->tensor), elementsOf(m.access->tensor)});
      if (copyIn)
        relayoutCopy(m.access->tensor, names_[t], strides_[t], buf, m.strides,
                     base + "_relayout_" + p_.tensors[t].name);
      relaid.tensors += (relaid.tensors.empty() ? "" : ", ") + p_.tensors[t].name;
    }
    names_[t] = buf;
    strides_[t] = m.strides;
    aligned_[t] = true; // a scratch allocation of its own
  };
  // The output's copy starts from its values unless ':=' writes all of it.
  const bool outputIn = !(st.assign == Assign::Define && coversOutput(st, bs, sched));
  // The tile is decided over the copies' layouts before anything is emitted.
  TileEmission emit;
  {
    for (const Relaid& m : in) redirect(m, false, true);
    if (out) redirect(*out, false, outputIn);
    const Scoped<int> channelLast(ctx_.kLast, kLast);
    emit = plan();
    restore();
  }
  if (!emit) return std::nullopt;
  for (const Relaid& m : in) redirect(m, true, true);
  if (out) redirect(*out, true, outputIn);
  GpuTileSchedule tile;
  {
    const Scoped<int> channelLast(ctx_.kLast, kLast);
    tile = emit();
  }
  if (out) {
    const auto t = static_cast<std::size_t>(st.output);
    relayoutCopy(st.output, names_[t], strides_[t], savedNames[t], savedStrides[t],
                 base + "_relayout_back");
  }
  restore();
  tile.relayout = std::move(relaid);
  return tile;
}

} // namespace einjit::codegen::lowering
