#include "codegen/CodeGenCUDA.h"
#include "codegen/Target.h"

#include "einjit/Error.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace einjit::codegen {

using namespace ir;

namespace {

// Helper functions, emitted when used.
const std::map<std::string, std::string>& helpers() {
  static const std::map<std::string, std::string> h = {
      {"ej_min", "template <class T> __device__ __forceinline__ T ej_min(T a, T b) { return b < a "
                 "? b : a; }\n"},
      {"ej_max", "template <class T> __device__ __forceinline__ T ej_max(T a, T b) { return b > a "
                 "? b : a; }\n"},
      {"ej_fdiv", "template <class T> __device__ __forceinline__ T ej_fdiv(T a, T b) { T q = a / "
                  "b; return q - (a % b < 0); }\n"},
      {"ej_cdiv", "template <class T> __device__ __forceinline__ T ej_cdiv(T a, T b) { T q = a / "
                  "b; return q + (a % b > 0); }\n"},
      {"ej_emod", "template <class T> __device__ __forceinline__ T ej_emod(T a, T b) { T r = a % "
                  "b; return r < 0 ? r + b : r; }\n"},
      // Float to integer as the interpreter and the CPU JIT do it (Rust's and Java's rule):
      // toward zero, NaN to 0, saturating at the type's limits (the bounds are powers of two,
      // exact in either float type). CUDA's own conversions leave NaN to the hardware.
      {"ej_f2i", "__device__ __forceinline__ int ej_f2i(double v) { return v != v ? 0 : v >= "
                 "2147483648.0 ? 2147483647 : v <= -2147483648.0 ? (-2147483647 - 1) : (int)v; "
                 "}\n"},
      {"ej_f2ll", "__device__ __forceinline__ long long ej_f2ll(double v) { return v != v ? 0 : "
                  "v >= 9223372036854775808.0 ? 9223372036854775807LL : v <= "
                  "-9223372036854775808.0 ? (-9223372036854775807LL - 1) : (long long)v; }\n"},
      {"ej_bf16",
       "__device__ __forceinline__ unsigned short ej_bf16(float f) {\n"
       "  unsigned u = __float_as_uint(f);\n"
       "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
       "  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n}\n"},
      // bf16 has no atomic add of its own before sm_90: a compare-and-swap loop on the 32-bit
      // word that holds it (the sum rounded once).
      {"ej_scatter_bf16",
       "__device__ __forceinline__ void ej_scatter_bf16(unsigned short* p, float v) {\n"
       "  unsigned* w = (unsigned*)((unsigned long long)p & ~3ull);\n"
       "  const unsigned s = ((unsigned long long)p & 2ull) ? 16u : 0u;\n"
       "  unsigned old = *w, seen;\n"
       "  do {\n"
       "    seen = old;\n"
       "    const float cur = __uint_as_float(((seen >> s) & 0xffffu) << 16);\n"
       "    const unsigned b = ej_bf16(cur + v);\n"
       "    old = atomicCAS(w, seen, (seen & ~(0xffffu << s)) | (b << s));\n"
       "  } while (old != seen);\n}\n"},
      // A wgmma shared-memory matrix descriptor: the start address, the two byte offsets (see
      // ir::Wgmma), each in 16-byte units, and the swizzle mode (0 none, 1 128-byte) (PTX ISA,
      // "Matrix Descriptor Format").
      {"ej_wgmma_desc",
       "__device__ __forceinline__ unsigned long long ej_wgmma_desc(const void* p, unsigned lbo, "
       "unsigned sbo, unsigned long long mode) {\n"
       "  const unsigned a = (unsigned)__cvta_generic_to_shared(p);\n"
       "  return (unsigned long long)((a & 0x3ffffu) >> 4) | ((unsigned long long)(lbo >> 4) << "
       "16) |\n"
       "         ((unsigned long long)(sbo >> 4) << 32) | (mode << 62);\n}\n"},
      {"ej_check",
       "__device__ __forceinline__ long long ej_check(long long i, long long e, int* status) {\n"
       "  if (i < 0 || i >= e) { *(volatile int*)status = 1; return i < 0 ? 0 : e - 1; }\n"
       "  return i;\n}\n"},
  };
  return h;
}

std::string ident(const std::string& prefix, const std::string& name) {
  // '.' (generated names) and '_' are escaped so that distinct IR names stay distinct.
  std::string s = prefix;
  for (char c : name) {
    if (c == '.')
      s += "_d";
    else if (c == '_')
      s += "__";
    else
      s += c;
  }
  return s;
}

class Emitter {
public:
  Emitter(const Func& f, const std::string& prefix, const CudaOptions& opt,
          std::set<std::string>& used)
      : f_(f), prefix_(prefix), opt_(opt), used_(used) {}

