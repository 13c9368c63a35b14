// Parser: golden AST dumps, printer round trips, precedence and layout rules.
#include "TestSupport.h"

#include "dsl/Parser.h"
#include "dsl/Printer.h"

#include <algorithm>
#include <filesystem>

using namespace einjit::dsl;
using einjit::test::checkGolden;
using einjit::test::checkRoundTrip;

namespace {

const std::string kGoldenDir = std::string(EINJIT_TEST_DIR) + "/golden/parse";

std::vector<std::string> goldenPrograms() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(kGoldenDir))
    if (e.path().extension() == ".ein") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string printed(const std::string& text) { return printProgram(parse(text)); }

} // namespace

TEST_CASE("golden: AST dumps and canonical text of every program in golden/parse") {
  auto names = goldenPrograms();
  REQUIRE(names.size() >= 15);
  for (const auto& name : names) {
    CAPTURE(name);
    std::string text = einjit::test::readFile(kGoldenDir + "/" + name + ".ein");
    ProgramAst ast = parse(text);
    checkGolden(kGoldenDir + "/" + name + ".ast", dumpAst(ast));
    checkGolden(kGoldenDir + "/" + name + ".printed", printProgram(ast) + "\n");
    checkRoundTrip(text);
  }
}

TEST_CASE("precedence follows C, with ^ above unary minus and right-associative") {
  CHECK(printed("y := a + b * c") == "y := a + b * c");
  CHECK(printed("y := (a + b) * c") == "y := (a + b) * c");
  CHECK(printed("y := a - (b - c)") == "y := a - (b - c)");
  CHECK(printed("y := (a - b) - c") == "y := a - b - c");
  CHECK(printed("y := -x^2") == "y := -x^2");
  CHECK(printed("y := (-x)^2") == "y := (-x)^2");
  CHECK(printed("y := a^b^c") == "y := a^b^c");
  CHECK(printed("y := (a^b)^c") == "y := (a^b)^c");
  CHECK(printed("y := x^-2") == "y := x^(-2)");
  CHECK(printed("y := a < b == c > d") == "y := a < b == c > d");
  CHECK(printed("y := a || b && c") == "y := a || b && c");
  CHECK(printed("y := (a || b) && c") == "y := (a || b) && c");
  CHECK(printed("y := c ? a : d ? e : f") == "y := c ? a : d ? e : f");
  CHECK(printed("y := (c ? a : d) ? e : f") == "y := (c ? a : d) ? e : f");
  CHECK(printed("y := 1 + (c ? a : b)") == "y := 1 + (c ? a : b)");
  CHECK(printed("y := !!a") == "y := !!a");
  CHECK(printed("y := - -a") == "y := --a");
}

TEST_CASE("implicit multiplication binds a literal to the name right after it") {
  ProgramAst p = parse("y[i] := x[2h+a]");
  const Expr& sub = *p.stmts[0].rhs->args[0];
  REQUIRE(sub.kind == ExprKind::Binary);
  CHECK(sub.binop == BinOp::Add);
  const Expr& mul = *sub.args[0];
  CHECK(mul.binop == BinOp::Mul);
  CHECK(mul.args[0]->number == 2);
  CHECK(mul.args[1]->name == "h");
  CHECK(printed("y[h] := x[2 * h]") == "y[h] := x[2h]");
  CHECK_THROWS_AS(parse("y[h] := x[2 h]"), einjit::Error); // juxtaposition needs no space
  CHECK(printed("y[e] := x[2*e]") == "y[e] := x[2 * e]");  // "2e" would not lex as 2*e
}

TEST_CASE("statements are separated by ';' or newlines; newlines inside brackets continue") {
  CHECK(parse("a := x[i]; b := y[i]\n\n c := z[i];").stmts.size() == 3);
  CHECK(parse("y[i,\n  j] := x[i,\n j]").stmts.size() == 1);
  CHECK(parse("y[i] := x[i] *\n 2").stmts.size() == 1);
  CHECK(parse("y[i] := x[i]\n  where i in 0:3").stmts[0].where.size() == 1);
  CHECK(parse("y[i] := c[i] ?\n 1 :\n 2").stmts.size() == 1);
  CHECK(parse("# only a comment\ny := x[i] # trailing\n").stmts.size() == 1);
}

