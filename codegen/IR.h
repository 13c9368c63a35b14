#pragma once
// The loop-nest IR, in the Halide style: immutable nodes shared by pointer, kinds from one
// X-macro list (IR.def), a visitor and a mutator. Lowering (Lower.h) builds it from a checked,
// bound program and a schedule; backends (CodeGenLLVM, CodeGenCUDA) only translate it.
//
// Integers are i64 (indices, bounds), conditions i1, values f32/f64, tensors also i32/i64.
// A loop's bounds are expressions, so they may depend on outer loop variables (the gradient
// solver's max/min/floor/ceil bounds). Local buffers (Allocate) hold accumulators; vectorized
// and unrolled loops over them become registers.
#include "dsl/Program.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace einjit::codegen::ir {

// bf16 is a storage type only: loaded and stored, and converted to and from f32 by Cast.
enum class Type : std::uint8_t { i1, i32, i64, f32, f64, bf16 };
bool isFloat(Type t);
std::string_view typeName(Type t);
int typeBytes(Type t); // storage size (i1: 1)

enum class NodeKind : std::uint8_t {
#define EXPR(name) name,
#define STMT(name) name,
#include "codegen/IR.def"
};

struct ExprNode {
  NodeKind kind;
  Type type;
  ExprNode(NodeKind k, Type t) : kind(k), type(t) {}
  virtual ~ExprNode() = default;
};
using Expr = std::shared_ptr<const ExprNode>;

struct StmtNode {
  NodeKind kind;
  explicit StmtNode(NodeKind k) : kind(k) {}
  virtual ~StmtNode() = default;
};
using Stmt = std::shared_ptr<const StmtNode>;

enum class UnOp : std::uint8_t { Neg, Not };
// Min/Max on floats keep the interpreter's semantics (b < a ? b : a). FloorDiv, CeilDiv and
// EMod (Euclidean modulo) are integer-only; Mod is the floating-point remainder (fmod).
enum class BinOp : std::uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  Pow,
  Min,
  Max,
  FloorDiv,
  CeilDiv,
  EMod,
  Xor, // integers: bitwise exclusive or (GPU shared-memory swizzles)
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  And,
  Or,
};
std::string_view binOpName(BinOp op);
bool isComparison(BinOp op);

// Serial; Parallel: the one loop whose range the runtime splits among threads; Vectorized:
// lanes of width `width` (explicit vectors when the extent is a constant multiple of it,
// otherwise a hint to LLVM's loop vectorizer); Unrolled: constant extent, body repeated;
// GpuBlock/GpuThread: bound to CUDA block/thread indices.
// Rolled: a serial loop that LLVM is told to leave rolled (no vectorizing, interleaving or
// unrolling): a packing loop whose body is already the shape wanted, where the optimizer's
// versions of it would cost compile time and no speed.
// Outlined: a rolled loop that the CPU code generator emits as a function of its own, never
// inlined, so that its registers are not allocated together with the code around it (a GEMM's
// packing beside the micro-kernel, whose accumulators must stay in registers).
enum class ForKind : std::uint8_t {
  Serial,
  Parallel,
  Vectorized,
  Unrolled,
  GpuBlock,
  GpuThread,
  Rolled,
  Outlined
};
std::string_view forKindName(ForKind k);

#define EXPR(name) struct name;
#define STMT(name) struct name;
#include "codegen/IR.def"

