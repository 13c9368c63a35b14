// Row blocks on the CPU (schedule/RowBlocks.h): the statements of a run, each lowered by its own
// schedule over one block of rows, one after another inside one parallel loop over task groups
// of blocks.
#include "codegen/lower/Lowerer.h"

#include <set>

namespace einjit::codegen::lowering {

namespace {

// Every loop serial: a statement's own parallel loop runs inside a block.
class Serialize : public ir::Mutator {
public:
  Stmt mutateFor(const Stmt& self, const ir::For& n) override {
    Stmt body = mutate(n.body);
    if (n.forKind != ForKind::Parallel && body == n.body) return self;
    return ir::forLoop(n.var, n.lo, n.hi,
                       n.forKind == ForKind::Parallel ? ForKind::Serial : n.forKind, body, n.width);
  }
};

// The loads of `e` whose buffer is one of `inputs` and whose index depends on `row`, each
// index once.
class RowInputLoads : public ir::Visitor {
public:
  RowInputLoads(const std::set<std::string>& inputs, std::string row)
      : inputs_(inputs), row_(std::move(row)) {}
  std::vector<std::pair<std::string, Expr>> found;
  void visitLoad(const ir::Load& n) override {
    if (inputs_.count(n.buffer) && ir::dependsOn(n.index, row_)) {
      const std::string key = n.buffer + " " + ir::print(n.index);
      if (seen_.insert(key).second) found.emplace_back(n.buffer, n.index);
    }
    Visitor::visitLoad(n);
  }

private:
  const std::set<std::string>& inputs_;
  std::string row_;
  std::set<std::string> seen_;
};

} // namespace

auto Lowerer::statementRanges(const BoundStatement& bs) const -> Ranges {
  Ranges r = rangesOf(bs);
  if (ctx_.rows.var >= 0) r[static_cast<std::size_t>(ctx_.rows.var)] = {0, ctx_.rows.rows};
  return r;
}

Stmt Lowerer::rowBlockBody(const RowPlan& plan, const RowRun& run, const FusionPlan& fusion,
                           std::int64_t rows, const Expr& base, const Expr& slot,
                           const Expr& sumSlot, const std::vector<std::int64_t>& blockElems) {
  std::vector<Stmt> parts;
  const std::size_t funcs = out_.funcs.size();
  for (std::size_t k = run.first; k <= run.last; ++k) {
    if (!run.member(k) && !run.summed(k)) continue; // deferred: after the run (rowBlocks)
    RowBlockContext rc;
    rc.var = plan.rowVar[k];
    rc.rows = rows;
    rc.lo = run.lo;
    rc.hi = run.hi;
    rc.base = base;
    rc.slot = slot;
    rc.blockElems = blockElems;
    for (std::size_t j = k; j <= (fusion.fused(k) ? fusion.last[k] : k); ++j) {
      if (run.streams(j)) rc.streamed.push_back(&p_.stmts[j]);
      if (run.forwards(j)) rc.forwarded.push_back(&p_.stmts[j]);
      if (const int o = run.stores(j); o >= 0) {
        rc.storesBy = &p_.stmts[j];
        rc.storesBuffer = p_.tensors[static_cast<std::size_t>(o)].name;
      }
    }
    if (run.summed(k)) {
      rc.sumOutput = p_.stmts[k].output;
      rc.sumElems = elementsOf(rc.sumOutput);
      rc.sumSlot = sumSlot;
    }
    if (const RowRun::Loop* loop = run.loopAt(k)) {
      rowLoop(plan, run, *loop, rc);
      k = loop->last;
      continue;
    }
    const Scoped<RowBlockContext> inRows(ctx_.rows, std::move(rc));
    stmt_ = k;
    if (fusion.fused(k) && fusion.first[k] != k && fusion.last[k] == k) {
      statement(k); // the last of an element-wise group whose others ended a row loop
    } else if (fusion.fused(k) && fusion.first[k] != k) {
      // The rest of an element-wise group whose first statements ended a row loop.
      fusedStatements(k, fusion.last[k], "fused with the statements after it");
      for (std::size_t j = k + 1; j <= fusion.last[k]; ++j) out_.notes.push_back(fusion.notes[j]);
      k = fusion.last[k];
    } else if (fusion.fused(k)) {
      fusedStatements(k, fusion.last[k], fusion.notes[k]);
      for (std::size_t j = k + 1; j <= fusion.last[k]; ++j) out_.notes.push_back(fusion.notes[j]);
      k = fusion.last[k];
    } else {
      statement(k);
    }
  }
  Serialize serial;
  for (std::size_t f = funcs; f < out_.funcs.size(); ++f)
    parts.push_back(serial.mutate(out_.funcs[f].body));
  out_.funcs.resize(funcs);
  return parts.empty() ? nullptr : ir::block(parts);
}

void Lowerer::rowBlocks(const RowPlan& plan, std::size_t index, const FusionPlan& fusion) {
  const RowRun& run = plan.runs[index];
  const std::string name = "rows" + std::to_string(run.first);
  const std::size_t notes = out_.notes.size();
  {
    // The run's scratch tensors are addressed in the task group's block of the scratch.
    const Scoped<BufferMap> redirected(ctx_.buffers, ctx_.buffers);
    std::vector<std::int64_t> blockElems(p_.tensors.size(), 0);
    for (int t : run.scratch) {
      const auto u = static_cast<std::size_t>(t);
      std::int64_t perRow = 1;
      const auto& shape = b_.tensors[u].shape;
      for (std::size_t d = 1; d < shape.size(); ++d) perRow *= shape[d];
      blockElems[u] = perRow * run.blockRows;
      ctx_.buffers.names[u] = name + "." + p_.tensors[u].name;
      out_.scratch.push_back({ctx_.buffers.names[u], elemType(t), blockElems[u] * run.groups});
    }
    // The column sums' partial sums, one per task group and one for the tail block, in
    // scratch; their stores go there (RowBlockContext::sumOutput).
    for (std::size_t k : run.sums) {
      const int t = p_.stmts[k].output;
      const auto u = static_cast<std::size_t>(t);
      ctx_.buffers.names[u] = name + ".sum." + p_.tensors[u].name;
      ctx_.buffers.aligned[u] = elementsOf(t) * ir::typeBytes(elemType(t)) % 64 == 0;
      out_.scratch.push_back({ctx_.buffers.names[u], elemType(t), elementsOf(t) * run.partialSlots()});
    }
    // Zeroes partial sum `at` of every column sum.
    auto zeroSums = [&](const Expr& at) {
      std::vector<Stmt> zero;
      for (std::size_t k : run.sums) {
        const int t = p_.stmts[k].output;
        const std::int64_t n = elementsOf(t);
        const std::string e = "rows.z" + std::to_string(k);
        zero.push_back(ir::forLoop(
            e, ir::intImm(0), ir::intImm(n), ForKind::Serial,
            ir::store(bufferName(t), ir::add(ir::mul(at, ir::intImm(n)), ir::var(e)),
                      ir::cast(elemType(t), num(0)))));
      }
      return zero;
    };
    const std::int64_t full = run.fullBlocks(), B = run.blockRows, G = run.groups;
    if (full > 0) {
      // Group g runs blocks [g * full / G, (g + 1) * full / G), in its own scratch slot g.
      const std::string g = "rows.g", blk = "rows.b";
      const Expr base = ir::add(ir::intImm(run.lo), ir::mul(ir::var(blk), ir::intImm(B)));
      Stmt body = rowBlockBody(plan, run, fusion, B, base, ir::var(g), ir::var(g), blockElems);
      ir::Func f = newFunc(name);
      if (body) {
        auto bound = [&](const Expr& at) {
          return ir::binary(BinOp::FloorDiv, ir::mul(at, ir::intImm(full)), ir::intImm(G));
        };
        body = ir::forLoop(blk, bound(ir::var(g)), bound(ir::add(ir::var(g), ir::intImm(1))),
                           ForKind::Serial, body);
        std::vector<Stmt> group = zeroSums(ir::var(g));
        group.push_back(body);
        body = ir::block(group);
        f.body = ir::forLoop(g, ir::intImm(0), ir::intImm(G),
                             G > 1 ? ForKind::Parallel : ForKind::Serial, body);
        f.parallel = G > 1;
        f.parallelLo = 0;
        f.parallelHi = G;
        f.grain = 1;
        out_.funcs.push_back(std::move(f));
      }
    }
    if (run.tailRows() > 0) {
      // The last, partial block, after every group has finished (slot 0 is free again).
      const Expr base = ir::intImm(run.lo + full * B);
      Stmt body = rowBlockBody(plan, run, fusion, run.tailRows(), base, ir::intImm(0),
                               ir::intImm(G), blockElems);
      if (body) {
        ir::Func f = newFunc(name + "_tail");
        std::vector<Stmt> tail = zeroSums(ir::intImm(G));
        tail.push_back(body);
        f.body = ir::block(tail);
        out_.funcs.push_back(std::move(f));
      }
    }
  }
  // One note per member (each block's lowering wrote them), with the run's.
  const std::size_t members = run.last - run.first + 1 - run.deferred.size();
  out_.notes.resize(notes + members);
  std::vector<std::string> memberNotes(out_.notes.begin() + static_cast<std::ptrdiff_t>(notes),
                                       out_.notes.end());
  out_.notes.resize(notes);
  // The deferred statements and the column sums' combines, in their order, each deferred one by
  // its own schedule (fusion groups with them were dissolved: Lower.cpp).
  std::vector<std::string> deferredNotes;
  for (std::size_t k = run.first; k <= run.last; ++k) {
    if (run.summed(k)) {
      combineSums(run, k, name);
      continue;
    }
    if (run.member(k)) continue;
    stmt_ = k;
    statement(k);
    deferredNotes.push_back(rowRunNote(plan, k, out_.notes.back()));
    out_.notes.pop_back();
  }
  // The notes in statement order.
  std::size_t m = 0, d = 0;
  for (std::size_t k = run.first; k <= run.last; ++k) {
    if (!run.member(k) && !run.summed(k)) {
      out_.notes.push_back(deferredNotes[d++]);
      continue;
    }
    out_.notes.push_back(rowRunNote(plan, k, memberNotes[m++]));
  }
}

void Lowerer::rowLoop(const RowPlan& plan, const RowRun& run, const RowRun::Loop& loop,
                      const RowBlockContext& block) {
  const std::size_t first = loop.first, last = loop.last;
  for (std::size_t k = first; k <= last; ++k) {
    const StatementSchedule sched = scheduleStatement(p_, b_, k, ctx_.buffers.strides, target_);
    zeroFillUncovered(k, sched);
    out_.notes.push_back(sched.why);
  }
  const int W = vectorWidth();
  const std::int64_t U = loop.chains;
  const auto col0 = static_cast<std::size_t>(1 - plan.rowVar[first]);
  const std::int64_t lc = b_.stmts[first].lo[col0], hc = b_.stmts[first].hi[col0];
  // Whole steps of U vectors, then whole vectors, then the remaining elements.
  const std::int64_t vecs = (hc - lc) / W, steps = vecs / U, rv = lc + steps * U * W,
                     rm = lc + vecs * W;
  const std::string r = "rl.r", co = "cl.o", cu = "cl.u", ci = "cl.i", cv = "cl.v", ct = "cl.t";
  auto accName = [](std::size_t k) { return "acc" + std::to_string(k); };
  auto reduces = [&](std::size_t k) { return p_.stmts[k].numOutputVars() == 1; };
  const RowBlockContext saved = ctx_.rows;
  // Statement k's context (its row index, its stores) and index values.
  auto enter = [&](std::size_t k, const Expr& col) {
    RowBlockContext rc = block;
    rc.var = plan.rowVar[k];
    rc.streamed.clear();
    if (run.streams(k)) rc.streamed.push_back(&p_.stmts[k]);
    rc.forwarded.clear();
    if (run.forwards(k)) rc.forwarded.push_back(&p_.stmts[k]);
    rc.storesBy = nullptr;
    if (const int o = run.stores(k); o >= 0) {
      rc.storesBy = &p_.stmts[k];
      rc.storesBuffer = p_.tensors[static_cast<std::size_t>(o)].name;
    }
    ctx_.rows = rc;
    stmt_ = k;
    setRanges(p_.stmts[k], statementRanges(b_.stmts[k]));
    varExpr_[static_cast<std::size_t>(rc.var)] = ir::var(r);
    if (col) varExpr_[static_cast<std::size_t>(1 - rc.var)] = col;
  };
  // Every statement's update of one element (col), the reductions' into their lanes at `slot`.
  auto element = [&](const Expr& col, const Expr& slot) -> Stmt {
    std::vector<Stmt> parts;
    ctx_.forwarded.clear(); // (the values of another column expression's elements)
    for (std::size_t k = first; k <= last; ++k) {
      enter(k, col);
      const Statement& st = p_.stmts[k];
      Stmt s;
      if (reduces(k)) {
        const Expr a = ir::load(vt_, accName(k), slot);
        s = ir::store(accName(k), slot, combine(st.reduce, a, value(*st.rhs)));
      } else {
        s = storeOutput(st, st.reduce == Reduce::Max || st.reduce == Reduce::Min
                                ? combine(st.reduce, identity(st.reduce), value(*st.rhs))
                                : value(*st.rhs));
      }
      if (s) parts.push_back(s);
    }
    return parts.empty() ? Stmt{} : ir::block(parts);
  };
  auto vector = [&](const std::string& v, Stmt body) {
    return ir::forLoop(v, ir::intImm(0), ir::intImm(W), ForKind::Vectorized, std::move(body), W);
  };
  std::vector<Stmt> all;
  for (std::size_t k = first; k <= last; ++k)
    if (reduces(k))
      all.push_back(ir::forLoop(cu, ir::intImm(0), ir::intImm(U), ForKind::Unrolled,
                                vector(ci, ir::store(accName(k),
                                                     ir::add(ir::mul(ir::var(cu), ir::intImm(W)),
                                                             ir::var(ci)),
                                                     identity(p_.stmts[k].reduce)))));
  if (steps > 0) {
    const Expr col = ir::add(
        ir::intImm(lc),
        ir::add(ir::mul(ir::add(ir::mul(ir::var(co), ir::intImm(U)), ir::var(cu)), ir::intImm(W)),
                ir::var(ci)));
    if (Stmt e = element(col, ir::add(ir::mul(ir::var(cu), ir::intImm(W)), ir::var(ci)))) {
      Stmt step = vector(ci, e);
      if (Stmt ahead = prefetchNextBlock(loop, block, e, r, ci)) step = ir::block({ahead, step});
      all.push_back(ir::forLoop(co, ir::intImm(0), ir::intImm(steps), ForKind::Serial,
                                ir::forLoop(cu, ir::intImm(0), ir::intImm(U), ForKind::Unrolled,
                                            step)));
    }
  }
  if (rv < rm)
    if (Stmt e = element(ir::add(ir::intImm(rv), ir::add(ir::mul(ir::var(cv), ir::intImm(W)),
                                                          ir::var(ci))),
                         ir::var(ci)))
      all.push_back(ir::forLoop(cv, ir::intImm(0), ir::intImm((rm - rv) / W), ForKind::Serial,
                                vector(ci, e)));
  if (rm < hc)
    if (Stmt e = element(ir::var(ct), ir::intImm(0)))
      all.push_back(ir::forLoop(ct, ir::intImm(rm), ir::intImm(hc), ForKind::Serial, e));
  // The partial results combined: the U vectors lane by lane in order, then the lanes (sums
  // pairwise, extremes folded in lane order, as the dot-product tile does).
  for (std::size_t k = first; k <= last; ++k) {
    if (!reduces(k)) continue;
    const Statement& st = p_.stmts[k];
    enter(k, nullptr);
    auto lane = [&](std::int64_t l) { return ir::load(vt_, accName(k), ir::intImm(l)); };
    std::vector<Expr> lanes;
    for (int l = 0; l < W; ++l) {
      Expr v = lane(l);
      for (std::int64_t u = 1; u < U; ++u) v = combine(st.reduce, v, lane(u * W + l));
      lanes.push_back(v);
    }
    Expr result;
    Stmt fold;
    if (st.reduce == Reduce::Add) {
      result = combineTree(st.reduce, std::move(lanes));
    } else {
      // A comparison's select reads both operands twice: statements, not one expression.
      const std::string fl = "cl.l";
      result = lane(0);
      fold = ir::forLoop(fl, ir::intImm(1), ir::intImm(U * W), ForKind::Unrolled,
                         ir::store(accName(k), ir::intImm(0),
                                   combine(st.reduce, result,
                                           ir::load(vt_, accName(k), ir::var(fl)))));
    }
    all.push_back(fold);
    all.push_back(storeOutput(st, result));
  }
  ctx_.rows = saved;
  ctx_.forwarded.clear();
  Stmt body = ir::block(all);
  for (std::size_t k = last + 1; k-- > first;)
    if (reduces(k)) body = ir::allocate(accName(k), vt_, U * W, body);
  ir::Func f = newFunc("s" + std::to_string(first));
  f.body = ir::forLoop(r, ir::intImm(0), ir::intImm(block.rows), ForKind::Serial, body);
  out_.funcs.push_back(std::move(f));
}

// The row loop's step reads its inputs one vector at a time along the row; the plan's
// `ahead` inputs (RowRun::Loop::ahead) get a hint for the same vector of the next block (the
// row `rows` further on), so that the next block's first pass over its rows (a row maximum:
// only loads) finds them in L2 instead of waiting on memory. The last block's hints point past
// its rows: a prefetch never faults.
Stmt Lowerer::prefetchNextBlock(const RowRun::Loop& loop, const RowBlockContext& block,
                                const Stmt& e, const std::string& row,
                                const std::string& lane) const {
  std::set<std::string> inputs;
  for (int t : loop.ahead) inputs.insert(bufferName(t));
  RowInputLoads loads(inputs, row);
  loads.visit(e);
  std::vector<Stmt> hints;
  for (const auto& [buffer, index] : loads.found)
    hints.push_back(ir::prefetch(
        buffer,
        ir::substitute(ir::substitute(index, lane, ir::intImm(0)), row,
                       ir::add(ir::var(row), ir::intImm(block.rows))),
        /*ahead=*/true));
  return hints.empty() ? nullptr : ir::block(hints);
}

// The column sum k's output: its partial sums added in slot order (the task groups', then the
// tail block's), element by element; the output is dense (RowBlocks.cpp, notColumnSum).
void Lowerer::combineSums(const RowRun& run, std::size_t k, const std::string& name) {
  const int t = p_.stmts[k].output;
  const auto u = static_cast<std::size_t>(t);
  const std::int64_t n = elementsOf(t);
  const std::string partial = name + ".sum." + p_.tensors[u].name, e = "rows.e";
  const Type et = elemType(t);
  Expr sum = num(0);
  for (std::int64_t s = 0; s < run.partialSlots(); ++s) {
    if (s < run.groups ? run.fullBlocks() == 0 : run.tailRows() == 0) continue; // never ran
    sum = ir::add(sum, ir::cast(vt_, ir::load(et, partial, ir::add(ir::intImm(s * n), ir::var(e)))));
  }
  ir::Func f = newFunc(name + "_sum" + std::to_string(k));
  f.body = ir::forLoop(e, ir::intImm(0), ir::intImm(n), ForKind::Serial,
                       ir::store(bufferName(t), ir::var(e), ir::cast(et, sum)));
  out_.funcs.push_back(std::move(f));
}

} // namespace einjit::codegen::lowering
