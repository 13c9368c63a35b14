#include "codegen/passes/MergeVariants.h"

#include <map>
#include <memory>

namespace einjit::codegen::passes {

using namespace ir;

namespace {

// Thrown where the variants differ in more than constants.
struct Mismatch {};

// hi is lo + 1 as the lowering's lets build it (CodeGenLLVM emits such a loop as a binding).
bool oneIteration(const For& n) {
  std::int64_t lo = 0, hi = 0;
  if (isConst(n.lo, &lo) && isConst(n.hi, &hi)) return hi == lo + 1;
  if (n.hi->kind != NodeKind::Binary) return false;
  const auto& b = static_cast<const Binary&>(*n.hi);
  std::int64_t one = 0;
  return b.op == BinOp::Add && b.a == n.lo && isConst(b.b, &one) && one == 1;
}

// The nodes of the variants, as their kind (checked by the caller).
template <class T, class V>
std::vector<const T*> cast(const std::vector<V>& v) {
  std::vector<const T*> out;
  for (const V& x : v) out.push_back(static_cast<const T*>(x.get()));
  return out;
}
// One field of each variant's node.
template <class T, class F>
auto field(const std::vector<const T*>& v, F get) {
  std::vector<std::decay_t<decltype(get(*v[0]))>> out;
  for (const T* x : v) out.push_back(get(*x));
  return out;
}

class Merger {
public:
  Merger(std::size_t n, std::string selector, const BufferRename& rename,
         std::vector<std::pair<std::string, Expr>>* bindings)
      : n_(n), selector_(std::move(selector)), rename_(rename), bindings_(bindings) {}

  Stmt stmt(const std::vector<Stmt>& v) {
    const Stmt& s0 = v[0];
    for (const Stmt& s : v)
      if (!s || s->kind != s0->kind) throw Mismatch{};
    switch (s0->kind) {
    case NodeKind::For: {
      auto f = cast<For>(v);
      const For& a = *f[0];
      for (const For* x : f)
        if (x->var != a.var || x->forKind != a.forKind || x->width != a.width) throw Mismatch{};
      const bool fixed = a.forKind == ForKind::Unrolled || a.forKind == ForKind::Vectorized ||
                         a.forKind == ForKind::Parallel;
      Expr lo, hi;
      if (fixed) { // the extents the code generator writes out or the runtime splits
        for (const For* x : f)
          if (print(x->lo) != print(a.lo) || print(x->hi) != print(a.hi)) throw Mismatch{};
        lo = a.lo;
        hi = a.hi;
      } else {
        bool lets = true;
        for (const For* x : f) lets = lets && oneIteration(*x);
        lo = expr(field(f, [](const For& x) { return x.lo; }));
        hi = lets ? add(lo, intImm(1)) : expr(field(f, [](const For& x) { return x.hi; }));
      }
      Stmt body = stmt(field(f, [](const For& x) { return x.body; }));
      return std::make_shared<For>(a.var, lo, hi, a.forKind, a.width, body);
    }
    case NodeKind::Block: {
      auto b = cast<Block>(v);
      for (const Block* x : b)
        if (x->stmts.size() != b[0]->stmts.size()) throw Mismatch{};
      std::vector<Stmt> out;
      for (std::size_t k = 0; k < b[0]->stmts.size(); ++k) {
        std::vector<Stmt> part;
        for (const Block* x : b) part.push_back(x->stmts[k]);
        out.push_back(stmt(part));
      }
      return std::make_shared<Block>(std::move(out));
    }
    case NodeKind::Store: {
      auto s = cast<Store>(v);
      const Store& a = *s[0];
      for (const Store* x : s)
        if (x->atomicAdd != a.atomicAdd || x->nonTemporal != a.nonTemporal) throw Mismatch{};
      std::string name;
      Expr index = access(field(s, [](const Store& x) { return x.buffer; }),
                          field(s, [](const Store& x) { return x.index; }), &name);
      Expr value = expr(field(s, [](const Store& x) { return x.value; }));
      return std::make_shared<Store>(name, index, value, a.atomicAdd, a.nonTemporal);
    }
    case NodeKind::IfThen: {
      auto c = cast<IfThen>(v);
      bool otherwise = static_cast<bool>(c[0]->otherwise);
      for (const IfThen* x : c)
        if (static_cast<bool>(x->otherwise) != otherwise) throw Mismatch{};
      Expr cond = expr(field(c, [](const IfThen& x) { return x.cond; }));
      Stmt then = stmt(field(c, [](const IfThen& x) { return x.then; }));
      Stmt other =
          otherwise ? stmt(field(c, [](const IfThen& x) { return x.otherwise; })) : nullptr;
      return std::make_shared<IfThen>(cond, then, other);
    }
    case NodeKind::Allocate: {
      auto a = cast<Allocate>(v);
      std::int64_t size = 0;
      for (const Allocate* x : a) {
        if (x->buffer != a[0]->buffer || x->elem != a[0]->elem || x->shared != a[0]->shared)
          throw Mismatch{};
        size = std::max(size, x->size); // each variant indexes its own part of it
      }
      Stmt body = stmt(field(a, [](const Allocate& x) { return x.body; }));
      return std::make_shared<Allocate>(a[0]->buffer, a[0]->elem, size, body, a[0]->shared);
    }
    case NodeKind::Prefetch: {
      auto f = cast<Prefetch>(v);
      for (const Prefetch* x : f)
        if (x->ahead != f[0]->ahead) throw Mismatch{};
      std::string name;
      Expr index = access(field(f, [](const Prefetch& x) { return x.buffer; }),
                          field(f, [](const Prefetch& x) { return x.index; }), &name);
      return std::make_shared<Prefetch>(name, index, f[0]->ahead);
    }
    case NodeKind::Evaluate: {
      auto e = cast<Evaluate>(v);
      return std::make_shared<Evaluate>(expr(field(e, [](const Evaluate& x) { return x.value; })));
    }
    default: throw Mismatch{}; // the GPU's statements: not merged
    }
  }