  CudaLaunch emit(std::ostringstream& out) {
    CudaLaunch launch;
    launch.name = prefix_ + f_.name;
    Stmt body = f_.body;
    // The launch shape: GpuBlock { GpuThread { ... } } at the top.
    if (body && body->kind == NodeKind::For) {
      const auto& b = static_cast<const For&>(*body);
      std::int64_t nb = 0, nt = 0;
      if (b.forKind == ForKind::GpuBlock && b.body->kind == NodeKind::For && isConst(b.hi, &nb)) {
        const auto& t = static_cast<const For&>(*b.body);
        if (t.forKind == ForKind::GpuThread && isConst(t.hi, &nt)) {
          launch.grid = nb;
          launch.block = nt;
        }
      }
    }
    written_.clear();
    collectStores(f_.body);
    swizzled_.clear();
    vectored_.clear();
    collectBufferUses(f_.body);
    // A shared buffer lives for its Allocate's body: buffers nested in one another are live at
    // once, a block's statements one after another (a tile's epilogue reuses the bytes of its
    // slices; the lowering puts a barrier between). Dynamic shared memory, where that reuse is
    // real, when the buffers together would pass the static shared memory's limit.
    const std::int64_t sharedTotal = sharedBytes(f_.body);
    dynamicShared_ = sharedBytes(f_.body, true) > Target::gpuStaticShared;
    sharedOffset_ = 0;
    if (dynamicShared_) launch.sharedBytes = sharedTotal;
    std::ostringstream sig;
    sig << "extern \"C\" __global__ void __launch_bounds__(" << launch.block << ") " << launch.name
        << "(";
    for (const BufferArg& b : f_.buffers) {
      bool w = written_.count(b.name) > 0;
      sig << (w ? "" : "const ") << typeText(b.elem, true) << "* __restrict__ "
          << ident("b_", b.name) << ", ";
    }
    for (int i = 0; i < opt_.params; ++i) sig << "const double ej_p" << i << ", ";
    sig << "int* __restrict__ ej_status)";
    out << sig.str() << " {\n";
    if (dynamicShared_) out << "  extern __shared__ __align__(1024) unsigned char ej_smem[];\n";
    stmt(f_.body, 1, out);
    out << "}\n\n";
    return launch;
  }

private:
  const Func& f_;
  const std::string& prefix_;
  const CudaOptions& opt_;
  std::set<std::string>& used_;
  std::set<std::string> written_;
  std::set<std::string> swizzled_; // shared buffers read by 128-byte swizzled wgmma operands
  std::set<std::string> vectored_; // buffers a CopyVector reads or writes (local ones: aligned)
  std::set<std::string> locals_;
  int gpuBlockDims_ = 0, gpuThreadDims_ = 0;
  int tmp_ = 0;
  bool dynamicShared_ = false;
  std::int64_t sharedOffset_ = 0; // bytes of ej_smem handed out so far (16-byte multiples)

  // The shared buffers wgmma reads swizzled (swizzled_) and the buffers a CopyVector touches
  // (vectored_).
  void collectBufferUses(const Stmt& s) {
    struct V : Visitor {
      std::set<std::string>& out;
      std::set<std::string>& vec;
      V(std::set<std::string>& o, std::set<std::string>& w) : out(o), vec(w) {}
      void visitWgmma(const Wgmma& n) override {
        for (const WgmmaOperand* o : {&n.a, &n.b})
          if (o->swizzle128) out.insert(o->buffer);
      }
      void visitCopyVector(const CopyVector& n) override {
        vec.insert(n.dst);
        vec.insert(n.src);
      }
    } v(swizzled_, vectored_);
    v.visit(s);
  }
  // Bytes a shared buffer takes: rounded up to 16; a swizzled one also keeps 1024 in hand to
  // start 1024-byte aligned.
  std::int64_t sharedSize(const Allocate& n) const {
    return (n.size * typeBytes(n.elem) + 15) / 16 * 16 + (swizzled_.count(n.buffer) ? 1024 : 0);
  }
  // The bytes of shared memory a statement tree needs (sharedSize): the most live at once, or
  // with `all` the sum of every buffer.
  std::int64_t sharedBytes(const Stmt& s, bool all = false) const {
    if (!s) return 0;
    auto join = [all](std::int64_t a, std::int64_t b) { return all ? a + b : std::max(a, b); };
    switch (s->kind) {
    case NodeKind::For: return sharedBytes(static_cast<const For&>(*s).body, all);
    case NodeKind::Block: {
      std::int64_t n = 0;
      for (const Stmt& x : static_cast<const Block&>(*s).stmts) n = join(n, sharedBytes(x, all));
      return n;
    }
    case NodeKind::IfThen: {
      const auto& n = static_cast<const IfThen&>(*s);
      return join(sharedBytes(n.then, all), sharedBytes(n.otherwise, all));
    }
    case NodeKind::Allocate: {
      const auto& n = static_cast<const Allocate&>(*s);
      const std::int64_t own = n.shared ? sharedSize(n) : 0;
      return own + sharedBytes(n.body, all);
    }
    default: return 0;
    }
  }

