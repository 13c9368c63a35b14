#include "codegen/Lower.h"

#include "einjit/Error.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

namespace einjit::codegen {

using namespace einjit::dsl;
using ir::BinOp;
using ir::Expr;
using ir::ForKind;
using ir::Stmt;
using ir::Type;

namespace {

Type irType(DType t) {
  switch (t) {
  case DType::f32: return Type::f32;
  case DType::f64: return Type::f64;
  case DType::i32: return Type::i32;
  case DType::i64: return Type::i64;
  case DType::bf16: return Type::bf16;
  }
  return Type::f32;
}

struct Interval {
  bool known = true;
  std::int64_t lo = 0, hi = 0; // inclusive
};

class Lowerer {
public:
  Lowerer(const Program& p, const BoundProgram& b, const Strides& s, const Target& t,
          const Aligned16& a)
      : p_(p), b_(b), strides_(s), target_(t), aligned_(a), vt_(irType(computeDType(b.dtype))) {
    for (const auto& tensor : p.tensors) names_.push_back(tensor.name);
    aligned_.resize(p.tensors.size(), false);
  }

  LoweredProgram run() {
    for (std::size_t k = 0; k < p_.stmts.size(); ++k) {
      stmt_ = k;
      statement(k);
    }
    hoistChecks();
    for (ir::Func& f : out_.funcs) {
      for (const ScratchBuffer& b : out_.scratch) f.buffers.push_back({b.name, b.elem});
      ir::verify(f);
    }
    out_.checked = checked_;
    return std::move(out_);
  }

private:
  const Program& p_;
  const BoundProgram& b_;
  // Per tensor id: the buffer its accesses go to, its strides and alignment; a statement may
  // redirect a tensor to a re-laid-out scratch copy for its lowering (relayoutTiled).
  Strides strides_;
  const Target& target_;
  Aligned16 aligned_;
  std::vector<std::string> names_;
  Type vt_;
  LoweredProgram out_;
  bool checked_ = false;
  // The subscripts checked at run time, per statement (hoistChecks); unhoistable_: some check
  // was made that hoistChecks cannot repeat (of a rewritten statement, or a floating-point
  // gather index).
  struct CheckedSub {
    std::size_t stmt;
    const CExpr* access;
    std::size_t dim;
  };
  std::vector<CheckedSub> checkedSubs_;
  bool unhoistable_ = false, hoisting_ = false;
  std::size_t stmt_ = 0; // the statement being lowered
  bool trustPlain_ = false;
  bool atomic_ = false; // storeOutput adds atomically (see atomicScatter)
  std::string wide_;    // ... into this f32 copy of a bf16 output (beginWideScatter)
  // While a residue phase of a statement is lowered (phaseTiles): slot `out` holds q with the
  // original index u = g*q + rho, and slot `red` holds m with the original h = a*q + m.
  struct PhaseSub {
    std::size_t out = 0, red = 0;
    std::int64_t g = 1, rho = 0, a = 0;
    std::int64_t hullLo = 0, hullHi = 0; // h's original hull
  };
  std::vector<PhaseSub> phase_;                //
                                               // see stageIssue
  const BoundStatement* maskBounds_ = nullptr; // the masked tile's statement
  // Per index variable of the current statement: its value as IR, and its range (hull,
  // inclusive) for proving accesses in bounds.
  std::vector<Expr> varExpr_;
  std::vector<Interval> varRange_;
  // Indices that setRanges binds to their only value (a GPU tile's indices of one value).
  std::vector<bool> pinned_;
  int kLast_ = -1; // the reduction index a GPU tile runs last (relayoutTiled), or -1

  const std::string& bufferName(int t) const { return names_[static_cast<std::size_t>(t)]; }
  Type elemType(int t) const { return irType(b_.tensors[static_cast<std::size_t>(t)].dtype); }
  std::int64_t extentOf(int t, std::size_t d) const {
    return b_.tensors[static_cast<std::size_t>(t)].shape[d];
  }
  Expr num(double v) const { return ir::floatImm(vt_, v); }
  Expr truth(Expr cond) const { return ir::select(std::move(cond), num(1), num(0)); }
  Expr nonzero(Expr v) const { return ir::binary(BinOp::Ne, std::move(v), num(0)); }

  // --- accesses ------------------------------------------------------------------------------

  Interval interval(const Subscript& s, std::int64_t constant) const {
    Interval r{true, constant, constant};
    if (s.gather) return {false, 0, 0};
    for (std::size_t v = 0; v < s.coef.size(); ++v) {
      std::int64_t c = s.coef[v];
      if (c == 0) continue;
      const Interval& x = varRange_[v];
      if (!x.known) return {false, 0, 0};
      std::int64_t a = c * x.lo, e = c * x.hi;
      r.lo += std::min(a, e);
      r.hi += std::max(a, e);
    }
    return r;
  }

  // Whether subscript d of read e stays inside its dimension over the current ranges.
  bool subscriptInBounds(const CExpr& e, std::size_t d) const {
    const Subscript& sub = e.subs[d];
    const Interval iv = interval(sub, b_.eval(p_, sub.constant));
    return iv.known && iv.lo >= 0 && iv.hi < extentOf(e.tensor, d);
  }

  // The element offset of an access; `inside` collects the conditions of padded dimensions;
  // `dropped` is set when a padded or folded dimension has extent 0 (nothing is read/written).
  Expr offset(const CExpr& acc, Expr* inside, bool* dropped) {
    Expr off = ir::intImm(0);
    const auto& stride = strides_[static_cast<std::size_t>(acc.tensor)];
    for (std::size_t d = 0; d < acc.subs.size(); ++d) {
      const Subscript& s = acc.subs[d];
      const std::int64_t e = extentOf(acc.tensor, d);
      const std::int64_t c = b_.eval(p_, s.constant);
      Expr idx = subscriptIndex(s);
      Interval r = interval(s, c);
      const bool proven = (r.known && r.lo >= 0 && r.hi < e) ||
                          (trustPlain_ && s.mode == IndexMode::Plain && !s.gather && e > 0);
      if (!proven) {
        if (e == 0) {
          if (s.mode == IndexMode::Plain) {
            idx = ir::check(ir::intImm(-1), 1); // always outside: the interpreter reports it
            noteCheck(acc, d);
          }
          *dropped = true;
        } else {
          switch (s.mode) {
          case IndexMode::Plain:
            idx = ir::check(idx, e);
            noteCheck(acc, d);
            break;
          case IndexMode::Pad: {
            Expr in = ir::binary(BinOp::And, ir::binary(BinOp::Ge, idx, ir::intImm(0)),
                                 ir::binary(BinOp::Lt, idx, ir::intImm(e)));
            *inside = *inside ? ir::binary(BinOp::And, *inside, in) : in;
            idx = clampIndex(idx, e);
            break;
          }
          case IndexMode::Clamp: idx = clampIndex(idx, e); break;
          case IndexMode::Wrap: idx = ir::binary(BinOp::EMod, idx, ir::intImm(e)); break;
          }
        }
      }
      off = ir::add(off, ir::mul(idx, ir::intImm(stride[d])));
    }
    return off;
  }

  // Subscript s as an index (unchecked).
  Expr subscriptIndex(const Subscript& s) {
    Expr idx = ir::intImm(b_.eval(p_, s.constant));
    for (std::size_t v = 0; v < s.coef.size(); ++v)
      if (s.coef[v] != 0) idx = ir::add(idx, ir::mul(ir::intImm(s.coef[v]), varExpr_[v]));
    if (s.gather) idx = ir::add(idx, gatherIndex(*s.gather));
    return idx;
  }

  // The value of a gather index tensor as an i64. Integer tensors convert exactly; a
  // floating-point one (an intermediate computed by the program) must hold integers: any other
  // value sets the status, and the interpreter reports it.
  Expr gatherIndex(const CExpr& g) {
    Expr v = read(g, false);
    if (!ir::isFloat(v->type)) return ir::cast(Type::i64, v);
    Expr big = ir::floatImm(v->type, 1e15);
    Expr integral = ir::binary(BinOp::And, ir::binary(BinOp::Eq, ir::call(Fn::Floor, {v}), v),
                               ir::binary(BinOp::Lt, ir::call(Fn::Abs, {v}), big));
    checked_ = true;
    unhoistable_ = true;
    Expr flag = ir::check(ir::select(integral, ir::intImm(0), ir::intImm(-1)), 1);
    return ir::add(ir::cast(Type::i64, v), flag);
  }

  // --- access checks hoisted ahead of the program (Lower.h) ----------------------------------

  // A subscript checked at run time: recorded for hoistChecks when it belongs to the statement
  // being lowered (a residue phase's rewritten copy does not: nothing is hoisted then).
  void noteCheck(const CExpr& access, std::size_t dim) {
    checked_ = true;
    if (hoisting_) return;
    const Statement& st = p_.stmts[stmt_];
    if (!holds(*st.lhs, &access) && !holds(*st.rhs, &access)) {
      unhoistable_ = true;
      return;
    }
    for (const CheckedSub& c : checkedSubs_)
      if (c.access == &access && c.dim == dim) return;
    checkedSubs_.push_back({stmt_, &access, dim});
  }
  static bool holds(const CExpr& e, const CExpr* node) {
    if (&e == node) return true;
    for (const Subscript& s : e.subs)
      if (s.gather && holds(*s.gather, node)) return true;
    for (const CExprPtr& a : e.args)
      if (holds(*a, node)) return true;
    return false;
  }
  // The indices a subscript reads (through its gathers too), and the tensors its gathers read.
  static void subscriptUses(const Subscript& s, std::vector<bool>& vars, std::vector<int>& reads) {
    for (std::size_t v = 0; v < s.coef.size(); ++v)
      if (s.coef[v] != 0) vars[v] = true;
    if (!s.gather) return;
    reads.push_back(s.gather->tensor);
    for (const Subscript& g : s.gather->subs) subscriptUses(g, vars, reads);
  }

  // The checked subscripts as functions of their own, first in the program, when each reads
  // only indices of fixed ranges and tensors no statement writes (their values are then those
  // the statements see); otherwise nothing is hoisted. One function per subscript: a GPU
  // thread, or a CPU loop iteration, per point of the box of its indices.
  void hoistChecks() {
    if (!checked_ || unhoistable_) return;
    std::vector<std::vector<std::size_t>> boxes;
    for (const CheckedSub& c : checkedSubs_) {
      const Statement& st = p_.stmts[c.stmt];
      std::vector<bool> vars(st.vars.size(), false);
      std::vector<int> reads;
      subscriptUses(c.access->subs[c.dim], vars, reads);
      for (int t : reads)
        if (!p_.tensors[static_cast<std::size_t>(t)].writtenBy.empty()) return;
      std::vector<std::size_t> box;
      for (std::size_t v = 0; v < vars.size(); ++v) {
        if (!vars[v]) continue;
        if (b_.stmts[c.stmt].dependent[v]) return;
        box.push_back(v);
      }
      boxes.push_back(std::move(box));
    }
    std::vector<ir::Func> funcs;
    hoisting_ = true;
    for (std::size_t i = 0; i < checkedSubs_.size(); ++i) {
      const CheckedSub& c = checkedSubs_[i];
      const Statement& st = p_.stmts[c.stmt];
      const BoundStatement& bs = b_.stmts[c.stmt];
      const Ranges r = rangesOf(bs);
      if (extentOfGroup(boxes[i], r) <= 0) continue; // never reached
      setRanges(st, r);
      ir::Func f = newFunc("s" + std::to_string(c.stmt) + "_check" + std::to_string(i));
      auto check = [&] {
        const std::int64_t e = extentOf(c.access->tensor, c.dim);
        return ir::evaluate(e == 0 ? ir::check(ir::intImm(-1), 1)
                                   : ir::check(subscriptIndex(c.access->subs[c.dim]), e));
      };
      if (target_.gpu) {
        f.body = threadPerPoint(boxes[i], r, [&](Expr&) { return check(); });
      } else {
        Stmt body = check();
        for (std::size_t q = boxes[i].size(); q-- > 0;)
          body = loopOver(bs, st, boxes[i][q], r, ForKind::Serial, body);
        f.body = body;
      }
      funcs.push_back(std::move(f));
    }
    hoisting_ = false;
    out_.checks = funcs.size();
    out_.prechecked = true;
    out_.funcs.insert(out_.funcs.begin(), std::make_move_iterator(funcs.begin()),
                      std::make_move_iterator(funcs.end()));
  }

  static Expr clampIndex(Expr idx, std::int64_t e) {
    return ir::binary(BinOp::Min, ir::binary(BinOp::Max, std::move(idx), ir::intImm(0)),
                      ir::intImm(e - 1));
  }

  // A tensor read: as a value (converted to the value type) or raw (gather indices).
  Expr read(const CExpr& e, bool asValue) {
    Expr inside;
    bool dropped = false;
    Expr off = offset(e, &inside, &dropped);
    Type et = elemType(e.tensor);
    if (dropped) return asValue ? num(0) : ir::intImm(0);
    Expr v = ir::load(et, bufferName(e.tensor), off);
    if (!asValue) return v;
    v = ir::cast(vt_, v);
    if (inside) v = ir::select(inside, v, num(0));
    return v;
  }

  Expr value(const CExpr& e) {
    auto arg = [&](std::size_t i) { return value(*e.args[i]); };
    switch (e.kind) {
    case CKind::Const: return num(e.value);
    case CKind::Index: return ir::cast(vt_, varExpr_[static_cast<std::size_t>(e.var)]);
    case CKind::Param: return ir::param(vt_, e.param);
    case CKind::Size:
      return num(static_cast<double>(extentOf(e.tensor, static_cast<std::size_t>(e.dim))));
    case CKind::Read: return read(e, true);
    case CKind::Unary:
      if (e.unop == UnOp::Neg) return ir::unary(ir::UnOp::Neg, arg(0));
      return truth(ir::binary(BinOp::Eq, arg(0), num(0)));
    case CKind::Binary: {
      Expr a = arg(0), b = arg(1);
      switch (e.binop) {
      case dsl::BinOp::Add: return ir::binary(BinOp::Add, a, b);
      case dsl::BinOp::Sub: return ir::binary(BinOp::Sub, a, b);
      case dsl::BinOp::Mul: return ir::binary(BinOp::Mul, a, b);
      case dsl::BinOp::Div: return ir::binary(BinOp::Div, a, b);
      case dsl::BinOp::Mod: return ir::binary(BinOp::Mod, a, b);
      case dsl::BinOp::Pow: return ir::binary(BinOp::Pow, a, b);
      case dsl::BinOp::Lt: return truth(ir::binary(BinOp::Lt, a, b));
      case dsl::BinOp::Le: return truth(ir::binary(BinOp::Le, a, b));
      case dsl::BinOp::Gt: return truth(ir::binary(BinOp::Gt, a, b));
      case dsl::BinOp::Ge: return truth(ir::binary(BinOp::Ge, a, b));
      case dsl::BinOp::Eq: return truth(ir::binary(BinOp::Eq, a, b));
      case dsl::BinOp::Ne: return truth(ir::binary(BinOp::Ne, a, b));
      case dsl::BinOp::And: return truth(ir::binary(BinOp::And, nonzero(a), nonzero(b)));
      case dsl::BinOp::Or: return truth(ir::binary(BinOp::Or, nonzero(a), nonzero(b)));
      }
      throw InternalError("lower: binary operator");
    }
    case CKind::Ternary: return ir::select(nonzero(arg(0)), arg(1), arg(2));
    case CKind::Call: {
      switch (e.fn) {
      case Fn::ToF32: return ir::cast(vt_, ir::cast(Type::f32, arg(0)));
      case Fn::ToF64: return arg(0);
      case Fn::ToI32: return ir::cast(vt_, ir::cast(Type::i32, arg(0)));
      case Fn::ToI64: return ir::cast(vt_, ir::cast(Type::i64, arg(0)));
      case Fn::Min: return ir::binary(BinOp::Min, arg(0), arg(1));
      case Fn::Max: return ir::binary(BinOp::Max, arg(0), arg(1));
      case Fn::FDiv: return ir::call(Fn::Floor, {ir::binary(BinOp::Div, arg(0), arg(1))});
      case Fn::CDiv: return ir::call(Fn::Ceil, {ir::binary(BinOp::Div, arg(0), arg(1))});
      default: {
        std::vector<Expr> args;
        for (std::size_t i = 0; i < e.args.size(); ++i) args.push_back(arg(i));
        return ir::call(e.fn, std::move(args));
      }
      }
    }
    }
    throw InternalError("lower: expression kind");
  }

  // --- reductions ----------------------------------------------------------------------------

  Expr identity(Reduce r) const {
    switch (r) {
    case Reduce::Add: return num(0);
    case Reduce::Mul: return num(1);
    case Reduce::Max: return num(-std::numeric_limits<double>::infinity());
    case Reduce::Min: return num(std::numeric_limits<double>::infinity());
    }
    return num(0);
  }

  // Strict comparisons keep the first extreme; NaN never replaces the accumulator.
  static Expr combine(Reduce r, const Expr& acc, const Expr& v) {
    switch (r) {
    case Reduce::Add: return ir::binary(BinOp::Add, acc, v);
    case Reduce::Mul: return ir::binary(BinOp::Mul, acc, v);
    case Reduce::Max: return ir::select(ir::binary(BinOp::Gt, v, acc), v, acc);
    case Reduce::Min: return ir::select(ir::binary(BinOp::Lt, v, acc), v, acc);
    }
    return acc;
  }

  // Writes the reduced value v of the current output element.
  Stmt storeOutput(const Statement& st, const Expr& v) {
    Expr inside;
    bool dropped = false;
    Expr off = offset(*st.lhs, &inside, &dropped);
    if (dropped) return nullptr;
    const std::string& name = bufferName(st.output);
    Type et = elemType(st.output);
    Expr val = v;
    Stmt s;
    if (atomic_) // a bf16 output's adds are f32 (into its wide copy, when it has one)
      s = ir::atomicAdd(wide_.empty() ? name : wide_, off,
                        ir::cast(et == Type::bf16 ? Type::f32 : et, v));
    else if (st.assign == Assign::Accumulate)
      val = combine(st.reduce, ir::cast(vt_, ir::load(et, name, off)), v);
    if (!s) s = ir::store(name, off, ir::cast(et, val));
    return inside ? ir::ifThen(inside, s) : s;
  }

  Expr boundExpr(const ConcreteBound& c) const {
    switch (c.kind) {
    case IndexBound::Kind::Affine: {
      Expr e = ir::intImm(c.constant);
      for (auto [v, k] : c.terms)
        e = ir::add(e, ir::mul(ir::intImm(k), varExpr_[static_cast<std::size_t>(v)]));
      return e;
    }
    case IndexBound::Kind::Max:
    case IndexBound::Kind::Min: {
      Expr e = boundExpr(c.args[0]);
      BinOp op = c.kind == IndexBound::Kind::Max ? BinOp::Max : BinOp::Min;
      for (std::size_t i = 1; i < c.args.size(); ++i) e = ir::binary(op, e, boundExpr(c.args[i]));
      return e;
    }
    case IndexBound::Kind::FDiv:
      return ir::binary(BinOp::FloorDiv, boundExpr(c.args[0]), ir::intImm(c.divisor));
    case IndexBound::Kind::CDiv:
      return ir::binary(BinOp::CeilDiv, boundExpr(c.args[0]), ir::intImm(c.divisor));
    case IndexBound::Kind::Sum: {
      Expr e = ir::intImm(0);
      for (std::size_t i = 0; i < c.args.size(); ++i)
        e = ir::add(e, ir::mul(ir::intImm(c.scale[i]), boundExpr(c.args[i])));
      return e;
    }
    }
    return ir::intImm(0);
  }

  // --- statements ----------------------------------------------------------------------------

  using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;
  // A statement's box: each index's range (its hull where it depends on other indices).
  static Ranges rangesOf(const BoundStatement& bs) {
    Ranges r;
    for (std::size_t v = 0; v < bs.lo.size(); ++v) r.push_back({bs.lo[v], bs.hi[v]});
    return r;
  }