struct IntImm : ExprNode {
  std::int64_t value;
  explicit IntImm(std::int64_t v) : ExprNode(NodeKind::IntImm, Type::i64), value(v) {}
};
struct FloatImm : ExprNode {
  double value;
  FloatImm(Type t, double v) : ExprNode(NodeKind::FloatImm, t), value(v) {}
};
struct Var : ExprNode {
  std::string name;
  explicit Var(std::string n) : ExprNode(NodeKind::Var, Type::i64), name(std::move(n)) {}
};
struct Param : ExprNode {
  int index;
  Param(Type t, int i) : ExprNode(NodeKind::Param, t), index(i) {}
};
// With a mask (i1; null: none), an element where the mask is false reads nothing and is 0:
// a vector of them is one masked load (or gather), lanes outside their tensor included.
struct Load : ExprNode {
  std::string buffer;
  Expr index;
  Expr mask;
  Load(Type t, std::string b, Expr i, Expr m = nullptr)
      : ExprNode(NodeKind::Load, t), buffer(std::move(b)), index(std::move(i)), mask(std::move(m)) {}
};
struct Cast : ExprNode {
  Expr value;
  Cast(Type t, Expr v) : ExprNode(NodeKind::Cast, t), value(std::move(v)) {}
};
struct Unary : ExprNode {
  UnOp op;
  Expr a;
  Unary(Type t, UnOp o, Expr x) : ExprNode(NodeKind::Unary, t), op(o), a(std::move(x)) {}
};
struct Binary : ExprNode {
  BinOp op;
  Expr a, b;
  Binary(Type t, BinOp o, Expr x, Expr y)
      : ExprNode(NodeKind::Binary, t), op(o), a(std::move(x)), b(std::move(y)) {}
};
struct Select : ExprNode {
  Expr cond, a, b;
  Select(Expr c, Expr x, Expr y)
      : ExprNode(NodeKind::Select, x->type), cond(std::move(c)), a(std::move(x)), b(std::move(y)) {}
};
struct Call : ExprNode {
  dsl::Fn fn;
  std::vector<Expr> args;
  Call(Type t, dsl::Fn f, std::vector<Expr> a)
      : ExprNode(NodeKind::Call, t), fn(f), args(std::move(a)) {}
};
struct Check : ExprNode {
  Expr index;
  std::int64_t extent; // > 0
  Check(Expr i, std::int64_t e)
      : ExprNode(NodeKind::Check, Type::i64), index(std::move(i)), extent(e) {}
};

