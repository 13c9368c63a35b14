#include "dsl/Parser.h"

#include "dsl/Lexer.h"

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <optional>

namespace einjit::dsl {

namespace {

std::optional<BinOp> binOpFor(Tok t) {
  switch (t) {
  case Tok::OrOr: return BinOp::Or;
  case Tok::AndAnd: return BinOp::And;
  case Tok::EqEq: return BinOp::Eq;
  case Tok::NotEq: return BinOp::Ne;
  case Tok::Lt: return BinOp::Lt;
  case Tok::Le: return BinOp::Le;
  case Tok::Gt: return BinOp::Gt;
  case Tok::Ge: return BinOp::Ge;
  case Tok::Plus: return BinOp::Add;
  case Tok::Minus: return BinOp::Sub;
  case Tok::Star: return BinOp::Mul;
  case Tok::Slash: return BinOp::Div;
  case Tok::Percent: return BinOp::Mod;
  case Tok::Caret: return BinOp::Pow;
  default: return std::nullopt;
  }
}

// Deeply nested input must fail with an error, not overflow the stack.
constexpr int kMaxDepth = 200;

// The most statements a program may have (gradient programs included, docs/LANGUAGE.md
// "Limits"): the CPU JIT's compile time grows faster than linearly in the number of
// statements, so the limit bounds the worst case.
constexpr std::size_t kMaxStatements = 1024;

class Parser {
public:
  explicit Parser(SourcePtr src) : src_(std::move(src)), toks_(lex(*src_)) {}

  ProgramAst program() {
    ProgramAst p;
    p.source = src_;
    skipSeparators();
    while (peek().kind != Tok::End) {
      Stmt s = stmt();
      if (p.stmts.size() == kMaxStatements)
        fail(*src_, s.range,
             "too many statements: a program may have at most " + std::to_string(kMaxStatements) +
                 " (this is statement " + std::to_string(kMaxStatements + 1) + ")",
             {{{},
               "split the program into several kernels (compile time grows faster than the "
               "number of statements; a gradient program has about twice as many statements "
               "as the program it differentiates)",
               false}});
      p.stmts.push_back(std::move(s));
      const Token& t = peek();
      if (t.kind != Tok::End && t.kind != Tok::Newline && t.kind != Tok::Semi)
        fail(*src_, t.range, "expected ';' or a newline after the statement, found " + describe(t));
      skipSeparators();
    }
    if (p.stmts.empty()) fail(*src_, peek().range, "the program has no statement");
    return p;
  }

private:
  SourcePtr src_;
  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  int nest_ = 0;  // open brackets/parentheses: newlines inside them are insignificant
  int depth_ = 0; // recursion depth

  // The next significant token.
  const Token& peek() {
    if (nest_ > 0)
      while (toks_[pos_].kind == Tok::Newline) ++pos_;
    return toks_[pos_];
  }
  const Token& peekAfter() { // the token after peek(), newlines inside brackets skipped
    peek();
    std::size_t i = pos_ + 1;
    if (nest_ > 0)
      while (i < toks_.size() && toks_[i].kind == Tok::Newline) ++i;
    return toks_[std::min(i, toks_.size() - 1)];
  }
  Token take() {
    peek();
    Token t = toks_[pos_];
    if (t.kind != Tok::End) ++pos_;
    return t;
  }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    take();
    return true;
  }
  void skipNewlines() {
    while (toks_[pos_].kind == Tok::Newline) ++pos_;
  }
  void skipSeparators() {
    while (toks_[pos_].kind == Tok::Newline || toks_[pos_].kind == Tok::Semi) ++pos_;
  }
  std::string describe(const Token& t) {
    switch (t.kind) {
    case Tok::End: return "end of input";
    case Tok::Newline: return "end of line";
    case Tok::Ident: return "'" + std::string(t.text) + "'";
    default: return "'" + std::string(t.text) + "'";
    }
  }
  Token expect(Tok k, const char* context) {
    const Token& t = peek();
    if (t.kind != k)
      fail(*src_, t.range,
           "expected '" + std::string(tokenSpelling(k)) + "' " + context + ", found " +
               describe(t));
    return take();
  }
  void enter(SourceRange r) {
    if (++depth_ > kMaxDepth) fail(*src_, r, "expression nested too deeply");
  }
  // A node the parser built; `at` is its operator (a chain's whole span may be megabytes).
  ExprPtr bounded(ExprPtr e, SourceRange at) {
    if (e->height > kMaxExprHeight)
      fail(*src_, at,
           "expression too long: more than " + std::to_string(kMaxExprHeight) +
               " operations deep (a chain a + b + c + ... is as deep as it is long)",
           {{{},
             "split it into several statements, e.g. accumulate the terms with '+='",
             false}});
    return e;
  }