  void statement(std::size_t k) {
    const Statement& st = p_.stmts[k];
    const BoundStatement& bs = b_.stmts[k];
    StatementSchedule sched = scheduleStatement(p_, b_, k, strides_, target_);
    out_.notes.push_back(sched.why);
    if (st.assign == Assign::Define && !coversOutput(st, bs, sched))
      if (std::find(out_.zeroFill.begin(), out_.zeroFill.end(), st.output) == out_.zeroFill.end())
        out_.zeroFill.push_back(st.output);
    if (!sched.run) return;
    const Ranges ranges = rangesOf(bs);
    const std::string base = "s" + std::to_string(k);
    if (sched.splitChunks > 0) {
      emitSplit(st, bs, sched, ranges, base);
      return;
    }
    if (target_.gpu) {
      auto tiled = [&] { return emitGpuTiled(st, bs, ranges, base); };
      auto phases = [&] { return phaseTiles(st, bs, ranges, base); };
      // A tile over copies in other layouts, a plain one, the same for residue phases.
      const bool indep = independentOutputs(st);
      if (indep && (relayoutTiled(st, bs, sched, ranges, base, tiled) || tiled() ||
                    relayoutTiled(st, bs, sched, ranges, base, phases) || phases())) {
        out_.notes.back() = gpuNote_;
      } else if (indep && gpuCoreSplit(st, bs, ranges, base)) {
        return;
      } else if (indep) {
        emitGpuGeneric(st, bs, ranges, base);
      } else if (atomicScatter(st)) {
        const std::string& out = p_.tensors[static_cast<std::size_t>(st.output)].name;
        const bool wide = elemType(st.output) == Type::bf16;
        out_.notes.back() =
            "one GPU thread per element of (" + varNames(st, outputIndices(st)) +
            "), atomic adds into " +
            (wide ? "an f32 copy of " + out + ", rounded to bf16 once at the end" : out) +
            " (several land on one element: their order, and the sum's last bits, vary between "
            "runs)";
        if (wide) wide_ = beginWideScatter(st, bs, ranges, base);
        atomic_ = true;
        emitGpuGeneric(st, bs, ranges, base);
        atomic_ = false;
        if (wide) endWideScatter(st, bs, ranges, base);
        wide_.clear();
      } else {
        out_.notes.back() = "one GPU thread: output elements are not independent (" +
                            std::string(st.scatter ? "scatter" : "left-hand side") + ")";
        emitGeneric(st, bs, sched, ranges, base);
      }
      return;
    }
    if (coreSplit(k, st, bs, ranges, base)) return;
    emitBox(st, bs, sched, ranges, base);
  }

  // A bf16 scatter adds into an f32 copy of its output (a scratch buffer indexed like the
  // output), widened before and rounded back after: each element is rounded once, as in the
  // interpreter, instead of once per add. Returns the copy's name. Only the elements the
  // scatter adds to are widened and rounded back when the output box has fewer points than the
  // output has elements (an embedding's gradient: the rows of the batch's tokens, not the
  // table); a thread per point of the box then, points that share an element writing the same
  // value. Measured on the H100 (session 15, bench_cuda, 16384 tokens into a 32768 x 1024
  // table): the whole table 0.298 ms, the tokens' rows 0.232 (f32, no copy: 0.096).
  std::string beginWideScatter(const Statement& st, const BoundStatement& bs, const Ranges& r,
                               const std::string& base) {
    const auto t = static_cast<std::size_t>(st.output);
    const std::string wide = base + ".wide";
    out_.scratch.push_back({wide, Type::f32, spanElements(b_.tensors[t].shape, strides_[t])});
    eachTouched(st, bs, r, base + "_widen", [&](const Expr& off) {
      return ir::store(wide, off,
                       ir::cast(Type::f32, ir::load(Type::bf16, bufferName(st.output), off)));
    });
    return wide;
  }
  void endWideScatter(const Statement& st, const BoundStatement& bs, const Ranges& r,
                      const std::string& base) {
    eachTouched(st, bs, r, base + "_narrow", [&](const Expr& off) {
      return ir::store(bufferName(st.output), off,
                       ir::cast(Type::bf16, ir::load(Type::f32, wide_, off)));
    });
  }
  // A GPU function of a thread per element of st's output that the statement writes (or more:
  // all of them), body(the element's offset).
  void eachTouched(const Statement& st, const BoundStatement& bs, const Ranges& r,
                   const std::string& name, const std::function<Stmt(const Expr&)>& body) {
    const auto t = static_cast<std::size_t>(st.output);
    std::int64_t count = 1;
    for (std::int64_t e : b_.tensors[t].shape) count *= e;
    if (extentOfGroup(outputIndices(st), r) >= count) return eachElement(st.output, name, body);
    eachOutputPoint(st, bs, r, name, [&]() -> Stmt {
      Expr inside;
      bool dropped = false;
      Expr off = offset(*st.lhs, &inside, &dropped);
      if (dropped) return nullptr;
      return inside ? ir::ifThen(inside, body(off)) : body(off);
    });
  }
  // A GPU function of one thread per element of tensor t: body(the element's offset).
  void eachElement(int t, const std::string& name, const std::function<Stmt(const Expr&)>& body) {
    const auto& shape = b_.tensors[static_cast<std::size_t>(t)].shape;
    const auto& str = strides_[static_cast<std::size_t>(t)];
    std::int64_t count = 1;
    for (std::int64_t e : shape) count *= e;
    if (count == 0) return;
    Expr e = ir::add(ir::mul(ir::var("gpu.block"), ir::intImm(256)), ir::var("gpu.thread"));
    Expr off = ir::intImm(0), rest = e;
    for (std::size_t d = shape.size(); d-- > 0;) {
      off = ir::add(
          off, ir::mul(ir::binary(BinOp::Mod, rest, ir::intImm(shape[d])), ir::intImm(str[d])));
      rest = ir::binary(BinOp::Div, rest, ir::intImm(shape[d]));
    }
    ir::Func f = newFunc(name);
    f.body = tileLaunch(ir::ifThen(ir::binary(BinOp::Lt, e, ir::intImm(count)), body(off)),
                        (count + 255) / 256);
    out_.funcs.push_back(std::move(f));
  }

  // --- batch-fast tensors on the GPU ---------------------------------------------------------
  // A contraction tile computes one batch element per block. When a tensor's unit stride lies
  // on a batch index (one the output and every factor use: C[i,k,b] := A[i,j,b] * B[b,k,j]),
  // each 32-byte sector a block reads or writes holds one useful element and L2 moves the
  // tensor once per batch element (bf16 permuted batched product 1.26 ms on the H100, 0.12x
  // PyTorch, which copies). Such tensors are copied once into a scratch buffer with the batch
  // indices outermost (a shared-memory transpose, coalesced on both sides), the tile reads that
  // copy; an output is computed in its copy and transposed back (copied in first unless ':='
  // covers it). Any layout computes the same values: only the sectors moved change.