struct For : StmtNode {
  std::string var;
  Expr lo, hi;
  ForKind forKind;
  int width; // Vectorized: lanes; otherwise 1
  Stmt body;
  For(std::string v, Expr l, Expr h, ForKind k, int w, Stmt b)
      : StmtNode(NodeKind::For), var(std::move(v)), lo(std::move(l)), hi(std::move(h)), forKind(k),
        width(w), body(std::move(b)) {}
};
struct Block : StmtNode {
  std::vector<Stmt> stmts;
  explicit Block(std::vector<Stmt> s) : StmtNode(NodeKind::Block), stmts(std::move(s)) {}
};
struct Store : StmtNode {
  std::string buffer;
  Expr index, value;
  // GPU: buffer[index] += value as one atomic read-modify-write (a scatter's adds; a bf16
  // buffer takes an f32 value, rounded once).
  bool atomicAdd = false;
  // CPU: a hint that the line need not be kept in cache (a row block's output that nothing reads
  // soon, schedule/RowBlocks.h): a whole aligned vector is stored non-temporally, without the
  // read for ownership; anything else is an ordinary store.
  bool nonTemporal = false;
  Store(std::string b, Expr i, Expr v, bool atomic = false, bool stream = false)
      : StmtNode(NodeKind::Store), buffer(std::move(b)), index(std::move(i)), value(std::move(v)),
        atomicAdd(atomic), nonTemporal(stream) {}
};
struct IfThen : StmtNode {
  Expr cond;
  Stmt then, otherwise; // otherwise may be null
  IfThen(Expr c, Stmt t, Stmt e)
      : StmtNode(NodeKind::IfThen), cond(std::move(c)), then(std::move(t)),
        otherwise(std::move(e)) {}
};
struct Allocate : StmtNode {
  std::string buffer;
  Type elem;
  std::int64_t size;
  Stmt body;
  bool shared; // GPU: one buffer per thread block (shared memory), not per thread
  Allocate(std::string b, Type t, std::int64_t n, Stmt s, bool sh)
      : StmtNode(NodeKind::Allocate), buffer(std::move(b)), elem(t), size(n), body(std::move(s)),
        shared(sh) {}
};
// With asyncProxy, each thread first orders its earlier writes to shared memory before the
// reads of the async proxy (fence.proxy.async: the operands of Wgmma).
struct Barrier : StmtNode {
  bool asyncProxy = false;
  explicit Barrier(bool proxy = false) : StmtNode(NodeKind::Barrier), asyncProxy(proxy) {}
};
// One 16-deep step of a warp's MT x NT block of tensor-core products, mma.sync m16n8k16 (bf16
// x bf16 + f32 accumulators), every lane of the warp running it. Fragments come from bf16
// shared buffers through ldmatrix: A fragment i (16 rows m x 16 k) has element (m, k) at
// base + i * step + (kMajor ? k * stride + m : m * stride + k); B fragment j (16 k x 8
// columns n) likewise with n for m. Rows of 8 elements must be 16-byte aligned. The products
// accumulate into acc[accBase + (i * NT + j) * 4 + c], c the lane's four values in PTX's
// layout for this shape (rows g and g + 8, columns 2t and 2t + 1, g = lane / 4, t = lane % 4).
struct MmaOperand {
  std::string buffer;
  Expr base;
  std::int64_t stride = 0, step = 0;
  bool kMajor = false;
};
struct Mma : StmtNode {
  MmaOperand a, b;
  int mt, nt;
  std::string acc;
  Expr accBase;
  Mma(MmaOperand a_, MmaOperand b_, int m, int n, std::string c, Expr cb)
      : StmtNode(NodeKind::Mma), a(std::move(a_)), b(std::move(b_)), mt(m), nt(n),
        acc(std::move(c)), accBase(std::move(cb)) {}
};
// Steps of 16 along the reduction of a warpgroup's 64 x n block of tensor-core products,
// wgmma.mma_async m64nNk16 (bf16 x bf16 + f32 accumulators, sm_90a), the 128 threads of the
// warpgroup running it (fence, `steps` products, commit, then wait until at most `pending` of
// the warpgroup's groups of products are in flight: 0 waits for all; with 1 the products of
// this call still run when it returns, so their accumulators and operands must not be touched
// until a later wait, an AsyncWait with `products`, says so). The operands are read
// by the tensor cores from bf16 shared buffers through matrix descriptors (PTX ISA "Matrix
// Descriptor Format"): step s of an operand starts at element base + s * kStep; lbo and sbo
// are the descriptor's byte offsets (found by tools/probe/wgmma_layout.cu on sm_90a:
// unswizzled, lbo between 8 x 8 core matrices along the reduction and sbo along rows, for
// either major; 128-byte swizzle, k-major: sbo between 8-row atoms, lbo unused; mn-major: lbo
// between 64-wide atoms, sbo between groups of 8 along the reduction). Swizzled buffers start
// 1024-byte aligned. The products accumulate into acc[accBase + i], i = 4 * j + c: row 16 *
// (warp % 4) + g + 8 * (c / 2), column 8 * j + 2 * t + c % 2 (g = lane / 4, t = lane % 4).
struct WgmmaOperand {
  std::string buffer;
  Expr base;
  std::int64_t kStep = 0;        // elements
  std::int64_t lbo = 0, sbo = 0; // bytes
  bool kMajor = true, swizzle128 = false;
};
struct Wgmma : StmtNode {
  WgmmaOperand a, b;
  int n, steps, pending;
  std::string acc;
  Expr accBase;
  Wgmma(WgmmaOperand a_, WgmmaOperand b_, int n_, int s, std::string c, Expr cb, int p)
      : StmtNode(NodeKind::Wgmma), a(std::move(a_)), b(std::move(b_)), n(n_), steps(s), pending(p),
        acc(std::move(c)), accBase(std::move(cb)) {}
};
// cp.async: `bytes` (4, 8 or 16) bytes from src[srcIndex] to the shared buffer dst[dstIndex],
// both addresses aligned to `bytes`; zeros instead when cond is false (src is not read then);
// a null cond always copies.
struct CopyAsync : StmtNode {
  std::string dst, src;
  Expr dstIndex, srcIndex, cond;
  int bytes;
  CopyAsync(std::string d, Expr di, std::string s, Expr si, int b, Expr c)
      : StmtNode(NodeKind::CopyAsync), dst(std::move(d)), src(std::move(s)),
        dstIndex(std::move(di)), srcIndex(std::move(si)), cond(std::move(c)), bytes(b) {}
};
// A 4-, 8- or 16-byte copy between buffers (global, shared or local) by one vector load and one
// vector store: both element offsets aligned to `bytes` (the tile epilogue's 16-byte stores).
struct CopyVector : StmtNode {
  std::string dst, src;
  Expr dstIndex, srcIndex;
  int bytes;
  CopyVector(std::string d, Expr di, std::string s, Expr si, int b)
      : StmtNode(NodeKind::CopyVector), dst(std::move(d)), src(std::move(s)),
        dstIndex(std::move(di)), srcIndex(std::move(si)), bytes(b) {}
};
// Closes the group of this thread's copies issued since the last commit (possibly empty).
struct AsyncCommit : StmtNode {
  AsyncCommit() : StmtNode(NodeKind::AsyncCommit) {}
};
// Waits until at most `pending` of this thread's committed groups of copies are still in
// flight (a Barrier after it publishes the copies to the block); with `products`, of its
// warpgroup's groups of tensor-core products instead (Wgmma, wgmma.wait_group).
struct AsyncWait : StmtNode {
  int pending;
  bool products;
  AsyncWait(int n, bool p) : StmtNode(NodeKind::AsyncWait), pending(n), products(p) {}
};
// An expression evaluated and its value dropped: the checks in it (Check) are its only effect
// (the hoisted access checks of lower(): LoweredProgram::checks).
struct Evaluate : StmtNode {
  Expr value;
  explicit Evaluate(Expr v) : StmtNode(NodeKind::Evaluate), value(std::move(v)) {}
};

