#include "codegen/Interpreter.h"

#include "dsl/InPlace.h"
#include "dsl/Printer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <string>

namespace einjit::codegen {

using namespace einjit::dsl;

namespace {

double loadElement(DType t, const void* base, std::int64_t off) {
  switch (t) {
  case DType::f32: return static_cast<const float*>(base)[off];
  case DType::f64: return static_cast<const double*>(base)[off];
  case DType::i32: return static_cast<const std::int32_t*>(base)[off];
  case DType::i64: return static_cast<double>(static_cast<const std::int64_t*>(base)[off]);
  case DType::bf16: return static_cast<double>(static_cast<const bf16*>(base)[off]);
  }
  return 0;
}

// Float to integer without undefined behaviour: NaN becomes 0, the rest saturates.
template <class I>
I saturate(double v) {
  if (std::isnan(v)) return 0;
  double lo = static_cast<double>(std::numeric_limits<I>::min());
  double hi = static_cast<double>(std::numeric_limits<I>::max());
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

void storeElement(DType t, void* base, std::int64_t off, double v) {
  switch (t) {
  case DType::f32: static_cast<float*>(base)[off] = static_cast<float>(v); return;
  case DType::f64: static_cast<double*>(base)[off] = v; return;
  case DType::i32: static_cast<std::int32_t*>(base)[off] = saturate<std::int32_t>(v); return;
  case DType::i64: static_cast<std::int64_t*>(base)[off] = saturate<std::int64_t>(v); return;
  case DType::bf16: static_cast<bf16*>(base)[off] = bf16(static_cast<float>(v)); return;
  }
}

// Calls f(offset, linearIndex) for every element of a strided shape, row-major.
template <class F>
void forEachElement(const std::vector<std::int64_t>& shape,
                    const std::vector<std::int64_t>& strides, F&& f) {
  std::int64_t total = 1;
  for (std::int64_t e : shape) total *= e;
  if (total == 0) return;
  std::vector<std::int64_t> idx(shape.size(), 0);
  std::int64_t off = 0;
  for (std::int64_t lin = 0; lin < total; ++lin) {
    f(off, lin);
    for (std::size_t d = shape.size(); d-- > 0;) {
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

double reduceIdentity(Reduce r) {
  switch (r) {
  case Reduce::Add: return 0.0;
  case Reduce::Mul: return 1.0;
  case Reduce::Max: return -std::numeric_limits<double>::infinity();
  case Reduce::Min: return std::numeric_limits<double>::infinity();
  }
  return 0.0;
}

// Strict comparisons keep the first extreme value; NaN never replaces the accumulator.
double combine(Reduce r, double acc, double v) {
  switch (r) {
  case Reduce::Add: return acc + v;
  case Reduce::Mul: return acc * v;
  case Reduce::Max: return v > acc ? v : acc;
  case Reduce::Min: return v < acc ? v : acc;
  }
  return acc;
}

double callFunction(Fn f, const double* a) {
  switch (f) {
  case Fn::Exp: return std::exp(a[0]);
  case Fn::Log: return std::log(a[0]);
  case Fn::Sqrt: return std::sqrt(a[0]);
  case Fn::Tanh: return std::tanh(a[0]);
  case Fn::Sigmoid: return 1.0 / (1.0 + std::exp(-a[0]));
  case Fn::Relu: return a[0] > 0 ? a[0] : 0.0;
  case Fn::Abs: return std::fabs(a[0]);
  case Fn::Pow: return std::pow(a[0], a[1]);
  case Fn::Min: return a[1] < a[0] ? a[1] : a[0];
  case Fn::Max: return a[1] > a[0] ? a[1] : a[0];
  case Fn::Sin: return std::sin(a[0]);
  case Fn::Cos: return std::cos(a[0]);
  case Fn::Erf: return std::erf(a[0]);
  case Fn::Atan: return std::atan(a[0]);
  case Fn::Atan2: return std::atan2(a[0], a[1]);
  case Fn::Log2: return std::log2(a[0]);
  case Fn::Log10: return std::log10(a[0]);
  case Fn::Log1p: return std::log1p(a[0]);
  case Fn::Expm1: return std::expm1(a[0]);
  case Fn::Cbrt: return std::cbrt(a[0]);
  case Fn::Round: return std::round(a[0]);
  case Fn::Sign: return a[0] > 0 ? 1.0 : a[0] < 0 ? -1.0 : a[0];
  case Fn::Floor: return std::floor(a[0]);
  case Fn::Ceil: return std::ceil(a[0]);
  case Fn::FDiv: return std::floor(a[0] / a[1]);
  case Fn::CDiv: return std::ceil(a[0] / a[1]);
  case Fn::ToF32: return static_cast<double>(static_cast<float>(a[0]));
  case Fn::ToF64: return a[0];
  case Fn::ToI32: return static_cast<double>(saturate<std::int32_t>(std::trunc(a[0])));
  case Fn::ToI64: return static_cast<double>(saturate<std::int64_t>(std::trunc(a[0])));
  }
  return 0.0;
}

// A checked expression with every symbol resolved to a number for this call.
struct Node;
struct Sub {
  IndexMode mode = IndexMode::Plain;
  std::vector<std::pair<int, std::int64_t>> terms; // (var, coefficient)
  std::int64_t constant = 0;
  std::unique_ptr<Node> gather;
  std::int64_t extent = 0;
  std::int64_t stride = 0;
  SourceRange range;
};
struct Node {
  CKind kind;
  double value = 0;
  int var = -1;
  int tensor = -1;
  UnOp unop = UnOp::Neg;
  BinOp binop = BinOp::Add;
  Fn fn = Fn::Exp;
  std::vector<Sub> subs;
  std::vector<Node> args;
  // A read's tensor: its dense copy, or else the caller's buffer read in place.
  const double* dense = nullptr;
  const void* base = nullptr;
  DType dtype = DType::f64;
};

class Interpreter {
public:
  Interpreter(const Program& p, const BoundProgram& b, const std::vector<HostBuffer>& t,
              std::vector<std::vector<std::int64_t>>* writeCounts)
      : p_(p), b_(b), bufs_(t), writeCounts_(writeCounts) {}

  void run() {
    if (bufs_.size() != p_.tensors.size()) throw InternalError("interpret: wrong tensor count");
    load();
    for (std::size_t k = 0; k < p_.stmts.size(); ++k) statement(k);
    store();
  }

private:
  const Program& p_;
  const BoundProgram& b_;
  const std::vector<HostBuffer>& bufs_;
  std::vector<std::vector<std::int64_t>>* writeCounts_;
  // Per tensor: the tensors that statements write (outputs, temporaries, arguments written
  // in place) are dense row-major copies in vals_, stored back at the end, so that a failed
  // check writes nothing and in-place statements read what the program's order says. Read-only
  // arguments are read where they are, through their own strides and dtype (direct_): a
  // gather from a huge (even stride-0) table must not copy the table.
  std::vector<std::vector<double>> vals_;
  std::vector<bool> direct_;
  std::vector<std::vector<std::int64_t>> stride_; // in elements of vals_ or of the buffer
  std::vector<std::int64_t> vars_;

  const std::vector<std::int64_t>& shapeOf(int t) const {
    return b_.tensors[static_cast<std::size_t>(t)].shape;
  }

  void load() {
    vals_.resize(p_.tensors.size());
    direct_.assign(p_.tensors.size(), false);
    stride_.resize(p_.tensors.size());
    for (std::size_t t = 0; t < p_.tensors.size(); ++t) {
      if (p_.tensors[t].isArgument && p_.tensors[t].writtenBy.empty()) {
        const HostBuffer& h = bufs_[t];
        if (h.shape != shapeOf(static_cast<int>(t))) throw InternalError("interpret: input shape");
        direct_[t] = true;
        stride_[t] = h.strides;
        continue;
      }
      const auto& shape = shapeOf(static_cast<int>(t));
      std::int64_t total = 1;
      std::vector<std::int64_t> stride(shape.size());
      for (std::size_t d = shape.size(); d-- > 0;) {
        stride[d] = total;
        total *= shape[d];
      }
      stride_[t] = stride;
      try {
        vals_[t].assign(static_cast<std::size_t>(total), 0.0);
      } catch (const std::bad_alloc&) {
        throw Error("the reference interpreter cannot allocate " +
                    std::to_string(static_cast<std::uint64_t>(total) * sizeof(double)) +
                    " bytes for its float64 copy of '" + dsl::shownName(p_, static_cast<int>(t)) +
                    "' (" + std::to_string(total) + " elements)");
      }
      if (!p_.tensors[t].isArgument) continue;
      const HostBuffer& h = bufs_[t];
      auto& dst = vals_[t];
      forEachElement(h.shape, h.strides, [&](std::int64_t off, std::int64_t lin) {
        dst[static_cast<std::size_t>(lin)] = loadElement(h.dtype, h.data, off);
      });
    }
  }

  void store() {
    for (std::size_t t = 0; t < p_.tensors.size(); ++t) {
      if (p_.tensors[t].writtenBy.empty()) continue;
      const HostBuffer& h = bufs_[t];
      if (h.shape != shapeOf(static_cast<int>(t))) throw InternalError("interpret: output shape");
      const auto& src = vals_[t];
      forEachElement(h.shape, h.strides, [&](std::int64_t off, std::int64_t lin) {
        storeElement(h.dtype, h.data, off, src[static_cast<std::size_t>(lin)]);
      });
    }
  }

  Node compile(const CExpr& e) {
    Node n;
    n.kind = e.kind;
    n.value = e.value;
    n.var = e.var;
    n.tensor = e.tensor;
    n.unop = e.unop;
    n.binop = e.binop;
    n.fn = e.fn;
    switch (e.kind) {
    case CKind::Param:
      n.kind = CKind::Const;
      n.value = b_.params[static_cast<std::size_t>(e.param)];
      break;
    case CKind::Size:
      n.kind = CKind::Const;
      n.value = static_cast<double>(shapeOf(e.tensor)[static_cast<std::size_t>(e.dim)]);
      break;
    case CKind::Read: {
      const auto t = static_cast<std::size_t>(e.tensor);
      if (direct_[t]) {
        n.base = bufs_[t].data;
        n.dtype = bufs_[t].dtype;
      } else {
        n.dense = vals_[t].data();
      }
      for (std::size_t d = 0; d < e.subs.size(); ++d) {
        const Subscript& s = e.subs[d];
        Sub c;
        c.mode = s.mode;
        for (std::size_t v = 0; v < s.coef.size(); ++v)
          if (s.coef[v] != 0) c.terms.push_back({static_cast<int>(v), s.coef[v]});
        c.constant = b_.eval(p_, s.constant);
        if (s.gather) c.gather = std::make_unique<Node>(compile(*s.gather));
        c.extent = shapeOf(e.tensor)[d];
        c.stride = stride_[static_cast<std::size_t>(e.tensor)][d];
        c.range = s.range;
        n.subs.push_back(std::move(c));
      }
      break;
    }
    default: break;
    }
    for (const CExprPtr& a : e.args) n.args.push_back(compile(*a));
    return n;
  }

  double read(const Node& n) {
    std::int64_t off = 0;
    if (!offsetOf(n, &off)) return 0.0;
    return n.dense ? n.dense[off] : loadElement(n.dtype, n.base, off);
  }

  // The element an access reaches; false for a padded read outside the tensor.
  bool offsetOf(const Node& n, std::int64_t* offset) {
    std::int64_t off = 0;
    for (const Sub& s : n.subs) {
      std::int64_t idx = s.constant;
      for (auto [v, c] : s.terms) idx += c * vars_[static_cast<std::size_t>(v)];
      if (s.gather) {
        double g = eval(*s.gather);
        if (!(g > -1e15 && g < 1e15) || std::floor(g) != g) gatherNotInteger(s, g);
        idx += static_cast<std::int64_t>(g);
      }
      if (idx < 0 || idx >= s.extent) {
        switch (s.mode) {
        case IndexMode::Pad: return false;
        case IndexMode::Clamp:
          if (s.extent == 0) return false;
          idx = std::clamp<std::int64_t>(idx, 0, s.extent - 1);
          break;
        case IndexMode::Wrap:
          if (s.extent == 0) return false;
          idx = ((idx % s.extent) + s.extent) % s.extent;
          break;
        case IndexMode::Plain:
          if (s.gather) gatherOutOfBounds(n, s, static_cast<double>(idx));
          // Binding proves box-shaped accesses in bounds; accesses over dependent ranges are
          // checked here.
          outOfBounds(n, s, idx);
        }
      }
      off += idx * s.stride;
    }
    *offset = off;
    return true;
  }

  [[noreturn]] void outOfBounds(const Node& n, const Sub& s, std::int64_t idx) {
    const std::string& name = dsl::shownName(p_, n.tensor);
    fail(*p_.source, s.range,
         "subscript '" + std::string(p_.source->slice(s.range)) + "' goes out of bounds: it " +
             "reaches " + std::to_string(idx) + " but '" + name + "' has extent " +
             std::to_string(s.extent) + " there",
         {{{}, "wrap the subscript in pad(...) to read zeros outside the tensor", false}});
  }

  [[noreturn]] void gatherOutOfBounds(const Node& n, const Sub& s, double idx) {
    const std::string& name = dsl::shownName(p_, n.tensor);
    fail(*p_.source, s.range,
         "gather index " + std::to_string(static_cast<long long>(idx)) + " is out of bounds for '" +
             name + "' (extent " + std::to_string(s.extent) + ")",
         {{{},
           "wrap the subscript in clamp(...), wrap(...) or pad(...) to allow such indices",
           false}});
  }

  [[noreturn]] void gatherNotInteger(const Sub& s, double g) {
    fail(*p_.source, s.range, "gather index " + formatNumber(g, false) + " is not an integer",
         {{{}, "index tensors hold integers; round a computed index with i64(...)", false}});
  }

  double eval(const Node& n) {
    switch (n.kind) {
    case CKind::Const: return n.value;
    case CKind::Index: return static_cast<double>(vars_[static_cast<std::size_t>(n.var)]);
    case CKind::Read: return read(n);
    case CKind::Unary: {
      double a = eval(n.args[0]);
      return n.unop == UnOp::Neg ? -a : (a == 0.0 ? 1.0 : 0.0);
    }
    case CKind::Binary: {
      if (n.binop == BinOp::And) return eval(n.args[0]) != 0.0 && eval(n.args[1]) != 0.0;
      if (n.binop == BinOp::Or) return eval(n.args[0]) != 0.0 || eval(n.args[1]) != 0.0;
      double a = eval(n.args[0]), b = eval(n.args[1]);
      switch (n.binop) {
      case BinOp::Add: return a + b;
      case BinOp::Sub: return a - b;
      case BinOp::Mul: return a * b;
      case BinOp::Div: return a / b;
      case BinOp::Mod: return std::fmod(a, b);
      case BinOp::Pow: return std::pow(a, b);
      case BinOp::Lt: return a < b;
      case BinOp::Le: return a <= b;
      case BinOp::Gt: return a > b;
      case BinOp::Ge: return a >= b;
      case BinOp::Eq: return a == b;
      case BinOp::Ne: return a != b;
      default: break;
      }
      throw InternalError("interpret: binary operator");
    }
    case CKind::Ternary: return eval(n.args[0]) != 0.0 ? eval(n.args[1]) : eval(n.args[2]);
    case CKind::Call: {
      double a[2] = {0, 0};
      for (std::size_t i = 0; i < n.args.size() && i < 2; ++i) a[i] = eval(n.args[i]);
      return callFunction(n.fn, a);
    }
    default: throw InternalError("interpret: unresolved expression node");
    }
  }

  void statement(std::size_t k) {
    const Statement& st = p_.stmts[k];
    const BoundStatement& bs = b_.stmts[k];
    const std::size_t n = st.vars.size();
    const std::size_t nOut = static_cast<std::size_t>(st.numOutputVars());
    // No output element is covered: nothing to write. An empty reduction still writes its
    // identity to every covered element.
    for (std::size_t v = 0; v < nOut; ++v)
      if (bs.hi[v] <= bs.lo[v]) return;
    Node rhs = compile(*st.rhs);
    Node lhs = compile(*st.lhs);
    vars_.assign(n, 0);
    auto& out = vals_[static_cast<std::size_t>(st.output)];
    std::vector<std::int64_t>* counts = nullptr;
    if (writeCounts_) {
      writeCounts_->resize(p_.stmts.size());
      counts = &(*writeCounts_)[k];
      counts->assign(out.size(), 0);
    }
    loop(bs, 0, nOut, [&] {
      double acc = reduceIdentity(st.reduce);
      loop(bs, nOut, n, [&] { acc = combine(st.reduce, acc, eval(rhs)); });
      std::int64_t off = 0;
      if (!offsetOf(lhs, &off)) return; // pad() on the left: a write outside is dropped
      double& slot = out[static_cast<std::size_t>(off)];
      if (counts) ++(*counts)[static_cast<std::size_t>(off)];
      slot = st.assign == Assign::Accumulate ? combine(st.reduce, slot, acc) : acc;
    });
  }

  // Runs body for every value of the index variables [v, end), in order; a dependent range
  // is evaluated from the current values of the indices before it.
  template <class F>
  void loop(const BoundStatement& bs, std::size_t v, std::size_t end, F&& body) {
    if (v == end) {
      body();
      return;
    }
    std::int64_t lo = bs.lo[v], hi = bs.hi[v];
    if (bs.dependent[v]) {
      lo = bs.loBound[v].eval(vars_);
      hi = bs.hiBound[v].eval(vars_);
    }
    for (std::int64_t x = lo; x < hi; ++x) {
      vars_[v] = x;
      loop(bs, v + 1, end, body);
    }
  }
};

} // namespace

void interpret(const Program& program, const BoundProgram& bound,
               const std::vector<HostBuffer>& tensors,
               std::vector<std::vector<std::int64_t>>* writeCounts) {
  Interpreter(program, bound, tensors, writeCounts).run();
}

} // namespace einjit::codegen
