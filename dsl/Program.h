#pragma once
// The checked program: what Sema and RangeInference make of a ProgramAst, and what every
// later stage (gradients, lowering, the reference interpreter) consumes.
//
// Names are resolved: tensors have ids, index variables are numbered per statement (the
// statement's output indices first, in left-hand-side order, then its reduction indices in
// order of first appearance), scalar parameters have ids. Subscripts are classified (affine,
// pad/clamp/wrap, gather) and every index variable has a symbolic half-open range [lo, hi)
// over tensor extents and integer parameters.
#include "dsl/Ast.h"
#include "dsl/SymExpr.h"

#include <functional>
#include <optional>

namespace einjit::dsl {

enum class Fn : unsigned char {
#define FUNCTION(kind, name, arity) kind,
#include "dsl/Functions.def"
#undef FUNCTION
};
std::optional<Fn> lookupFunction(std::string_view name);
std::string_view functionName(Fn f);
int functionArity(Fn f);

enum class IndexMode : unsigned char { Plain, Pad, Clamp, Wrap };
std::string_view indexModeName(IndexMode m); // "", "pad", "clamp", "wrap"

struct CExpr;
using CExprPtr = std::shared_ptr<const CExpr>;

// One subscript of an access: mode( gather + sum(coef[v] * var_v) + constant ).
struct Subscript {
  IndexMode mode = IndexMode::Plain;
  std::vector<std::int64_t> coef; // one per index variable of the statement
  Sym constant;
  CExprPtr gather; // a Read of an integer index tensor, or null
  SourceRange range;
  // The index variable v when the subscript is exactly "v" (coefficient 1, nothing else).
  std::optional<int> bareVar() const;
};

enum class CKind : unsigned char {
  Const,   // value
  Index,   // var: an index variable's value
  Param,   // param: a runtime scalar parameter
  Size,    // tensor, dim: an extent as a value
  Read,    // tensor[subs]
  Unary,   // unop args[0]
  Binary,  // binop args[0] args[1]
  Ternary, // args[0] ? args[1] : args[2]
  Call,    // fn(args)
};

struct CExpr {
  CKind kind;
  SourceRange range;
  double value = 0;
  int var = -1;
  int param = -1;
  int tensor = -1;
  int dim = 0;
  std::vector<Subscript> subs;
  UnOp unop = UnOp::Neg;
  BinOp binop = BinOp::Add;
  Fn fn = Fn::Exp;
  std::vector<CExprPtr> args;
};

// Structural equality (the same operators, reads with the same subscripts, the same constants).
bool sameExpr(const CExpr& a, const CExpr& b);

// Marks in `used` the index variables e reads (as values, in subscripts, through gathers).
void usedVars(const CExpr& e, std::vector<bool>& used);

struct TensorInfo {
  std::string name;
  int rank = -1; // -1: only used in size(), any rank is accepted
  SourceRange firstUse;
  bool isArgument = false;    // supplied by the caller (an input, or an '='/'+=' output)
  int definedBy = -1;         // the ':=' statement that creates it, or -1
  std::vector<int> writtenBy; // every statement that assigns it
  bool readAsValue = false;
  bool readAsIndex = false; // read inside a subscript (gather): must hold integers
  std::vector<Sym> extents; // ':=' outputs: symbolic shape (hi of each left-hand index)
  // A snapshot (dsl/InPlace.h): the copy of tensor `snapshotOf` that a statement writing it
  // reads instead of it; -1 for the program's own tensors.
  int snapshotOf = -1;
  // Options::saved (grad::markSaved): the caller keeps it from the call and the gradient program
  // takes it as an input instead of recomputing it; always written in full (no row scratch).
  bool saved = false;
};

struct ParamInfo {
  std::string name;
  SourceRange firstUse;
  bool usedInIndex = false; // must then be an integer at call time
};

// A range bound that depends on other index variables ("where k in max(0, j-N+1):min(K, j+1)"):
// max/min/floor-/ceil-division/sums over affine forms in the statement's index variables.
struct IndexBound {
  enum class Kind : unsigned char { Affine, Max, Min, FDiv, CDiv, Sum };
  Kind kind = Kind::Affine;
  std::vector<std::int64_t> coef;  // Affine: one per index variable
  Sym constant;                    // Affine
  std::vector<IndexBound> args;    // Max/Min: >= 2; FDiv/CDiv: 1; Sum: >= 2
  std::vector<std::int64_t> scale; // Sum: the coefficient of each argument
  std::int64_t divisor = 1;        // FDiv/CDiv: > 0
  // Marks the index variables it reads in `vars`.
  void collectVars(std::vector<bool>& vars) const;
};

struct IndexVar {
  std::string name;
  SourceRange firstUse;
  bool isOutput = false;
  Sym lo, hi;             // half-open range (the box; unused when `dependent`)
  bool fromWhere = false; // range given by a 'where' clause
  SourceRange whereRange;
  // The 'where' bounds read other index variables, which all come earlier in the statement's
  // iteration order; the range is evaluated per iteration from loBound/hiBound.
  bool dependent = false;
  IndexBound loBound, hiBound;
};

// A use of index variable `var` alone in dimension `dim` of `tensor` (or of the output of an
// '='/'+=' statement): its extent must equal the variable's other bare uses.
struct BareUse {
  int var;
  int tensor;
  int dim;
  SourceRange range;
};

// A plain affine subscript that Binding proves in bounds over the whole iteration box.
struct BoundsCheck {
  int tensor;
  int dim;
  const Subscript* sub; // points into the statement's expression tree (kept alive by it)
  CExprPtr owner;
};

struct Statement {
  Stmt ast;
  Reduce reduce = Reduce::Add;
  Assign assign = Assign::Define;
  int output = -1;
  // Per left-hand dimension when every left-hand subscript is a bare index (always for ':=';
  // repeats allowed: diagonal writes); empty otherwise ('=' and '+=' take any subscript).
  std::vector<int> lhsVars;
  bool scatter = false; // the left-hand side gathers ("dE[tok[i], d] += ..."): may hit an
                        // element several times, so it runs as an accumulating scatter
  std::vector<IndexVar> vars;
  CExprPtr rhs;
  CExprPtr lhs; // the output as an access: a Read of `output` with one subscript per dimension
  std::vector<BareUse> bareUses;
  std::vector<BoundsCheck> boundsChecks;
  int numOutputVars() const;
};

// Calls f on every read of the statement: those of its right-hand side (the reads inside its
// subscripts' gathers included), then those that gather its left-hand side's subscripts.
void eachRead(const Statement& st, const std::function<void(const CExpr&)>& f);

// size(t, d) somewhere in the program: Binding checks d against t's rank.
struct SizeUse {
  int tensor;
  int dim;
  SourceRange range;
};

struct Program {
  SourcePtr source;
  ProgramAst ast;
  std::vector<TensorInfo> tensors;
  std::vector<ParamInfo> params;
  std::vector<Statement> stmts;
  std::vector<int> arguments; // tensor ids the caller passes, in order of first appearance
  std::vector<int> outputs;   // assigned tensors that no later statement reads
  std::vector<SizeUse> sizeUses;
  int findTensor(std::string_view name) const;
  int findParam(std::string_view name) const;
};

// Parse, Sema and RangeInference per statement, InPlace (Check.cpp). Throws einjit::Error
// with a caret on any misuse.
Program check(const ProgramAst& ast);
Program check(const std::string& text, const std::string& name = "<program>");

// A dependent range bound in einjit syntax, with the statement's index names.
std::string printBound(const IndexBound& b, const Statement& st);

// "i in 0:size(x,0)" per index of each statement, grouped under the statement's text.
std::string describeRanges(const Program& p);

} // namespace einjit::dsl