// A hint that buffer[index] is about to be written (and read): its cache line is fetched now,
// nothing else changes (no fault, no value read). The packed GEMM's micro-kernel asks for its
// output tile's lines before the reduction, so that storing (or adding to) the tile after it
// does not wait on memory. `ahead`: the line is only read, later (a row block's input one block
// ahead, lower/CpuRows.cpp): fetched into the second-level cache, not for writing.
struct Prefetch : StmtNode {
  std::string buffer;
  Expr index;
  bool ahead = false;
  Prefetch(std::string b, Expr i, bool a = false)
      : StmtNode(NodeKind::Prefetch), buffer(std::move(b)), index(std::move(i)), ahead(a) {}
};

// --- constructors (integer arithmetic folds constants) ---------------------------------------
Expr intImm(std::int64_t v);
Expr floatImm(Type t, double v);
Expr var(const std::string& name);
Expr param(Type t, int index);
Expr load(Type t, const std::string& buffer, Expr index);
// buffer[index] where mask holds, else 0 (nothing read): Load's mask.
Expr maskedLoad(Type t, const std::string& buffer, Expr index, Expr mask);
Expr cast(Type t, Expr v);
Expr unary(UnOp op, Expr a);
Expr binary(BinOp op, Expr a, Expr b);
Expr add(Expr a, Expr b);
Expr sub(Expr a, Expr b);
Expr mul(Expr a, Expr b);
Expr select(Expr c, Expr a, Expr b);
Expr call(dsl::Fn fn, std::vector<Expr> args);
Expr check(Expr index, std::int64_t extent);
Stmt forLoop(const std::string& v, Expr lo, Expr hi, ForKind k, Stmt body, int width = 1);
Stmt block(std::vector<Stmt> s); // flattens nested blocks, drops nulls
Stmt store(const std::string& buffer, Expr index, Expr value);
Stmt atomicAdd(const std::string& buffer, Expr index, Expr value); // see Store
Stmt streamStore(const std::string& buffer, Expr index, Expr value); // see Store::nonTemporal
Stmt ifThen(Expr c, Stmt t, Stmt e = nullptr);
Stmt allocate(const std::string& buffer, Type t, std::int64_t size, Stmt body, bool shared = false);
Stmt barrier(bool asyncProxy = false);
Stmt wgmma(WgmmaOperand a, WgmmaOperand b, int n, int steps, const std::string& acc, Expr accBase,
           int pending = 0);
