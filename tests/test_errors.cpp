// User errors: one table row per kind of mistake. Each row is a program, how it is called
// (nothing: compile() must throw; or a call with given arguments), the expected message
// (a substring) and the expected caret position, counted by hand (1-based line and column of
// the first character of the offending part). Every error must be an einjit::Error whose
// what() is the rendered diagnostic: "<program>:LINE:COL: error: MESSAGE", the source line,
// and a caret under the column. A call that fails any check must write nothing: every '=' or
// '+=' output a row passes is watched and must hold its old values afterwards.
#include "Watch.h"
#include "dsl/Binding.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

using einjit::DType;
using einjit::Kernel;
using einjit::Shape;
using einjit::Tensor;

namespace {

using einjit::test::Watch;

using Call = std::function<void(const Kernel&, Watch&)>;

struct ErrorRow {
  const char* kind;
  std::string program;
  Call call; // empty: compile() itself must throw
  const char* message;
  int line, column; // 0, 0: an error about the call with no place in the program
};

Tensor rnd(const Shape& s, DType d = DType::f32) {
  static std::uint64_t seed = 1;
  return Tensor::random(s, d, seed++);
}
// An output passed in with recognisable contents.
Tensor out(Watch& w, const Shape& s, DType d = DType::f32) { return w(Tensor::full(s, 7.0, d)); }
Tensor ints(const Shape& s, const std::vector<double>& v) {
  return Tensor::fromValues(s, v, DType::i64);
}

// Binds the checked program to argument shapes (by name, f32) without running anything; for
// mistakes that must be caught before any loop runs.
Call bindOnly(std::vector<std::pair<std::string, Shape>> shapes, std::vector<double> params = {}) {
  return [shapes, params](const Kernel& k, Watch&) {
    const einjit::dsl::Program& p = k.program();
    std::vector<einjit::dsl::ArgSpec> args;
    for (int id : p.arguments)
      for (const auto& [name, s] : shapes)
        if (name == p.tensors[static_cast<std::size_t>(id)].name) args.push_back({DType::f32, s});
    REQUIRE(args.size() == p.arguments.size());
    einjit::dsl::bind(p, args, params);
  };
}

std::string nested(int depth, const std::string& open, const std::string& inner,
                   const std::string& close) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += inner;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// clang-format off
std::vector<ErrorRow> rows() {
  return {
    // --- lexing and parsing ------------------------------------------------------------------
    {"unexpected character", "y[i] := x[i] $ 2", {}, "unexpected character '$'", 1, 14},
    {"unexpected character, line 2", "y[i] := x[i]\nz[i] := x[i] @ 2", {},
     "unexpected character '@'", 2, 14},
    {"unexpected non-ASCII byte", "y[i] := x[i] \xc3\xa9", {}, "unexpected character '\\xc3'",
     1, 14},
    {"missing ':='", "y[i] x[i]", {},
     "expected ':=', '=' or '+=' after the left-hand side, found 'x'", 1, 6},
    {"missing ':=' after a scalar output", "y x[i]", {},
     "expected ':=', '=' or '+=' after the left-hand side, found 'x'", 1, 3},
    {"unclosed subscript", "y[i] := x[i", {},
     "expected ']' to close the subscript, found end of input", 1, 12},
    {"unclosed subscript, continued on line 2", "y[i] := x[i\nz[i] := w[i]", {},
     "expected ']' to close the subscript, found 'z'", 2, 1},
    {"unclosed left-hand side", "y[i := x[i]", {},
     "expected ']' to close the left-hand side, found ':='", 1, 5},
    {"extra ']'", "y[i] := x[i]]", {},
     "expected ';' or a newline after the statement, found ']'", 1, 13},
    {"unclosed parenthesis", "y[i] := (x[i] + 1", {},
     "expected ')' to close the parenthesis, found end of input", 1, 18},
    {"unclosed call", "y[i] := exp(x[i]", {},
     "expected ')' to close the call, found end of input", 1, 17},
    {"empty subscript", "y[i] := x[]", {}, "'x[]' has no subscript", 1, 9},
    {"empty left-hand subscript", "y[] := x[i]", {}, "expected an index inside '[]'", 1, 3},
    {"left-hand side is not an index name", "y[i+1] := x[i]", {},
     "the left-hand side of ':=' takes index names only", 1, 3},
    {"bad reduction (foo)", "(foo) y[i] := x[i]", {},
     "expected a reduction '+', '*', 'max' or 'min' after '(', found 'foo'", 1, 2},
    {"bad reduction (-)", "(-) y[i] := x[i]", {},
     "expected a reduction '+', '*', 'max' or 'min' after '(', found '-'", 1, 2},
    {"empty program", "", {}, "the program has no statement", 1, 1},
    {"incomplete expression", "y[i] := x[i] ? 1", {},
     "expected ':' in a conditional expression (c ? a : b), found end of input", 1, 17},
    {"incomplete 'where' range", "y[i] := x[i] where i in 0", {},
     "expected ':' between the bounds of a range (lo:hi), found end of input", 1, 26},
    {"integer literal too large", "y[i] := x[i] + 99999999999999999999", {},
     "integer literal 99999999999999999999 is too large", 1, 16},

    // --- functions -----------------------------------------------------------------------------
    {"unknown function", "y[i] := foo(x[i])", {}, "unknown function 'foo'", 1, 9},
    {"too many arguments", "y[i] := exp(x[i], 2)", {}, "'exp' takes 1 argument, not 2", 1, 9},
    {"too few arguments", "y[i] := pow(x[i])", {}, "'pow' takes 2 arguments, not 1", 1, 9},
    {"size() of a rank-0 tensor", "s := x[i]; y[i] := x[i] * size(s, 0)", {},
     "dimension 0 is out of range for 's' of rank 0", 1, 35},
    {"size() dimension out of range", "y[i] := x[i] + size(x,1)", {},
     "dimension 1 is out of range for 'x' of rank 1", 1, 23},
    {"size() dimension out of range, before the tensor is indexed",
     "y[i] := size(x, 3) + x[i]", {}, "dimension 3 is out of range for 'x' of rank 1", 1, 17},
    {"size() dimension past int's range", "y[i] := x[i] / size(x,1777777777777777)", {},
     "dimension 1777777777777777 is out of range for 'x'", 1, 23},
    {"size() dimension past int's range, before the tensor is indexed",
     "y[i] := size(x, 4294967296) + x[i]", {}, "dimension 4294967296 is out of range for 'x'", 1, 17},
    {"size() of the output being defined", "y[i] := x[i] where i in 0:size(y,0)", {},
     "the shape of 'y' is being defined by this statement", 1, 32},

    // --- subscripts ----------------------------------------------------------------------------
    {"product of indices", "y[i,j] := x[i*j]", {},
     "subscript is not affine: product of index variables", 1, 13},
    {"division", "y[i] := x[i/2]", {}, "subscript is not affine: operator '/' is not allowed", 1,
     11},
    {"power", "y[i] := x[i^2]", {}, "subscript is not affine: operator '^' is not allowed", 1,
     11},
    {"remainder", "y[i] := x[i%2]", {}, "subscript is not affine: operator '%' is not allowed", 1,
     11},
    {"float literal index", "y[i] := x[1.5]", {},
     "subscript is not affine: '1.5' is not an integer", 1, 11},
    {"function in a subscript", "y[i] := x[abs(i)]", {},
     "subscript is not affine: 'abs(...)' is not allowed in a subscript", 1, 11},
    {"conditional in a subscript", "y[i] := x[i > 0 ? i : 0]", {},
     "a conditional is not allowed in a subscript", 1, 11},
    {"parameter as a coefficient", "y[i] := x[N*i]", {},
     "the coefficient of an index variable must be an integer constant, not 'N'", 1, 11},
    {"gather scaled", "y[i] := x[2*tok[i]]", {},
     "a gather through 'tok' must be added to the subscript", 1, 13},
    {"gather negated", "y[i] := x[-tok[i]]", {},
     "a gather through 'tok' must be added to the subscript", 1, 12},
    {"two gathers in one subscript", "y[i] := x[tok[i] + tok[i]]", {},
     "a subscript can gather through one tensor only", 1, 11},
    {"pad nested", "y[i] := x[pad(pad(i))]", {}, "pad, clamp and wrap cannot be nested", 1, 15},
    {"clamp nested in wrap", "y[i] := x[wrap(clamp(i))]", {},
     "pad, clamp and wrap cannot be nested", 1, 16},
    {"pad in value position", "y[i] := pad(x[i])", {},
     "'pad(...)' is only allowed as a whole subscript", 1, 9},
    {"pad inside a sum", "y[i] := x[i+pad(i)]", {}, "'pad(...)' must be the whole subscript", 1,
     13},
    {"pad with two arguments", "y[i] := x[pad(i, j)]", {}, "'pad' takes one index expression", 1,
     11},
    {"tensor used as an index", "y[i] := x[w] * w[i]", {},
     "tensor 'w' cannot be used as an index this way", 1, 11},
    {"tensor used as a left-hand index", "y[x] := x[i]", {},
     "'x' is a tensor and cannot be an index", 1, 3},
    {"tensor used as a 'where' index", "y[i] := x[i] where x in 0:3", {},
     "'x' is a tensor and cannot be an index", 1, 20},

    // --- 'where' -------------------------------------------------------------------------------
    {"'=' writing an element twice", "y[i+j] = x[i,j]", {},
     "with '=' every element must be written once", 1, 3},
    {"gather on the left-hand side without '+='", "E[tok[i], d] = x[i,d]", {},
     "write it with '+='", 1, 3},
    {"pad on the left-hand side of '='", "y[pad(i-1)] = x[i]", {},
     "pad() on the left-hand side needs '+='", 1, 3},
    {"clamp on the left-hand side of '='", "y[clamp(i-1)] = x[i]", {},
     "clamp() on the left-hand side needs '+='", 1, 3},
    {"output range depending on an index in a ':=' statement", "y[i] := x[i+j] where i in 0:j",
     {}, "the range of output index 'i' cannot depend on other indices in a ':=' statement", 1,
     22},
    {"output range depending on a reduction index", "y[i] = x[i+j] where i in 0:j", {},
     "the range of output index 'i' cannot depend on reduction index 'j'", 1, 21},
    {"range depending on itself", "y[i] := x[i,k] where k in 0:k+1", {},
     "the range of 'k' cannot depend on 'k'", 1, 22},
    {"ranges depending on each other", "y[i] := x[j,k] where j in 0:k, k in 0:j", {},
     "depend on each other", 1, 22},
    {"index read through a dependent range cannot be inferred", "y := x[i+k] where k in 0:i", {},
     "cannot infer the range of index 'i'", 1, 8},

    {"tensor element in a 'where' bound", "y[i] := x[i] where i in 0:x[0]", {},
     "a tensor element cannot appear in a range bound", 1, 27},
    {"'where' index used nowhere", "y[i] := x[i] where k in 0:3", {},
     "index 'k' has a 'where' range but nothing uses it", 1, 20},
    {"duplicate 'where'", "y[i] := x[i] where i in 0:3, i in 0:4", {},
     "index 'i' has two 'where' ranges", 1, 30},

    // --- names and ranks -----------------------------------------------------------------------
    {"':=' on a name already defined", "y[i] := x[i]; y[i] := x[i]", {},
     "'y' is already defined by statement 1; use '=' or '+=' to write it again", 1, 15},
    {"':=' on an input", "y[i] := x[i]*2; x[i] := y[i]", {},
     "'x' already exists (it is passed in); use '=' or '+=' to write it", 1, 17},
    {"reading a ':=' output in its own statement", "y[i] := x[i]*y[i]", {},
     "'y' is defined by this statement and cannot be read in it", 1, 14},
    {"reading a scalar ':=' output in its own statement", "s := s + x[i]", {},
     "'s' is defined by this statement and cannot be read in it", 1, 6},
    {"rank mismatch between two uses", "y[i] := x[i] + x[i,0]", {},
     "'x' is used with 2 indexes here but has rank 1", 1, 16},
    {"rank mismatch across statements", "t[i] := x[i]\ny[i] := t[i,0]", {},
     "'t' is used with 2 indexes here but has rank 1", 2, 9},
    {"output rank mismatch across statements", "y[i] := x[i]; y[i,j] = x[i]*x[j]", {},
     "'y' is used with 2 indexes here but has rank 1", 1, 15},

    // --- ranges found without shapes -----------------------------------------------------------
    {"un-inferable index (pad only)", "y[i] := x[pad(i)]", {},
     "cannot infer the range of index 'i'", 1, 3},
    {"un-inferable reduction index (clamp only)", "y[i] := x[i] * w[clamp(k)]", {},
     "cannot infer the range of index 'k'", 1, 18},
    {"un-inferable indices bound only through each other", "y[i,j] := x[i+j]", {},
     "cannot infer the range of index 'i'", 1, 3},
    {"un-inferable index used nowhere", "y[i] := 1.0", {},
     "cannot infer the range of index 'i'", 1, 3},
    {"output range starting below 0", "y[i] := x[i+1]", {},
     "the range of output index 'i' starts at -1, below 0", 1, 3},

    // --- nesting: an error, not a stack overflow ---------------------------------------------
    // Each '(' costs two levels of the parser's limit of 200 after the two of the right-hand
    // side: the 101st '(' (column 5 + 101) is one too many.
    {"1000 nested parentheses", "y := " + nested(1000, "(", "x", ")"), {},
     "expression nested too deeply", 1, 106},
    // A '(' at the start of a statement opens a reduction.
    {"1000 parentheses at the start", nested(1000, "(", "", ""), {},
     "expected a reduction '+', '*', 'max' or 'min' after '(', found '('", 1, 2},
    // Each '-' costs two levels: the 100th (column 5 + 100) is one too many.
    {"1000 unary minuses", "y := " + nested(1000, "-", "x", ""), {},
     "expression nested too deeply", 1, 105},
    // In a subscript the access adds two levels: the 100th '(' (column 10 + 100).
    {"1000 nested parentheses in a subscript", "y[i] := x[" + nested(1000, "(", "i", ")") + "]",
     {}, "expression nested too deeply", 1, 110},
    // '^' is right-associative: the operand after the 199th '^' (column 6 + 2 * 199).
    {"1000 chained powers", "y := x" + nested(1000, "^x", "", ""), {},
     "expression nested too deeply", 1, 404},

    // --- mistakes found when binding shapes (before anything runs) ---------------------------
    {"output range starting below 0 (from shapes)", "y[i] := x[-i]",
     [](const Kernel& k, Watch&) { k(rnd({5})); },
     "the range of output index 'i' starts at -4, below 0", 1, 3},
    {"'where' output range starting below 0", "y[i] := x[pad(i)] where i in -2:12",
     [](const Kernel& k, Watch&) { k(rnd({10})); },
     "the range of output index 'i' starts at -2, below 0", 1, 3},
    {"'where' pushing an access out of bounds", "y[i] = x[i+1] where i in 0:N",
     [](const Kernel& k, Watch& w) { k(out(w, {10}), rnd({10}), 10); },
     "subscript 'i+1' goes out of bounds: it reaches 10 but dimension 0 of 'x' has extent 10", 1,
     10},
    {"'where' pushing an access below 0", "s := x[i-1] where i in 0:3",
     [](const Kernel& k, Watch&) { k(rnd({10})); },
     "subscript 'i-1' goes out of bounds: it reaches -1 but dimension 0 of 'x' has extent 10", 1,
     8},
    // The left-hand side of '=' is an access too: y has 5 elements, i reaches 5. Checked by
    // bind() alone: running it would write outside y.
    {"'where' pushing an '=' output out of bounds", "y[i] = x[pad(i)] where i in 0:6",
     bindOnly({{"y", {5}}, {"x", {3}}}), "out of bounds", 1, 3},
    {"'where' pushing a '+=' output below 0", "y[i] += x[pad(i)] where i in -1:5",
     bindOnly({{"y", {5}}, {"x", {3}}}), "out of bounds", 1, 3},
    {"constant subscript out of bounds", "y[i] = x[i, 5]",
     [](const Kernel& k, Watch& w) { k(out(w, {3}), rnd({3, 4})); },
     "subscript '5' goes out of bounds: it reaches 5 but dimension 1 of 'x' has extent 4", 1, 13},
    // A bare use fixes a range; another use of the index must stay in bounds over all of it.
    {"bare use fixing a range that a shifted use leaves", "y[i] = x[i+1] - x[i]",
     [](const Kernel& k, Watch& w) { k(out(w, {5}), rnd({5})); },
     "subscript 'i+1' goes out of bounds: it reaches 5 but dimension 0 of 'x' has extent 5", 1,
     10},
    {"'where' and a bare use leaving a tensor together", "y[i] := x[i+k]*w[k] where i in 0:size(x,0)",
     [](const Kernel& k, Watch&) { k(rnd({10}), rnd({3})); },
     "subscript 'i+k' goes out of bounds: it reaches 11 but dimension 0 of 'x' has extent 10", 1,
     11},
    {"bare extents disagreeing", "c[i,j] = a[i,k] * b[k,j]",
     [](const Kernel& k, Watch& w) { k(out(w, {2, 7}), rnd({2, 5}), rnd({4, 7})); },
     "index 'k' ranges over 4 (dimension 0 of 'b') here but over 5 (dimension 1 of 'a') elsewhere",
     1, 21},
    {"bare extent disagreeing with an '=' output", "y[i] = x[i]",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), rnd({5})); },
     "index 'i' ranges over 5 (dimension 0 of 'x') here but over 4 (dimension 0 of 'y') elsewhere",
     1, 10},

    // --- arguments -----------------------------------------------------------------------------
    {"argument rank mismatch", "y[i] = x[i,j] * w[j]",
     [](const Kernel& k, Watch& w) { k(out(w, {6}), rnd({6}), rnd({3})); },
     "'x' has rank 2 in the program but the argument has shape 6 (rank 1)", 1, 8},
    {"rank-0 argument for a rank-1 tensor", "y[i] = x[i] * 2",
     [](const Kernel& k, Watch& w) { k(out(w, {3}), rnd({})); },
     "'x' has rank 1 in the program but the argument has shape a scalar (rank 0)", 1, 8},
    {"dtype mismatch f32 vs f64", "y[i] = x[i] * w[i]",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), rnd({4}), rnd({4}, DType::f64)); },
     "dtype mismatch: 'w' is f64 but the program computes in f32", 1, 15},
    {"dtype mismatch between output and input", "y[i] = x[i] * 2",
     [](const Kernel& k, Watch& w) { k(out(w, {4}, DType::f64), rnd({4})); },
     "dtype mismatch: 'x' is f32 but the program computes in f64", 1, 8},
    {"dtype mismatch on a '+=' output", "y[i] += x[i] * w[i]",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), rnd({4}), rnd({4}, DType::f64)); },
     "dtype mismatch: 'w' is f64 but the program computes in f32", 1, 16},
    {"bf16 does not mix with f64", "y[i] := x[i] * w[i]",
     [](const Kernel& k, Watch&) { k(rnd({4}, DType::bf16), rnd({4}, DType::f64)); },
     "dtype mismatch: 'w' is f64 but the program computes in bf16; f64 does not mix with f32 "
     "or bf16",
     1, 16},
    {"bf16 and f32 mix, f64 still does not", "y[i] := x[i] * w[i] * z[i]",
     [](const Kernel& k, Watch&) {
       k(rnd({4}, DType::bf16), rnd({4}), rnd({4}, DType::f64));
     },
     "dtype mismatch: 'z' is f64 but the program computes in f32; f64 does not mix", 1, 23},
    {"float tensor as a gather index", "y[i] = E[tok[i]]",
     [](const Kernel& k, Watch& w) { k(out(w, {3}), rnd({5}), rnd({3})); },
     "'tok' is used to index another tensor, so it must hold integers (i32 or i64), not f32", 1,
     10},
    {"non-integer scalar in a subscript", "y[i] = x[i+N]",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), rnd({5}), 1.5); },
     "parameter 'N' is used in a subscript or a range and must be an integer", 1, 12},
    {"NaN scalar in a subscript", "y[i] = x[i+N]",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), rnd({5}), kNaN); },
     "parameter 'N' is used in a subscript or a range and must be an integer", 1, 12},
    {"non-integer scalar in a 'where' bound", "y[i] := x[pad(i)] where i in 0:N",
     [](const Kernel& k, Watch&) { k(rnd({3}), 2.5); }, "parameter 'N' is used in a", 1, 32},
    {"too few arguments", "y[i] = x[i] * w[i]",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), rnd({4})); },
     "wrong number of arguments: got 2, expected 3: 3 tensor(s) (y, x, w) then 0 scalar(s) (none)",
     1, 15},
    {"too many arguments", "y[i] = x[i] * w[i]",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), rnd({4}), rnd({4}), rnd({4})); },
     "wrong number of arguments: got 4, expected 3: 3 tensor(s) (y, x, w)", 1, 1},
    {"missing scalar", "y[i] = x[i+N]",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), rnd({5})); },
     "wrong number of arguments: got 2, expected 3: 2 tensor(s) (y, x) then 1 scalar(s) (N)", 1,
     12},
    // An upper-case subscript name is a parameter: the message says so where it is used.
    {"upper-case name meant as an index", "y[i] = x[i,J]",
     [](const Kernel& k, Watch& w) { k(out(w, {3}), rnd({3, 4})); },
     "note: 'J' is a scalar parameter, not an index: a name in a subscript that begins with an "
     "upper-case letter is a parameter", 1, 12},
    {"upper-case name meant as an index, called by name", "y[i] = x[i,J]",
     [](const Kernel& k, Watch& w) { k.call({{"y", out(w, {3})}, {"x", rnd({3, 4})}}, {}); },
     "to loop over it, write it in lower case or give it a range with 'where J in lo:hi'", 1,
     12},
    {"scalar where a tensor is expected", "y[i] = x[i] * w[i]",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), 2.0, rnd({4})); },
     "argument 2 should be the tensor 'x', got a scalar", 1, 8},
    {"tensor where a scalar is expected", "y[i] = x[i+N]",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), rnd({5}), rnd({5})); },
     "argument 3 should be the scalar 'N', got a tensor", 1, 12},
    {"undefined tensor", "y[i] = x[i] * 2",
     [](const Kernel& k, Watch& w) { k(out(w, {4}), Tensor()); },
     "tensor 'x' is undefined", 1, 8},
    {"missing tensor by name", "y[i] = x[i] * w[i]",
     [](const Kernel& k, Watch& w) { k.call({{"y", out(w, {4})}, {"x", rnd({4})}}); },
     "missing tensor argument 'w'", 1, 15},
    {"missing scalar by name", "y[i] = x[i+N]",
     [](const Kernel& k, Watch& w) { k.call({{"y", out(w, {4})}, {"x", rnd({5})}}, {}); },
     "missing scalar argument 'N'", 1, 12},
    {"unknown tensor by name", "y[i] = x[i] * 2",
     [](const Kernel& k, Watch& w) {
       k.call({{"y", out(w, {4})}, {"x", rnd({4})}, {"q", rnd({4})}});
     },
     "'q' is not a tensor argument of this program", 0, 0},
    {"unknown scalar by name", "y[i] = x[i+N]",
     [](const Kernel& k, Watch& w) {
       k.call({{"y", out(w, {4})}, {"x", rnd({5})}}, {{"N", 1}, {"M", 2}});
     },
     "'M' is not a scalar parameter of this program", 0, 0},
    {"output aliasing an input (the same tensor)", "y[i] = x[i]*2",
     [](const Kernel& k, Watch& w) {
       Tensor t = out(w, {5});
       k(t, t);
     },
     "output 'y' shares memory with argument 'x'; pass separate memory for outputs", 1, 1},
    {"output aliasing an input (overlapping views)", "y[i] = x[i]*2",
     [](const Kernel& k, Watch& w) {
       Tensor buf = out(w, {8});
       k(buf.slice(0, 0, 5), buf.slice(0, 3, 8));
     },
     "output 'y' shares memory with argument 'x'", 1, 1},
    {"'+=' output aliasing its transpose", "y[i,j] += x[j,i]",
     [](const Kernel& k, Watch& w) {
       Tensor t = out(w, {3, 3});
       k(t, t.transpose(0, 1));
     },
     "output 'y' shares memory with argument 'x'", 1, 1},

    // 2^53 * 2048 wraps around in 64-bit arithmetic: still out of bounds, still an
    // einjit::Error (not an internal error, not a read outside x).
    {"huge coefficient out of bounds", "s := x[9007199254740992*i] where i in 0:2049",
     [](const Kernel& k, Watch&) { k(rnd({1})); }, "out of bounds", 1, 8},
    // Every element of a stride-0 output is the same memory: the result would depend on the
    // order of the writes (y[i] += x[i] currently gives x[4], not the sum).
    {"output whose elements overlap (stride 0)", "y[i] += x[i]",
     [](const Kernel& k, Watch& w) {
       Tensor one = out(w, {1});
       k(Tensor::view(one.data(), DType::f32, {5}, {0}), rnd({5}));
     },
     "output 'y'", 1, 1},

    // --- run time --------------------------------------------------------------------------
    {"gather index out of range", "y[i] = E[tok[i]]",
     [](const Kernel& k, Watch& w) { k(out(w, {3}), rnd({5}), ints({3}, {0, 7, 1})); },
     "gather index 7 is out of bounds for 'E' (extent 5)", 1, 10},
    {"negative gather index", "y[i] = E[tok[i]]",
     [](const Kernel& k, Watch& w) { k(out(w, {3}), rnd({5}), ints({3}, {0, -1, 1})); },
     "gather index -1 is out of bounds for 'E' (extent 5)", 1, 10},
    {"gather index out of range after a statement that ran",
     "t[i] := x[i] * 2\ny[i] = t[i] + E[tok[i]]",
     [](const Kernel& k, Watch& w) {
       k(rnd({3}), out(w, {3}), rnd({5}), ints({3}, {1, 9, 2}));
     },
     "gather index 9 is out of bounds for 'E' (extent 5)", 2, 17},
    // A ':=' output holds floating-point values; used as a gather index, 0.5 is no integer
    // (reporting "gather index 0 is out of bounds" for it would be wrong).
    {"non-integer value of a computed gather index", "t[i] := x[i]; y[i] = E[t[i]]",
     [](const Kernel& k, Watch& w) {
       k(Tensor::fromValues({3}, {0.5, 1, 2}), out(w, {3}), rnd({5}));
     },
     "integer", 1, 24},
  };
}
// clang-format on