  void collectStores(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
    case NodeKind::For: collectStores(static_cast<const For&>(*s).body); break;
    case NodeKind::Block:
      for (const Stmt& x : static_cast<const Block&>(*s).stmts) collectStores(x);
      break;
    case NodeKind::Store: written_.insert(static_cast<const Store&>(*s).buffer); break;
    case NodeKind::CopyVector: written_.insert(static_cast<const CopyVector&>(*s).dst); break;
    case NodeKind::IfThen: {
      const auto& n = static_cast<const IfThen&>(*s);
      collectStores(n.then);
      collectStores(n.otherwise);
      break;
    }
    case NodeKind::Allocate: collectStores(static_cast<const Allocate&>(*s).body); break;
    default: break;
    }
  }

  // The element type of a global buffer (atomic adds go only there).
  Type bufferType(const std::string& name) const {
    for (const BufferArg& b : f_.buffers)
      if (b.name == name) return b.elem;
    throw InternalError("codegen: atomic add into '" + name + "', which is not a global buffer");
  }

  // `storage`: the element type of a buffer (i64 tensors stay 64-bit in index32 mode).
  std::string typeText(Type t, bool storage = false) const {
    switch (t) {
    case Type::i1: return "bool";
    case Type::i32: return "int";
    case Type::i64: return opt_.index32 && !storage ? "int" : "long long";
    case Type::f32: return "float";
    case Type::f64: return "double";
    case Type::bf16: return "unsigned short"; // the bits; Cast converts
    }
    return "?";
  }

  std::string bufferRef(const std::string& name) const {
    return locals_.count(name) ? ident("l_", name) : ident("b_", name);
  }

  std::string use(const std::string& helper) {
    used_.insert(helper);
    return helper;
  }