  // The output indices of a product that every factor uses, with at least two values.
  std::vector<bool> batchIndices(const Statement& st, const Ranges& r) const {
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

  // The dimension with the smallest nonzero stride among those with two elements or more
  // (-1: none).
  static int fastestDim(const std::vector<std::int64_t>& shape,
                        const std::vector<std::int64_t>& str) {
    int best = -1;
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (shape[d] >= 2 && str[d] != 0 &&
          (best < 0 || std::abs(str[d]) < std::abs(str[static_cast<std::size_t>(best)])))
        best = static_cast<int>(d);
    return best;
  }

  // Whether subscript d of access a moves with batch indices only (and with one at least).
  static bool batchSubscript(const CExpr& a, std::size_t d, const std::vector<bool>& batch) {
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

  // Whether access a's tensor has its fastest dimension on a batch subscript and another one
  // (of two elements or more) on a non-batch subscript, and no broadcast dimension (its copy
  // would be larger than the tensor).
  bool batchFast(const CExpr& a, const std::vector<bool>& batch) const {
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

  // Dense strides for tensor t: its dimensions ordered by outer(d) (true first), then by
  // their strides (the fastest of each part stays fastest).
  std::vector<std::int64_t> denseStrides(int t,
                                         const std::function<bool(std::size_t)>& outer) const {
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
  // Batch dimensions of access a outermost.
  std::vector<std::int64_t> batchOuter(const CExpr& a, const std::vector<bool>& batch) const {
    return denseStrides(a.tensor, [&](std::size_t d) { return batchSubscript(a, d, batch); });
  }
  // Dimension `last` fastest.
  std::vector<std::int64_t> withFastest(int t, std::size_t last) const {
    return denseStrides(t, [last](std::size_t d) { return d != last; });
  }

  std::int64_t elementsOf(int t) const {
    std::int64_t count = 1;
    for (std::int64_t e : b_.tensors[static_cast<std::size_t>(t)].shape) count *= e;
    return count;
  }

  // A GPU function copying tensor t from buffer `from` (strides fs) to buffer `to` (strides ts):
  // blocks take a TS x TD tile of the two layouts' (different) fastest dimensions, one value of
  // every other dimension, read along the source's fastest into shared memory (rows padded by
  // one) and write along the destination's fastest.
  void relayoutCopy(int t, const std::string& from, const std::vector<std::int64_t>& fs,
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
    std::stable_sort(rest.begin(), rest.end(), [&](std::size_t x, std::size_t y) {
      return std::abs(ts[x]) > std::abs(ts[y]);
    });
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
    const std::int64_t TS = std::min<std::int64_t>(shape[s], 32),
                       TD = std::min<std::int64_t>(shape[d], std::max<std::int64_t>(32, 1024 / TS));
    const std::int64_t nS = (shape[s] + TS - 1) / TS, nD = (shape[d] + TD - 1) / TD;
    std::int64_t blocks = nS * nD;
    for (std::size_t q : rest) blocks *= shape[q];
    Expr td = ir::binary(BinOp::Mod, blk, ir::intImm(nD));
    Expr tsI = nS == 1 ? ir::intImm(0)
                       : ir::binary(BinOp::Mod, ir::binary(BinOp::Div, blk, ir::intImm(nD)),
                                    ir::intImm(nS));
    Expr fo = ir::intImm(0), to_ = ir::intImm(0);
    offsets(rest, ir::binary(BinOp::Div, blk, ir::intImm(nS * nD)), fo, to_);
    const std::string tile = "relayout.tile";
    const std::int64_t elems = TS * TD, reps = (elems + 255) / 256, pitch = TS + 1;
    // One pass over the tile, reading (along the source's fastest) or writing (along the
    // destination's): the thread's elements e, at (sv, dv) in the tile.
    auto pass = [&](bool write) {
      Expr e = ir::add(thr, ir::mul(ir::var("relayout.q"), ir::intImm(256)));
      Expr sv = write ? ir::binary(BinOp::Div, e, ir::intImm(TD))
                      : ir::binary(BinOp::Mod, e, ir::intImm(TS));
      Expr dv = write ? ir::binary(BinOp::Mod, e, ir::intImm(TD))
                      : ir::binary(BinOp::Div, e, ir::intImm(TS));
      Expr gs = ir::add(ir::mul(tsI, ir::intImm(TS)), sv),
           gd = ir::add(ir::mul(td, ir::intImm(TD)), dv);
      Expr valid = both(ir::binary(BinOp::Lt, gs, ir::intImm(shape[s])),
                        ir::binary(BinOp::Lt, gd, ir::intImm(shape[d])));
      if (elems % 256 != 0) valid = both(ir::binary(BinOp::Lt, e, ir::intImm(elems)), valid);
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
    f.body = tileLaunch(ir::allocate(tile, et, TD * pitch,
                                     ir::block({pass(false), ir::barrier(), pass(true)}), true),
                        blocks);
    out_.funcs.push_back(std::move(f));
  }

  // Channel-fast inputs (bf16 tensor-core tiles): a convolution's input read through a window
  // (x[n,c,h+a,w+b]) is contiguous along 3 elements of its reduction (c,a,b) in NCHW, so it is
  // staged through registers 2 bytes at a time; with the channel fastest (NHWC) and the
  // reduction run as (a,b,c), a slice is whole 16-byte vectors along c. A reduction index c
  // qualifies when no output index has a dependent range, c's is not dependent, its extent is at
  // least 16 and a multiple of 8, both factors are plain reads using c alone in one subscript, and
  // a factor with a window subscript (two indices of two values or more) reads fewer than 8
  // elements contiguously along the reduction (a forward convolution: 3; a stride-2 weight
  // gradient, whose c is the image index n: 1; a stride-1 weight gradient reads 12-54 along (h,w)
  // and measured slower copied: C=64 0.086 -> 0.118 ms). Factors whose c dimension is not already
  // their fastest are copied with it fastest (the others in their order); kLast_ asks the tile
  // to run c last. Measured on the H100 (session 11, bench_cuda, bf16): forward C=64 0.104 ->
  // 0.080 ms, C=128 stride 2 0.088 -> 0.077, C=256 0.056 -> 0.042; stride-2 weight gradient
  // 0.225 -> 0.152. f32 tiles keep their inputs (an NHWC input measured -21%, -21%, +19%).
  // Reduction indices with dependent ranges (a solved input gradient's filter taps, masked in
  // the tile) qualify too, the channel not being one of them: dy[n,o,u-a,v-b] and k[o,c,a,b]
  // copied with o fastest, the masked operand's 16-byte copies zero-filled outside its ranges
  // (a vector lies in one tap), residue phases sharing the copies. Measured on the H100
  // (session 14, bench_cuda, bf16 input gradients): C=64 0.132 -> 0.088 ms, C=128 stride 2
  // 0.169 -> 0.101, C=256 0.115 -> 0.052.
  int channelIndex(const Statement& st, const BoundStatement& bs, const Ranges& r,
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
  // The dimension of read f that index v alone subscripts (plain, coefficient 1); -1 when f does
  // not use v; -2 when it uses v otherwise (or in several subscripts).
  static int channelDim(const CExpr& f, std::size_t v) {
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
  // A tensor the tile reads (or writes) from a scratch copy in another layout.
  struct Relaid {
    const CExpr* access;
    std::vector<std::int64_t> strides;
  };

  // Lowers statement st by `emit` (a GPU tile, or residue phases of tiles) over re-laid-out
  // copies of some of its tensors: batch-fast tensors (and output) batch-outermost, or a
  // convolution's inputs channel-fast (see above). False (and nothing emitted) when neither
  // applies or `emit` does not.
  bool relayoutTiled(const Statement& st, const BoundStatement& bs, const StatementSchedule& sched,
                     const Ranges& r, const std::string& base, const std::function<bool()>& emit) {
    std::vector<const CExpr*> factors;
    flattenProduct(*st.rhs, factors);
    std::vector<Relaid> in;
    std::optional<Relaid> out;
    std::string why;
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
      why = "batch-outermost layouts (unit stride on a batch index)";
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
      why = "layouts with " + st.vars[v].name + " fastest, the reduction run with " +
            st.vars[v].name + " last (whole 16-byte vectors)";
    }
    if (in.empty() && !out) return false;
    const std::size_t funcs0 = out_.funcs.size(), scratch0 = out_.scratch.size();
    const Strides savedStrides = strides_;
    const Aligned16 savedAligned = aligned_;
    const std::vector<std::string> savedNames = names_;
    std::string note;
    auto redirect = [&](const Relaid& m, bool copyIn) {
      const auto t = static_cast<std::size_t>(m.access->tensor);
      const std::string buf = base + "." + p_.tensors[t].name + ".relaid";
      out_.scratch.push_back({buf, elemType(m.access->tensor), elementsOf(m.access->tensor)});
      if (copyIn)
        relayoutCopy(m.access->tensor, names_[t], strides_[t], buf, m.strides,
                     base + "_relayout_" + p_.tensors[t].name);
      names_[t] = buf;
      strides_[t] = m.strides;
      aligned_[t] = true; // a scratch allocation of its own
      note += (note.empty() ? "" : ", ") + p_.tensors[t].name;
    };
    for (const Relaid& m : in) redirect(m, true);
    if (out) redirect(*out, !(st.assign == Assign::Define && coversOutput(st, bs, sched)));
    kLast_ = kLast;
    bool ok = emit();
    kLast_ = -1;
    if (ok && out) {
      const auto t = static_cast<std::size_t>(st.output);
      relayoutCopy(st.output, names_[t], strides_[t], savedNames[t], savedStrides[t],
                   base + "_relayout_back");
    }
    strides_ = savedStrides;
    aligned_ = savedAligned;
    names_ = savedNames;
    if (!ok) {
      out_.funcs.erase(out_.funcs.begin() + static_cast<std::ptrdiff_t>(funcs0), out_.funcs.end());
      out_.scratch.erase(out_.scratch.begin() + static_cast<std::ptrdiff_t>(scratch0),
                         out_.scratch.end());
      return false;
    }
    gpuNote_ += "; " + note + " copied first to " + why;
    return true;
  }

  // A '+=' sum whose left-hand side may hit an element several times (a gather's gradient, a
  // scatter, or a non-injective affine one) and that does not read its output: on the GPU,
  // one thread per element of the output indices, adding its sum atomically.
  bool atomicScatter(const Statement& st) const {
    if (st.assign != Assign::Accumulate || st.reduce != Reduce::Add) return false;
    const Type et = elemType(st.output);
    if (et != Type::f32 && et != Type::f64 && et != Type::bf16) return false;
    return !readsOwnOutput(st);
  }

  // A statement box under a schedule: the full tiles, then the edges (columns right of the
  // last full tile, every row; rows below it, the tiled columns), themselves tiled with a
  // narrower tile where one fits, generic otherwise.
  void emitBox(const Statement& st, const BoundStatement& bs, const StatementSchedule& sched,
               const Ranges& ranges, const std::string& name) {
    if (sched.tileJ < 0 && sched.dotVar < 0) {
      emitGeneric(st, bs, sched, ranges, name);
      return;
    }
    const int i = sched.tileI, j = sched.tileJ;
    auto fullEnd = [&](int v, int size) {
      const auto [lo, hi] = ranges[static_cast<std::size_t>(v)];
      return lo + (hi - lo) / size * size;
    };
    if (sched.dotVar >= 0)
      emitDot(st, bs, sched, ranges, name);
    else
      emitTiled(st, bs, sched, ranges, name);
    StatementSchedule generic = sched;
    generic.tileI = generic.tileJ = generic.dotVar = -1;
    if (j >= 0 && fullEnd(j, sched.nr) < ranges[static_cast<std::size_t>(j)].second) {
      Ranges r = ranges;
      r[static_cast<std::size_t>(j)].first = fullEnd(j, sched.nr);
      const std::int64_t rest =
          r[static_cast<std::size_t>(j)].second - r[static_cast<std::size_t>(j)].first;
      StatementSchedule narrow = sched;
      const std::string edge = name + "_" + st.vars[static_cast<std::size_t>(j)].name;
      if (sched.dotVar >= 0) {
        narrow.nr = static_cast<int>(rest);
        emitBox(st, bs, narrow, r, edge);
      } else if (rest >= sched.width && sched.nr > sched.width) {
        narrow.nr = sched.width;
        emitBox(st, bs, narrow, r, edge);
      } else {
        emitGeneric(st, bs, generic, r, edge);
      }
    }
    if (i >= 0 && fullEnd(i, sched.mr) < ranges[static_cast<std::size_t>(i)].second) {
      Ranges r = ranges;
      r[static_cast<std::size_t>(i)].first = fullEnd(i, sched.mr);
      if (j >= 0) r[static_cast<std::size_t>(j)].second = fullEnd(j, sched.nr);
      StatementSchedule narrow = sched;
      narrow.mr = static_cast<int>(r[static_cast<std::size_t>(i)].second -
                                   r[static_cast<std::size_t>(i)].first);
      if (j < 0 || r[static_cast<std::size_t>(j)].second > r[static_cast<std::size_t>(j)].first)
        emitBox(st, bs, narrow, r, name + "_" + st.vars[static_cast<std::size_t>(i)].name);
    }
  }

  // Core/border split (GRADIENTS.md G6): when the ranges of reduction indices depend on
  // output indices (the solved gradients' max/min bounds), the output box splits into a core,
  // where every such range equals its full hull (plain loops, tiles), and borders that keep
  // the dependent bounds. Only bounds that read a single output index are split.
  // The core of G6: per output index that dependent reduction ranges read, the longest run of
  // its values where every such range takes its full (box) extent. False when the statement has
  // other dependences or no core.
  // The indices that dependent index v's bounds read.
  static std::vector<std::size_t> boundReads(const Statement& st, std::size_t v) {
    std::vector<bool> reads(st.vars.size(), false);
    st.vars[v].loBound.collectVars(reads);
    st.vars[v].hiBound.collectVars(reads);
    std::vector<std::size_t> read;
    for (std::size_t u = 0; u < reads.size(); ++u)
      if (reads[u]) read.push_back(u);
    return read;
  }

  // The core of output index o when every bound that reads it is monotone in it: each bound
  // takes its interior value (the hull's end) on a prefix or a suffix of o's range, found by
  // bisection, and the core is where all of them do. False when some bound is not monotone.
  static bool monotoneCore(const BoundStatement& bs, std::pair<std::int64_t, std::int64_t> range,
                           std::size_t o, const std::vector<std::size_t>& readers, std::size_t n,
                           std::pair<std::int64_t, std::int64_t>& core) {
    struct Condition {
      const ConcreteBound* bound;
      std::int64_t interior;
      bool prefix; // holds on a prefix of the range (else on a suffix)
    };
    std::vector<Condition> conds;
    for (std::size_t r : readers) {
      const int lo = bs.loBound[r].direction(static_cast<int>(o));
      const int hi = bs.hiBound[r].direction(static_cast<int>(o));
      if (lo == 2 || hi == 2) return false;
      // The lower bound is at its least where it has not risen yet, the upper at its most.
      if (lo != 0) conds.push_back({&bs.loBound[r], bs.lo[r], lo > 0});
      if (hi != 0) conds.push_back({&bs.hiBound[r], bs.hi[r], hi < 0});
    }
    std::vector<std::int64_t> vals(n, 0);
    auto holds = [&](const Condition& c, std::int64_t x) {
      vals[o] = x;
      return c.bound->eval(vals) == c.interior;
    };
    core = range;
    for (const Condition& c : conds) {
      // First x in [first, second] where the condition flips (second: it never does).
      std::int64_t a = range.first, b = range.second;
      while (a < b) {
        const std::int64_t m = a + (b - a) / 2;
        if (holds(c, m) == c.prefix)
          a = m + 1;
        else
          b = m;
      }
      if (c.prefix)
        core.second = std::min(core.second, a);
      else
        core.first = std::max(core.first, a);
    }
    return true;
  }

  bool coreRanges(const Statement& st, const BoundStatement& bs, const Ranges& ranges,
                  Ranges& core) const {
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
    std::vector<std::vector<std::size_t>> readers(nOut); // dependent vars whose bounds read o
    bool any = false;
    for (std::size_t v = 0; v < n; ++v) {
      if (!bs.dependent[v]) continue;
      if (v < nOut) return false;
      const std::vector<std::size_t> read = boundReads(st, v);
      if (read.size() != 1 || read[0] >= nOut) return false;
      readers[read[0]].push_back(v);
      any = true;
    }
    if (!any) return false;
    core = ranges;
    for (std::size_t o = 0; o < nOut; ++o) {
      if (readers[o].empty()) continue;
      if (monotoneCore(bs, ranges[o], o, readers[o], n, core[o])) {
        if (core[o].second <= core[o].first) return false;
        continue;
      }
      // Otherwise the longest run of points where every bound is interior.
      std::vector<std::int64_t> vals(n, 0);
      std::int64_t bestLo = 0, bestLen = 0, runLo = 0, runLen = 0;
      for (std::int64_t x = ranges[o].first; x < ranges[o].second; ++x) {
        vals[o] = x;
        bool inside = true;
        for (std::size_t r : readers[o])
          inside = inside && bs.loBound[r].eval(vals) == bs.lo[r] &&
                   bs.hiBound[r].eval(vals) == bs.hi[r];
        if (inside) {
          if (runLen == 0) runLo = x;
          if (++runLen > bestLen) {
            bestLen = runLen;
            bestLo = runLo;
          }
        } else {
          runLen = 0;
        }
      }
      if (bestLen == 0) return false;
      core[o] = {bestLo, bestLo + bestLen};
    }
    return true;
  }

  // The border strips around a core: per split output index, below and above the core, each
  // later index restricted to its core (so every element is in exactly one part).
  template <class F>
  void forEachBorder(const Statement& st, const Ranges& ranges, const Ranges& core,
                     const std::string& base, F&& emit) {
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
    Ranges outer = ranges;
    for (std::size_t o = 0; o < nOut; ++o) {
      if (core[o] == ranges[o]) continue;
      Ranges lowPart = outer, highPart = outer;
      lowPart[o] = {ranges[o].first, core[o].first};
      highPart[o] = {core[o].second, ranges[o].second};
      if (lowPart[o].second > lowPart[o].first)
        emit(lowPart, base + "_border" + std::to_string(o) + "lo");
      if (highPart[o].second > highPart[o].first)
        emit(highPart, base + "_border" + std::to_string(o) + "hi");
      outer[o] = core[o]; // later borders cover only the core of this index
    }
  }

  static BoundStatement boxOf(const BoundStatement& bs, const Ranges& core) {
    BoundStatement cs = bs;
    for (std::size_t v = 0; v < core.size(); ++v) {
      cs.lo[v] = core[v].first;
      cs.hi[v] = core[v].second;
      cs.dependent[v] = false;
    }
    return cs;
  }

  bool coreSplit(std::size_t k, const Statement& st, const BoundStatement& bs, const Ranges& ranges,
                 const std::string& base) {
    Ranges core;
    if (!coreRanges(st, bs, ranges, core)) return false;
    dsl::BoundProgram b2 = b_;
    auto& cs = b2.stmts[k];
    cs = boxOf(bs, core);
    StatementSchedule coreSched = scheduleStatement(p_, b2, k, strides_, target_);
    if (coreSched.tileJ < 0 && coreSched.dotVar < 0) return false;
    out_.notes.back() = "core/border split; core: " + coreSched.why;
    emitBox(st, cs, coreSched, core, base + "_core");
    StatementSchedule generic = scheduleStatement(p_, b_, k, strides_, target_);
    generic.tileI = generic.tileJ = generic.dotVar = -1;
    forEachBorder(st, ranges, core, base, [&](const Ranges& part, const std::string& name) {
      emitGeneric(st, bs, generic, part, name);
    });
    return true;
  }

  // G6 on the GPU: the core (box ranges) as a contraction tile, the border strips one thread
  // per output element.
  bool gpuCoreSplit(const Statement& st, const BoundStatement& bs, const Ranges& ranges,
                    const std::string& base) {
    Ranges core;
    if (!coreRanges(st, bs, ranges, core)) return false;
    if (!emitGpuTiled(st, boxOf(bs, core), core, base + "_core")) return false;
    out_.notes.back() = "core/border split; core: " + gpuNote_ + "; borders: one thread each";
    forEachBorder(st, ranges, core, base, [&](const Ranges& part, const std::string& name) {
      emitGpuGeneric(st, bs, part, name);
    });
    return true;
  }

  // A ':=' statement writes every element of its output when its left-hand indices are
  // distinct, run over whole dimensions, and do not depend on other indices.
  bool coversOutput(const Statement& st, const BoundStatement& bs, const StatementSchedule& s) {
    if (!s.run || st.lhsVars.empty()) return false;
    for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
      auto v = static_cast<std::size_t>(st.lhsVars[d]);
      for (std::size_t e = 0; e < d; ++e)
        if (st.lhsVars[e] == st.lhsVars[d]) return false;
      if (bs.dependent[v] || bs.lo[v] != 0 || bs.hi[v] != extentOf(st.output, d)) return false;
    }
    return true;
  }

  void setRanges(const Statement& st, const Ranges& r) {
    varExpr_.clear();
    varRange_.clear();
    for (std::size_t v = 0; v < st.vars.size(); ++v) {
      varExpr_.push_back(v < pinned_.size() && pinned_[v] ? ir::intImm(r[v].first)
                                                          : ir::var(st.vars[v].name));
      varRange_.push_back({r[v].second > r[v].first, r[v].first, r[v].second - 1});
    }
  }

  // Loop kind for output index v, and the function's parallel fields.
  ForKind outerKind(const StatementSchedule& s, int v, std::int64_t lo, std::int64_t hi,
                    double innerWork, ir::Func& f) {
    if (v != s.parallelVar || hi - lo < 2) return ForKind::Serial;
    f.parallel = true;
    f.parallelLo = lo;
    f.parallelHi = hi;
    f.grain = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(
                                            target_.minParallelWork / std::max(innerWork, 1.0))));
    return ForKind::Parallel;
  }

  ir::Func newFunc(const std::string& name) {
    ir::Func f;
    f.name = name;
    for (std::size_t t = 0; t < p_.tensors.size(); ++t)
      f.buffers.push_back({p_.tensors[t].name, elemType(static_cast<int>(t))});
    return f;
  }

  static double workOf(const Ranges& r, std::size_t from) {
    double w = 1;
    for (std::size_t v = from; v < r.size(); ++v)
      w *= static_cast<double>(std::max<std::int64_t>(r[v].second - r[v].first, 1));
    return w;
  }

  Stmt loopOver(const BoundStatement& bs, const Statement& st, std::size_t v, const Ranges& r,
                ForKind kind, Stmt body, int width = 1) {
    Expr lo = ir::intImm(r[v].first), hi = ir::intImm(r[v].second);
    if (bs.dependent[v]) {
      lo = ir::binary(BinOp::Max, boundExpr(bs.loBound[v]), lo);
      hi = ir::binary(BinOp::Min, boundExpr(bs.hiBound[v]), hi);
    }
    return ir::forLoop(st.vars[v].name, lo, hi, kind, std::move(body), width);
  }

  int vectorWidth() const { return std::max(1, target_.vectorBytes / (vt_ == Type::f64 ? 8 : 4)); }

  // One output element: the reduction into a local accumulator, then the store (null when
  // nothing is written).
  Stmt elementBody(const Statement& st, const BoundStatement& bs, const Ranges& r, bool vectorize) {
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
    const std::size_t n = st.vars.size();
    const std::string acc = "acc";
    if (n == nOut) return storeOutput(st, value(*st.rhs));
    Expr a = ir::load(vt_, acc, ir::intImm(0));
    Stmt inner = ir::store(acc, ir::intImm(0), combine(st.reduce, a, value(*st.rhs)));
    for (std::size_t v = n; v-- > nOut;) {
      bool innermost = v == n - 1;
      inner = loopOver(bs, st, v, r, innermost && vectorize ? ForKind::Vectorized : ForKind::Serial,
                       inner, innermost && vectorize ? vectorWidth() : 1);
    }
    Stmt out = storeOutput(st, a);
    if (!out) return nullptr;
    return ir::allocate(
        acc, vt_, 1, ir::block({ir::store(acc, ir::intImm(0), identity(st.reduce)), inner, out}));
  }

  void emitGeneric(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                   const Ranges& r, const std::string& name) {
    setRanges(st, r);
    ir::Func f = newFunc(name);
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
    const std::size_t n = st.vars.size();
    Stmt body = elementBody(st, bs, r, s.vectorizeInner && !target_.gpu);
    if (!body) return;
    double inside = workOf(r, nOut);
    for (std::size_t idx = s.outerOrder.size(); idx-- > 0;) {
      auto v = static_cast<std::size_t>(s.outerOrder[idx]);
      bool innermost = idx + 1 == s.outerOrder.size() && n == nOut;
      ForKind kind = innermost && s.vectorizeInner ? ForKind::Vectorized : ForKind::Serial;
      if (static_cast<int>(v) == s.parallelVar && !bs.dependent[v])
        kind = outerKind(s, static_cast<int>(v), r[v].first, r[v].second, inside, f);
      body = loopOver(bs, st, v, r, kind, body, kind == ForKind::Vectorized ? vectorWidth() : 1);
      inside *= static_cast<double>(std::max<std::int64_t>(r[v].second - r[v].first, 1));
    }
    f.body = body;
    out_.funcs.push_back(std::move(f));
  }

  // One GPU thread per element of the output box: thread t of the flattened box (the first
  // index of `order` varying fastest) computes one element; dependent output ranges and the
  // last block's spare threads are guarded.
  void emitGpuGeneric(const Statement& st, const BoundStatement& bs, const Ranges& r,
                      const std::string& name) {
    eachOutputPoint(st, bs, r, name, [&] { return elementBody(st, bs, r, false); });
  }
  // A GPU function of one thread per point of the output box (dependent ranges guarded), the
  // index with unit stride in the output fastest (coalesced stores), else the last one;
  // body() gives a point's work, with the indices bound.
  void eachOutputPoint(const Statement& st, const BoundStatement& bs, const Ranges& r,
                       const std::string& name, const std::function<Stmt()>& body) {
    setRanges(st, r);
    ir::Func f = newFunc(name);
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
    const auto& os = strides_[static_cast<std::size_t>(st.output)];
    std::size_t fast = nOut ? nOut - 1 : 0;
    for (std::size_t d = 0; d < st.lhs->subs.size(); ++d)
      for (std::size_t v = 0; v < nOut; ++v)
        if (st.lhs->subs[d].coef[v] != 0 && os[d] == 1 && r[v].second - r[v].first > 1) fast = v;
    std::vector<std::size_t> order; // the fastest last
    for (std::size_t v = 0; v < nOut; ++v)
      if (v != fast) order.push_back(v);
    if (nOut) order.push_back(fast);
    f.body = threadPerPoint(order, r, [&](Expr& guard) {
      for (std::size_t v = 0; v < nOut; ++v) {
        if (!bs.dependent[v]) continue;
        guard = both(guard, ir::binary(BinOp::Ge, varExpr_[v], boundExpr(bs.loBound[v])));
        guard = both(guard, ir::binary(BinOp::Lt, varExpr_[v], boundExpr(bs.hiBound[v])));
      }
      return body();
    });
    if (f.body) out_.funcs.push_back(std::move(f));
  }

  // One GPU thread per point of the box of `order` (its last index fastest): binds the indices
  // (decompose), then body(guard) gives the thread's work, and may add to the guard, which
  // starts as the last block's spare threads' test. Null when the box or the body is empty.
  Stmt threadPerPoint(const std::vector<std::size_t>& order, const Ranges& r,
                      const std::function<Stmt(Expr&)>& body) {
    const std::int64_t total = extentOfGroup(order, r);
    if (total <= 0) return nullptr;
    const std::int64_t block = std::min<std::int64_t>(target_.gpuBlock, total);
    Expr t = ir::add(ir::mul(ir::var("gpu.block"), ir::intImm(block)), ir::var("gpu.thread"));
    decompose(order, r, t);
    Expr guard;
    if (total % block != 0) guard = ir::binary(BinOp::Lt, t, ir::intImm(total));
    Stmt s = body(guard);
    if (!s) return nullptr;
    if (guard) s = ir::ifThen(guard, s);
    s = ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(block), ForKind::GpuThread, s);
    return ir::forLoop("gpu.block", ir::intImm(0), ir::intImm((total + block - 1) / block),
                       ForKind::GpuBlock, s);
  }

  // --- split reductions ------------------------------------------------------------------------

  // A split reduction (Schedule.h). Chunk c of output element o (its position in the flattened
  // output box, the last index fastest) leaves its partial in scratch[o * chunks + c]; a second
  // function combines each element's partials in chunk order into the output (a single chunk
  // writes the output directly). CPU: a parallel loop over chunks, each running the output
  // elements and its part of the reduction in iteration order. GPU: one block per (element,
  // chunk), its threads striding through the chunk, then a tree in shared memory.
  void emitSplit(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                 const Ranges& r, const std::string& name) {
    setRanges(st, r);
    if (!storeOutput(st, num(0))) return; // nothing is written
    std::string partial;
    if (s.splitChunks > 1) {
      partial = name + ".partial";
      out_.scratch.push_back({partial, vt_, extentOfGroup(outputIndices(st), r) * s.splitChunks});
    }
    if (target_.gpu)
      emitSplitGpu(st, s, r, name, partial);
    else
      emitSplitCpu(st, bs, s, r, name, partial);
    if (s.splitChunks > 1) emitCombine(st, bs, s, r, name + "_combine", partial);
  }

  static std::vector<std::size_t> outputIndices(const Statement& st) {
    std::vector<std::size_t> v(static_cast<std::size_t>(st.numOutputVars()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = i;
    return v;
  }

  // The position of the current output element in the flattened output box.
  Expr flatOutput(const Statement& st, const Ranges& r) const {
    Expr o = ir::intImm(0);
    for (std::size_t v = 0; v < static_cast<std::size_t>(st.numOutputVars()); ++v)
      o = ir::add(ir::mul(o, ir::intImm(r[v].second - r[v].first)),
                  ir::sub(varExpr_[v], ir::intImm(r[v].first)));
    return o;
  }

  // The end of a chunk's partial: its slot in the scratch buffer, or the output itself.
  Stmt finishChunk(const Statement& st, const std::string& partial, const Expr& slot,
                   const Expr& v) {
    return partial.empty() ? storeOutput(st, v) : ir::store(partial, slot, v);
  }

  void emitSplitCpu(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                    const Ranges& r, const std::string& name, const std::string& partial) {
    ir::Func f = newFunc(name);
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
    const auto p = static_cast<std::size_t>(s.splitVar);
    const std::int64_t extP = r[p].second - r[p].first;
    Expr c = ir::var("split.c");
    Expr qlo = ir::mul(c, ir::intImm(s.splitChunk));
    Expr qhi =
        ir::binary(BinOp::Min, ir::add(qlo, ir::intImm(s.splitChunk)), ir::intImm(s.splitPrefix));
    // The chunk [qlo, qhi) of the flattened prefix: the indices before splitVar from the group
    // counter g, splitVar over its part of g's row.
    std::vector<std::size_t> group;
    for (std::size_t v = nOut; v < p; ++v) group.push_back(v);
    Expr g = ir::var("split.g");
    if (!group.empty()) decompose(group, r, g);
    const std::string acc = "acc";
    Expr a = ir::load(vt_, acc, ir::intImm(0));
    Stmt inner = ir::store(acc, ir::intImm(0), combine(st.reduce, a, value(*st.rhs)));
    auto kind = [&](std::size_t v) { return v == n - 1 ? ForKind::Vectorized : ForKind::Serial; };
    auto width = [&](std::size_t v) { return v == n - 1 ? vectorWidth() : 1; };
    for (std::size_t v = n; v-- > p + 1;) inner = loopOver(bs, st, v, r, kind(v), inner, width(v));
    Expr lo = qlo, hi = qhi;
    if (!group.empty()) {
      Expr row = ir::mul(g, ir::intImm(extP));
      lo = ir::binary(BinOp::Max, ir::sub(qlo, row), ir::intImm(0));
      hi = ir::binary(BinOp::Min, ir::sub(qhi, row), ir::intImm(extP));
    }
    Expr first = ir::intImm(r[p].first);
    inner = ir::forLoop(st.vars[p].name, ir::add(first, lo), ir::add(first, hi), kind(p), inner,
                        width(p));
    if (!group.empty())
      inner =
          ir::forLoop("split.g", ir::binary(BinOp::Div, qlo, ir::intImm(extP)),
                      ir::add(ir::binary(BinOp::Div, ir::sub(qhi, ir::intImm(1)), ir::intImm(extP)),
                              ir::intImm(1)),
                      ForKind::Serial, inner);
    Expr slot = ir::add(ir::mul(flatOutput(st, r), ir::intImm(s.splitChunks)), c);
    Stmt body = ir::allocate(acc, vt_, 1,
                             ir::block({ir::store(acc, ir::intImm(0), identity(st.reduce)), inner,
                                        finishChunk(st, partial, slot, a)}));
    for (std::size_t v = nOut; v-- > 0;) body = loopOver(bs, st, v, r, ForKind::Serial, body);
    ForKind chunkKind = ForKind::Serial;
    if (s.splitChunks > 1) {
      chunkKind = ForKind::Parallel;
      f.parallel = true;
      f.parallelLo = 0;
      f.parallelHi = s.splitChunks;
      f.grain = 1;
    }
    f.body = ir::forLoop("split.c", ir::intImm(0), ir::intImm(s.splitChunks), chunkKind, body);
    out_.funcs.push_back(std::move(f));
  }

  void emitSplitGpu(const Statement& st, const StatementSchedule& s, const Ranges& r,
                    const std::string& name, const std::string& partial) {
    ir::Func f = newFunc(name);
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
    const std::int64_t threads = target_.gpuBlock, chunks = s.splitChunks;
    const std::vector<std::size_t> outs = outputIndices(st);
    Expr blk = ir::var("gpu.block"), thr = ir::var("gpu.thread");
    Expr c = chunks > 1 ? ir::binary(BinOp::Mod, blk, ir::intImm(chunks)) : ir::intImm(0);
    decompose(outs, r, chunks > 1 ? ir::binary(BinOp::Div, blk, ir::intImm(chunks)) : blk);
    // Iteration q of the flattened reduction: thread t takes chunk start + t, + threads, ...
    std::vector<std::size_t> red;
    for (std::size_t v = nOut; v < n; ++v) red.push_back(v);
    Expr qlo = ir::mul(c, ir::intImm(s.splitChunk));
    Expr qhi =
        ir::binary(BinOp::Min, ir::add(qlo, ir::intImm(s.splitChunk)), ir::intImm(s.splitPrefix));
    Expr q = ir::add(ir::add(qlo, ir::mul(ir::var("split.k"), ir::intImm(threads))), thr);
    decompose(red, r, q);
    const std::string acc = "acc", tree = "split.tree";
    Expr a = ir::load(vt_, acc, ir::intImm(0));
    Stmt update = ir::ifThen(ir::binary(BinOp::Lt, q, qhi),
                             ir::store(acc, ir::intImm(0), combine(st.reduce, a, value(*st.rhs))));
    Stmt strided =
        ir::forLoop("split.k", ir::intImm(0), ir::intImm((s.splitChunk + threads - 1) / threads),
                    ForKind::Serial, update);
    // The tree: at each level the lower half absorbs the upper half (the earlier element
    // first, so that max/min keep it on ties).
    std::int64_t levels = 1;
    while (levels < threads) levels *= 2;
    std::vector<Stmt> steps = {ir::store(tree, thr, a), ir::barrier()};
    for (std::int64_t half = levels / 2; half >= 1; half /= 2) {
      Expr other = ir::add(thr, ir::intImm(half));
      Expr active = ir::binary(BinOp::Lt, thr, ir::intImm(half));
      if (2 * half > threads)
        active = ir::binary(BinOp::And, active, ir::binary(BinOp::Lt, other, ir::intImm(threads)));
      steps.push_back(ir::ifThen(active, ir::store(tree, thr,
                                                   combine(st.reduce, ir::load(vt_, tree, thr),
                                                           ir::load(vt_, tree, other)))));
      if (half > 1) steps.push_back(ir::barrier());
    }
    steps.push_back(ir::ifThen(ir::binary(BinOp::Eq, thr, ir::intImm(0)),
                               finishChunk(st, partial, blk, ir::load(vt_, tree, ir::intImm(0)))));
    Stmt body = ir::allocate(
        acc, vt_, 1,
        ir::block({ir::store(acc, ir::intImm(0), identity(st.reduce)), strided, ir::block(steps)}));
    body = ir::allocate(tree, vt_, threads, body, true);
    body = ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(threads), ForKind::GpuThread, body);
    f.body = ir::forLoop("gpu.block", ir::intImm(0), ir::intImm(extentOfGroup(outs, r) * chunks),
                         ForKind::GpuBlock, body);
    out_.funcs.push_back(std::move(f));
  }

  // Each output element's partials combined in chunk order (from the reduction's identity, as
  // the unsplit reduction starts), then stored like any reduced value. CPU: serial loops over
  // the few output elements; GPU: one thread each.
  // chunkMajor: the partials are laid out scratch[c * elements + o] instead (split-K tiles).
  void emitCombine(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                   const Ranges& r, const std::string& name, const std::string& partial,
                   bool chunkMajor = false) {
    setRanges(st, r);
    ir::Func f = newFunc(name);
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
    const std::vector<std::size_t> outs = outputIndices(st);
    const std::int64_t total = extentOfGroup(outs, r);
    const std::int64_t block = std::min<std::int64_t>(target_.gpuBlock, total);
    Expr o = ir::add(ir::mul(ir::var("gpu.block"), ir::intImm(block)), ir::var("gpu.thread"));
    if (target_.gpu)
      decompose(outs, r, o);
    else
      o = flatOutput(st, r);
    const std::string acc = "acc";
    Expr a = ir::load(vt_, acc, ir::intImm(0));
    Expr slot = chunkMajor ? ir::add(ir::mul(ir::var("split.c"), ir::intImm(total)), o)
                           : ir::add(ir::mul(o, ir::intImm(s.splitChunks)), ir::var("split.c"));
    Stmt fold = ir::forLoop(
        "split.c", ir::intImm(0), ir::intImm(s.splitChunks), ForKind::Serial,
        ir::store(acc, ir::intImm(0), combine(st.reduce, a, ir::load(vt_, partial, slot))));
    Stmt body = ir::allocate(
        acc, vt_, 1,
        ir::block({ir::store(acc, ir::intImm(0), identity(st.reduce)), fold, storeOutput(st, a)}));
    if (target_.gpu) {
      if (total % block != 0) body = ir::ifThen(ir::binary(BinOp::Lt, o, ir::intImm(total)), body);
      body = ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(block), ForKind::GpuThread, body);
      body = ir::forLoop("gpu.block", ir::intImm(0), ir::intImm((total + block - 1) / block),
                         ForKind::GpuBlock, body);
    } else {
      for (std::size_t v = nOut; v-- > 0;) body = loopOver(bs, st, v, r, ForKind::Serial, body);
    }
    f.body = body;
    out_.funcs.push_back(std::move(f));
  }

  // --- GPU contraction tiles -------------------------------------------------------------------
  std::string gpuNote_;

  // Split-K for tiles: the reduction's slices cut into `splits` contiguous ranges (each at least
  // kSplitReduction of the reduction and 8 slices), one block per (tile, range); each block
  // leaves its tile's partial sums in scratch[range * elements + o], and a second kernel adds
  // them in range order (deterministic, like the split reductions).
  // - Tensor-core tiles (`cellFlops` 0): the count doubles while there are fewer blocks than
  //   `wanted` (a quarter of Target::gpuBlocksWanted for the warpgroup tiles, which fill an SM
  //   with one or two blocks).
  // - f32 tiles (`cellFlops`: the flops of one slice of one tile): the count, any count, that
  //   least loads the busiest SM. An SM runs one 128 x 128 f32 tile block about as fast as two
  //   (H100, session 13: the Linear layer's weight gradient, 56 tiles, whole 0.387 ms, in 4
  //   ranges 0.197 with two blocks on the busiest SMs; smaller tiles lose more alone:
  //   kLoneBlock), so a split's time is that of the slices of the SM given the most blocks,
  //   ceil(tiles * s / SMs) * ceil(slices / s) (kLoneBlock times that for one block), at
  //   Target::gpuSmFlops, plus the partials' memory traffic at Target::gpuBandwidth: s of them
  //   written, read back by the combine pass, which writes the output (at 8192^3, 4 ranges
  //   would cut the busiest SM's slices 16384 -> 16000 and took 23.6 -> 24.7 ms).
  //   Measured against the doubling rule (H100, session 13): the Linear weight gradient in 7
  //   ranges (392 blocks, 3 of 37 slices on the busiest SM; tiles of 128 x 112) takes the
  //   layer's forward + gradients from 0.550 to 0.531 ms; the C=256 forward in 3 ranges 0.214
  //   -> 0.185, its weight gradient in 7 0.209 -> 0.162, the C=64 weight gradient in 44 (64 x
  //   96 tiles) 0.295 -> 0.220, the stride-2 one in 29 0.347 -> 0.241; the forward (256
  //   tiles) and input gradient (224) of the Linear layer stay whole.
  struct TileSplit {
    std::int64_t splits = 1, perSplit = 0;
    std::int64_t elements = 0; // output elements (the stride of a range's partials)
    std::string partial;       // scratch buffer, when splits > 1
  };
  TileSplit tileSplit(const Statement& st, const Ranges& r, std::int64_t tiles, std::int64_t slices,
                      std::int64_t BK, const std::string& name, std::int64_t wanted,
                      double cellFlops = 0) {
    TileSplit t;
    t.elements = extentOfGroup(outputIndices(st), r);
    const std::int64_t least = std::max<std::int64_t>(8, kSplitReduction / BK);
    if (cellFlops <= 0) {
      while (tiles * t.splits < wanted && slices / (2 * t.splits) >= least) t.splits *= 2;
    } else {
      const std::int64_t sms = std::max<std::int64_t>(1, target_.gpuBlocksWanted / 2);
      const double bytes =
          static_cast<double>(t.elements) * static_cast<double>(ir::typeBytes(vt_));
      double best = 0;
      for (std::int64_t s = 1; s == 1 || (s <= slices / least && s <= 1024); ++s) {
        const std::int64_t per = (slices + s - 1) / s, busiest = (tiles * s + sms - 1) / sms;
        double time = static_cast<double>(busiest * per) * cellFlops / target_.gpuSmFlops;
        if (busiest == 1) time *= kLoneBlock;
        if (s > 1) time += static_cast<double>(2 * s + 1) * bytes / target_.gpuBandwidth;
        if (s == 1 || time < best) {
          best = time;
          t.splits = s;
        }
      }
    }
    t.perSplit = (slices + t.splits - 1) / t.splits;
    t.splits = (slices + t.perSplit - 1) / t.perSplit; // no empty range
    if (t.splits > 1) {
      t.partial = name + ".partial";
      out_.scratch.push_back({t.partial, vt_, t.elements * t.splits});
    }
    return t;
  }
  // The k-slices of one block's range, and where a cell's sum goes.
  Expr splitIndex(const TileSplit& t) const {
    return ir::binary(BinOp::Mod, ir::var("gpu.block"), ir::intImm(t.splits));
  }
  Expr tileBlock(const TileSplit& t) const {
    return t.splits > 1 ? ir::binary(BinOp::Div, ir::var("gpu.block"), ir::intImm(t.splits))
                        : ir::var("gpu.block");
  }
  void sliceBounds(const TileSplit& t, std::int64_t slices, Expr* lo, Expr* hi) const {
    if (t.splits == 1) {
      *lo = ir::intImm(0);
      *hi = ir::intImm(slices);
      return;
    }
    *lo = ir::mul(splitIndex(t), ir::intImm(t.perSplit));
    *hi = ir::binary(BinOp::Min, ir::add(*lo, ir::intImm(t.perSplit)), ir::intImm(slices));
  }
  Stmt storeCell(const Statement& st, const Ranges& r, const TileSplit& t, const Expr& v) {
    if (t.splits == 1) return storeOutput(st, v);
    return ir::store(t.partial,
                     ir::add(ir::mul(splitIndex(t), ir::intImm(t.elements)), flatOutput(st, r)), v);
  }
  void finishSplit(const Statement& st, const BoundStatement& bs, const Ranges& r,
                   const TileSplit& t, const std::string& name) {
    if (t.splits == 1) return;
    StatementSchedule s;
    s.splitChunks = t.splits;
    emitCombine(st, bs, s, r, name + "_combine", t.partial, true);
    gpuNote_ += ", split-K: " + std::to_string(t.splits) + " ranges of " +
                std::to_string(t.perSplit) + " slices, partials added in order";
  }

  static void flattenProduct(const CExpr& e, std::vector<const CExpr*>& out) {
    if (e.kind == CKind::Binary && e.binop == dsl::BinOp::Mul) {
      flattenProduct(*e.args[0], out);
      flattenProduct(*e.args[1], out);
    } else {
      out.push_back(&e);
    }
  }

  static void usedVars(const CExpr& e, std::vector<bool>& used) {
    if (e.kind == CKind::Index) used[static_cast<std::size_t>(e.var)] = true;
    for (const Subscript& sub : e.subs) {
      for (std::size_t v = 0; v < sub.coef.size(); ++v)
        if (sub.coef[v] != 0) used[v] = true;
      if (sub.gather) usedVars(*sub.gather, used);
    }
    for (const auto& a : e.args) usedVars(*a, used);
  }

  // Whether some read of e has unit stride along index v.
  bool unitAlong(const CExpr& e, std::size_t v) const {
    if (e.kind == CKind::Read && !e.subs.empty()) {
      std::int64_t c = 0;
      const auto& stv = strides_[static_cast<std::size_t>(e.tensor)];
      bool affine = true;
      for (std::size_t d = 0; d < e.subs.size(); ++d) {
        if (e.subs[d].coef[v] == 0) continue;
        if (e.subs[d].gather || e.subs[d].mode == IndexMode::Wrap) affine = false;
        c += e.subs[d].coef[v] * stv[d];
      }
      if (affine && c == 1) return true;
    }
    for (const auto& a : e.args)
      if (unitAlong(*a, v)) return true;
    return false;
  }

  // value = lo + (g / div) % ext for each index of a group, the last one varying fastest
  // (g >= 0, so truncating division and remainder are exact).
  // On the GPU, a group of two indices or more whose flattened extent is below 2^30 divides in
  // 32 bits (g runs at most a tile or a block of threads past the extent, far inside 2^31): a
  // 64-bit division by a constant takes several times the instructions (stride-2 bf16 weight
  // gradient 0.416 -> 0.227 ms on the H100, session 10).
  void decompose(const std::vector<std::size_t>& group, const Ranges& r, const Expr& g) {
    constexpr std::int64_t kNarrow = std::int64_t{1} << 30;
    std::int64_t total = 1;
    for (std::size_t v : group) // saturating at 2^30: no overflow
      total =
          std::min(kNarrow, total * std::clamp<std::int64_t>(r[v].second - r[v].first, 1, kNarrow));
    const bool narrow = target_.gpu && group.size() > 1 && total < kNarrow;
    auto c = [narrow](std::int64_t x) {
      return narrow ? ir::cast(Type::i32, ir::intImm(x)) : ir::intImm(x);
    };
    const Expr gn = narrow ? ir::cast(Type::i32, g) : g;
    std::int64_t div = 1;
    for (std::size_t q = group.size(); q-- > 0;) {
      const std::size_t v = group[q];
      const std::int64_t ext = r[v].second - r[v].first;
      Expr e = div == 1 ? gn : ir::binary(BinOp::Div, gn, c(div));
      if (q > 0) e = ir::binary(BinOp::Mod, e, c(ext));
      varExpr_[v] = ir::add(ir::intImm(r[v].first), narrow ? ir::cast(Type::i64, e) : e);
      div *= ext;
    }
  }

  // One operand of a contraction tile, staged in shared memory one slice at a time: BW rows of
  // its index group (from `base`) by BK of the flattened reduction (from slice k.o), at
  // `slot(w, kk)` within a stage of `stageElems` elements of type `elem`. With `vector` > 0
  // the operand is copied `vector` elements at a time (contiguous along k when kFast, else
  // along the row) by asynchronous copies straight into shared memory; with 0, each thread
  // loads its elements into registers (buf.v) and stores them afterwards, which works for any
  // operand (products, padded or strided reads) and lets the loads of the next slice overlap
  // the products of this one. Consecutive threads take consecutive k when kFast (coalesced
  // when the operand has unit stride along k), else consecutive rows.
  struct Staged {
    std::vector<const CExpr*> fs;
    std::vector<std::size_t> group;
    Expr base;
    std::int64_t BW = 0, stageElems = 0;
    bool kFast = false;
    int vector = 0;
    std::string buf;
    Type elem = Type::f32;
    // Layout of a stage: row-major, element (w, kk) at w * stride + kk, or k-major, at
    // kk * stride + w. With `core` (the wgmma operand layouts, ir::Wgmma, bf16): rows of 64
    // elements (128 bytes) whose 16-byte chunk c of row q is stored at chunk c ^ (q % 8) (the
    // 128-byte swizzle): row-major, row w holds kk = 0..63 (BK = 64); k-major, row (kk, w / 64)
    // holds w % 64, at (kk / 8) * stride + (w / 64) * 512 + (kk % 8) * 64 (stride = 8 BW).
    bool rowMajor = false, core = false;
    std::int64_t stride = 0;
    // Dependent reduction indices (a solved gradient's ranges) whose range this operand checks:
    // the tile runs over their hulls, and an element outside its range stages as 0.
    std::vector<std::size_t> masks;
    // A register-staged single read whose offset splits into a part of the row (and of the
    // batch) plus a part of the reduction (affine, proven in bounds): each thread's reduction
    // position is the same in every pass of a slice, so the reduction part is computed once a
    // slice, and the rows' parts are read from this shared table (BW 32-bit offsets, filled
    // once per block) instead of decomposing every element's indices. Empty when not so.
    std::string rowTable;
    // Otherwise, for a register-staged operand: the indices that vary from pass to pass (the
    // row's with consecutive threads along k, else the reduction's) are read from shared
    // tables, one per index (buf.t<index>: its value at each row of the tile, or at each
    // position of the whole reduction), filled once per block, instead of being decomposed
    // (divisions and remainders) for every element: None, Rows or Reduction.
    enum class Tables : std::uint8_t { None, Rows, Reduction } tables = Tables::None;
    std::string table(std::size_t v) const { return buf + ".t" + std::to_string(v); }
    // Elements of one stage in the layout that rowMajor, core and stride describe.
    std::int64_t stageSize(std::int64_t BK) const {
      return core ? BW * BK : (rowMajor ? BW : BK) * stride;
    }
    Expr slot(const Expr& w, const Expr& kk) const {
      if (core) {
        auto div = [](const Expr& e, std::int64_t d) {
          return ir::binary(BinOp::Div, e, ir::intImm(d));
        };
        auto mod = [](const Expr& e, std::int64_t d) {
          return ir::binary(BinOp::Mod, e, ir::intImm(d));
        };
        // Row start, the row's swizzle (q % 8) and the position along the row.
        Expr row = rowMajor ? ir::mul(w, ir::intImm(64))
                            : ir::add(ir::add(ir::mul(div(kk, 8), ir::intImm(stride)),
                                              ir::mul(div(w, 64), ir::intImm(512))),
                                      ir::mul(mod(kk, 8), ir::intImm(64)));
        Expr q = rowMajor ? mod(w, 8) : mod(kk, 8);
        Expr at = rowMajor ? kk : mod(w, 64);
        Expr chunk = ir::binary(BinOp::Xor, div(at, 8), q);
        return ir::add(row, ir::add(ir::mul(chunk, ir::intImm(8)), mod(at, 8)));
      }
      return rowMajor ? ir::add(ir::mul(w, ir::intImm(stride)), kk)
                      : ir::add(ir::mul(kk, ir::intImm(stride)), w);
    }
  };
  // An operand of a tile over `group` x K, copied by vectors where vectorRead allows (along k
  // when it has unit stride there, else along the row), laid out by `layout(sg)`, which sets
  // rowMajor and stride.
  Staged staged(const std::vector<const CExpr*>& fs, const std::vector<std::size_t>& group,
                const std::vector<std::size_t>& K, const Ranges& r, const Expr& base,
                std::int64_t BW, std::int64_t BK, const std::string& buf, Type elem,
                const std::vector<std::size_t>& masks, const std::function<void(Staged&)>& layout,
                bool throughRegisters = false) const {
    Staged sg;
    sg.fs = fs;
    sg.masks = masks;
    sg.group = group;
    sg.base = base;
    sg.BW = BW;
    sg.buf = buf;
    sg.elem = elem;
    sg.kFast = unitAlongAny(fs, K);
    // A masked operand is copied by vectors only along the channel index run last (kLast_):
    // its masks are on other reduction indices, so a vector is wholly inside or outside.
    const bool vectorMasks =
        masks.empty() ||
        (kLast_ >= 0 && sg.kFast && !K.empty() && K.back() == static_cast<std::size_t>(kLast_) &&
         std::find(masks.begin(), masks.end(), K.back()) == masks.end());
    sg.vector = vectorMasks && !(throughRegisters && sg.kFast)
                    ? vectorRead(fs, sg.kFast ? K : group, r, elem, !masks.empty())
                    : 0;
    if (sg.vector == 0 && masks.empty() && sg.kFast && BW <= 256 && 256 % BK == 0 &&
        separableRead(fs))
      sg.rowTable = buf + ".rows";
    else if (sg.vector == 0 && 256 % (sg.kFast ? BK : BW) == 0) {
      // Tables pay where the decomposition divides by other than powers of two (shifts and
      // masks): an index after the first whose extent is not one (f32 stride-2 input gradient:
      // tables over a reduction of extents 128 x 2 x 2 took 0.447 -> 0.563 ms).
      auto dividing = [&](const std::vector<std::size_t>& g) {
        return std::any_of(g.begin() + (g.empty() ? 0 : 1), g.end(), [&](std::size_t v) {
          const std::int64_t e = r[v].second - r[v].first;
          return e > 1 && (e & (e - 1)) != 0;
        });
      };
      // Row tables of a masked operand (the bounds then read table entries): bf16 stride-2
      // input gradient 0.666 -> 0.440 ms, but f32 0.480 -> 0.556 (H100, session 9): f32 tiles
      // keep decomposing a masked operand's rows.
      if (sg.kFast && dividing(group) && BW <= 256 && (masks.empty() || elem == Type::bf16))
        sg.tables = Staged::Tables::Rows;
      else if (!sg.kFast && dividing(K) && !slicesAligned(K, r, BK) &&
               static_cast<std::int64_t>(K.size()) * wholeSlices(K, r, BK) * 4 <= 32 * 1024)
        sg.tables = Staged::Tables::Reduction;
    }
    layout(sg);
    sg.stageElems = sg.stageSize(BK);
    return sg;
  }
  static std::int64_t stageUnits(const Staged& s, std::int64_t BK) {
    return s.BW * BK / std::max(s.vector, 1);
  }
  static std::int64_t stageReps(const Staged& s, std::int64_t BK) {
    return (stageUnits(s, BK) + 255) / 256;
  }

  // Element (or vector) e = thread + 256 * rep of a staging pass: its row w, its reduction
  // position kk in the slice, and whether e exists (null when every thread's does).
  static void stagePos(const Staged& s, std::int64_t BK, const Expr& rep, Expr* w, Expr* kk,
                       Expr* valid) {
    const std::int64_t u = std::max(s.vector, 1), units = stageUnits(s, BK);
    Expr e = ir::add(ir::var("gpu.thread"), ir::mul(rep, ir::intImm(256)));
    const std::int64_t fastN = s.kFast ? BK / u : s.BW / u;
    Expr fast = ir::mul(ir::binary(BinOp::Mod, e, ir::intImm(fastN)), ir::intImm(u));
    Expr slow = ir::binary(BinOp::Div, e, ir::intImm(fastN));
    if (256 % fastN == 0) {
      // The same position along the fast direction in every pass (Staged::rowTable, tables).
      Expr thr = ir::var("gpu.thread");
      fast = ir::mul(ir::binary(BinOp::Mod, thr, ir::intImm(fastN)), ir::intImm(u));
      slow = ir::add(ir::binary(BinOp::Div, thr, ir::intImm(fastN)),
                     ir::mul(rep, ir::intImm(256 / fastN)));
    }
    if (s.core && s.vector > 0 && fastN % 8 == 0) {
      // Vectors into the swizzled rows: 8 consecutive threads copy 128 contiguous bytes of one
      // row (whole lines of global memory; the swizzle puts their 8 chunks in distinct
      // banks), a warp 4 rows, then the next 128 bytes of the rows.
      const std::int64_t slowN = s.kFast ? s.BW : BK;
      Expr lo = ir::binary(BinOp::Mod, e, ir::intImm(8)),
           rest = ir::binary(BinOp::Div, e, ir::intImm(8));
      slow = ir::binary(BinOp::Mod, rest, ir::intImm(slowN));
      fast = ir::mul(
          ir::add(ir::mul(ir::binary(BinOp::Div, rest, ir::intImm(slowN)), ir::intImm(8)), lo),
          ir::intImm(u));
    }
    *w = s.kFast ? slow : fast;
    *kk = s.kFast ? fast : slow;
    *valid = units % 256 == 0 ? nullptr : ir::binary(BinOp::Lt, e, ir::intImm(units));
  }
  static Stmt guarded(const Expr& valid, Stmt s) {
    return valid ? ir::ifThen(valid, std::move(s)) : s;
  }

  // Sets the group's and the reduction's indices for row w and position kk of `slice`; returns
  // whether the element lies inside the operand's box, or null where it always does: the
  // tiles (base = tile * BW, w < BW) and slices divide the extents exactly (unmasked operands).
  Expr stageIndices(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r,
                    std::int64_t BK, const Expr& slice, const Expr& w, const Expr& kk) {
    const std::int64_t ext = extentOfGroup(s.group, r), extK = extentOfGroup(K, r);
    Expr gw = ir::add(s.base, w), gk = ir::add(ir::mul(slice, ir::intImm(BK)), kk);
    auto fromTables = [&](const std::vector<std::size_t>& g, const Expr& at) {
      for (std::size_t v : g)
        varExpr_[v] = ir::cast(Type::i64, ir::load(Type::i32, s.table(v), at));
    };
    if (s.tables == Staged::Tables::Rows)
      fromTables(s.group, w);
    else
      decompose(s.group, r, gw);
    if (s.tables == Staged::Tables::Reduction)
      fromTables(K, gk);
    else
      decomposeReduction(K, r, BK, slice, kk);
    // Masked operands (a solved gradient's hull) keep both checks: without them, NVVM in
    // CUDA 13.0 (NVRTC and nvcc alike) crashed in most runs, nondeterministically, on the
    // bf16 convolution input gradient of bench/ (session 8); with them it compiles every time.
    const bool keep = !s.masks.empty();
    Expr inside;
    if (keep || ext % s.BW != 0) inside = ir::binary(BinOp::Lt, gw, ir::intImm(ext));
    if (keep || extK % BK != 0) inside = both(inside, ir::binary(BinOp::Lt, gk, ir::intImm(extK)));
    return inside;
  }
  // A masked tile's reduction (a solved input gradient's (o, a, b): the hull of the filter taps
  // masked to each output position's range) reordered so that the last index is one whose
  // extent BK divides, when there is one: every slice then lies in one tap (slicesAligned), so
  // a thread's masks and offsets are the same for all the elements it stages in a slice (the
  // sums run in another order). Measured on the H100 (session 10, bf16): stride-1 input
  // gradient C=64 0.269 -> 0.133 ms, stride 2 0.398 -> 0.170, C=256 0.195 -> 0.115; f32
  // (slices of 16) 0.376 -> 0.266, 0.489 -> 0.495, 0.308 -> 0.261. Unmasked
  // tiles keep their order: a forward convolution's filter (o, c, a, b) is contiguous along
  // (c, a, b) and copied by vectors, which (a, b, c) would lose (0.057 -> 0.169 ms at C=256).
  // The reduction's slice length (BK) in the f32 tile and in the tensor-core tiles.
  static constexpr std::int64_t kTileSlice = 16, kMmaSlice = 64;
  // In the f32 tiles' split-K model, an SM given a single block takes this much longer for the
  // same slices than one given two (H100, session 13: the C=64 weight gradient's 6 tiles of
  // 64 x 96 in 22 ranges, one block per SM, 0.237 ms, in 44, two, 0.220; the 1x1 weight
  // gradient's 2 tiles of 128 x 64 in 64 ranges 0.111, in 128 0.101).
  static constexpr double kLoneBlock = 1.1;
  // The shortest reduction range of a split tile: 512 (32 f32 slices, 8 tensor-core ones).
  // Shorter ranges spend their time filling the pipeline and writing partials: f32 1024^3
  // (64 tiles of 128 x 128) split in 8 ranges of 8 slices took 0.092 ms, in 2 of 32 0.067-0.071
  // (H100, session 12; cuBLAS 0.060).
  static constexpr std::int64_t kSplitReduction = 512;
  // The fewest slices of an f32 tile's reduction for which row-major operands are copied
  // 4 bytes at a time into the k-major layout (emitGpuTiled).
  static constexpr std::int64_t kLongReduction = 16;
  static void sliceAlongFullIndex(std::vector<std::size_t>& K, const Ranges& r, std::int64_t BK) {
    std::stable_partition(K.begin(), K.end(),
                          [&](std::size_t v) { return (r[v].second - r[v].first) % BK != 0; });
  }
  // Whether every slice of BK along the reduction lies in one combination of its indices but
  // the last (whose extent BK divides).
  static bool slicesAligned(const std::vector<std::size_t>& K, const Ranges& r, std::int64_t BK) {
    return K.size() > 1 && (r[K.back()].second - r[K.back()].first) % BK == 0;
  }
  // The reduction's indices at position slice * BK + kk. With slicesAligned, the indices but
  // the last come from the slice alone (the same for every element a thread stages in it) and
  // the last from kk: no division per element.
  void decomposeReduction(const std::vector<std::size_t>& K, const Ranges& r, std::int64_t BK,
                          const Expr& slice, const Expr& kk) {
    if (!slicesAligned(K, r, BK)) {
      decompose(K, r, ir::add(ir::mul(slice, ir::intImm(BK)), kk));
      return;
    }
    const std::size_t last = K.back();
    const std::int64_t per = (r[last].second - r[last].first) / BK;
    decompose(std::vector<std::size_t>(K.begin(), K.end() - 1), r,
              per == 1 ? slice : ir::binary(BinOp::Div, slice, ir::intImm(per)));
    Expr in =
        per == 1
            ? kk
            : ir::add(ir::mul(ir::binary(BinOp::Mod, slice, ir::intImm(per)), ir::intImm(BK)), kk);
    varExpr_[last] = ir::add(ir::intImm(r[last].first), in);
  }
  // a && b, either possibly null (true).
  static Expr both(const Expr& a, const Expr& b) {
    return !a ? b : !b ? a : ir::binary(BinOp::And, a, b);
  }

  // Starts the staging of `slice` into stage `stage`: asynchronous copies, or loads into
  // registers (the product of the factors, 0 outside the operand).
  Stmt stageIssue(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r,
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
      Expr gk = ir::add(ir::mul(slice, ir::intImm(BK)), kk);
      decomposeReduction(K, r, BK, slice, kk);
      if (extK % BK != 0) inside = ir::binary(BinOp::Lt, gk, ir::intImm(extK));
    }
    Stmt one;
    if (s.vector > 0) {
      Expr unusedInside;
      bool dropped = false;
      const CExpr& f = *s.fs[0];
      trustPlain_ = !s.masks.empty(); // in bounds inside its ranges (`inside` checks them)
      Expr src = offset(f, &unusedInside, &dropped);
      trustPlain_ = false;
      Expr dst = ir::add(ir::mul(stage, ir::intImm(s.stageElems)), s.slot(w, kk));
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
        trustPlain_ = !s.masks.empty();
        v = value(*s.fs[0]);
        for (std::size_t q = 1; q < s.fs.size(); ++q)
          v = ir::binary(BinOp::Mul, v, value(*s.fs[q]));
        trustPlain_ = false;
      }
      one = ir::store(s.buf + ".v", rep, ir::cast(s.elem, v));
      if (inside)
        one = ir::ifThen(inside, one, ir::store(s.buf + ".v", rep, ir::cast(s.elem, num(0))));
    }
    return ir::forLoop(s.buf + ".r", ir::intImm(0), ir::intImm(stageReps(s, BK)), ForKind::Unrolled,
                       guarded(valid, one));
  }
  // Stores the registers of a register-staged operand into stage `stage`.
  Stmt stagePut(const Staged& s, std::int64_t BK, const Expr& stage) {
    if (s.vector > 0) return nullptr;
    Expr rep = ir::var(s.buf + ".r"), w, kk, valid;
    stagePos(s, BK, rep, &w, &kk, &valid);
    Expr dst = ir::add(ir::mul(stage, ir::intImm(s.stageElems)), s.slot(w, kk));
    return ir::forLoop(s.buf + ".r", ir::intImm(0), ir::intImm(stageReps(s, BK)), ForKind::Unrolled,
                       guarded(valid, ir::store(s.buf, dst, ir::load(s.elem, s.buf + ".v", rep))));
  }