// The source line `line` of `text` (1-based), without its newline.
std::string lineOf(const std::string& text, int line) {
  std::size_t b = 0;
  for (int l = 1; l < line; ++l) b = text.find('\n', b) + 1;
  std::size_t e = text.find('\n', b);
  return text.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

std::string gutter(int line) {
  std::string n = std::to_string(line);
  return std::string(n.size() < 4 ? 4 - n.size() : 0, ' ') + n;
}

} // namespace

TEST_CASE("error table: every kind of user mistake is an einjit::Error with a caret") {
  const auto table = rows();
  CHECK(table.size() >= 80);
  for (const ErrorRow& row : table) {
    std::string kind = row.kind;
    CAPTURE(kind);
    std::string program =
        row.program.size() > 200 ? row.program.substr(0, 200) + "..." : row.program;
    CAPTURE(program);
    Watch watch;
    std::string what;
    int line = -1, column = -1;
    bool threw = false;
    try {
      Kernel k = einjit::compile(row.program);
      if (!row.call) {
        FAIL_CHECK("compile() accepted the program");
        continue;
      }
      row.call(k, watch);
      FAIL_CHECK("the call succeeded");
    } catch (const einjit::Error& e) {
      threw = true;
      what = e.what();
      line = e.line();
      column = e.column();
    } catch (const std::exception& e) {
      FAIL_CHECK("threw something other than einjit::Error: " << std::string(e.what()));
    }
    if (!threw) continue;
    std::string shown = what.size() > 600 ? what.substr(0, 600) + "..." : what;
    CAPTURE(shown);
    CHECK_MESSAGE(what.find(row.message) != std::string::npos,
                  "expected the message to contain: " << std::string(row.message));
    CHECK(line == row.line);
    CHECK(column == row.column);
    if (row.line > 0 && line == row.line && column == row.column) {
      std::string header =
          "<program>:" + std::to_string(row.line) + ":" + std::to_string(row.column) + ": error: ";
      CHECK(what.rfind(header, 0) == 0);
      // The source line, and right under it the caret at the column. A line longer than 160
      // characters is shown as a window: 60 characters before the caret, 100 from it.
      std::string text = lineOf(row.program, row.line), before, after;
      auto col = static_cast<std::size_t>(row.column - 1);
      if (text.size() > 160) {
        std::size_t from = col > 60 ? col - 60 : 0;
        std::size_t to = std::min(text.size(), std::max(col, from) + 100);
        before = from > 0 ? "..." : "";
        after = to < text.size() ? "..." : "";
        text = text.substr(from, to - from);
        col -= from;
      }
      std::string source = gutter(row.line) + " | " + before + text + after + "\n";
      std::string caret = std::string(gutter(row.line).size(), ' ') + " | " +
                          std::string(before.size() + col, ' ') + "^";
      CHECK(what.find(source + caret) != std::string::npos);
    }
    // Nothing was written to the outputs passed in.
    for (std::size_t t = 0; t < watch.tensors.size(); ++t) {
      CAPTURE(t);
      CHECK(watch.tensors[t].toVector() == watch.before[t]);
    }
  }
}

