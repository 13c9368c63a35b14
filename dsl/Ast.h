#pragma once
// The syntax tree: what the parser produces and the printer prints. Nodes are immutable and
// shared; every node carries its source range. Names are not resolved here (Sema does that),
// so an identifier may still be a tensor, an index variable or a scalar parameter.
#include "dsl/Source.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace einjit::dsl {

enum class BinOp : unsigned char {
#define BINOP(kind, spelling, prec, right) kind,
#include "dsl/Ops.def"
#undef BINOP
};
std::string_view binOpSpelling(BinOp op);
int binOpPrecedence(BinOp op);
bool binOpRightAssoc(BinOp op);
constexpr int kUnaryPrecedence = 7; // between '*' and '^': -x^2 is -(x^2)

enum class UnOp : unsigned char { Neg, Not };

enum class ExprKind : unsigned char {
  Number,  // number, isInteger
  Ident,   // name
  Access,  // name[args...]
  Call,    // name(args...)
  Unary,   // unop args[0]
  Binary,  // binop args[0] args[1]
  Ternary, // args[0] ? args[1] : args[2]
};

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  ExprKind kind;
  SourceRange range;
  double number = 0;
  bool isInteger = false;
  std::string name;
  SourceRange nameRange; // Access/Call: the name alone
  UnOp unop = UnOp::Neg;
  BinOp binop = BinOp::Add;
  std::vector<ExprPtr> args;
  // Nodes on the longest path down to a leaf: every pass over the tree recurses this deep, so
  // the parser bounds it (kMaxExprHeight).
  int height = 1;

  static ExprPtr makeNumber(double v, bool isInteger, SourceRange r = {});
  static ExprPtr makeIdent(std::string name, SourceRange r = {});
  static ExprPtr makeAccess(std::string name, std::vector<ExprPtr> idx, SourceRange r = {},
                            SourceRange nameRange = {});
  static ExprPtr makeCall(std::string name, std::vector<ExprPtr> args, SourceRange r = {},
                          SourceRange nameRange = {});
  static ExprPtr makeUnary(UnOp op, ExprPtr a, SourceRange r = {});
  static ExprPtr makeBinary(BinOp op, ExprPtr a, ExprPtr b, SourceRange r = {});
  static ExprPtr makeTernary(ExprPtr c, ExprPtr t, ExprPtr f, SourceRange r = {});
};

// The most nodes on a path from an expression's root to a leaf that the parser accepts: long
// operator chains (a + b + c + ...) are as deep as they are long, and the later stages recurse
// over the tree.
constexpr int kMaxExprHeight = 512;

// Structural equality, ignoring source ranges.
bool sameExpr(const Expr& a, const Expr& b);

enum class Reduce : unsigned char { Add, Mul, Max, Min };
std::string_view reduceSpelling(Reduce r); // "+", "*", "max", "min"

enum class Assign : unsigned char {
  Define,     // :=  new output, shape from inferred ranges, unwritten elements zero
  Overwrite,  // =   existing output, covered elements overwritten
  Accumulate, // +=  existing output, combined with the statement's reduction
};
std::string_view assignSpelling(Assign a);

struct RangeDecl {
  std::string index;
  SourceRange indexRange;
  ExprPtr lo, hi; // half-open [lo, hi)
  SourceRange range;
};

struct Stmt {
  Reduce reduce = Reduce::Add;
  bool reduceWritten = false; // "(+)" written explicitly (kept for printing)
  std::string output;
  SourceRange outputRange;
  bool outputBracketed = false; // y[...] rather than a bare scalar name
  std::vector<ExprPtr> lhs;     // index expressions on the left
  Assign assign = Assign::Define;
  SourceRange assignRange;
  ExprPtr rhs;
  std::vector<RangeDecl> where;
  SourceRange range;
};

struct ProgramAst {
  SourcePtr source;
  std::vector<Stmt> stmts;
};

bool sameStmt(const Stmt& a, const Stmt& b);
bool sameProgram(const ProgramAst& a, const ProgramAst& b);

// An indented tree dump (used by the parser's golden tests).
std::string dumpAst(const ProgramAst& p);

} // namespace einjit::dsl