  // How many slices a tile keeps in shared memory: operands staged through registers run one
  // slice ahead (2); when every operand is copied asynchronously, up to 4 slices within
  // 96 KiB, so the copies of slice k.o + stages - 1 overlap the products of k.o.
  static int stagesFor(const std::vector<Staged>& ops) {
    for (const Staged& s : ops)
      if (s.vector == 0) return 2;
    const std::int64_t per = sharedBytes(ops);
    return static_cast<int>(
        std::clamp<std::int64_t>(96 * 1024 / std::max<std::int64_t>(per, 1), 2, 4));
  }

  // The reduction loop of a tile over its slices with every operand staged in `stages` slots
  // of shared memory (stagesFor): before slice k.o is multiplied (`compute(slot)`), the copies
  // of slice k.o + stages - 1 are issued into the slot slice k.o - 1 used, and the operands
  // staged through registers load slice k.o + 1, stored after the products; one barrier per
  // slice. With `inFlight` (asynchronous warpgroup products that `compute` leaves running),
  // the copies run inFlight slices less ahead, and the products are waited for after the loop.
  Stmt pipeline(const std::vector<Staged>& ops, const std::vector<std::size_t>& K, const Ranges& r,
                std::int64_t BK, const TileSplit& split, std::int64_t slices, int stages,
                const std::function<Stmt(const Expr&)>& compute, bool asyncProxy = false,
                int inFlight = 0) {
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
    auto plus = [](const Expr& e, std::int64_t k) { return ir::add(e, ir::intImm(k)); };
    auto below = [&](const Expr& e) { return ir::binary(BinOp::Lt, e, hi); };
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
    Expr cur = ir::binary(BinOp::Mod, from, ir::intImm(stages));
    Expr ahead = plus(ko, dist);
    const bool registers =
        std::any_of(ops.begin(), ops.end(), [](const Staged& sg) { return sg.vector == 0; });
    Expr next = ir::binary(BinOp::Mod, plus(from, 1), ir::intImm(stages));
    Stmt body = ir::block(
        {async ? ir::asyncWait(dist - 1) : nullptr, ir::barrier(asyncProxy),
         ir::ifThen(below(ahead),
                    issue(ahead, ir::binary(BinOp::Mod, plus(from, dist), ir::intImm(stages)))),
         commit, compute(cur), registers ? ir::ifThen(below(plus(ko, 1)), put(next)) : nullptr});
    Stmt loop = ir::block({ir::block(prologue), ir::forLoop("k.o", lo, hi, ForKind::Serial, body),
                           inFlight ? ir::asyncWait(0, true) : nullptr});
    for (const Staged& s : ops)
      if (s.vector == 0) loop = ir::allocate(s.buf + ".v", s.elem, stageReps(s, BK), loop);
    for (const Staged& s : ops)
      loop = ir::allocate(s.buf, s.elem, stages * s.stageElems, loop, true);
    for (const Staged& s : ops)
      if (!s.rowTable.empty()) {
        loop = ir::allocate(s.rowTable, Type::i32, s.BW, loop, true);
      } else if (s.tables != Staged::Tables::None) {
        for (std::size_t v : s.tables == Staged::Tables::Rows ? s.group : K)
          loop = ir::allocate(s.table(v), Type::i32, tableEntries(s, K, r, BK), loop, true);
      }
    return loop;
  }
  static std::int64_t sharedBytes(const std::vector<Staged>& ops) {
    std::int64_t n = 0;
    for (const Staged& s : ops) n += s.stageElems * typeBytes(s.elem);
    return n;
  }

