// Lexer: token kinds and ranges, comments, implicit multiplication boundaries, errors.
#include "dsl/Lexer.h"

#include <doctest/doctest.h>

using namespace einjit::dsl;

namespace {

std::vector<Tok> kinds(const std::string& text) {
  Source src(text);
  std::vector<Tok> out;
  for (const Token& t : lex(src)) out.push_back(t.kind);
  return out;
}

std::vector<std::string> texts(const std::string& text) {
  Source src(text);
  std::vector<std::string> out;
  for (const Token& t : lex(src))
    if (t.kind != Tok::End) out.emplace_back(t.text);
  return out;
}

} // namespace

TEST_CASE("every operator and punctuation token") {
  CHECK(kinds(":= = += + - * / % ^ < <= > >= == != && || ! ? : [ ] ( ) , ;") ==
        std::vector<Tok>{Tok::Define,   Tok::Assign,   Tok::PlusAssign, Tok::Plus,     Tok::Minus,
                         Tok::Star,     Tok::Slash,    Tok::Percent,    Tok::Caret,    Tok::Lt,
                         Tok::Le,       Tok::Gt,       Tok::Ge,         Tok::EqEq,     Tok::NotEq,
                         Tok::AndAnd,   Tok::OrOr,     Tok::Bang,       Tok::Question, Tok::Colon,
                         Tok::LBracket, Tok::RBracket, Tok::LParen,     Tok::RParen,   Tok::Comma,
                         Tok::Semi,     Tok::End});
}

TEST_CASE("keywords, names and numbers") {
  CHECK(kinds("where in wherever _x1 inner") ==
        std::vector<Tok>{Tok::KwWhere, Tok::KwIn, Tok::Ident, Tok::Ident, Tok::Ident, Tok::End});
  CHECK(kinds("7 1.5 .5 2. 1e3 2E-4 3e+2") == std::vector<Tok>{Tok::Int, Tok::Float, Tok::Float,
                                                               Tok::Float, Tok::Float, Tok::Float,
                                                               Tok::Float, Tok::End});
}

TEST_CASE("a literal before a name stays two tokens; an exponent needs digits") {
  CHECK(texts("2h+a") == std::vector<std::string>{"2", "h", "+", "a"});
  CHECK(texts("2e") == std::vector<std::string>{"2", "e"});
  CHECK(texts("2e3") == std::vector<std::string>{"2e3"});
  CHECK(texts("2ex") == std::vector<std::string>{"2", "ex"});
  CHECK(texts("0:10") == std::vector<std::string>{"0", ":", "10"});
}

TEST_CASE("newlines are tokens; comments and blanks are not") {
  CHECK(kinds("a # comment ; ignored\n\tb\r\n") ==
        std::vector<Tok>{Tok::Ident, Tok::Newline, Tok::Ident, Tok::Newline, Tok::End});
}

TEST_CASE("token ranges are byte offsets into the source") {
  Source src("y[i] := x");
  auto toks = lex(src);
  REQUIRE(toks.size() == 7);
  CHECK(toks[4].kind == Tok::Define);
  CHECK(toks[4].range.begin == 5);
  CHECK(toks[4].range.end == 7);
  CHECK(toks.back().range.begin == 9);
}

TEST_CASE("an unexpected character is an error with a caret") {
  Source src("y[i] := x[i] $ 2");
  try {
    lex(src);
    FAIL("no error");
  } catch (const einjit::Error& e) {
    CHECK(e.line() == 1);
    CHECK(e.column() == 14);
    CHECK(std::string(e.what()).find("unexpected character '$'") != std::string::npos);
    CHECK(std::string(e.what()).find("             ^") != std::string::npos);
  }
  Source ctl(std::string("y := \x01"));
  CHECK_THROWS_WITH_AS(lex(ctl), doctest::Contains("'\\x01'"), einjit::Error);
}