  Stmt stmt() {
    Stmt s;
    std::uint32_t begin = peek().range.begin;
    if (peek().kind == Tok::LParen) {
      const Token& op = peekAfter();
      Token open = take();
      ++nest_;
      if (op.kind == Tok::Plus)
        s.reduce = Reduce::Add;
      else if (op.kind == Tok::Star)
        s.reduce = Reduce::Mul;
      else if (op.kind == Tok::Ident && op.text == "max")
        s.reduce = Reduce::Max;
      else if (op.kind == Tok::Ident && op.text == "min")
        s.reduce = Reduce::Min;
      else
        fail(*src_, op.range,
             "expected a reduction '+', '*', 'max' or 'min' after '(', found " + describe(op));
      take();
      --nest_;
      expect(Tok::RParen, "after the reduction");
      (void)open;
      s.reduceWritten = true;
    }
    Token name = peek();
    if (name.kind != Tok::Ident)
      fail(*src_, name.range, "expected the name of the output, found " + describe(name));
    take();
    s.output = std::string(name.text);
    s.outputRange = name.range;
    if (peek().kind == Tok::LBracket) {
      s.outputBracketed = true;
      take();
      ++nest_;
      if (peek().kind == Tok::RBracket)
        fail(*src_, peek().range, "expected an index inside '[]'; a scalar output has no brackets");
      s.lhs.push_back(expr());
      while (accept(Tok::Comma)) s.lhs.push_back(expr());
      --nest_;
      expect(Tok::RBracket, "to close the left-hand side");
    }
    const Token& a = peek();
    if (a.kind == Tok::Define)
      s.assign = Assign::Define;
    else if (a.kind == Tok::Assign)
      s.assign = Assign::Overwrite;
    else if (a.kind == Tok::PlusAssign)
      s.assign = Assign::Accumulate;
    else
      fail(*src_, a.range,
           "expected ':=', '=' or '+=' after the left-hand side, found " + describe(a));
    s.assignRange = a.range;
    take();
    skipNewlines();
    s.rhs = expr();
    // A 'where' clause may start on the next line.
    std::size_t save = pos_;
    skipNewlines();
    if (peek().kind == Tok::KwWhere) {
      take();
      do {
        skipNewlines();
        s.where.push_back(rangeDecl());
      } while (accept(Tok::Comma));
    } else {
      pos_ = save;
    }
    s.range = {begin, toks_[pos_ > 0 ? pos_ - 1 : 0].range.end};
    return s;
  }

  RangeDecl rangeDecl() {
    RangeDecl r;
    Token name = peek();
    if (name.kind != Tok::Ident)
      fail(*src_, name.range, "expected an index name after 'where', found " + describe(name));
    take();
    r.index = std::string(name.text);
    r.indexRange = name.range;
    expect(Tok::KwIn, "after the index name in a 'where' range");
    r.lo = binary(1);
    expect(Tok::Colon, "between the bounds of a range (lo:hi)");
    r.hi = binary(1);
    r.range = SourceRange::join(name.range, r.hi->range);
    return r;
  }

  ExprPtr expr() { return ternary(); }

  ExprPtr ternary() {
    enter(peek().range);
    ExprPtr c = binary(1);
    if (peek().kind == Tok::Question) {
      Token q = take();
      skipNewlines();
      ++nest_; // newlines between '?' and ':' are continuation
      ExprPtr t = ternary();
      --nest_;
      expect(Tok::Colon, "in a conditional expression (c ? a : b)");
      skipNewlines();
      ExprPtr f = ternary();
      c = bounded(Expr::makeTernary(c, t, f, SourceRange::join(c->range, f->range)), q.range);
    }
    --depth_;
    return c;
  }