TEST_CASE("error table: rows that fail a call compile fine on their own") {
  // The call rows must fail because of the call, not because the program is wrong.
  for (const ErrorRow& row : rows()) {
    if (!row.call) continue;
    std::string kind = row.kind;
    CAPTURE(kind);
    CHECK_NOTHROW(einjit::compile(row.program));
  }
}

TEST_CASE("a kernel that failed a call still works, and its outputs are written only on success") {
  Kernel k = einjit::compile("y[i] = E[tok[i]] * s");
  Tensor E = Tensor::fromValues({4}, {1, 2, 3, 4});
  Tensor y = Tensor::full({3}, 7.0);
  CHECK_THROWS_AS(k(y, E, ints({3}, {0, 4, 1}), 2.0), einjit::Error);
  CHECK(y.toVector() == std::vector<double>{7, 7, 7});
  CHECK_THROWS_AS(k(y, E, Tensor::fromValues({3}, {0, 1, 2}), 2.0), einjit::Error);
  CHECK(y.toVector() == std::vector<double>{7, 7, 7});
  k(y, E, ints({3}, {3, 0, 1}), 2.0);
  CHECK(y.toVector() == std::vector<double>{8, 2, 4});
}

TEST_CASE("diagnostics render every note and keep the caret on the right line") {
  try {
    einjit::compile("c[i,j] := a[i,k] * b[k,j]")(rnd({2, 5}), rnd({4, 7}));
    FAIL("expected an error");
  } catch (const einjit::Error& e) {
    std::string what = e.what();
    // The error at b's k, then a note at a's k.
    CHECK(what.find("<program>:1:22: error: ") == 0);
    CHECK(what.find("<program>:1:15: note: 'k' ranges over 5 here") != std::string::npos);
  }
  try {
    einjit::compile("y[i] := x[i]\n\nz[j] := x[j] +\n  foo(x[j])");
    FAIL("expected an error");
  } catch (const einjit::Error& e) {
    CHECK(e.line() == 4);
    CHECK(e.column() == 3);
    CHECK(std::string(e.what()).find("   4 |   foo(x[j])\n     |   ^~~") != std::string::npos);
  }
}
