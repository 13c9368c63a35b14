// Upper bounds on how often a statement's innermost actions run, from interval arithmetic on
// its loops' bounds (IR.h, iterationBound).
#include "codegen/IR.h"

#include <algorithm>
#include <map>

namespace einjit::codegen::ir {

namespace {

struct Interval {
  double lo, hi;
};

using Ranges = std::map<std::string, Interval>;

std::optional<Interval> range(const Expr& e, const Ranges& vars) {
  switch (e->kind) {
  case NodeKind::IntImm: {
    const auto v = static_cast<double>(static_cast<const IntImm&>(*e).value);
    return Interval{v, v};
  }
  case NodeKind::Var: {
    auto it = vars.find(static_cast<const Var&>(*e).name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  }
  case NodeKind::Cast: {
    const auto& c = static_cast<const Cast&>(*e);
    if (isFloat(c.type) || isFloat(c.value->type)) return std::nullopt;
    return range(c.value, vars);
  }
  case NodeKind::Check: {
    const auto& c = static_cast<const Check&>(*e);
    return Interval{0, static_cast<double>(c.extent - 1)};
  }
  case NodeKind::Binary: {
    const auto& b = static_cast<const Binary&>(*e);
    if (isFloat(b.type)) return std::nullopt;
    auto x = range(b.a, vars), y = range(b.b, vars);
    if (!x || !y) return std::nullopt;
    switch (b.op) {
    case BinOp::Add: return Interval{x->lo + y->lo, x->hi + y->hi};
    case BinOp::Sub: return Interval{x->lo - y->hi, x->hi - y->lo};
    case BinOp::Mul: {
      const double p[] = {x->lo * y->lo, x->lo * y->hi, x->hi * y->lo, x->hi * y->hi};
      return Interval{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
    }
    case BinOp::Min: return Interval{std::min(x->lo, y->lo), std::min(x->hi, y->hi)};
    case BinOp::Max: return Interval{std::max(x->lo, y->lo), std::max(x->hi, y->hi)};
    case BinOp::FloorDiv:
    case BinOp::CeilDiv:
    case BinOp::Div:
      // By a positive constant: monotone (rounding moves each end by less than one).
      if (y->lo != y->hi || y->lo <= 0) return std::nullopt;
      return Interval{x->lo / y->lo - 1, x->hi / y->lo + 1};
    case BinOp::EMod:
      if (y->lo != y->hi || y->lo <= 0) return std::nullopt;
      return Interval{0, y->lo - 1};
    default: return std::nullopt;
    }
  }
  default: return std::nullopt;
  }
}

std::optional<double> bound(const Stmt& s, Ranges& vars) {
  if (!s) return 0.0;
  switch (s->kind) {
  case NodeKind::For: {
    const auto& f = static_cast<const For&>(*s);
    auto lo = range(f.lo, vars), hi = range(f.hi, vars);
    if (!lo || !hi) return std::nullopt;
    const double trips = std::max(0.0, hi->hi - lo->lo);
    if (trips == 0) return 0.0;
    auto saved = vars.find(f.var) != vars.end() ? std::optional<Interval>(vars[f.var]) : std::nullopt;
    vars[f.var] = Interval{lo->lo, hi->hi - 1};
    auto inner = bound(f.body, vars);
    if (saved)
      vars[f.var] = *saved;
    else
      vars.erase(f.var);
    if (!inner) return std::nullopt;
    return trips * std::max(*inner, 1.0);
  }
  case NodeKind::Block: {
    double total = 0;
    for (const Stmt& x : static_cast<const Block&>(*s).stmts) {
      auto b = bound(x, vars);
      if (!b) return std::nullopt;
      total += *b;
    }
    return total;
  }
  case NodeKind::IfThen: {
    const auto& i = static_cast<const IfThen&>(*s);
    auto a = bound(i.then, vars), b = bound(i.otherwise, vars);
    if (!a || !b) return std::nullopt;
    return *a + *b;
  }
  case NodeKind::Allocate: return bound(static_cast<const Allocate&>(*s).body, vars);
  case NodeKind::Store:
  case NodeKind::Evaluate:
  case NodeKind::Prefetch: return 1.0;
  default: return std::nullopt; // GPU statements: not counted
  }
}

} // namespace

std::optional<double> iterationBound(const Stmt& s) {
  Ranges vars;
  return bound(s, vars);
}

} // namespace einjit::codegen::ir