  // ", 2 slices in flight; tile.A by 16-byte asynchronous copies, tile.B through registers".
  static std::string stagingNote(const Statement& st, const std::vector<Staged>& ops, int stages) {
    std::string t = ", " + std::to_string(stages) + " slices in flight";
    for (std::size_t q = 0; q < ops.size(); ++q) {
      t += std::string(q ? ", " : "; ") + ops[q].buf +
           (ops[q].vector > 0 ? " by " + std::to_string(ops[q].vector * typeBytes(ops[q].elem)) +
                                    "-byte asynchronous copies"
                              : std::string(" through registers"));
      if (!ops[q].rowTable.empty())
        t += " (row offsets from a table)";
      else if (ops[q].tables != Staged::Tables::None)
        t += ops[q].tables == Staged::Tables::Rows ? " (row indices from tables)"
                                                   : " (reduction indices from tables)";
      if (!ops[q].masks.empty())
        t += " (over the hull of (" + varNames(st, ops[q].masks) + "), masked to their ranges)";
    }
    return t;
  }

  // Elements per asynchronous 16-byte copy of operand f along the flattened index group
  // `along` (the last fastest), or 0 when f cannot be copied that way: a single read whose
  // subscripts are proven in bounds (no check, pad or fold), stored as `elem`, from a 16-byte
  // aligned pointer, contiguous along a run of the group's last indices (unit stride on the
  // last, each earlier one moving by the extent of those after it: a convolution's weights
  // along (c,a,b)) whose length is a multiple of the vector; every other index of two values or
  // more moves it by whole vectors, and so does its offset at the box's first element.
  // With trustPlain (a masked operand), plain subscripts count as in bounds (as in offset).
  int vectorRead(const std::vector<const CExpr*>& fs, const std::vector<std::size_t>& along,
                 const Ranges& r, Type elem, bool trustPlain = false) const {
    if (along.empty()) return 0;
    if (fs.size() != 1 || fs[0]->kind != CKind::Read || fs[0]->subs.empty()) return 0;
    const CExpr& f = *fs[0];
    const auto t = static_cast<std::size_t>(f.tensor);
    if (t >= aligned_.size() || !aligned_[t] || elemType(f.tensor) != elem) return 0;
    const std::int64_t vec = 16 / typeBytes(elem);
    const auto& stv = strides_[t];
    std::vector<std::int64_t> coef(r.size(), 0);
    std::int64_t first = 0;
    for (std::size_t d = 0; d < f.subs.size(); ++d) {
      const Subscript& sub = f.subs[d];
      if (sub.gather) return 0;
      if (!subscriptInBounds(f, d) && !(trustPlain && sub.mode == IndexMode::Plain)) return 0;
      const std::int64_t c = b_.eval(p_, sub.constant);
      first += c * stv[d];
      for (std::size_t v = 0; v < r.size() && v < sub.coef.size(); ++v)
        coef[v] += sub.coef[v] * stv[d];
    }
    if (coef[along.back()] != 1) return 0;
    std::vector<bool> inRun(r.size(), false);
    std::int64_t run = 1;
    for (std::size_t q = along.size(); q-- > 0;) {
      const std::size_t v = along[q];
      if (coef[v] != run) break;
      inRun[v] = true;
      run *= r[v].second - r[v].first;
    }
    if (run % vec != 0) return 0;
    for (std::size_t v = 0; v < r.size(); ++v) {
      first += coef[v] * r[v].first;
      if (!inRun[v] && r[v].second - r[v].first > 1 && coef[v] % vec != 0) return 0;
    }
    return first % vec == 0 ? static_cast<int>(vec) : 0;
  }

  bool unitAlongAny(const std::vector<const CExpr*>& fs, const std::vector<std::size_t>& K) const {
    if (K.empty()) return false;
    for (const CExpr* f : fs)
      if (unitAlong(*f, K.back())) return true;
    return false;
  }