  Expr expr(const std::vector<Expr>& v) {
    bool same = true;
    for (const Expr& e : v) same = same && e->kind == v[0]->kind && e->type == v[0]->type;
    if (!same) return folded(v);
    switch (v[0]->kind) {
    case NodeKind::IntImm: {
      std::vector<std::int64_t> values;
      for (const Expr& e : v) values.push_back(static_cast<const IntImm&>(*e).value);
      return constant(values);
    }
    case NodeKind::FloatImm:
      for (const Expr& e : v)
        if (static_cast<const FloatImm&>(*e).value != static_cast<const FloatImm&>(*v[0]).value)
          throw Mismatch{};
      return v[0];
    case NodeKind::Var:
      for (const Expr& e : v)
        if (static_cast<const Var&>(*e).name != static_cast<const Var&>(*v[0]).name)
          throw Mismatch{};
      return v[0];
    case NodeKind::Param:
      for (const Expr& e : v)
        if (static_cast<const Param&>(*e).index != static_cast<const Param&>(*v[0]).index)
          throw Mismatch{};
      return v[0];
    case NodeKind::Load: {
      auto l = cast<Load>(v);
      bool masked = static_cast<bool>(l[0]->mask);
      for (const Load* x : l)
        if (static_cast<bool>(x->mask) != masked) throw Mismatch{};
      std::string name;
      Expr index = access(field(l, [](const Load& x) { return x.buffer; }),
                          field(l, [](const Load& x) { return x.index; }), &name);
      Expr mask = masked ? expr(field(l, [](const Load& x) { return x.mask; })) : nullptr;
      return std::make_shared<Load>(l[0]->type, name, index, mask);
    }
    case NodeKind::Cast: {
      auto c = cast<Cast>(v);
      return std::make_shared<Cast>(c[0]->type,
                                    expr(field(c, [](const Cast& x) { return x.value; })));
    }
    case NodeKind::Unary: {
      auto u = cast<Unary>(v);
      for (const Unary* x : u)
        if (x->op != u[0]->op) throw Mismatch{};
      return std::make_shared<Unary>(u[0]->type, u[0]->op,
                                     expr(field(u, [](const Unary& x) { return x.a; })));
    }
    case NodeKind::Binary: {
      auto b = cast<Binary>(v);
      for (const Binary* x : b)
        if (x->op != b[0]->op) return folded(v);
      try {
        Expr a = expr(field(b, [](const Binary& x) { return x.a; }));
        Expr c = expr(field(b, [](const Binary& x) { return x.b; }));
        return std::make_shared<Binary>(b[0]->type, b[0]->op, a, c);
      } catch (const Mismatch&) {
        if (b[0]->type != Type::i64) throw;
        return folded(v); // x + c in some variants, (x + c) + d in others
      }
    }
    case NodeKind::Select: {
      auto s = cast<Select>(v);
      return std::make_shared<Select>(expr(field(s, [](const Select& x) { return x.cond; })),
                                      expr(field(s, [](const Select& x) { return x.a; })),
                                      expr(field(s, [](const Select& x) { return x.b; })));
    }
    case NodeKind::Call: {
      auto c = cast<Call>(v);
      for (const Call* x : c)
        if (x->fn != c[0]->fn || x->args.size() != c[0]->args.size()) throw Mismatch{};
      std::vector<Expr> args;
      for (std::size_t k = 0; k < c[0]->args.size(); ++k) {
        std::vector<Expr> part;
        for (const Call* x : c) part.push_back(x->args[k]);
        args.push_back(expr(part));
      }
      return std::make_shared<Call>(c[0]->type, c[0]->fn, std::move(args));
    }
    case NodeKind::Check: {
      auto c = cast<Check>(v);
      for (const Check* x : c)
        if (x->extent != c[0]->extent) throw Mismatch{};
      return std::make_shared<Check>(expr(field(c, [](const Check& x) { return x.index; })),
                                     c[0]->extent);
    }
    default: throw Mismatch{};
    }
  }

private:
  std::size_t n_;
  std::string selector_;
  const BufferRename& rename_;
  std::vector<std::pair<std::string, Expr>>* bindings_;
  std::map<std::vector<std::int64_t>, Expr> constants_;