  static std::string floatLiteral(Type t, double v) {
    const bool f = t == Type::f32;
    if (f) v = static_cast<double>(static_cast<float>(v)); // may overflow to infinity
    if (std::isnan(v))
      return f ? "__int_as_float(0x7fffffff)" : "__longlong_as_double(0x7ff8000000000000LL)";
    if (std::isinf(v)) {
      if (f) return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
      return v > 0 ? "__longlong_as_double(0x7ff0000000000000LL)"
                   : "__longlong_as_double(0xfff0000000000000LL)";
    }
    char buf[64];
    if (f)
      std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(v)));
    else
      std::snprintf(buf, sizeof buf, "%a", v);
    return std::string("(") + buf + ")";
  }

  std::string intLiteral(std::int64_t v) const {
    if (opt_.index32 && v >= std::numeric_limits<std::int32_t>::min() / 2 &&
        v <= std::numeric_limits<std::int32_t>::max() / 2)
      return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
    return "(" + std::to_string(v) + "LL)";
  }

  std::string expr(const Expr& e) {
    switch (e->kind) {
    case NodeKind::IntImm: return intLiteral(static_cast<const IntImm&>(*e).value);
    case NodeKind::FloatImm: {
      const auto& n = static_cast<const FloatImm&>(*e);
      return floatLiteral(n.type, n.value);
    }
    case NodeKind::Var: return ident("v_", static_cast<const Var&>(*e).name);
    case NodeKind::Param: {
      const auto& n = static_cast<const Param&>(*e);
      return "((" + typeText(n.type) + ")ej_p" + std::to_string(n.index) + ")";
    }
    case NodeKind::Load: {
      const auto& n = static_cast<const Load&>(*e);
      std::string s = bufferRef(n.buffer) + "[" + expr(n.index) + "]";
      return n.mask ? "(" + expr(n.mask) + " ? " + s + " : (" + typeText(n.type) + ")0)" : s;
    }
    case NodeKind::Cast: return castExpr(static_cast<const Cast&>(*e));
    case NodeKind::Unary: {
      const auto& n = static_cast<const Unary&>(*e);
      return std::string("(") + (n.op == UnOp::Neg ? "-" : "!") + expr(n.a) + ")";
    }
    case NodeKind::Binary: return binaryExpr(static_cast<const Binary&>(*e));
    case NodeKind::Select: {
      const auto& n = static_cast<const Select&>(*e);
      return "(" + expr(n.cond) + " ? " + expr(n.a) + " : " + expr(n.b) + ")";
    }
    case NodeKind::Call: return callExpr(static_cast<const Call&>(*e));
    case NodeKind::Check: {
      const auto& n = static_cast<const Check&>(*e);
      std::string c = use("ej_check") + "(" + expr(n.index) + ", " + std::to_string(n.extent) +
                      "LL, ej_status)";
      return opt_.index32 ? "((int)" + c + ")" : c;
    }
    default: break;
    }
    throw InternalError("cuda codegen: statement node in an expression");
  }

  std::string castExpr(const Cast& n) {
    const Type from = n.value->type, to = n.type;
    std::string v = expr(n.value);
    if (from == Type::bf16 && to != Type::bf16) // through f32
      return castText(Type::f32, to, "__uint_as_float(((unsigned)" + v + ") << 16)");
    if (to == Type::bf16 && from != Type::bf16)
      return use("ej_bf16") + "(" + castText(from, Type::f32, v) + ")";
    return castText(from, to, v);
  }

  std::string castText(Type from, Type to, const std::string& v) {
    if (from == to) return v;
    if (isFloat(to)) return "((" + typeText(to) + ")" + v + ")";
    if (isFloat(from)) { // saturating, NaN -> 0, like the interpreter (an f32 widens exactly)
      if (to == Type::i32) return use("ej_f2i") + "(" + v + ")";
      if (to == Type::i64) return use("ej_f2ll") + "(" + v + ")";
      return "(" + v + " != 0)";
    }
    if (to == Type::i1) return "(" + v + " != 0)";
    // i64 is int in index32 mode; wider sources (i64 tensors) stay long long, checked as such.
    if (to == Type::i64) return from == Type::i32 && opt_.index32 ? v : "((long long)" + v + ")";
    return "((" + typeText(to) + ")" + v + ")";
  }

  // Whether the C text of an integer expression is long long where its IR type is emitted as
  // int: in index32 mode, what comes from 64-bit storage (an i64 tensor's offsets), wide
  // literals, and casts to i64 from anything but i32 stay long long. The integer helpers are
  // templates, so a call mixing the two widths names its type (ej_max<long long>(...)).
  bool wide(const Expr& e) const {
    if (!opt_.index32 || isFloat(e->type)) return false;
    switch (e->kind) {
    case NodeKind::IntImm:
      return intLiteral(static_cast<const IntImm&>(*e).value).find("LL") != std::string::npos;
    case NodeKind::Load: return bufferType(static_cast<const Load&>(*e).buffer) == Type::i64;
    case NodeKind::Cast: {
      const auto& n = static_cast<const Cast&>(*e);
      if (n.type == n.value->type) return wide(n.value);
      return n.type == Type::i64 && n.value->type != Type::i32;
    }
    case NodeKind::Unary: return wide(static_cast<const Unary&>(*e).a);
    case NodeKind::Select: {
      const auto& n = static_cast<const Select&>(*e);
      return wide(n.a) || wide(n.b);
    }
    case NodeKind::Binary: {
      const auto& n = static_cast<const Binary&>(*e);
      switch (n.op) {
      case BinOp::Lt:
      case BinOp::Le:
      case BinOp::Gt:
      case BinOp::Ge:
      case BinOp::Eq:
      case BinOp::Ne:
      case BinOp::And:
      case BinOp::Or: return false;
      default: return wide(n.a) || wide(n.b);
      }
    }
    default: return false;
    }
  }

  std::string binaryExpr(const Binary& n) {
    std::string a = expr(n.a), b = expr(n.b);
    const bool fl = isFloat(n.a->type);
    const bool f32 = n.a->type == Type::f32;
    auto infix = [&](const char* op) { return "(" + a + " " + op + " " + b + ")"; };
    const std::string width = !fl && (wide(n.a) || wide(n.b)) ? "<long long>" : "";
    auto fn = [&](const std::string& name) { return name + width + "(" + a + ", " + b + ")"; };
    switch (n.op) {
    case BinOp::Add: return infix("+");
    case BinOp::Sub: return infix("-");
    case BinOp::Mul: return infix("*");
    case BinOp::Div: return infix("/");
    case BinOp::Mod: return fl ? fn(f32 ? "fmodf" : "fmod") : infix("%");
    case BinOp::Pow: return fn(f32 ? "powf" : "pow");
    case BinOp::Min: return fn(use("ej_min"));
    case BinOp::Max: return fn(use("ej_max"));
    case BinOp::FloorDiv: return fn(use("ej_fdiv"));
    case BinOp::CeilDiv: return fn(use("ej_cdiv"));
    case BinOp::EMod: return fn(use("ej_emod"));
    case BinOp::Xor: return infix("^");
    case BinOp::Lt: return infix("<");
    case BinOp::Le: return infix("<=");
    case BinOp::Gt: return infix(">");
    case BinOp::Ge: return infix(">=");
    case BinOp::Eq: return infix("==");
    case BinOp::Ne: return infix("!=");
    case BinOp::And: return infix("&&");
    case BinOp::Or: return infix("||");
    }
    throw InternalError("cuda codegen: binary operator");
  }

  std::string callExpr(const Call& n) {
    using dsl::Fn;
    const bool f = n.type == Type::f32;
    std::string a = expr(n.args[0]);
    auto math = [&](const char* name) { return std::string(name) + (f ? "f(" : "(") + a + ")"; };
    const std::string one = f ? "1.0f" : "1.0", zero = f ? "0.0f" : "0.0";
    switch (n.fn) {
    case Fn::Exp: return math("exp");
    case Fn::Log: return math("log");
    case Fn::Sqrt: return math("sqrt");
    case Fn::Sin: return math("sin");
    case Fn::Cos: return math("cos");
    case Fn::Abs: return math("fabs");
    case Fn::Floor: return math("floor");
    case Fn::Ceil: return math("ceil");
    case Fn::Tanh: return math("tanh");
    case Fn::Erf: return math("erf");
    case Fn::Atan: return math("atan");
    case Fn::Atan2: return std::string(f ? "atan2f(" : "atan2(") + a + ", " + expr(n.args[1]) + ")";
    case Fn::Log2: return math("log2");
    case Fn::Log10: return math("log10");
    case Fn::Log1p: return math("log1p");
    case Fn::Expm1: return math("expm1");
    case Fn::Cbrt: return math("cbrt");
    case Fn::Round: return math("round"); // half away from zero
    case Fn::Sign:
      return "(" + a + " > " + zero + " ? " + one + " : " + a + " < " + zero + " ? -" + one +
             " : " + a + ")";
    case Fn::Sigmoid:
      return "(" + one + " / (" + one + " + " + (f ? "expf(-" : "exp(-") + a + ")))";
    case Fn::Relu: return "(" + a + " > " + zero + " ? " + a + " : " + zero + ")";
    case Fn::Pow: return std::string(f ? "powf(" : "pow(") + a + ", " + expr(n.args[1]) + ")";
    default: break;
    }
    throw InternalError("cuda codegen: function " + std::string(dsl::functionName(n.fn)) +
                        " should have been lowered");
  }

  static void indent(std::ostringstream& out, int d) {
    for (int i = 0; i < d; ++i) out << "  ";
  }

  void stmt(const Stmt& s, int d, std::ostringstream& out) {
    if (!s) return;
    switch (s->kind) {
    case NodeKind::For: forStmt(static_cast<const For&>(*s), d, out); break;
    case NodeKind::Block:
      for (const Stmt& x : static_cast<const Block&>(*s).stmts) stmt(x, d, out);
      break;
    case NodeKind::Store: {
      const auto& n = static_cast<const Store&>(*s);
      indent(out, d);
      if (!n.atomicAdd) {
        out << bufferRef(n.buffer) << "[" << expr(n.index) << "] = " << expr(n.value) << ";\n";
      } else if (bufferType(n.buffer) == Type::bf16) {
        use("ej_bf16");
        out << use("ej_scatter_bf16") << "(&" << bufferRef(n.buffer) << "[" << expr(n.index)
            << "], " << expr(n.value) << ");\n";
      } else {
        out << "atomicAdd(&" << bufferRef(n.buffer) << "[" << expr(n.index) << "], "
            << expr(n.value) << ");\n";
      }
      break;
    }
    case NodeKind::IfThen: {
      const auto& n = static_cast<const IfThen&>(*s);
      indent(out, d);
      out << "if (" << expr(n.cond) << ") {\n";
      stmt(n.then, d + 1, out);
      indent(out, d);
      if (n.otherwise) {
        out << "} else {\n";
        stmt(n.otherwise, d + 1, out);
        indent(out, d);
      }
      out << "}\n";
      break;
    }
    case NodeKind::Allocate: {
      const auto& n = static_cast<const Allocate&>(*s);
      indent(out, d);
      out << "{\n";
      indent(out, d + 1);
      const bool shadow = locals_.count(n.buffer) > 0;
      locals_.insert(n.buffer);
      const bool swizzled = swizzled_.count(n.buffer) > 0;
      const std::int64_t offsetBefore = sharedOffset_;
      if (n.shared && dynamicShared_) {
        const std::string t = typeText(n.elem, true);
        const std::int64_t at = swizzled ? (sharedOffset_ + 1023) / 1024 * 1024 : sharedOffset_;
        out << t << "* const " << ident("l_", n.buffer) << " = (" << t << "*)(ej_smem + " << at
            << ");\n";
        sharedOffset_ = at + sharedSize(n) - (swizzled ? 1024 : 0);
      } else {
        out << (n.shared ? (swizzled ? "__shared__ __align__(1024) " : "__shared__ __align__(16) ")
                         : (vectored_.count(n.buffer) ? "__align__(16) " : ""))
            << typeText(n.elem, true) << " " << ident("l_", n.buffer) << "[" << n.size << "];\n";
      }
      stmt(n.body, d + 1, out);
      sharedOffset_ = offsetBefore; // the buffer's bytes are free again after its body
      if (!shadow) locals_.erase(n.buffer);
      indent(out, d);
      out << "}\n";
      break;
    }
    case NodeKind::Barrier:
      indent(out, d);
      if (static_cast<const Barrier&>(*s).asyncProxy) {
        out << "asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n";
        indent(out, d);
      }
      out << "__syncthreads();\n";
      break;
    case NodeKind::Wgmma: wgmma(static_cast<const Wgmma&>(*s), d, out); break;
    case NodeKind::Mma: {
      // ldmatrix: lanes 8q..8q+7 give the rows of matrix q (x4: A's four 8x8 quarters, x2:
      // B's two), .trans for k-major buffers.
      const auto& n = static_cast<const Mma&>(*s);
      const std::string id = std::to_string(tmp_++), lane = "ej_lane" + id;
      const std::string fa = "ej_fa" + id, fb = "ej_fb" + id;
      auto rows = [&](const MmaOperand& o, bool isA) {
        const std::string st = std::to_string(o.stride);
        const std::string q = isA ? "(" + lane + " >> 3)" : "((" + lane + " >> 3) & 1)";
        const std::string r = "(" + lane + " & 7)";
        if (!isA)
          return o.kMajor ? "(" + r + " + 8 * " + q + ") * " + st : r + " * " + st + " + 8 * " + q;
        return o.kMajor ? "(" + r + " + 8 * (" + q + " >> 1)) * " + st + " + 8 * (" + q + " & 1)"
                        : "(" + r + " + 8 * (" + q + " & 1)) * " + st + " + 8 * (" + q + " >> 1)";
      };
      auto load = [&](const MmaOperand& o, bool isA, const std::string& frag, int count) {
        const int regs = isA ? 4 : 2;
        indent(out, d + 1);
        out << "#pragma unroll\n";
        indent(out, d + 1);
        out << "for (int ej_i = 0; ej_i < " << count << "; ++ej_i)\n";
        indent(out, d + 2);
        out << "asm volatile(\"ldmatrix.sync.aligned.m8n8.x" << regs << (o.kMajor ? ".trans" : "")
            << ".shared.b16 {";
        for (int i = 0; i < regs; ++i) out << (i ? "," : "") << "%" << i;
        out << "}, [%" << regs << "];\" : ";
        for (int i = 0; i < regs; ++i)
          out << (i ? ", " : "") << "\"=r\"(" << frag << "[ej_i][" << i << "])";
        out << " : \"r\"((unsigned)__cvta_generic_to_shared(&" << bufferRef(o.buffer) << "["
            << expr(o.base) << " + ej_i * " << o.step << " + " << rows(o, isA) << "])));\n";
      };
      indent(out, d);
      out << "{\n";
      indent(out, d + 1);
      out << "const int " << lane << " = (int)(threadIdx.x & 31);\n";
      indent(out, d + 1);
      out << "unsigned " << fa << "[" << n.mt << "][4], " << fb << "[" << n.nt << "][2];\n";
      load(n.a, true, fa, n.mt);
      load(n.b, false, fb, n.nt);
      indent(out, d + 1);
      out << "#pragma unroll\n";
      indent(out, d + 1);
      out << "for (int ej_i = 0; ej_i < " << n.mt << "; ++ej_i)\n";
      indent(out, d + 1);
      out << "#pragma unroll\n";
      indent(out, d + 1);
      out << "for (int ej_j = 0; ej_j < " << n.nt << "; ++ej_j)\n";
      indent(out, d + 2);
      out << "asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
             "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n";
      indent(out, d + 3);
      out << ": ";
      const std::string cell = bufferRef(n.acc) + "[" + expr(n.accBase) + " + (ej_i * " +
                               std::to_string(n.nt) + " + ej_j) * 4 + ";
      for (int i = 0; i < 4; ++i) out << (i ? ", " : "") << "\"+f\"(" << cell << i << "])";
      out << "\n";
      indent(out, d + 3);
      out << ": ";
      for (int i = 0; i < 4; ++i)
        out << (i ? ", " : "") << "\"r\"(" << fa << "[ej_i][" << i << "])";
      for (int i = 0; i < 2; ++i) out << ", \"r\"(" << fb << "[ej_j][" << i << "])";
      out << ");\n";
      indent(out, d);
      out << "}\n";
      break;
    }
    case NodeKind::CopyAsync: {
      // The source address is only formed when the copy reads (src-size 0 fills zeros).
      const auto& n = static_cast<const CopyAsync&>(*s);
      const std::string c = n.cond ? "ej_c" + std::to_string(tmp_++) : "";
      const std::string src = "&" + bufferRef(n.src) + "[" + expr(n.srcIndex) + "]";
      indent(out, d);
      out << "{ ";
      if (n.cond) out << "const bool " << c << " = " << expr(n.cond) << "; ";
      out << "asm volatile(\"cp.async." << (n.bytes == 16 ? "cg" : "ca")
          << ".shared.global [%0], [%1], " << n.bytes << (n.cond ? ", %2" : "")
          << ";\" :: \"r\"((unsigned)__cvta_generic_to_shared(&" << bufferRef(n.dst) << "["
          << expr(n.dstIndex) << "])), \"l\"("
          << (n.cond ? c + " ? " + src + " : " + bufferRef(n.src) : src) << ")";
      if (n.cond) out << ", \"r\"(" << c << " ? " << n.bytes << " : 0)";
      out << " : \"memory\"); }\n";
      break;
    }
    case NodeKind::CopyVector: {
      // One vector load and one vector store (both offsets aligned to the vector's bytes).
      const auto& n = static_cast<const CopyVector&>(*s);
      const char* v = n.bytes == 16 ? "uint4" : n.bytes == 8 ? "uint2" : "unsigned";
      indent(out, d);
      out << "*reinterpret_cast<" << v << "*>(&" << bufferRef(n.dst) << "[" << expr(n.dstIndex)
          << "]) = *reinterpret_cast<const " << v << "*>(&" << bufferRef(n.src) << "["
          << expr(n.srcIndex) << "]);\n";
      break;
    }
    case NodeKind::Evaluate:
      indent(out, d);
      out << "(void)(" << expr(static_cast<const Evaluate&>(*s).value) << ");\n";
      break;
    case NodeKind::Prefetch: break; // a CPU hint: nothing on the GPU
    case NodeKind::AsyncCommit:
      indent(out, d);
      out << "asm volatile(\"cp.async.commit_group;\" ::: \"memory\");\n";
      break;
    case NodeKind::AsyncWait: {
      const auto& w = static_cast<const AsyncWait&>(*s);
      indent(out, d);
      out << "asm volatile(\""
          << (w.products ? "wgmma.wait_group.sync.aligned " : "cp.async.wait_group ") << w.pending
          << ";\" ::: \"memory\");\n";
      break;
    }
    default: throw InternalError("cuda codegen: expression node as a statement");
    }
  }

  // fence; `steps` x wgmma.mma_async (descriptors advanced by kStep elements); commit; wait
  // until `pending` groups remain.
  void wgmma(const Wgmma& n, int d, std::ostringstream& out) {
    const std::string id = std::to_string(tmp_++), k = "ej_k" + id;
    const int regs = n.n / 2;
    auto line = [&](const std::string& text) {
      indent(out, d + 1);
      out << text << "\n";
    };
    auto desc = [&](const WgmmaOperand& o) {
      return use("ej_wgmma_desc") + "(&" + bufferRef(o.buffer) + "[" + expr(o.base) + " + " + k +
             " * " + std::to_string(o.kStep) + "], " + std::to_string(o.lbo) + "u, " +
             std::to_string(o.sbo) + "u, " + (o.swizzle128 ? "1ull" : "0ull") + ")";
    };
    indent(out, d);
    out << "{\n";
    line("asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");");
    line("#pragma unroll");
    line("for (int " + k + " = 0; " + k + " < " + std::to_string(n.steps) + "; ++" + k + ") {");
    line("  const unsigned long long ej_da = " + desc(n.a) + ";");
    line("  const unsigned long long ej_db = " + desc(n.b) + ";");
    std::ostringstream a;
    a << "  asm volatile(\"{ .reg .pred p; setp.ne.b32 p, %" << regs + 2
      << ", 0; wgmma.mma_async.sync.aligned.m64n" << n.n << "k16.f32.bf16.bf16 {";
    for (int i = 0; i < regs; ++i) a << (i ? "," : "") << "%" << i;
    a << "}, %" << regs << ", %" << regs + 1 << ", p, 1, 1, " << (n.a.kMajor ? 0 : 1) << ", "
      << (n.b.kMajor ? 0 : 1) << "; }\"";
    line(a.str());
    std::ostringstream o;
    o << "    : ";
    for (int i = 0; i < regs; ++i)
      o << (i ? ", " : "") << "\"+f\"(" << bufferRef(n.acc) << "[" << expr(n.accBase) << " + " << i
        << "])";
    line(o.str());
    line("    : \"l\"(ej_da), \"l\"(ej_db), \"r\"(1));");
    line("}");
    line("asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");");
    line("asm volatile(\"wgmma.wait_group.sync.aligned " + std::to_string(n.pending) +
         ";\" ::: \"memory\");");
    indent(out, d);
    out << "}\n";
  }

  void forStmt(const For& n, int d, std::ostringstream& out) {
    const std::string v = ident("v_", n.var);
    const std::string it = typeText(Type::i64);
    if (n.forKind == ForKind::GpuBlock || n.forKind == ForKind::GpuThread) {
      const bool blk = n.forKind == ForKind::GpuBlock;
      int& dim = blk ? gpuBlockDims_ : gpuThreadDims_;
      static const char* xyz[] = {"x", "y", "z"};
      if (dim >= 3) throw InternalError("cuda codegen: more than three GPU loop dimensions");
      indent(out, d);
      out << "{\n";
      indent(out, d + 1);
      out << "const " << it << " " << v << " = " << expr(n.lo) << " + (" << it << ")"
          << (blk ? "blockIdx." : "threadIdx.") << xyz[dim++] << ";\n";
      stmt(n.body, d + 1, out);
      --dim;
      indent(out, d);
      out << "}\n";
      return;
    }
    const std::string end = "e" + std::to_string(tmp_++);
    indent(out, d);
    if (n.forKind == ForKind::Unrolled) out << "#pragma unroll\n", indent(out, d);
    out << "for (" << it << " " << v << " = " << expr(n.lo) << ", " << end << " = " << expr(n.hi)
        << "; " << v << " < " << end << "; ++" << v << ") {\n";
    stmt(n.body, d + 1, out);
    indent(out, d);
    out << "}\n";
  }
};

} // namespace

CudaSource emitCUDA(const std::vector<Func>& funcs, const std::string& prefix,
                    const CudaOptions& options) {
  CudaSource result;
  std::set<std::string> used;
  std::ostringstream body;
  for (const Func& f : funcs)
    result.kernels.push_back(Emitter(f, prefix, options, used).emit(body));
  std::string src = "// generated by einjit\n";
  for (const auto& [name, text] : helpers())
    if (used.count(name)) src += text;
  result.source = src + "\n" + body.str();
  result.archSpecific = used.count("ej_wgmma_desc") > 0;
  return result;
}

std::string numberLines(const std::string& source) {
  std::istringstream in(source);
  std::string line, out;
  int n = 0;
  char buf[16];
  while (std::getline(in, line)) {
    std::snprintf(buf, sizeof buf, "%5d | ", ++n);
    out += buf + line + "\n";
  }
  return out;
}

} // namespace einjit::codegen