  // A single read with affine subscripts proven in bounds (no gather, pad or fold) in a tensor
  // whose offsets fit in 32 bits: Staged::rowTable.
  bool separableRead(const std::vector<const CExpr*>& fs) const {
    if (fs.size() != 1 || fs[0]->kind != CKind::Read || fs[0]->subs.empty()) return false;
    const CExpr& f = *fs[0];
    const auto t = static_cast<std::size_t>(f.tensor);
    std::int64_t span = 1;
    for (std::size_t d = 0; d < f.subs.size(); ++d) {
      const Subscript& sub = f.subs[d];
      if (sub.gather) return false;
      if (!subscriptInBounds(f, d)) return false;
      span += (extentOf(f.tensor, d) - 1) * std::abs(strides_[t][d]);
    }
    return span < (std::int64_t{1} << 31);
  }
  // The part of read f's offset that the indices in `of` contribute (with the constants when
  // `constants`), from the current index expressions.
  Expr offsetPart(const CExpr& f, const std::vector<bool>& of, bool constants) const {
    Expr off = ir::intImm(0);
    const auto& stride = strides_[static_cast<std::size_t>(f.tensor)];
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
  std::vector<bool> inGroup(const std::vector<std::size_t>& g) const {
    std::vector<bool> in(varExpr_.size(), false);
    for (std::size_t v : g) in[v] = true;
    return in;
  }
  // Fills a row table (Staged::rowTable): entry w holds the row part of the offset of row
  // base + w, 0 for rows past the extent (their products only reach cells never stored).
  Stmt fillRowTable(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r) {
    const std::int64_t ext = extentOfGroup(s.group, r);
    Expr w = ir::var("gpu.thread"), gw = ir::add(s.base, w);
    decompose(s.group, r, gw);
    std::vector<bool> rest = inGroup(K);
    rest.flip();
    Expr off = offsetPart(*s.fs[0], rest, true);
    if (ext % s.BW != 0)
      off = ir::select(ir::binary(BinOp::Lt, gw, ir::intImm(ext)), off, ir::intImm(0));
    Stmt fill = ir::store(s.rowTable, w, ir::cast(Type::i32, off));
    return s.BW < 256 ? ir::ifThen(ir::binary(BinOp::Lt, w, ir::intImm(s.BW)), fill) : fill;
  }

  // Fills the index tables of a register-staged operand (Staged::tables): per row of the tile,
  // or per position of the reduction padded to whole slices.
  Stmt fillTables(const Staged& s, const std::vector<std::size_t>& K, const Ranges& r,
                  std::int64_t BK) {
    const bool rows = s.tables == Staged::Tables::Rows;
    const std::vector<std::size_t>& g = rows ? s.group : K;
    const std::int64_t n = tableEntries(s, K, r, BK);
    Expr t = ir::var("gpu.thread"), e = ir::add(t, ir::mul(ir::var(s.buf + ".f"), ir::intImm(256)));
    decompose(g, r, rows ? ir::add(s.base, e) : e);
    std::vector<Stmt> stores;
    for (std::size_t v : g)
      stores.push_back(ir::store(s.table(v), e, ir::cast(Type::i32, varExpr_[v])));
    Stmt body = ir::block(stores);
    if (n % 256 != 0) body = ir::ifThen(ir::binary(BinOp::Lt, e, ir::intImm(n)), body);
    return ir::forLoop(s.buf + ".f", ir::intImm(0), ir::intImm((n + 255) / 256), ForKind::Serial,
                       body);
  }
  static std::int64_t tableEntries(const Staged& s, const std::vector<std::size_t>& K,
                                   const Ranges& r, std::int64_t BK) {
    return s.tables == Staged::Tables::Rows ? s.BW : wholeSlices(K, r, BK);
  }
  // The reduction's extent rounded up to whole slices.
  static std::int64_t wholeSlices(const std::vector<std::size_t>& K, const Ranges& r,
                                  std::int64_t BK) {
    return (extentOfGroup(K, r) + BK - 1) / BK * BK;
  }

  // The tile kernel's launch: 256 threads per block, a block per (tile, reduction range).
  static Stmt tileLaunch(Stmt body, std::int64_t blocks) {
    body = ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(256), ForKind::GpuThread, body);
    return ir::forLoop("gpu.block", ir::intImm(0), ir::intImm(blocks), ForKind::GpuBlock, body);
  }

  // "i,j" for a group of indices ("-" when empty), for schedule notes.
  static std::string varNames(const Statement& st, const std::vector<std::size_t>& group) {
    std::string t;
    for (std::size_t v : group) t += (t.empty() ? "" : ",") + st.vars[v].name;
    return t.empty() ? std::string("-") : t;
  }

  static std::int64_t extentOfGroup(const std::vector<std::size_t>& group, const Ranges& r) {
    std::int64_t n = 1;
    for (std::size_t v : group) n *= r[v].second - r[v].first;
    return n;
  }

  // Dependent reduction indices (the ranges a gradient's index solving leaves, e.g. a in
  // max(u - 2, 0):min(u + 1, 3)) in a tile: it runs over their hulls, and the operand on the
  // side whose output indices (with the batch ones) are all the bounds read checks them,
  // staging 0 outside (masks, see Staged). False when some bound reads both sides, reduction
  // indices or a dependent output index, or when the ranges fill less than half of their hulls
  // on average (a strided convolution's input gradient: the core/border split is better).
  bool maskedRanges(const Statement& st, const BoundStatement& bs, const Ranges& r,
                    const std::vector<std::size_t>& I, const std::vector<std::size_t>& J,
                    const std::vector<std::size_t>& B, std::vector<std::size_t>& maskL,
                    std::vector<std::size_t>& maskR) const {
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
    double share = 1;
    for (std::size_t v = 0; v < n; ++v) {
      if (!bs.dependent[v]) continue;
      if (v < nOut) return false;
      const std::vector<std::size_t> read = boundReads(st, v);
      auto within = [&](const std::vector<std::size_t>& g) {
        for (std::size_t u : read)
          if (std::find(g.begin(), g.end(), u) == g.end() &&
              std::find(B.begin(), B.end(), u) == B.end())
            return false;
        return true;
      };
      if (within(I))
        maskL.push_back(v);
      else if (within(J))
        maskR.push_back(v);
      else
        return false;
      share *= meanShare(bs, r, v, read);
    }
    return share >= 0.5;
  }
  // The mean length of dependent index v's range over the values of the indices it reads,
  // relative to its hull (0 when there are too many values to count).
  double meanShare(const BoundStatement& bs, const Ranges& r, std::size_t v,
                   const std::vector<std::size_t>& read) const {
    double points = 1;
    for (std::size_t u : read) points *= static_cast<double>(r[u].second - r[u].first);
    const std::int64_t hull = r[v].second - r[v].first;
    if (points > 1e6 || points < 1 || hull <= 0) return 0;
    std::vector<std::int64_t> vals(r.size(), 0);
    double sum = 0;
    std::function<void(std::size_t)> walk = [&](std::size_t q) {
      if (q == read.size()) {
        auto [lo, hi] = depRange(bs, v, vals);
        lo = std::max(lo, r[v].first);
        hi = std::min(hi, r[v].second);
        sum += static_cast<double>(std::max<std::int64_t>(hi - lo, 0));
        return;
      }
      for (std::int64_t x = r[read[q]].first; x < r[read[q]].second; ++x) {
        vals[read[q]] = x;
        walk(q + 1);
      }
    };
    walk(0);
    return sum / (points * static_cast<double>(hull));
  }
  // The range [lo, hi) of dependent index v at the values `vals` of the indices (slots) it
  // reads; in a residue phase, of m for q (see PhaseSub).
  std::pair<std::int64_t, std::int64_t> depRange(const BoundStatement& bs, std::size_t v,
                                                 const std::vector<std::int64_t>& vals) const {
    const PhaseSub* ph = nullptr;
    for (const PhaseSub& x : phase_)
      if (x.red == v) ph = &x;
    std::vector<std::int64_t> orig = vals;
    for (const PhaseSub& x : phase_) orig[x.out] = x.g * vals[x.out] + x.rho;
    std::int64_t lo = bs.loBound[v].eval(orig), hi = bs.hiBound[v].eval(orig);
    if (!ph) return {lo, hi};
    lo = std::max(lo, ph->hullLo);
    hi = std::min(hi, ph->hullHi);
    const std::int64_t shift = ph->a * vals[ph->out];
    return {lo - shift, hi - shift};
  }
  // Whether the current element lies in dependent index v's range (its original index, in a
  // residue phase; varExpr_ holds the slots' values).
  Expr maskCondition(std::size_t v) {
    const BoundStatement& bs = *maskBounds_;
    std::vector<Expr> saved = varExpr_;
    Expr h = varExpr_[v], extra;
    for (const PhaseSub& x : phase_) {
      varExpr_[x.out] = ir::add(ir::mul(ir::intImm(x.g), saved[x.out]), ir::intImm(x.rho));
      if (x.red == v) {
        h = ir::add(ir::mul(ir::intImm(x.a), saved[x.out]), saved[v]);
        extra = ir::binary(BinOp::And, ir::binary(BinOp::Ge, h, ir::intImm(x.hullLo)),
                           ir::binary(BinOp::Lt, h, ir::intImm(x.hullHi)));
      }
    }
    Expr c = ir::binary(BinOp::And, ir::binary(BinOp::Ge, h, boundExpr(bs.loBound[v])),
                        ir::binary(BinOp::Lt, h, boundExpr(bs.hiBound[v])));
    varExpr_ = saved;
    return extra ? ir::binary(BinOp::And, extra, c) : c;
  }

  // A strided convolution's input gradient, dx[u] := dy[h] * k[u - 2h] with h in
  // max(0, cdiv(u - 2, 2)):min(N, fdiv(u, 2) + 1), fills a sliver of h's hull. Split u into
  // residue phases u = g*q + rho (g: the divisor in h's bounds) and write h = a*q + m: in each
  // phase m runs over a few values (dx[2q+rho] := dy[q+m] * k[rho - 2m]), a dense contraction
  // that emitGpuTiled masks. Every phase must tile, or nothing is emitted.
  bool phaseTiles(const Statement& st, const BoundStatement& bs, const Ranges& ranges,
                  const std::string& base) {
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
    if (st.lhsVars.empty()) return false;
    std::vector<PhaseSub> subs;
    for (std::size_t v = 0; v < n; ++v) {
      if (!bs.dependent[v]) continue;
      if (v < nOut) return false;
      const std::vector<std::size_t> read = boundReads(st, v);
      if (read.size() != 1 || read[0] >= nOut) return false;
      const std::size_t u = read[0];
      for (const PhaseSub& x : subs)
        if (x.out == u) return false;
      const std::int64_t g = std::max(divisorOf(bs.loBound[v]), divisorOf(bs.hiBound[v]));
      if (g < 2 || ranges[u].second - ranges[u].first < 4 * g) return false;
      PhaseSub ph;
      ph.out = u;
      ph.red = v;
      ph.g = g;
      ph.hullLo = ranges[v].first;
      ph.hullHi = ranges[v].second;
      // a: how far h's range moves per step of q, read off the middle of u's range.
      std::vector<std::int64_t> vals(n, 0);
      const std::int64_t mid = (ranges[u].first + ranges[u].second) / 2 / g * g;
      vals[u] = mid;
      const std::int64_t lo0 = bs.loBound[v].eval(vals);
      vals[u] = mid + g;
      ph.a = bs.loBound[v].eval(vals) - lo0;
      subs.push_back(ph);
    }
    if (subs.empty()) return false;
    // Worth tiles: the multiply-adds the ranges hold, as emitGpuTiled asks of a whole statement.
    double work = 1;
    for (std::size_t v = 0; v < n; ++v)
      if (!bs.dependent[v]) work *= static_cast<double>(ranges[v].second - ranges[v].first);
    for (const PhaseSub& x : subs)
      work *= meanShare(bs, ranges, x.red, {x.out}) *
              static_cast<double>(ranges[x.red].second - ranges[x.red].first);
    if (work < 65536) return false;
    std::int64_t combos = 1;
    for (const PhaseSub& x : subs) combos *= x.g;
    if (combos > 16) return false;
    const std::size_t funcs = out_.funcs.size(), scratch = out_.scratch.size();
    auto cdiv = [](std::int64_t a, std::int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); };
    std::string notes;
    bool ok = true;
    for (std::int64_t c = 0; c < combos && ok; ++c) {
      std::int64_t rest = c;
      Ranges r = ranges;
      bool empty = false;
      for (PhaseSub& x : subs) {
        x.rho = rest % x.g;
        rest /= x.g;
        r[x.out] = {cdiv(ranges[x.out].first - x.rho, x.g),
                    cdiv(ranges[x.out].second - x.rho, x.g)};
        empty = empty || r[x.out].second <= r[x.out].first;
      }
      if (empty) continue;
      phase_ = subs;
      // m's hull over the phase.
      for (const PhaseSub& x : subs) {
        std::int64_t lo = 0, hi = 0;
        bool any = false;
        std::vector<std::int64_t> vals(n, 0);
        for (std::int64_t q = r[x.out].first; q < r[x.out].second; ++q) {
          vals[x.out] = q;
          auto [a, b] = depRange(bs, x.red, vals);
          if (b <= a) continue;
          lo = any ? std::min(lo, a) : a;
          hi = any ? std::max(hi, b) : b;
          any = true;
        }
        r[x.red] = {lo, any ? hi : lo + 1};
      }
      BoundStatement pb = bs;
      for (std::size_t v = 0; v < n; ++v) {
        pb.lo[v] = r[v].first;
        pb.hi[v] = r[v].second;
      }
      const Statement ps = phaseStatement(st, subs);
      std::string name = base + "_phase";
      for (const PhaseSub& x : subs) name += std::to_string(x.rho);
      ok = emitGpuTiled(ps, pb, r, name);
      if (ok) notes = gpuNote_;
    }
    phase_.clear();
    if (!ok || notes.empty()) {
      out_.funcs.resize(funcs);
      out_.scratch.resize(scratch);
      return false;
    }
    std::string what;
    for (const PhaseSub& x : subs)
      what += (what.empty() ? "" : ", ") + st.vars[x.out].name + " = " + std::to_string(x.g) +
              "q + r, " + st.vars[x.red].name + " = " + (x.a == 1 ? "" : std::to_string(x.a)) +
              "q + m";
    gpuNote_ = std::to_string(combos) + " residue phases (" + what + "), each: " + notes;
    if (mergeLaunches(funcs, base + "_phases")) gpuNote_ += "; the phases in one launch";
    return true;
  }
  // Functions [from, end) that are each one launch of the same block size and write disjoint
  // outputs (residue phases without split-K) become one launch: block b runs function p's block
  // b - offset_p, so one function's last blocks share the GPU with the next's first instead of
  // leaving it part idle. False (nothing changed) unless there are two or more such launches,
  // or when they use wgmma. Measured on the H100 (session 15, bench_cuda, stride-2 input
  // gradient, 4 phases of 196 blocks): f32 0.455 -> 0.422 ms; bf16 on warpgroup tiles 0.102 ->
  // 0.139 (ptxas keeps the products of four copies of the tile apart), so those stay apart.
  bool mergeLaunches(std::size_t from, const std::string& name) {
    std::vector<ir::Func>& fs = out_.funcs;
    if (fs.size() < from + 2) return false;
    struct FindWgmma : ir::Visitor {
      bool found = false;
      void visitWgmma(const ir::Wgmma&) override { found = true; }
    } wgmma;
    for (std::size_t i = from; i < fs.size(); ++i) wgmma.visit(fs[i].body);
    if (wgmma.found) return false;
    std::vector<std::int64_t> blocks;
    std::int64_t threads = 0;
    for (std::size_t i = from; i < fs.size(); ++i) {
      const Stmt& b = fs[i].body;
      std::int64_t nb = 0, nt = 0, lo = -1;
      if (b->kind != ir::NodeKind::For) return false;
      const auto& fb = static_cast<const ir::For&>(*b);
      if (fb.forKind != ForKind::GpuBlock || !ir::isConst(fb.hi, &nb) || !ir::isConst(fb.lo, &lo) ||
          lo != 0 || fb.body->kind != ir::NodeKind::For)
        return false;
      const auto& ft = static_cast<const ir::For&>(*fb.body);
      if (ft.forKind != ForKind::GpuThread || !ir::isConst(ft.hi, &nt) ||
          (threads && nt != threads))
        return false;
      threads = nt;
      blocks.push_back(nb);
    }
    const Expr blk = ir::var("gpu.block");
    std::int64_t total = 0;
    for (std::int64_t nb : blocks) total += nb;
    Stmt chain;
    std::int64_t end = total;
    for (std::size_t i = fs.size(); i-- > from;) {
      const std::int64_t off = end - blocks[i - from];
      const auto& ft = static_cast<const ir::For&>(*static_cast<const ir::For&>(*fs[i].body).body);
      Stmt part =
          off == 0 ? ft.body : ir::substitute(ft.body, "gpu.block", ir::sub(blk, ir::intImm(off)));
      chain = chain ? ir::ifThen(ir::binary(BinOp::Lt, blk, ir::intImm(end)), part, chain) : part;
      end = off;
    }
    ir::Func f = newFunc(name);
    f.body = ir::forLoop(
        "gpu.block", ir::intImm(0), ir::intImm(total), ForKind::GpuBlock,
        ir::forLoop("gpu.thread", ir::intImm(0), ir::intImm(threads), ForKind::GpuThread, chain));
    fs.resize(from);
    fs.push_back(std::move(f));
    return true;
  }
  static std::int64_t divisorOf(const ConcreteBound& b) {
    std::int64_t d =
        b.kind == IndexBound::Kind::FDiv || b.kind == IndexBound::Kind::CDiv ? b.divisor : 1;
    for (const ConcreteBound& a : b.args) d = std::max(d, divisorOf(a));
    return d;
  }
  // The statement in a residue phase: every subscript's coefficient on u moves to q (times g,
  // its constant gains rho times it) and h's to q (times a) and m.
  static Statement phaseStatement(const Statement& st, const std::vector<PhaseSub>& subs) {
    std::function<CExprPtr(const CExpr&)> copy = [&](const CExpr& e) {
      auto c = std::make_shared<CExpr>(e);
      for (Subscript& sub : c->subs) {
        std::vector<std::int64_t> coef = sub.coef;
        for (const PhaseSub& x : subs) {
          if (x.out >= coef.size()) continue;
          const std::int64_t cu = sub.coef[x.out], ch = x.red < coef.size() ? sub.coef[x.red] : 0;
          coef[x.out] = cu * x.g + ch * x.a;
          sub.constant = symAddConst(sub.constant, cu * x.rho);
        }
        sub.coef = coef;
        if (sub.gather) sub.gather = copy(*sub.gather);
      }
      for (CExprPtr& a : c->args) a = copy(*a);
      return CExprPtr(c);
    };
    Statement ps = st;
    ps.rhs = copy(*st.rhs);
    ps.lhs = copy(*st.lhs);
    return ps;
  }

  // Whether every plain subscript of the factors is proven inside its tensor over the current
  // ranges (setRanges), so they need no mask.
  bool provenInBounds(const std::vector<const CExpr*>& fs) const {
    std::function<bool(const CExpr&)> ok = [&](const CExpr& e) {
      if (e.kind == CKind::Read)
        for (std::size_t d = 0; d < e.subs.size(); ++d) {
          if (e.subs[d].mode != IndexMode::Plain) continue;
          if (!subscriptInBounds(e, d)) return false;
        }
      for (const auto& a : e.args)
        if (!ok(*a)) return false;
      return true;
    };
    for (const CExpr* f : fs)
      if (!ok(*f)) return false;
    return true;
  }