  // The value of variant i for each i: a constant, an affine function of the selector, or a
  // choice among the values.
  Expr constant(const std::vector<std::int64_t>& values) {
    Expr& e = constants_[values];
    if (e) return e;
    bool affine = true;
    const std::int64_t step = values.size() > 1 ? values[1] - values[0] : 0;
    for (std::size_t i = 0; i < values.size(); ++i)
      affine = affine && values[i] == values[0] + step * static_cast<std::int64_t>(i);
    Expr r;
    if (affine) {
      r = add(intImm(values[0]), mul(var(selector_), intImm(step)));
    } else {
      r = intImm(values.back());
      for (std::size_t i = values.size() - 1; i-- > 0;)
        r = select(binary(BinOp::Eq, var(selector_), intImm(static_cast<std::int64_t>(i))),
                   intImm(values[i]), r);
    }
    if (!bindings_ || isConst(r)) return e = r;
    const std::string name = selector_ + "." + std::to_string(bindings_->size());
    bindings_->emplace_back(name, r);
    return e = var(name);
  }

  // Variants where some dropped an integer identity: x + c, x - c, x * c (c a constant) in
  // some, x (c = 0, 0, 1) or 0 (x * 0) in others.
  Expr folded(const std::vector<Expr>& v) {
    // Which operation was dropped: tried in turn, additions (the outer ones) first.
    for (BinOp op : {BinOp::Add, BinOp::Sub, BinOp::Mul}) {
      bool present = false;
      for (const Expr& e : v)
        present = present || (e->kind == NodeKind::Binary && e->type == Type::i64 &&
                              static_cast<const Binary&>(*e).op == op);
      if (!present) continue;
      try {
        return folded(v, op);
      } catch (const Mismatch&) {
      }
    }
    throw Mismatch{};
  }
  Expr folded(const std::vector<Expr>& v, BinOp op) {
    // Each variant as (x, c).
    std::vector<Expr> xs(v.size());
    std::vector<std::int64_t> cs(v.size(), op == BinOp::Mul ? 1 : 0);
    std::vector<bool> zero(v.size(), false);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const Expr& e = v[i];
      std::int64_t k = 0;
      if (e->kind == NodeKind::Binary && static_cast<const Binary&>(*e).op == op) {
        const auto& b = static_cast<const Binary&>(*e);
        if (isConst(b.b, &k)) {
          xs[i] = b.a;
          cs[i] = k;
        } else if (op != BinOp::Sub && isConst(b.a, &k)) {
          xs[i] = b.b;
          cs[i] = k;
        } else {
          throw Mismatch{};
        }
      } else if (op == BinOp::Mul && isConst(e, &k) && k == 0) {
        zero[i] = true; // x * 0: any x
        cs[i] = 0;
      } else {
        if (e->type != Type::i64) throw Mismatch{};
        xs[i] = e;
      }
    }
    Expr any;
    for (const Expr& x : xs)
      if (x) any = x;
    if (!any) throw Mismatch{};
    // A variant whose x was dropped (multiplied by 0) takes another's: its value does not
    // matter, but it must be safe to evaluate anywhere (no loads, no checks).
    for (std::size_t i = 0; i < v.size(); ++i)
      if (zero[i]) {
        if (!pure(any)) throw Mismatch{};
        xs[i] = any;
      }
    return binary(op, expr(xs), constant(cs));
  }

  static bool pure(const Expr& e) {
    class Finder : public Visitor {
    public:
      bool found = false;
      void visitLoad(const Load&) override { found = true; }
      void visitCheck(const Check&) override { found = true; }
    } f;
    f.visit(e);
    return !f.found;
  }

  // buffer[index] of each variant: the merged buffer's name, and the index plus the variant's
  // offset in it.
  Expr access(const std::vector<std::string>& buffers, const std::vector<Expr>& indices,
              std::string* name) {
    std::vector<std::int64_t> offsets;
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      const std::optional<MergedBuffer> m = rename_(i, buffers[i]);
      const std::string merged = m ? m->name : buffers[i];
      if (i == 0) *name = merged;
      if (merged != *name) throw Mismatch{};
      offsets.push_back(m ? m->offset : 0);
    }
    return add(expr(indices), constant(offsets));
  }
};

} // namespace

std::optional<Stmt> mergeVariants(const std::vector<Stmt>& variants, const std::string& selector,
                                  const BufferRename& rename,
                                  std::vector<std::pair<std::string, Expr>>* bindings) {
  if (variants.empty()) return std::nullopt;
  try {
    if (bindings) bindings->clear();
    return Merger(variants.size(), selector, rename, bindings).stmt(variants);
  } catch (const Mismatch&) {
    return std::nullopt;
  }
}

} // namespace einjit::codegen::passes
