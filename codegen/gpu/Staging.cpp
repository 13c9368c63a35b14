// Staging GPU tile operands in shared memory: copies, index tables and the asynchronous pipeline.
#include "codegen/lower/Lowerer.h"

namespace einjit::codegen::lowering {

auto Lowerer::staged(const std::vector<const CExpr*>& fs, const std::vector<std::size_t>& group,
                     const Expr& base, const GpuOperandPlan& o, Type elem,
                     const std::vector<std::size_t>& masks) -> Staged {
  Staged sg;
  sg.fs = fs;
  sg.masks = masks;
  sg.group = group;
  sg.base = base;
  sg.BW = o.rows;
  sg.buf = o.buffer;
  sg.elem = elem;
  sg.kFast = o.kFast;
  sg.vector = o.vector;
  sg.rowMajor = o.rowMajor;
  sg.core = o.core;
  sg.stride = o.stride;
  sg.stageElems = o.stageElems;
  switch (o.index) {
  case GpuOperandPlan::Index::Decomposed: break;
  case GpuOperandPlan::Index::RowOffsets: sg.rowTable = o.buffer + ".rows"; break;
  case GpuOperandPlan::Index::RowTables: sg.tables = Staged::Tables::Rows; break;
  case GpuOperandPlan::Index::ReductionTables: sg.tables = Staged::Tables::Reduction; break;
  }
  return sg;
}

std::int64_t Lowerer::stageUnits(const Staged& s, std::int64_t BK) {
  return s.BW * BK / std::max(s.vector, 1);
}

std::int64_t Lowerer::stageReps(const Staged& s, std::int64_t BK) {
  constexpr std::int64_t threads = Target::gpuTileBlock;
  return (stageUnits(s, BK) + threads - 1) / threads;
}

void Lowerer::stagePos(const Staged& s, std::int64_t BK, const Expr& rep, Expr* w, Expr* kk,
                       Expr* valid) {
  constexpr std::int64_t threads = Target::gpuTileBlock;
  const std::int64_t u = std::max(s.vector, 1), units = stageUnits(s, BK);
  Expr e = ir::var("gpu.thread") + rep * threads;
  const std::int64_t fastN = s.kFast ? BK / u : s.BW / u;
  Expr fast = e % fastN * u;
  Expr slow = e / fastN;
  if (threads % fastN == 0) {
    // The same position along the fast direction in every pass (Staged::rowTable, tables).
    Expr thr = ir::var("gpu.thread");
    fast = thr % fastN * u;
    slow = thr / fastN + rep * (threads / fastN);
  }
  if (s.core && s.vector > 0 && fastN % 8 == 0) {
    // Vectors into the swizzled rows: 8 consecutive threads copy 128 contiguous bytes of one
    // row (whole lines of global memory; the swizzle puts their 8 chunks in distinct
    // banks), a warp 4 rows, then the next 128 bytes of the rows.
    const std::int64_t slowN = s.kFast ? s.BW : BK;
    Expr lo = e % 8, rest = e / 8;
    slow = rest % slowN;
    fast = (rest / slowN * 8 + lo) * u;
  }
  *w = s.kFast ? slow : fast;
  *kk = s.kFast ? fast : slow;
  *valid = units % threads == 0 ? nullptr : ir::lt(e, units);
}

Stmt Lowerer::guarded(const Expr& valid, Stmt s) {
  return valid ? ir::ifThen(valid, std::move(s)) : s;
}

Expr Lowerer::stageIndices(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r,
                           std::int64_t BK, const Expr& slice, const Expr& w, const Expr& kk) {
  const std::int64_t ext = extentOfGroup(s.group, r), extK = extentOfGroup(K, r);
  Expr gw = s.base + w, gk = slice * BK + kk;
  auto fromTables = [&](const std::vector<std::size_t>& g, const Expr& at) {
    for (std::size_t v : g) varExpr_[v] = ir::cast(Type::i64, ir::load(Type::i32, s.table(v), at));
  };
  if (s.tables == Staged::Tables::Rows)
    fromTables(s.group, w);
  else
    decompose(s.group, r, gw);
  if (s.tables == Staged::Tables::Reduction)
    fromTables(K, gk);
  else
    decomposeReduction(K, r, BK, slice, kk);
  // Masked operands (a solved gradient's hull) keep both checks: without them, NVVM in CUDA 13.0
  // (NVRTC and nvcc alike) crashed in most runs, nondeterministically, on the bf16 convolution
  // input gradient of bench/; with them it compiles every time.
  const bool keep = !s.masks.empty();
  Expr inside;
  if (keep || ext % s.BW != 0) inside = ir::lt(gw, ext);
  if (keep || extK % BK != 0) inside = both(inside, ir::lt(gk, extK));
  return inside;
}

bool Lowerer::slicesAligned(const std::vector<std::size_t>& K, const Ranges& r, std::int64_t BK) {
  return K.size() > 1 && (r[K.back()].second - r[K.back()].first) % BK == 0;
}

void Lowerer::decomposeReduction(const std::vector<std::size_t>& K, const Ranges& r,
                                 std::int64_t BK, const Expr& slice, const Expr& kk) {
  if (!slicesAligned(K, r, BK)) {
    decompose(K, r, slice * BK + kk);
    return;
  }
  const std::size_t last = K.back();
  const std::int64_t per = (r[last].second - r[last].first) / BK;
  decompose(std::vector<std::size_t>(K.begin(), K.end() - 1), r, per == 1 ? slice : slice / per);
  Expr in = per == 1 ? kk : slice % per * BK + kk;
  varExpr_[last] = r[last].first + in;
}

Stmt Lowerer::stageIssue(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r,
                         std::int64_t BK, const Expr& slice, const Expr& stage) {
  Expr rep = ir::var(s.buf + ".r"), w, kk, valid;
  stagePos(s, BK, rep, &w, &kk, &valid);
  Expr inside;
  if (s.rowTable.empty()) {
    inside = stageIndices(s, K, r, BK, slice, w, kk);
    for (std::size_t v : s.masks) inside = both(inside, maskCondition(v));
  } else {
    // Only the reduction's indices: the row part of the offset is in the table.
    const std::int64_t extK = extentOfGroup(K, r);
    Expr gk = slice * BK + kk;
    decomposeReduction(K, r, BK, slice, kk);
    if (extK % BK != 0) inside = ir::lt(gk, extK);
  }
  Stmt one;
  if (s.vector > 0) {
    Expr unusedInside;
    bool dropped = false;
    const CExpr& f = *s.fs[0];
    Expr src;
    {
      // In bounds inside its ranges (`inside` checks them).
      const Scoped<bool> trust(ctx_.trustPlain, !s.masks.empty());
      src = offset(f, &unusedInside, &dropped);
    }
    Expr dst = stage * s.stageElems + s.slot(w, kk);
    const int bytes = s.vector * typeBytes(s.elem);
    one = ir::copyAsync(s.buf, dst, bufferName(f.tensor), src, bytes, inside);
  } else {
    Expr v;
    if (!s.rowTable.empty()) {
      const CExpr& f = *s.fs[0];
      Expr off = ir::add(ir::cast(Type::i64, ir::load(Type::i32, s.rowTable, w)),
                         offsetPart(f, inGroup(K), false));
      v = ir::cast(vt_, ir::load(elemType(f.tensor), bufferName(f.tensor), off));
    } else {
      // Inside its ranges every plain subscript of a masked operand is in bounds (the
      // ranges were solved from them): no check.
      const Scoped<bool> trust(ctx_.trustPlain, !s.masks.empty());
      v = value(*s.fs[0]);
      for (std::size_t q = 1; q < s.fs.size(); ++q) v = ir::binary(BinOp::Mul, v, value(*s.fs[q]));
    }
    one = ir::store(s.buf + ".v", rep, ir::cast(s.elem, v));
    if (inside)
      one = ir::ifThen(inside, one, ir::store(s.buf + ".v", rep, ir::cast(s.elem, num(0))));
  }
  return ir::forLoop(s.buf + ".r", ir::intImm(0), ir::intImm(stageReps(s, BK)), ForKind::Unrolled,
                     guarded(valid, one));
}

Stmt Lowerer::stagePut(const Staged& s, std::int64_t BK, const Expr& stage) {
  if (s.vector > 0) return nullptr;
  Expr rep = ir::var(s.buf + ".r"), w, kk, valid;
  stagePos(s, BK, rep, &w, &kk, &valid);
  Expr dst = stage * s.stageElems + s.slot(w, kk);
  return ir::forLoop(s.buf + ".r", ir::intImm(0), ir::intImm(stageReps(s, BK)), ForKind::Unrolled,
                     guarded(valid, ir::store(s.buf, dst, ir::load(s.elem, s.buf + ".v", rep))));
}

Stmt Lowerer::pipeline(const std::vector<Staged>& ops, const std::vector<std::size_t>& K,
                       const Ranges& r, std::int64_t BK, const TileSplit& split,
                       std::int64_t slices, int stages,
                       const std::function<Stmt(const Expr&)>& compute, bool asyncProxy,
                       int inFlight) {
  // Copies run `dist` slices ahead: the slot they fill was last read by the products of
  // slice k.o - 1 - inFlight, finished by every thread before the barrier.
  const int dist = stages - 1 - inFlight;
  if (dist < 1) throw InternalError("lower: a pipeline with no slice ahead");
  Expr lo, hi;
  sliceBounds(split, slices, &lo, &hi);
  Expr ko = ir::var("k.o");
  bool async = false;
  for (const Staged& s : ops) async = async || s.vector > 0;
  auto issue = [&](const Expr& slice, const Expr& stage) {
    std::vector<Stmt> v;
    for (const Staged& s : ops) v.push_back(stageIssue(s, K, r, BK, slice, stage));
    return ir::block(v);
  };
  auto put = [&](const Expr& stage) {
    std::vector<Stmt> v;
    for (const Staged& s : ops)
      if (Stmt x = stagePut(s, BK, stage)) v.push_back(x);
    return v.empty() ? nullptr : ir::block(v);
  };
  auto plus = [](const Expr& e, std::int64_t k) { return e + k; };
  auto below = [&](const Expr& e) { return ir::lt(e, hi); };
  Stmt commit = async ? ir::asyncCommit() : nullptr;
  std::vector<Stmt> prologue;
  for (const Staged& s : ops)
    if (!s.rowTable.empty())
      prologue.push_back(fillRowTable(s, K, r));
    else if (s.tables != Staged::Tables::None)
      prologue.push_back(fillTables(s, K, r, BK));
  if (!prologue.empty()) prologue.push_back(ir::barrier());
  for (int q = 0; q < dist; ++q) {
    Stmt load = issue(plus(lo, q), ir::intImm(q));
    prologue.push_back(q == 0 ? load : ir::ifThen(below(plus(lo, q)), load));
    prologue.push_back(commit);
  }
  prologue.push_back(put(ir::intImm(0)));
  Expr from = ir::sub(ko, lo);
  Expr cur = from % stages;
  Expr ahead = plus(ko, dist);
  const bool registers =
      std::any_of(ops.begin(), ops.end(), [](const Staged& sg) { return sg.vector == 0; });
  Expr next = (from + 1) % stages;
  Stmt body =
      ir::block({async ? ir::asyncWait(dist - 1) : nullptr, ir::barrier(asyncProxy),
                 ir::ifThen(below(ahead), issue(ahead, (from + dist) % stages)), commit,
                 compute(cur), registers ? ir::ifThen(below(plus(ko, 1)), put(next)) : nullptr});
  Stmt loop = ir::block({ir::block(prologue), ir::forLoop("k.o", lo, hi, ForKind::Serial, body),
                         inFlight ? ir::asyncWait(0, true) : nullptr});
  for (const Staged& s : ops)
    if (s.vector == 0) loop = ir::allocate(s.buf + ".v", s.elem, stageReps(s, BK), loop);
  for (const Staged& s : ops) loop = ir::allocate(s.buf, s.elem, stages * s.stageElems, loop, true);
  for (const Staged& s : ops)
    if (!s.rowTable.empty()) {
      loop = ir::allocate(s.rowTable, Type::i32, s.BW, loop, true);
    } else if (s.tables != Staged::Tables::None) {
      for (std::size_t v : s.tables == Staged::Tables::Rows ? s.group : K)
        loop = ir::allocate(s.table(v), Type::i32, tableEntries(s, K, r, BK), loop, true);
    }
  return loop;
}

Expr Lowerer::offsetPart(const CExpr& f, const std::vector<bool>& of, bool constants) const {
  Expr off = ir::intImm(0);
  const auto& stride = ctx_.buffers.strides[static_cast<std::size_t>(f.tensor)];
  for (std::size_t d = 0; d < f.subs.size(); ++d) {
    const Subscript& sub = f.subs[d];
    Expr idx = ir::intImm(constants ? b_.eval(p_, sub.constant) : 0);
    for (std::size_t v = 0; v < sub.coef.size(); ++v)
      if (sub.coef[v] != 0 && of[v])
        idx = ir::add(idx, ir::mul(ir::intImm(sub.coef[v]), varExpr_[v]));
    off = ir::add(off, ir::mul(idx, ir::intImm(stride[d])));
  }
  return off;
}

std::vector<bool> Lowerer::inGroup(const std::vector<std::size_t>& g) const {
  std::vector<bool> in(varExpr_.size(), false);
  for (std::size_t v : g) in[v] = true;
  return in;
}

Stmt Lowerer::fillRowTable(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r) {
  const std::int64_t ext = extentOfGroup(s.group, r);
  Expr w = ir::var("gpu.thread"), gw = ir::add(s.base, w);
  decompose(s.group, r, gw);
  std::vector<bool> rest = inGroup(K);
  rest.flip();
  Expr off = offsetPart(*s.fs[0], rest, true);
  if (ext % s.BW != 0)
    off = ir::select(ir::binary(BinOp::Lt, gw, ir::intImm(ext)), off, ir::intImm(0));
  Stmt fill = ir::store(s.rowTable, w, ir::cast(Type::i32, off));
  return s.BW < Target::gpuTileBlock ? ir::ifThen(ir::binary(BinOp::Lt, w, ir::intImm(s.BW)), fill)
                                     : fill;
}

Stmt Lowerer::fillTables(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r,
                         std::int64_t BK) {
  const bool rows = s.tables == Staged::Tables::Rows;
  const std::vector<std::size_t>& g = rows ? s.group : K;
  const std::int64_t n = tableEntries(s, K, r, BK);
  constexpr std::int64_t threads = Target::gpuTileBlock;
  Expr t = ir::var("gpu.thread"),
       e = ir::add(t, ir::mul(ir::var(s.buf + ".f"), ir::intImm(threads)));
  decompose(g, r, rows ? ir::add(s.base, e) : e);
  std::vector<Stmt> stores;
  for (std::size_t v : g)
    stores.push_back(ir::store(s.table(v), e, ir::cast(Type::i32, varExpr_[v])));
  Stmt body = ir::block(stores);
  if (n % threads != 0) body = ir::ifThen(ir::binary(BinOp::Lt, e, ir::intImm(n)), body);
  return ir::forLoop(s.buf + ".f", ir::intImm(0), ir::intImm((n + threads - 1) / threads),
                     ForKind::Serial, body);
}

std::int64_t Lowerer::tableEntries(const Staged& s, const std::vector<std::size_t>& K,
                                   const Ranges& r, std::int64_t BK) {
  return s.tables == Staged::Tables::Rows ? s.BW : wholeSlices(K, r, BK);
}

std::int64_t Lowerer::wholeSlices(const std::vector<std::size_t>& K, const Ranges& r,
                                  std::int64_t BK) {
  return (extentOfGroup(K, r) + BK - 1) / BK * BK;
}

} // namespace einjit::codegen::lowering