  // A '+' contraction whose right-hand side is a product L * R, R holding every factor that
  // uses the output index with unit stride: each block of 256 threads computes a BM x BN tile
  // of (I = output indices only L uses) x (J = output indices only R uses) for one value of the
  // other output indices, staging BK-deep slices of L and R (over the flattened reduction
  // indices) in shared memory; each thread keeps TM x TN accumulators in registers.
  bool emitGpuTiled(const Statement& st, const BoundStatement& bs, const Ranges& r,
                    const std::string& name) {
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars()), n = st.vars.size();
    if (st.reduce != Reduce::Add || n == nOut || st.lhsVars.empty()) return false;
    std::vector<const CExpr*> factors;
    flattenProduct(*st.rhs, factors);
    // The column index: of the output indices some factors use and others do not (batch
    // indices, used by every factor, cannot separate them), the one with the smallest stride
    // in the output (coalesced stores when it is 1).
    const auto& os = strides_[static_cast<std::size_t>(st.output)];
    int fast = -1;
    std::int64_t fastStride = 0;
    std::vector<std::vector<bool>> uses(factors.size(), std::vector<bool>(n, false));
    for (std::size_t q = 0; q < factors.size(); ++q) usedVars(*factors[q], uses[q]);
    for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
      const auto v = static_cast<std::size_t>(st.lhsVars[d]);
      if (r[v].second - r[v].first < 2) continue;
      std::size_t users = 0;
      for (const auto& u : uses) users += u[v] ? 1 : 0;
      if (users == 0 || users == factors.size()) continue;
      std::int64_t stride = 0; // in the output (a residue phase's q moves by g elements)
      for (std::size_t e = 0; e < st.lhs->subs.size(); ++e)
        stride += st.lhs->subs[e].coef[v] * os[e];
      if (fast < 0 || std::abs(stride) < fastStride) {
        fast = static_cast<int>(v);
        fastStride = std::abs(stride);
      }
    }
    if (fast < 0) return false;
    std::vector<const CExpr*> L, R;
    std::vector<bool> inL(n, false), inR(n, false);
    for (std::size_t q = 0; q < factors.size(); ++q) {
      const CExpr* f = factors[q];
      const std::vector<bool>& u = uses[q];
      auto& side = u[static_cast<std::size_t>(fast)] ? R : L;
      auto& in = u[static_cast<std::size_t>(fast)] ? inR : inL;
      side.push_back(f);
      for (std::size_t v = 0; v < n; ++v) in[v] = in[v] || u[v];
    }
    if (L.empty() || R.empty()) return false;
    std::vector<std::size_t> I, J, B, K;
    for (std::size_t d = 0; d < st.lhsVars.size(); ++d) {
      const auto v = static_cast<std::size_t>(st.lhsVars[d]);
      if (std::find(I.begin(), I.end(), v) != I.end() ||
          std::find(J.begin(), J.end(), v) != J.end() ||
          std::find(B.begin(), B.end(), v) != B.end())
        continue;
      if (inL[v] && !inR[v])
        I.push_back(v);
      else if (inR[v] && !inL[v])
        J.push_back(v);
      else
        B.push_back(v);
    }
    for (std::size_t v = nOut; v < n; ++v) K.push_back(v);
    if (kLast_ >= 0) { // relayoutTiled: the channel index last
      const auto c = static_cast<std::size_t>(kLast_);
      K.erase(std::remove(K.begin(), K.end(), c), K.end());
      K.push_back(c);
    }
    // Indices of one value (a 1x1 filter's a, b) leave the groups and keep that value: a unit
    // stride along one must not decide an operand's layout or break a contiguous run (the 1x1
    // convolution's input was staged through registers as if contiguous along b).
    struct Unpin {
      std::vector<bool>& p;
      ~Unpin() { p.clear(); }
    } unpin{pinned_};
    pinned_.assign(n, false);
    for (auto* g : {&I, &J, &B, &K})
      g->erase(std::remove_if(g->begin(), g->end(),
                              [&](std::size_t v) {
                                pinned_[v] = r[v].second - r[v].first == 1 && !bs.dependent[v];
                                return pinned_[v];
                              }),
               g->end());
    if (I.empty() || J.empty() || K.empty()) return false;
    std::vector<std::size_t> maskL, maskR;
    if (!maskedRanges(st, bs, r, I, J, B, maskL, maskR)) return false;
    setRanges(st, r);
    if ((maskL.empty() && !maskR.empty() && !provenInBounds(L)) ||
        (maskR.empty() && !maskL.empty() && !provenInBounds(R)))
      return false;
    maskBounds_ = &bs;
    const std::int64_t extI = extentOfGroup(I, r), extJ = extentOfGroup(J, r),
                       extK = extentOfGroup(K, r), extB = extentOfGroup(B, r);
    // (A residue phase is tiled whatever its size: phaseTiles weighed the whole statement.)
    if (extK < 8 ||
        (phase_.empty() &&
         static_cast<double>(extI) * static_cast<double>(extJ) * static_cast<double>(extK) < 65536))
      return false;
    // bf16 operands read as they are (rounding them again to bf16 is exact): tensor cores.
    const bool mma = b_.dtype == DType::bf16 && L.size() == 1 && R.size() == 1 &&
                     L[0]->kind == CKind::Read && R[0]->kind == CKind::Read && extK >= 16;
    if (!maskL.empty() || !maskR.empty()) sliceAlongFullIndex(K, r, mma ? kMmaSlice : kTileSlice);
    if (mma) return emitGpuMma(st, bs, r, name, *L[0], *R[0], I, J, B, K, maskL, maskR);
    // Cells per thread along a tile side: 8 (128 wide), fewer for short extents (powers of
    // two), or 7 or 6 (112, 96 wide) where that pads the extent 5% less: 784 = 7 x 112 (the
    // Linear layer's input features; its gradients 0.219 -> 0.205 ms and 0.217 -> 0.196 ms on
    // the H100, session 13), 576 = 6 x 96 (a C=64 3x3 filter's (c,a,b)).
    auto tileFor = [](std::int64_t ext) {
      std::int64_t t = 8;
      while (t > 1 && 16 * t / 2 >= ext) t /= 2;
      if (t == 8) {
        auto padded = [ext](std::int64_t u) { return (ext + 16 * u - 1) / (16 * u) * (16 * u); };
        std::int64_t best = 8;
        for (std::int64_t u : {7, 6})
          if (padded(u) < padded(best) && 20 * padded(u) <= 19 * padded(8)) best = u;
        t = best;
      }
      return t;
    };
    const std::int64_t TM = tileFor(extI), TN = tileFor(extJ), BM = 16 * TM, BN = 16 * TN,
                       BK = kTileSlice;
    const std::int64_t tilesI = (extI + BM - 1) / BM, tilesJ = (extJ + BN - 1) / BN;
    const std::int64_t slices = (extK + BK - 1) / BK;
    setRanges(st, r);
    if (!storeOutput(st, num(0))) return false;
    const TileSplit split = tileSplit(st, r, tilesI * tilesJ * extB, slices, BK, name, 0,
                                      2.0 * static_cast<double>(BM * BN * BK));
    ir::Func f = newFunc(name);
    Expr blk = tileBlock(split), thr = ir::var("gpu.thread");
    Expr tj = ir::binary(BinOp::Mod, blk, ir::intImm(tilesJ));
    Expr ti =
        ir::binary(BinOp::Mod, ir::binary(BinOp::Div, blk, ir::intImm(tilesJ)), ir::intImm(tilesI));
    Expr bt = ir::binary(BinOp::Div, blk, ir::intImm(tilesJ * tilesI));
    Expr tx = ir::binary(BinOp::Mod, thr, ir::intImm(16)),
         ty = ir::binary(BinOp::Div, thr, ir::intImm(16));
    if (!B.empty()) decompose(B, r, bt);
    // Each operand's layout in shared memory: copied 4 floats at a time along k, rows of BK + 4
    // (row-major, 16-byte aligned rows); otherwise k-major, slot kk * stride + w, copied along
    // the row when the operand is contiguous there, else through registers, rows padded by 4
    // (consecutive threads store down a column: two on a bank).
    // When only one operand would be copied row-major, it goes through registers into the
    // k-major layout instead (ptxas reads a row-major operand 4 k at a time along its rows,
    // which costs registers). Measured (H100, session 12): 4096^3 A[i,k] * B[k,j] 3.07 ->
    // 2.92 ms, A[k,i] * B[j,k] 3.33 -> 2.92 ms (cuBLAS 2.66, 2.81); convolutions with a
    // row-major filter 5-15% faster (1x1 forward 0.160 -> 0.138 ms). With both row-major
    // (A[i,k] * B[j,k]: 214 registers, one block per SM) moving one is slower (3.41 -> 3.66
    // ms), both faster at 4096 (3.19) but slower at 1024 (0.067 -> 0.070) and for the 1x1
    // weight gradient (0.113 -> 0.131): both stay, except over whole long reductions (below).
    auto layout = [BK](Staged& sg) {
      sg.rowMajor = sg.kFast && sg.vector > 1;
      sg.stride = sg.rowMajor ? BK + 4 : sg.BW + (sg.kFast ? 4 : 0);
    };
    Expr baseI = ir::mul(ti, ir::intImm(BM)), baseJ = ir::mul(tj, ir::intImm(BN));
    auto stage = [&](bool left, bool throughRegisters) {
      return left
                 ? staged(L, I, K, r, baseI, BM, BK, "tile.L", vt_, maskL, layout, throughRegisters)
                 : staged(R, J, K, r, baseJ, BN, BK, "tile.R", vt_, maskR, layout,
                          throughRegisters);
    };
    std::vector<Staged> ops = {stage(true, false), stage(false, false)};
    if ((ops[0].rowMajor || ops[1].rowMajor) && split.splits == 1 && slices >= kLongReduction) {
      // Over a whole long reduction, a row-major operand is copied 4 bytes at a time
      // asynchronously into the k-major layout instead (vector 1): no registers staged, and
      // every operand asynchronous, so up to 4 slices in flight. Measured on the H100 (session
      // 16): 4096^3 A[i,k] * B[j,k] 3.40 -> 3.15 ms, A[i,k] * B[k,j] 2.94 -> 2.85, A[k,i] *
      // B[j,k] 2.91 -> 2.86, the Linear forward 0.170 -> 0.161, the C=64 3x3 forward
      // convolution's filter 0.245 -> 0.236. Split ranges and short reductions lost: A[i,k] *
      // B[j,k] at 1024^3 (2 ranges of 32 slices) 0.066 -> 0.071, the 1x1 weight gradient (131
      // of 48) 0.100 -> 0.109 and forward (4 slices) 0.138 -> 0.164, the C=64 weight gradient
      // (44 of 133) 0.219 -> 0.227; they keep the layouts below.
      for (Staged& sg : ops)
        if (sg.rowMajor) {
          sg.vector = 1;
          layout(sg);
          sg.stageElems = sg.stageSize(BK);
        }
    } else if (ops[0].rowMajor != ops[1].rowMajor) {
      const bool left = ops[0].rowMajor;
      ops[left ? 0 : 1] = stage(left, true);
    }
    const int stages = stagesFor(ops);
    // The register tile: acc[m * TN + n], thread (tx, ty) holding rows cellOf(L, ty, m) and
    // columns cellOf(R, tx, n). From a k-major operand (rows of a slice contiguous) a thread
    // takes runs of V = min(4, T) adjacent elements, 16 V apart (one 16-byte load; the threads
    // of a warp read distinct banks or the same word), and with T = 6 or 7 a last run of T - 4
    // after the 16 runs of 4; from a row-major one every 16th row (adjacent threads then hit
    // distinct banks).
    auto cellOf = [](const Staged& sg, const Expr& th, const Expr& q, std::int64_t T) {
      if (sg.rowMajor) return ir::add(th, ir::mul(q, ir::intImm(16)));
      const std::int64_t V = std::min<std::int64_t>(4, T), whole = T / V * V;
      Expr runs =
          ir::add(ir::add(ir::mul(th, ir::intImm(V)), ir::binary(BinOp::Mod, q, ir::intImm(V))),
                  ir::mul(ir::binary(BinOp::Div, q, ir::intImm(V)), ir::intImm(16 * V)));
      if (whole == T) return runs;
      // The last T - whole cells: one shorter run per thread after the 16-wide runs.
      Expr rest = ir::add(ir::add(ir::intImm(16 * whole), ir::mul(th, ir::intImm(T - whole))),
                          ir::sub(q, ir::intImm(whole)));
      return ir::select(ir::binary(BinOp::Lt, q, ir::intImm(whole)), runs, rest);
    };
    Expr m = ir::var("t.m"), nn = ir::var("t.n"), kk = ir::var("k.i");
    Expr slot = ir::add(ir::mul(m, ir::intImm(TN)), nn);
    auto cells = [&](Stmt body) {
      return ir::forLoop(
          "t.m", ir::intImm(0), ir::intImm(TM), ForKind::Unrolled,
          ir::forLoop("t.n", ir::intImm(0), ir::intImm(TN), ForKind::Unrolled, body));
    };
    auto compute = [&](const Expr& stg) {
      auto at = [&](const Staged& sg, const Expr& w) {
        return ir::load(vt_, sg.buf,
                        ir::add(ir::mul(stg, ir::intImm(sg.stageElems)), sg.slot(w, kk)));
      };
      Stmt fillRegs =
          ir::block({ir::forLoop("t.m", ir::intImm(0), ir::intImm(TM), ForKind::Unrolled,
                                 ir::store("reg.L", m, at(ops[0], cellOf(ops[0], ty, m, TM)))),
                     ir::forLoop("t.n", ir::intImm(0), ir::intImm(TN), ForKind::Unrolled,
                                 ir::store("reg.R", nn, at(ops[1], cellOf(ops[1], tx, nn, TN))))});
      Stmt fma = cells(ir::store("acc", slot,
                                 ir::binary(BinOp::Add, ir::load(vt_, "acc", slot),
                                            ir::binary(BinOp::Mul, ir::load(vt_, "reg.L", m),
                                                       ir::load(vt_, "reg.R", nn)))));
      return ir::forLoop("k.i", ir::intImm(0), ir::intImm(BK), ForKind::Unrolled,
                         ir::block({fillRegs, fma}));
    };
    Stmt kloop = pipeline(ops, K, r, BK, split, slices, stages, compute);
    // Stores: each cell's output indices from its row and column.
    Expr gi = ir::add(baseI, cellOf(ops[0], ty, m, TM));
    Expr gj = ir::add(baseJ, cellOf(ops[1], tx, nn, TN));
    decompose(I, r, gi);
    decompose(J, r, gj);
    Stmt out = storeCell(st, r, split, ir::load(vt_, "acc", slot));
    out = cells(ir::ifThen(both(ir::binary(BinOp::Lt, gi, ir::intImm(extI)),
                                ir::binary(BinOp::Lt, gj, ir::intImm(extJ))),
                           out));
    Stmt body = ir::allocate(
        "acc", vt_, TM * TN,
        ir::allocate("reg.L", vt_, TM,
                     ir::allocate("reg.R", vt_, TN,
                                  ir::block({cells(ir::store("acc", slot, num(0))), kloop, out}))));
    f.body = tileLaunch(body, tilesI * tilesJ * extB * split.splits);
    auto names = [&](const std::vector<std::size_t>& g) { return varNames(st, g); };
    gpuNote_ = "GPU tile " + std::to_string(BM) + "x" + std::to_string(BN) + " over (" + names(I) +
               ") x (" + names(J) + "), " + std::to_string(TM) + "x" + std::to_string(TN) +
               " per thread, shared-memory slices of " + std::to_string(BK) + " along (" +
               names(K) + ")" + (B.empty() ? "" : ", one tile row per (" + names(B) + ")") +
               stagingNote(st, ops, stages);
    out_.funcs.push_back(std::move(f));
    finishSplit(st, bs, r, split, name);
    return true;
  }

  // Where a tile's cells are: the tile's first row and column, its size, and the row and
  // column inside it of the cell a thread holds (expressions of the cell loops' variables).
  struct TileFrame {
    Expr baseI, baseJ;
    std::int64_t BM = 0, BN = 0;
    Expr li, lj;
  };

  // The end of a tensor-core tile, through shared memory (the slices' buffers are free by
  // then): every thread leaves its accumulators (`cells` around acc[slot]) in a BM x BN f32
  // tile, rows padded by 4 (at most two lanes of a warp on a bank); then the block writes the
  // tile out a row at a time, consecutive threads taking consecutive columns. J holds the
  // output's fastest-varying index (emitGpuTiled's column index), so a warp's stores fill
  // whole 32-byte sectors (the fragments' own layout spreads a warp over 8 rows, 8 bytes in
  // each, and measured 4 L2 writes per output sector on the H100: bf16 1x1 convolution
  // forward), and a thread's column, so its indices along J, is decomposed once.
  Stmt tileEpilogue(const Statement& st, const Ranges& r, const TileSplit& split,
                    const std::vector<std::size_t>& I, const std::vector<std::size_t>& J,
                    const TileFrame& f, const std::function<Stmt(Stmt)>& cells, const Expr& slot,
                    bool* vectored) {
    const std::int64_t extI = extentOfGroup(I, r), extJ = extentOfGroup(J, r);
    const std::int64_t P = f.BN + 4, threads = target_.gpuBlock, per = threads / f.BN;
    if (f.BN > threads || threads % f.BN != 0 || f.BM % per != 0)
      throw InternalError("lower: a tile epilogue that does not divide among the threads");
    const std::string buf = "tile.C";
    auto at = [P](const Expr& row, const Expr& col) {
      return ir::add(ir::mul(row, ir::intImm(P)), col);
    };
    Stmt put = cells(ir::store(buf, at(f.li, f.lj), ir::load(vt_, "acc", slot)));
    Expr thr = ir::var("gpu.thread");
    // A thread's run of `vec` cells along a row: 16 bytes of the output stored at once where
    // the tile writes the output itself ('=', not split) and the output is contiguous along J
    // in runs of whole vectors (as vectorRead for a read), else one cell. Measured on the H100
    // (session 14, bench_cuda, bf16): 1x1 convolution forward 0.048 -> 0.044 ms, its input
    // gradient 0.052 -> 0.048, 4096^3 NN 0.249 -> 0.238; the 3x3 convolutions 1-3% faster.
    const Type et = elemType(st.output);
    std::int64_t vec = 1;
    if (split.splits == 1 && st.assign == Assign::Define && !atomic_) {
      const std::int64_t v = vectorRead({st.lhs.get()}, J, r, et);
      if (v > 1 && f.BN % v == 0 && threads % (f.BN / v) == 0 && f.BM % (threads / (f.BN / v)) == 0)
        vec = v;
    }
    *vectored = vec > 1;
    const std::int64_t across = f.BN / vec, rows = threads / across;
    Expr col = ir::mul(ir::binary(BinOp::Mod, thr, ir::intImm(across)), ir::intImm(vec));
    Expr row = ir::add(ir::binary(BinOp::Div, thr, ir::intImm(across)),
                       ir::mul(ir::var("e.row"), ir::intImm(rows)));
    Expr gi = ir::add(f.baseI, row), gj = ir::add(f.baseJ, col);
    decompose(I, r, gi);
    decompose(J, r, gj);
    Expr inTile = both(ir::binary(BinOp::Lt, gi, ir::intImm(extI)),
                       ir::binary(BinOp::Lt, gj, ir::intImm(extJ)));
    Stmt store;
    if (vec == 1) {
      store = ir::ifThen(inTile, storeCell(st, r, split, ir::load(vt_, buf, at(row, col))));
    } else {
      Expr inside;
      bool dropped = false;
      Expr off = offset(*st.lhs, &inside, &dropped); // in bounds (vectorRead)
      Expr l = ir::var("e.l");
      Stmt fill = ir::forLoop(
          "e.l", ir::intImm(0), ir::intImm(vec), ForKind::Unrolled,
          ir::store("e.vec", l, ir::cast(et, ir::load(vt_, buf, at(row, ir::add(col, l))))));
      store = ir::ifThen(inTile, ir::block({fill, ir::copyVector(bufferName(st.output), off,
                                                                 "e.vec", ir::intImm(0), 16)}));
    }
    Stmt drain =
        ir::forLoop("e.row", ir::intImm(0), ir::intImm(f.BM / rows), ForKind::Unrolled, store);
    if (vec > 1) drain = ir::allocate("e.vec", et, vec, drain);
    return ir::block(
        {ir::asyncWait(0), ir::barrier(),
         ir::allocate(buf, vt_, f.BM * P, ir::block({put, ir::barrier(), drain}), true)});
  }

  // The warpgroup tile's width along J, the slices it keeps in shared memory and the groups of
  // products it leaves running while the next slice is issued. Measured on the H100 (session
  // 8, bf16 4096^3 NN, tools/probe/diag): 128 x 256 with 4 slices (192 KiB, one block per SM)
  // and one group in flight 0.248 ms; the same with 3 slices 0.317; 128 x 128 with 3 slices
  // (2 blocks per SM) 0.277 with none in flight, 0.298 with one. The widest tile of which
  // there are enough for one per SM (Target::gpuBlocksWanted / 2); below that 128 x 64 with 4
  // slices, which the split-K policy of these tiles (tileSplit's `wanted`: a quarter of
  // gpuBlocksWanted) leaves whole at 1024^3: 128 tiles of 16 slices, 0.013-0.014 ms, against
  // 0.022 for 128 x 128 split in two and 0.017 for it unsplit (bench_cuda, 4 layouts).
  struct WarpgroupShape {
    std::int64_t BN = 128;
    int stages = 3, inFlight = 0;
  };
  WarpgroupShape warpgroupShape(std::int64_t tilesI, std::int64_t extJ, std::int64_t extB) const {
    const std::int64_t sms = target_.gpuBlocksWanted / 2;
    auto tiles = [&](std::int64_t bn) { return tilesI * ((extJ + bn - 1) / bn) * extB; };
    if (extJ >= 256 && tiles(256) >= sms) return {256, 4, 1};
    if (tiles(128) >= sms) return {128, 3, 0};
    return {64, 4, 0};
  }

  // The tile of emitGpuTiled on tensor cores, for bf16 operands: 256 threads (8 warps, 2 x 4)
  // compute a 128 x 128 tile; BK = 64 slices of both operands are staged in shared memory as
  // bf16 (see `stage` below for the layouts; padded rows, so fragment loads hit distinct
  // banks); each warp computes 64 x 32 with 4 x 4 mma.sync m16n8k16 per 16 of the reduction,
  // fragments by ldmatrix, accumulating in f32 registers (PTX ISA fragment layouts).
  // On sm_90 (target gpuArch 90) the tile runs on the warpgroup instructions instead: 128 x BN
  // (warpgroupShape: 128 or 256), 2 warpgroups of 64 x BN, wgmma.mma_async reading both
  // operands from shared memory in the 128-byte-swizzled layouts (Staged::core, no padding),
  // 4 steps of k16 per slice; the barrier before each slice orders the copies before the
  // tensor cores' reads (fence.proxy.async).
  bool emitGpuMma(const Statement& st, const BoundStatement& bs, const Ranges& r,
                  const std::string& name, const CExpr& lf, const CExpr& rf,
                  const std::vector<std::size_t>& I, const std::vector<std::size_t>& J,
                  const std::vector<std::size_t>& B, const std::vector<std::size_t>& K,
                  const std::vector<std::size_t>& maskL, const std::vector<std::size_t>& maskR) {
    bool wg = target_.gpuArch == 90;
    const std::int64_t extI = extentOfGroup(I, r), extJ = extentOfGroup(J, r),
                       extK = extentOfGroup(K, r), extB = extentOfGroup(B, r);
    const std::int64_t BK = kMmaSlice, S = BK + 8, MT = 4, NT = 4;
    const std::int64_t slices = (extK + BK - 1) / BK;
    // Each operand staged as bf16: row-major (the reduction fastest, rows of S) when it has
    // unit stride along k, else k-major (rows of T = BW + 8, read by ldmatrix.trans); copied 8
    // elements at a time along the contiguous direction when it can be, else through registers
    // (consecutive threads then store consecutive elements of a shared row). The warpgroup
    // tile keeps the same majors in the swizzled layouts of Staged::core.
    auto layout = [S, BK, &wg](Staged& sg) {
      sg.rowMajor = sg.kFast;
      sg.core = wg;
      if (wg)
        sg.stride = sg.rowMajor ? BK : sg.BW * 8;
      else
        sg.stride = sg.rowMajor ? S : sg.BW + 8;
    };
    auto stage = [&](const CExpr& fct, const std::vector<std::size_t>& group, const Expr& base,
                     std::int64_t BW, const std::string& buf,
                     const std::vector<std::size_t>& masks) {
      return staged({&fct}, group, K, r, base, BW, BK, buf, Type::bf16, masks, layout);
    };
    // The warpgroup tile where it measured faster on the H100 (session 7): both operands
    // copied asynchronously, both tile dimensions filled and the reduction at least two
    // slices. Otherwise the mma.sync tile: with an operand staged through registers (a
    // convolution's im2col reads, masked ranges; 2-byte stores into the swizzled layout) the
    // warpgroup tile ran 5-35% slower (conv bf16 stride-2 forward 0.181 -> 0.243 ms), and on
    // the 1x1 convolution's half-filled tiles or single slice 3-14% slower.
    auto copied = [&](const CExpr& fct, const std::vector<std::size_t>& group,
                      const std::vector<std::size_t>& masks) {
      return stage(fct, group, ir::intImm(0), 128, "", masks).vector > 0;
    };
    // Rows for one warpgroup only (48 to 64: a convolution's 64 channels): the two stand side
    // by side, a tile of 64 x 128 (each 64 x 64, 4 slices of 24 KiB in flight). Measured on the
    // H100 (session 14, bench_cuda, bf16, C=64 forward / input gradient): the mma.sync tile of
    // 64 x 256 0.079 / 0.087 ms; side by side 64 x 128 with 4 slices 0.056 / 0.070, with 3
    // 0.063 / 0.081 (per warpgroup 128 wide), 64 x 256 with 4 and one slice's products in
    // flight 0.061 / 0.079, with 2 slices 0.062 / 0.084.
    const bool wgRow = extI <= 64 && extI >= 48;
    if (wg && (!copied(lf, I, maskL) || !copied(rf, J, maskR) || (extI < 128 && !wgRow) ||
               extJ < 128 || extK < 2 * BK))
      wg = false;
    // The mma.sync tile's 8 warps: 2 x 4 of 64 x 32 (128 x 128), or 1 x 8 (64 x 256) when I
    // fills no more than 64 rows (a convolution's 64 channels: half of a 128-row tile idle).
    const std::int64_t WM = (wg ? wgRow : extI <= 64 && extJ >= 256) ? 1 : 2, WN = 8 / WM;
    const std::int64_t BM = 64 * WM, tilesI = (extI + BM - 1) / BM;
    const WarpgroupShape shape = !wg     ? WarpgroupShape{}
                                 : wgRow ? WarpgroupShape{64, 4, 0}
                                         : warpgroupShape(tilesI, extJ, extB);
    // A warpgroup's columns (wgmma's n), the tile's.
    const std::int64_t WBN = shape.BN, BN = wg ? shape.BN * (wgRow ? 2 : 1) : WN * NT * 8,
                       tilesJ = (extJ + BN - 1) / BN;
    setRanges(st, r);
    if (!storeOutput(st, num(0))) return false;
    // Split-K aims at gpuBlocksWanted blocks for the mma.sync tile; for the warpgroup tile
    // (one or two blocks fill an SM) at a quarter of that, or, when there are fewer tiles than
    // half the SMs (a weight gradient's few output tiles over a long reduction), at all of it.
    // Measured on the H100 (session 15, bench_cuda, bf16 stride-2 weight gradient: 18 tiles of
    // 365 slices): 4 ranges 0.152 ms, 8 0.133, 16 0.122, 32 0.116.
    const std::int64_t tiles = tilesI * tilesJ * extB;
    std::int64_t wanted = target_.gpuBlocksWanted;
    if (wg && 4 * tiles >= target_.gpuBlocksWanted) wanted /= 4;
    const TileSplit split = tileSplit(st, r, tiles, slices, BK, name, wanted);
    ir::Func f = newFunc(name);
    auto div = [](Expr a, std::int64_t b) {
      return ir::binary(BinOp::Div, std::move(a), ir::intImm(b));
    };
    auto mod = [](Expr a, std::int64_t b) {
      return ir::binary(BinOp::Mod, std::move(a), ir::intImm(b));
    };
    auto times = [](Expr a, std::int64_t b) { return ir::mul(std::move(a), ir::intImm(b)); };
    Expr blk = tileBlock(split), thr = ir::var("gpu.thread");
    Expr tj = mod(blk, tilesJ), ti = mod(div(blk, tilesJ), tilesI), bt = div(blk, tilesJ * tilesI);
    if (!B.empty()) decompose(B, r, bt);
    Expr lane = mod(thr, 32), warp = div(thr, 32), g = div(lane, 4), t = mod(lane, 4);
    Expr wm = div(warp, WN), wn = mod(warp, WN);
    Expr baseI = times(ti, BM), baseJ = times(tj, BN);
    std::vector<Staged> ops = {stage(lf, I, baseI, BM, "tile.A", maskL),
                               stage(rf, J, baseJ, BN, "tile.B", maskR)};
    Expr mt = ir::var("w.m"), nt = ir::var("w.n"), ks = ir::var("k.s");
    Expr rowA = ir::add(ir::add(times(wm, MT * 16), times(mt, 16)), g);
    Expr accBase = times(ir::add(times(mt, NT), nt), 4);
    // A warp's fragments for 16 of the reduction from ks * 16: rows from `first` (wm * 64 for
    // A, wn * 32 for B), fragment i `rows` further.
    auto operand = [&](const Staged& sg, const Expr& stg, const Expr& first, std::int64_t rows) {
      ir::MmaOperand o;
      o.buffer = sg.buf;
      o.kMajor = !sg.rowMajor;
      o.stride = sg.stride;
      Expr at = sg.slot(first, times(ks, 16));
      o.base = ir::add(ir::mul(stg, ir::intImm(sg.stageElems)), at);
      o.step = o.kMajor ? rows : rows * sg.stride;
      return o;
    };
    auto compute = [&](const Expr& stg) {
      Stmt step = ir::mma(operand(ops[0], stg, times(wm, MT * 16), 16),
                          operand(ops[1], stg, times(wn, NT * 8), 8), static_cast<int>(MT),
                          static_cast<int>(NT), "acc", ir::intImm(0));
      return ir::forLoop("k.s", ir::intImm(0), ir::intImm(BK / 16), ForKind::Unrolled, step);
    };
    // Warpgroup wgi multiplies rows 64 wgi.. of A by all BN columns of B (wgRow: all 64 rows
    // of A by columns WBN wgi.. of B).
    Expr wgi = div(thr, 128);
    Expr wgRowA = wgRow ? ir::intImm(0) : times(wgi, 64),
         wgColB = wgRow ? times(wgi, WBN) : ir::intImm(0);
    auto coreOperand = [&](const Staged& sg, const Expr& stg, const Expr& first) {
      ir::WgmmaOperand o;
      o.buffer = sg.buf;
      o.kMajor = sg.rowMajor;
      o.base = ir::add(ir::mul(stg, ir::intImm(sg.stageElems)), sg.slot(first, ir::intImm(0)));
      // 128-byte swizzle: k-major rows in 8-row atoms of 1024 bytes, a step 16 elements along
      // the row; mn-major: 64-wide atoms 1024 bytes apart, groups of 8 k 2 stride bytes apart.
      o.swizzle128 = true;
      o.lbo = sg.rowMajor ? 16 : 1024;
      o.sbo = sg.rowMajor ? 1024 : 2 * sg.stride;
      o.kStep = sg.rowMajor ? 16 : 2 * sg.stride;
      return o;
    };
    auto computeWg = [&](const Expr& stg) {
      return ir::wgmma(coreOperand(ops[0], stg, wgRowA), coreOperand(ops[1], stg, wgColB),
                       static_cast<int>(WBN), static_cast<int>(BK / 16), "acc", ir::intImm(0),
                       shape.inFlight);
    };
    const int stages = wg ? shape.stages : stagesFor(ops);
    Stmt kloop =
        wg ? pipeline(ops, K, r, BK, split, slices, stages, computeWg, true, shape.inFlight)
           : pipeline(ops, K, r, BK, split, slices, stages, compute);
    // This lane's accumulator c of tile (mt, nt): row g (+8 for c >= 2), column 2t + c % 2;
    // of a warpgroup's block (wgmma): n8 column block w.n, rows from 16 (warp % 4).
    Expr c = ir::var("w.c");
    Expr slot = wg ? ir::add(times(nt, 4), c) : ir::add(accBase, c);
    Expr li = ir::add(wg ? ir::add(ir::add(wgRowA, times(mod(warp, 4), 16)), g) : rowA,
                      times(div(c, 2), 8));
    Expr lj = ir::add(wg ? ir::add(wgColB, times(nt, 8)) : ir::add(times(wn, NT * 8), times(nt, 8)),
                      ir::add(times(t, 2), mod(c, 2)));
    auto cells = [&](Stmt body) {
      body = ir::forLoop("w.n", ir::intImm(0), ir::intImm(wg ? WBN / 8 : NT), ForKind::Unrolled,
                         ir::forLoop("w.c", ir::intImm(0), ir::intImm(4), ForKind::Unrolled, body));
      return wg ? body : ir::forLoop("w.m", ir::intImm(0), ir::intImm(MT), ForKind::Unrolled, body);
    };
    bool vectored = false;
    Stmt out =
        tileEpilogue(st, r, split, I, J, {baseI, baseJ, BM, BN, li, lj}, cells, slot, &vectored);
    Stmt body = ir::allocate("acc", vt_, wg ? WBN / 2 : MT * NT * 4,
                             ir::block({cells(ir::store("acc", slot, num(0))), kloop, out}));
    f.body = tileLaunch(body, tilesI * tilesJ * extB * split.splits);
    auto names = [&](const std::vector<std::size_t>& grp) { return varNames(st, grp); };
    const std::string n = std::to_string(BN), wgn = std::to_string(WBN);
    gpuNote_ =
        (wg ? "GPU tensor cores (wgmma m64n" + wgn +
                  "k16 bf16, sm_90a, f32 accumulators, 128-byte swizzled operands): tile " +
                  std::to_string(BM) + "x" + n + " over ("
            : "GPU tensor cores (mma.sync m16n8k16 bf16, f32 accumulators): tile " +
                  std::to_string(BM) + "x" + n + " over (") +
        names(I) + ") x (" + names(J) +
        (wg ? std::string("), 2 warpgroups ") + (wgRow ? "side by side " : "") + "of 64x" + wgn
            : "), 8 warps (" + std::to_string(WM) + "x" + std::to_string(WN) + ") of 64x32") +
        ", shared-memory slices of " + std::to_string(BK) + " along (" + names(K) + ")" +
        (B.empty() ? "" : ", one tile row per (" + names(B) + ")") + stagingNote(st, ops, stages) +
        (shape.inFlight ? ", the products of one slice running while the next is issued" : "") +
        (vectored ? ", the output stored 16 bytes at a time" : "");
    out_.funcs.push_back(std::move(f));
    finishSplit(st, bs, r, split, name);
    return true;
  }

  void emitTiled(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                 const Ranges& r, const std::string& name) {
    const int i = s.tileI, j = s.tileJ;
    setRanges(st, r);
    ir::Func f = newFunc(name);
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
    const std::size_t n = st.vars.size();
    const std::string ji = st.vars[static_cast<std::size_t>(j)].name + ".i";
    const std::string ii = i >= 0 ? st.vars[static_cast<std::size_t>(i)].name + ".i" : "";
    tileVar(st, r, j, s.nr);
    if (i >= 0) tileVar(st, r, i, s.mr);
    // acc[ii * nr + ji]: one register tile.
    const std::string acc = "acc";
    Expr slot = ir::var(ji);
    if (i >= 0) slot = ir::add(ir::mul(ir::var(ii), ir::intImm(s.nr)), slot);
    auto tile = [&](Stmt body) {
      body = ir::forLoop(ji, ir::intImm(0), ir::intImm(s.nr), ForKind::Vectorized, body, s.width);
      if (i >= 0) body = ir::forLoop(ii, ir::intImm(0), ir::intImm(s.mr), ForKind::Unrolled, body);
      return body;
    };
    Expr a = ir::load(vt_, acc, slot);
    Stmt update = tile(ir::store(acc, slot, combine(st.reduce, a, value(*st.rhs))));
    for (std::size_t v = n; v-- > nOut;) update = loopOver(bs, st, v, r, ForKind::Serial, update);
    Stmt out = storeOutput(st, a);
    if (!out) return;
    Stmt body = ir::allocate(
        acc, vt_, static_cast<std::int64_t>(s.mr) * s.nr,
        ir::block({tile(ir::store(acc, slot, identity(st.reduce))), update, tile(out)}));
    f.body = tileLoops(st, bs, s, r, body, workOf(r, nOut) * s.mr * s.nr, f);
    out_.funcs.push_back(std::move(f));
  }

  // Tile index v is <lo> + <v>.o * size + <v>.i: the tile loop and the position inside it.
  void tileVar(const Statement& st, const Ranges& r, int v, int size) {
    const auto u = static_cast<std::size_t>(v);
    const std::string& vn = st.vars[u].name;
    varExpr_[u] =
        ir::add(ir::add(ir::intImm(r[u].first), ir::mul(ir::var(vn + ".o"), ir::intImm(size))),
                ir::var(vn + ".i"));
  }

  // Wraps a tile body in the loops over the other output indices and the tile loops of
  // tileI/tileJ (counts of full tiles), marking the parallel one.
  Stmt tileLoops(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
                 const Ranges& r, Stmt body, double inside, ir::Func& f) {
    for (std::size_t idx = s.outerOrder.size(); idx-- > 0;) {
      const int v = s.outerOrder[idx];
      const auto u = static_cast<std::size_t>(v);
      std::int64_t count = 0;
      if (v == s.tileI || v == s.tileJ) {
        count = (r[u].second - r[u].first) / (v == s.tileI ? s.mr : s.nr);
        ForKind kind = outerKind(s, v, 0, count, inside, f);
        body = ir::forLoop(st.vars[u].name + ".o", ir::intImm(0), ir::intImm(count), kind, body);
      } else {
        count = r[u].second - r[u].first;
        ForKind kind = outerKind(s, v, r[u].first, r[u].second, inside, f);
        body = loopOver(bs, st, u, r, kind, body);
      }
      inside *= static_cast<double>(std::max<std::int64_t>(count, 1));
    }
    return body;
  }

  // The dot-product tile: acc[(ii * NR + jj) * W + lane] holds partial sums along dotVar.
  void emitDot(const Statement& st, const BoundStatement& bs, const StatementSchedule& s,
               const Ranges& r, const std::string& name) {
    setRanges(st, r);
    ir::Func f = newFunc(name);
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
    const std::size_t n = st.vars.size();
    const auto rv = static_cast<std::size_t>(s.dotVar);
    const std::string& rn = st.vars[rv].name;
    const int W = s.width;
    tileVar(st, r, s.tileI, s.mr);
    const std::string ii = st.vars[static_cast<std::size_t>(s.tileI)].name + ".i";
    std::string jj;
    if (s.tileJ >= 0) {
      tileVar(st, r, s.tileJ, s.nr);
      jj = st.vars[static_cast<std::size_t>(s.tileJ)].name + ".i";
    }
    Expr cell =
        s.tileJ >= 0 ? ir::add(ir::mul(ir::var(ii), ir::intImm(s.nr)), ir::var(jj)) : ir::var(ii);
    Expr lane0 = ir::mul(cell, ir::intImm(W));
    auto cells = [&](Stmt body) {
      if (s.tileJ >= 0)
        body = ir::forLoop(jj, ir::intImm(0), ir::intImm(s.nr), ForKind::Unrolled, body);
      return ir::forLoop(ii, ir::intImm(0), ir::intImm(s.mr), ForKind::Unrolled, body);
    };
    const std::string acc = "acc", ro = rn + ".o", ri = rn + ".i", rt = rn + ".t";
    const auto [lr, hr] = r[rv];
    const std::int64_t vecs = (hr - lr) / W, rm = lr + vecs * W;
    Expr slot = ir::add(lane0, ir::var(ri));
    Expr a = ir::load(vt_, acc, slot);
    Stmt init = cells(ir::forLoop(ri, ir::intImm(0), ir::intImm(W), ForKind::Vectorized,
                                  ir::store(acc, slot, identity(st.reduce)), W));
    // Whole vectors along dotVar, then the remaining elements into lane 0.
    varExpr_[rv] =
        ir::add(ir::add(ir::intImm(lr), ir::mul(ir::var(ro), ir::intImm(W))), ir::var(ri));
    Stmt vec = ir::forLoop(
        ro, ir::intImm(0), ir::intImm(vecs), ForKind::Serial,
        cells(ir::forLoop(ri, ir::intImm(0), ir::intImm(W), ForKind::Vectorized,
                          ir::store(acc, slot, combine(st.reduce, a, value(*st.rhs))), W)));
    Stmt tail;
    if (rm < hr) {
      varExpr_[rv] = ir::var(rt);
      Expr a0 = ir::load(vt_, acc, lane0);
      tail = ir::forLoop(rt, ir::intImm(rm), ir::intImm(hr), ForKind::Serial,
                         cells(ir::store(acc, lane0, combine(st.reduce, a0, value(*st.rhs)))));
    }
    Stmt update = ir::block({vec, tail});
    for (std::size_t v = n; v-- > nOut;)
      if (v != rv) update = loopOver(bs, st, v, r, ForKind::Serial, update);
    // The lanes added pairwise.
    std::vector<Expr> lanes;
    for (int l = 0; l < W; ++l) lanes.push_back(ir::load(vt_, acc, ir::add(lane0, ir::intImm(l))));
    while (lanes.size() > 1) {
      std::vector<Expr> next;
      for (std::size_t l = 0; l + 1 < lanes.size(); l += 2)
        next.push_back(combine(st.reduce, lanes[l], lanes[l + 1]));
      if (lanes.size() % 2) next.push_back(lanes.back());
      lanes = next;
    }
    Stmt out = storeOutput(st, lanes[0]);
    if (!out) return;
    Stmt body = ir::allocate(acc, vt_, static_cast<std::int64_t>(s.mr) * s.nr * W,
                             ir::block({init, update, cells(out)}));
    f.body = tileLoops(st, bs, s, r, body, workOf(r, nOut) * s.mr * s.nr, f);
    out_.funcs.push_back(std::move(f));
  }
};

} // namespace

LoweredProgram lower(const Program& p, const BoundProgram& b, const Strides& strides,
                     const Target& target, const Aligned16& aligned) {
  return Lowerer(p, b, strides, target, aligned).run();
}

} // namespace einjit::codegen