Stmt mma(MmaOperand a, MmaOperand b, int mt, int nt, const std::string& acc, Expr accBase);

Stmt copyAsync(const std::string& dst, Expr dstIndex, const std::string& src, Expr srcIndex,
               int bytes, Expr cond);
Stmt copyVector(const std::string& dst, Expr dstIndex, const std::string& src, Expr srcIndex,
                int bytes);
Stmt asyncCommit();
Stmt asyncWait(int pending, bool products = false);
Stmt evaluate(Expr value);
Stmt prefetch(const std::string& buffer, Expr index, bool ahead = false);

bool isConst(const Expr& e, std::int64_t* value = nullptr);

// --- traversal -------------------------------------------------------------------------------
// Visits every node; the defaults visit the children in order.
class Visitor {
public:
  virtual ~Visitor() = default;
  void visit(const Expr& e);
  void visit(const Stmt& s);
#define EXPR(name) virtual void visit##name(const name& n);
#define STMT(name) virtual void visit##name(const name& n);
#include "codegen/IR.def"
};

// Rebuilds the tree bottom-up; a node whose children are unchanged is shared, not copied.
class Mutator {
public:
  virtual ~Mutator() = default;
  Expr mutate(const Expr& e);
  Stmt mutate(const Stmt& s);
#define EXPR(name) virtual Expr mutate##name(const Expr& self, const name& n);
#define STMT(name) virtual Stmt mutate##name(const Stmt& self, const name& n);
#include "codegen/IR.def"
};

// Replaces variable `name` by `value` everywhere.
Expr substitute(const Expr& e, const std::string& name, const Expr& value);
Stmt substitute(const Stmt& s, const std::string& name, const Expr& value);
// Every load of e read only where `mask` holds (maskedLoad; a load's own mask is kept, and-ed).
Expr maskLoads(const Expr& e, const Expr& mask);
bool dependsOn(const Expr& e, const std::string& name);
// The coefficient of `name` when e is affine in it (other variables and loads are treated as
// constants); nothing when it is not affine (a product of two uses, a division, a load of it).
std::optional<std::int64_t> linearCoefficient(const Expr& e, const std::string& name);
// An upper bound on how many stores and evaluations the statement performs, counting each
// lane of a vectorized loop (IRWork.cpp: interval arithmetic on loop bounds); nothing when a
// bound depends on a loaded value or another unknown.
std::optional<double> iterationBound(const Stmt& s);

// --- functions -------------------------------------------------------------------------------
struct BufferArg {
  std::string name;
  Type elem;
};

// One compiled entry point: void name(void** buffers, const double* params, i64 begin,
// i64 end, i32* status). The Parallel loop (at most one) runs over [max(lo, begin),
// min(hi, end)); the runtime splits [parallelLo, parallelHi) among threads.
struct Func {
  std::string name;
  std::vector<BufferArg> buffers;
  Stmt body;
  bool parallel = false;
  std::int64_t parallelLo = 0, parallelHi = 0, grain = 1;
  // Set by lowerings whose code is explicit (the packed GEMM: vector loops written out, packing
  // loops rolled): the CPU JIT compiles it with a short pipeline instead of O3 where the
  // emitted code confirms it (CodeGenLLVM.h, kExplicitCodeAttr).
  bool explicitCode = false;
  // The CPU program's statement this function lowers (a row run's or element-wise group's
  // first), -1 for a hoisted check: the runtime runs a statement's functions in order, and
  // statements that share no buffer at the same time (runtime/CpuStages.h).
  int statement = -1;
};

std::string print(const Expr& e);
std::string print(const Stmt& s, int indent = 0);
std::string print(const Func& f);

// Checks the invariants backends rely on: variables defined before use and not shadowed,
// buffers declared, types consistent, at most one Parallel loop, constant extents for
// Unrolled loops. Throws InternalError with the printed function on failure.
void verify(const Func& f);

} // namespace einjit::codegen::ir