  ExprPtr binary(int minPrec) {
    enter(peek().range);
    ExprPtr lhs = unary();
    for (;;) {
      auto op = binOpFor(peek().kind);
      if (!op || binOpPrecedence(*op) < minPrec) break;
      Token opTok = take();
      skipNewlines();
      int next = binOpRightAssoc(*op) ? binOpPrecedence(*op) : binOpPrecedence(*op) + 1;
      ExprPtr rhs = binary(next);
      lhs = bounded(Expr::makeBinary(*op, lhs, rhs, SourceRange::join(lhs->range, rhs->range)),
                    opTok.range);
    }
    --depth_;
    return lhs;
  }

  ExprPtr unary() {
    const Token& t = peek();
    if (t.kind == Tok::Minus || t.kind == Tok::Bang) {
      Token op = take();
      enter(op.range);
      ExprPtr a = binary(kUnaryPrecedence + 1);
      --depth_;
      return bounded(Expr::makeUnary(op.kind == Tok::Minus ? UnOp::Neg : UnOp::Not, a,
                                     SourceRange::join(op.range, a->range)),
                     op.range);
    }
    return primary();
  }

  std::vector<ExprPtr> list(Tok close, const char* what) {
    std::vector<ExprPtr> args;
    ++nest_;
    if (peek().kind != close) {
      args.push_back(expr());
      while (accept(Tok::Comma)) args.push_back(expr());
    }
    --nest_;
    expect(close, what);
    return args;
  }

  ExprPtr primary() {
    Token t = peek();
    switch (t.kind) {
    case Tok::Int:
    case Tok::Float: {
      take();
      std::string text(t.text);
      double v = std::strtod(text.c_str(), nullptr);
      if (t.kind == Tok::Int && v > 9007199254740992.0)
        fail(*src_, t.range, "integer literal " + text + " is too large");
      if (!std::isfinite(v)) fail(*src_, t.range, "number " + text + " is out of range");
      ExprPtr num = Expr::makeNumber(v, t.kind == Tok::Int, t.range);
      // "2i": a literal directly followed by a name multiplies it.
      const Token& n = toks_[pos_];
      if (n.kind == Tok::Ident && n.range.begin == t.range.end) {
        ExprPtr rhs = primary();
        return Expr::makeBinary(BinOp::Mul, num, rhs, SourceRange::join(t.range, rhs->range));
      }
      return num;
    }
    case Tok::Ident: {
      take();
      std::string name(t.text);
      if (peek().kind == Tok::LBracket) {
        take();
        auto idx = list(Tok::RBracket, "to close the subscript");
        if (idx.empty())
          fail(*src_, {t.range.begin, toks_[pos_ - 1].range.end},
               "'" + name + "[]' has no subscript; a scalar is read by its bare name");
        return bounded(Expr::makeAccess(name, std::move(idx),
                                        {t.range.begin, toks_[pos_ - 1].range.end}, t.range),
                       t.range);
      }
      if (peek().kind == Tok::LParen) {
        take();
        auto args = list(Tok::RParen, "to close the call");
        return bounded(Expr::makeCall(name, std::move(args),
                                      {t.range.begin, toks_[pos_ - 1].range.end}, t.range),
                       t.range);
      }
      return Expr::makeIdent(name, t.range);
    }
    case Tok::LParen: {
      take();
      ++nest_;
      ExprPtr e = expr();
      --nest_;
      Token close = expect(Tok::RParen, "to close the parenthesis");
      (void)close;
      return e;
    }
    default: fail(*src_, t.range, "expected an expression, found " + describe(t));
    }
  }
};

} // namespace

ProgramAst parse(SourcePtr source) { return Parser(std::move(source)).program(); }

ProgramAst parse(const std::string& text) { return parse(std::make_shared<Source>(text)); }

} // namespace einjit::dsl