TEST_CASE("source ranges cover each node") {
  auto src = std::make_shared<Source>("y[i] := x[i + 1] * w[k]");
  ProgramAst p = parse(src);
  const Stmt& s = p.stmts[0];
  CHECK(src->slice(s.outputRange) == "y");
  CHECK(src->slice(s.rhs->range) == "x[i + 1] * w[k]");
  CHECK(src->slice(s.rhs->args[0]->range) == "x[i + 1]");
  CHECK(src->slice(s.rhs->args[0]->args[0]->range) == "i + 1");
  CHECK(src->slice(s.rhs->args[1]->nameRange) == "w");
  CHECK(src->slice(s.range) == "y[i] := x[i + 1] * w[k]");
}

TEST_CASE("numbers print in their shortest round-tripping form") {
  CHECK(formatNumber(0.1, false) == "0.1");
  CHECK(formatNumber(2.0, false) == "2.0");
  CHECK(formatNumber(1e10, false) == "1e+10");
  CHECK(formatNumber(1.0 / 3.0, false) == "0.3333333333333333");
  CHECK(formatNumber(42, true) == "42");
  for (const char* t : {"y := 0.1 + 1e-300 + 123456789.125 + 3", "y := 2.5e-7 * x[i]"})
    checkRoundTrip(t);
}

TEST_CASE("syntax errors carry the caret at the offending token") {
  struct Row {
    const char* text;
    const char* message;
    int line, column;
  };
  const Row rows[] = {
      {"y[i] x[i]", "expected ':=', '=' or '+=' after the left-hand side, found 'x'", 1, 6},
      {"y[i] := x[i", "expected ']' to close the subscript, found end of input", 1, 12},
      {"y[i] := (x[i]", "expected ')' to close the parenthesis", 1, 14},
      {"y[] := x[i]", "expected an index inside '[]'", 1, 3},
      {"y[i] := x[]", "has no subscript", 1, 9},
      {"(foo) y := x[i]", "expected a reduction '+', '*', 'max' or 'min'", 1, 2},
      {"y[i] := ", "expected an expression, found end of input", 1, 9},
      {"y[i] := x[i] where", "expected an index name after 'where'", 1, 19},
      {"y[i] := x[i] where i 0:3", "expected 'in' after the index name", 1, 22},
      {"y[i] := x[i] where i in 0", "expected ':' between the bounds", 1, 26},
      {"y[i] := x[i] x", "expected ';' or a newline after the statement, found 'x'", 1, 14},
      {"y := 1\nz[i] := * 2", "expected an expression, found '*'", 2, 9},
      {"y := c ? 1", "expected ':' in a conditional expression", 1, 11},
      {"   \n  ;; ", "the program has no statement", 2, 6},
      {"y := 99999999999999999999", "is too large", 1, 6},
      {"y := 1e999", "out of range", 1, 6},
      {"3 := x", "expected the name of the output, found '3'", 1, 1},
  };
  for (const Row& r : rows) {
    CAPTURE(r.text);
    try {
      parse(r.text);
      FAIL("no error");
    } catch (const einjit::Error& e) {
      CHECK(std::string(e.what()).find(r.message) != std::string::npos);
      CHECK(e.line() == r.line);
      CHECK(e.column() == r.column);
    }
  }
}

TEST_CASE("deep nesting is an error, not a stack overflow") {
  std::string deep = "y := " + std::string(5000, '(') + "1" + std::string(5000, ')');
  CHECK_THROWS_WITH_AS(parse(deep), doctest::Contains("nested too deeply"), einjit::Error);
  std::string negs = "y := " + std::string(5000, '-') + "1";
  CHECK_THROWS_AS(parse(negs), einjit::Error);
}
