// Robustness: random token strings and mutated valid programs go through parse + check (and,
// when they check, bind + run on tiny random shapes). Every one must either succeed or raise
// einjit::Error; anything else (another exception, a crash, a sanitizer report) fails.
#include "TestSupport.h"

#include "dsl/Lexer.h"
#include "dsl/Program.h"
#include "einjit/einjit.h"

#include <functional>
#include <map>
#include <random>

namespace {

const std::vector<std::string> kVocabulary = {
    "y",   "x",     "w",    "E",   "tok",   "i",    "j",    "k",   "N",   "a",   "b",
    "[",   "]",     "(",    ")",   ",",     ";",    "\n",   ":=",  "=",   "+=",  "+",
    "-",   "*",     "/",    "%",   "^",     "<",    "<=",   ">",   ">=",  "==",  "!=",
    "&&",  "||",    "!",    "?",   ":",     "0",    "1",    "2",   "3",   "-1",  "2.5",
    "1e3", "where", "in",   "pad", "clamp", "wrap", "size", "exp", "max", "min", "(max)",
    "(*)", "relu",  "fdiv", "#c",  " ",     "2i",   "i32"};

const std::vector<std::string> kPrograms = {
    "y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]",
    "y[i] := x[i+k] * w[k]",
    "y[i,j] := x[i-j] * w[j]",
    "y[i] := x[i+j-k] * w[j,k]",
    "(max) y[i,j] := x[2i+a, 2j+b] where a in 0:2, b in 0:2",
    "y[b,d] := E[tok[b], d]",
    "y[i] := x[pad(i-1)] + x[clamp(i+1)] + x[wrap(i+2)] where i in 0:size(x,0)",
    "(max) m[i] := x[i,j]\ne[i,j] := exp(x[i,j] - m[i])\ns[i] := e[i,j]\ny[i,j] := e[i,j] / s[i]",
    "y[i,j] := (i <= j) ? a[i,j] : 0",
    "s := A[i,i]; D[i,i] := v[i]",
    "y[i] := x[N-1-i] * alpha",
    "y[i] = x[i] * 2; z[i] += x[i]",
    "(*) p[i] := x[i,j]; (min) q[i] := x[i,j]",
    "mu[i] := x[i,j] / size(x,1)\nv[i] := (x[i,j] - mu[i])^2 / size(x,1)\n"
    "y[i,j] := (x[i,j] - mu[i]) / sqrt(v[i] + 1e-5)",
};

// Exercises a program that checked: bind with random tiny shapes and run it; shape mistakes
// are einjit::Errors like any other.
void tryRun(const einjit::Kernel& k, std::mt19937_64& rng) {
  const einjit::dsl::Program& p = k.program();
  std::vector<einjit::Arg> args;
  for (int id : p.arguments) {
    const auto& t = p.tensors[static_cast<std::size_t>(id)];
    einjit::Shape shape;
    for (int d = 0; d < t.rank; ++d) shape.push_back(static_cast<std::int64_t>(rng() % 5));
    if (t.readAsIndex)
      args.emplace_back(einjit::Tensor::randomInt(shape, 0, 4, einjit::DType::i64, rng()));
    else
      args.emplace_back(einjit::Tensor::random(shape, einjit::DType::f64, rng()));
  }
  for (std::size_t i = 0; i < p.params.size(); ++i)
    args.emplace_back(static_cast<double>(static_cast<int>(rng() % 7) - 2));
  k.call(args);
}

// Returns true when the text compiled.
bool survive(const std::string& text, std::mt19937_64& rng) {
  try {
    einjit::Kernel k = einjit::compile(text);
    // The canonical form of anything that checks reparses to the same tree.
    einjit::test::checkRoundTrip(text);
    try {
      tryRun(k, rng);
    } catch (const einjit::Error&) {
    }
    return true;
  } catch (const einjit::Error& e) {
    // Every error points somewhere in the program.
    CHECK(e.line() >= 1);
    return false;
  }
}

std::vector<std::string> tokensOf(const std::string& text) {
  std::vector<std::string> out;
  einjit::dsl::Source src(text);
  for (const auto& t : einjit::dsl::lex(src))
    if (t.kind != einjit::dsl::Tok::End) out.emplace_back(t.text);
  return out;
}

std::string join(const std::vector<std::string>& toks) {
  std::string s;
  for (const auto& t : toks) s += t + (t == "\n" ? "" : " ");
  return s;
}

} // namespace

TEST_CASE("10,000 random token strings: success or einjit::Error, nothing else") {
  std::mt19937_64 rng(12345);
  int compiled = 0;
  for (int n = 0; n < 10000; ++n) {
    std::size_t len = 1 + rng() % 24;
    std::string text;
    // Half of them start like a statement, so they get past the first token.
    if (n % 2 == 0) text = "y[i] := ";
    for (std::size_t t = 0; t < len; ++t) text += kVocabulary[rng() % kVocabulary.size()] + " ";
    compiled += survive(text, rng) ? 1 : 0;
  }
  MESSAGE("random strings that compiled: " << compiled);
}

TEST_CASE("10,000 mutated valid programs: success or einjit::Error, nothing else") {
  std::mt19937_64 rng(777);
  int compiled = 0;
  for (const auto& p : kPrograms) REQUIRE(survive(p, rng)); // the seeds themselves are valid
  for (int n = 0; n < 10000; ++n) {
    auto toks = tokensOf(kPrograms[rng() % kPrograms.size()]);
    int edits = rng() % 10 < 7 ? 1 : 2;
    for (int e = 0; e < edits && !toks.empty(); ++e) {
      std::size_t at = rng() % toks.size();
      switch (rng() % 4) {
      case 0: toks.erase(toks.begin() + static_cast<std::ptrdiff_t>(at)); break;
      case 1:
        toks.insert(toks.begin() + static_cast<std::ptrdiff_t>(at),
                    kVocabulary[rng() % kVocabulary.size()]);
        break;
      case 2: toks[at] = kVocabulary[rng() % kVocabulary.size()]; break;
      default: std::swap(toks[at], toks[rng() % toks.size()]); break;
      }
    }
    compiled += survive(join(toks), rng) ? 1 : 0;
  }
  MESSAGE("mutated programs that compiled: " << compiled);
}

// --- regressions: crashes and exceptions other than einjit::Error ----------------------------

TEST_CASE("gradients of statements without index variables (a subscript of constants)") {
  struct Row {
    const char* program;
    std::map<std::string, einjit::Shape> shapes;
  };
  const std::vector<Row> rows = {
      {"y := x[0]", {{"x", {3}}}},
      {"out[i] := x[i] * 2\nloss := out[0] * 2", {{"x", {4}}}},
      {"out[i] := x[i] * 2\nloss := out[0] * 2 + out[2] * x[1]", {{"x", {4}}}},
      {"(max) y := x[1] * x[2]", {{"x", {3}}}},
      {"y[i] := x[i, 1] * x[1, 0] where i in 0:2", {{"x", {2, 2}}}},
  };
  for (const Row& row : rows) {
    INFO(std::string(row.program));
    for (einjit::Device dev : {einjit::Device::reference(), einjit::Device::cpu()}) {
      einjit::GradCheckResult r = einjit::gradcheck(row.program, row.shapes, {}, {}, 3, 1e-6, dev);
      CHECK(r.passed);
      CHECK(!r.inputs.empty());
    }
  }
  // By hand: the gradient of y := x[0] is dy at element 0 only.
  einjit::Kernel g = einjit::compile("y := x[0]").gradient();
  einjit::Tensor dx = g.call({{"x", einjit::Tensor::zeros({3}, einjit::DType::f64)}}, {{"dy", 3}})[0];
  CHECK(dx.toVector() == std::vector<double>{3, 0, 0});
}

TEST_CASE("a default-constructed Kernel is an einjit::Error to use, not a crash") {
  einjit::Kernel k;
  const char* msg = "this Kernel is empty (default-constructed)";
  CHECK_THROWS_WITH_AS(k(einjit::Tensor::zeros({2})), doctest::Contains(msg), einjit::Error);
  CHECK_THROWS_WITH_AS(k.call({}, {}), doctest::Contains(msg), einjit::Error);
  CHECK_THROWS_WITH_AS(k.source(), doctest::Contains(msg), einjit::Error);
  CHECK_THROWS_WITH_AS(k.ranges(), doctest::Contains(msg), einjit::Error);
  CHECK_THROWS_WITH_AS(k.gradient(), doctest::Contains(msg), einjit::Error);
  CHECK_THROWS_WITH_AS(k.tensorArguments(), doctest::Contains(msg), einjit::Error);
  CHECK_THROWS_WITH_AS(k.explain({}), doctest::Contains(msg), einjit::Error);
  CHECK_THROWS_WITH_AS(k.program(), doctest::Contains(msg), einjit::Error);
}

TEST_CASE("an index solve that leaves 64-bit integers is an einjit::Error at the statement") {
  try {
    einjit::compile("y[k] := a[333333k] * b[666666666666666-k]").gradient();
    FAIL("no error");
  } catch (const einjit::Error& e) {
    CHECK(std::string(e.what()).find("cannot differentiate this statement: solving its index "
                                     "equations leaves 64-bit integers") != std::string::npos);
    CHECK(e.line() == 1);
    CHECK(e.column() == 1);
  }
}

TEST_CASE("schedules: a register tile with no second index, and empty ranges with huge extents") {
  // The tile's row index is chosen among indices that score above nothing; here the only
  // candidate (i) scores -1 (C reads along both i and j), which once compared the extent of
  // index -1 (an out-of-bounds read).
  auto k = einjit::compile("y[i,j] := A[k,j] * B[k,j] * C[i,k,j]");
  auto ref = einjit::compile("y[i,j] := A[k,j] * B[k,j] * C[i,k,j]",
                             {einjit::Device::reference(), einjit::DType::f64});
  einjit::Tensor A = einjit::Tensor::random({5, 32}, einjit::DType::f64, 1);
  einjit::Tensor B = einjit::Tensor::random({5, 32}, einjit::DType::f64, 2);
  einjit::Tensor C = einjit::Tensor::random({4, 5, 32}, einjit::DType::f64, 3);
  std::vector<double> got = einjit::Tensor(k(A, B, C)).toVector();
  std::vector<double> want = einjit::Tensor(ref(A, B, C)).toVector();
  REQUIRE(got.size() == want.size());
  for (std::size_t e = 0; e < got.size(); ++e) CHECK(got[e] == doctest::Approx(want[e]));
  // Two empty reduction ranges of -5e9 each: their product must not count as 2.5e19 iterations
  // (a signed overflow in the split-reduction planner); the sums are empty.
  auto empty = einjit::compile("y[i] := x[i] * (j + k) where j in 0:N, k in 0:N");
  einjit::Tensor x = einjit::Tensor::random({3}, einjit::DType::f64, 4);
  einjit::Tensor y = empty(x, -5000000000.0);
  CHECK(y.toVector() == std::vector<double>{0, 0, 0});
}

// --- limits: long chains are as deep as they are long ----------------------------------------

namespace {

// "x[i] OP x[i] OP ..." with `terms` terms (height terms + 1: an access is two nodes).
std::string chain(const std::string& head, int terms, const std::string& op,
                  const std::string& term) {
  std::string s = head;
  for (int t = 0; t < terms; ++t) s += (t ? op : "") + term;
  return s;
}

} // namespace

TEST_CASE("expressions deeper than the limit are an einjit::Error at the operator") {
  struct Row {
    std::string what, text, message;
  };
  const std::vector<Row> rows = {
      {"a 30,000-term sum", chain("y[i] := ", 30000, " + ", "x[i]"), "expression too long"},
      {"a 100,000-term subscript", chain("y[i] := x[", 100000, "+", "i") + "]",
       "expression too long"},
      {"a 10 MB statement", chain("y[i] := ", 1400000, " * ", "w[i]"), "expression too long"},
      {"a 512-term sum (one past the limit)", chain("y[i] := ", 512, " + ", "x[i]"),
       "expression too long: more than 512 operations deep"},
      {"a where bound", chain("y[i] := x[i] where i in 0:", 600, "+", "1"), "expression too long"},
      {"30,000 negations", std::string("y[i] := ") + std::string(30000, '-') + "x[i]",
       "nested too deeply"},
      {"30,000 parentheses", "y[i] := " + std::string(30000, '(') + "x[i]" +
                                 std::string(30000, ')'),
       "nested too deeply"},
  };
  for (const Row& row : rows) {
    INFO(row.what);
    try {
      einjit::compile(row.text);
      FAIL_CHECK("no error");
    } catch (const einjit::Error& e) {
      const std::string msg = e.what();
      CHECK(msg.find(row.message) != std::string::npos);
      CHECK(e.line() == 1);
      CHECK(e.column() > 8);
      // The diagnostic shows a window of the line, not all of it.
      CHECK(msg.size() < 2000);
    }
  }
  // The first operator past the limit gets the caret: "x[i]" is 2 nodes deep and each '+' adds
  // one, so the 511th '+' (column 14 + 7 * 510) makes the 513th level.
  try {
    einjit::compile(chain("y[i] := ", 600, " + ", "x[i]"));
    FAIL("no error");
  } catch (const einjit::Error& e) {
    CHECK(e.column() == 14 + 7 * 510);
  }
}

TEST_CASE("a chain at the expression limit runs, differentiates and agrees with the interpreter") {
  // 510 terms, the last 509 three nodes deep: height 512, the most the parser accepts. The
  // terms differ, so the simplifier cannot fold the sum.
  std::string sum = "y[i] := x[i, 0]";
  for (int t = 1; t < 510; ++t) sum += " + x[i, " + std::to_string(t % 7) + "] * " + std::to_string(t);
  std::string product = chain("y[i] := ", 255, " * ", "(x[i, 1] + 1)");
  for (const std::string& program : {sum, product}) {
    INFO(program.substr(0, 60));
    einjit::Tensor x = einjit::Tensor::random({3, 7}, einjit::DType::f64, 5);
    auto cpu = einjit::compile(program, {einjit::Device::cpu(), einjit::DType::f64});
    auto ref = einjit::compile(program, {einjit::Device::reference(), einjit::DType::f64});
    std::vector<double> got = einjit::Tensor(cpu(x)).toVector();
    std::vector<double> want = einjit::Tensor(ref(x)).toVector();
    REQUIRE(got.size() == want.size());
    for (std::size_t e = 0; e < got.size(); ++e)
      CHECK(got[e] == doctest::Approx(want[e]).epsilon(1e-12));
    einjit::GradCheckResult r = einjit::gradcheck(program, {{"x", {3, 7}}}, {}, {}, 2, 1e-6);
    CHECK(r.passed);
  }
}

TEST_CASE("a gradient past the size limit is an einjit::Error at the statement") {
  // A balanced product of n distinct reads (as deep as log2 n, within the height limit): each
  // read's partial derivative is the product of the other n - 1, about 2n^2 operations in all.
  std::function<std::string(int, int)> product = [&](int lo, int hi) -> std::string {
    if (hi - lo == 1) return "x[i, " + std::to_string(lo) + "]";
    const int mid = (lo + hi) / 2;
    return "(" + product(lo, mid) + " * " + product(mid, hi) + ")";
  };
  einjit::Kernel big = einjit::compile("y[i] := " + product(0, 1024));
  try {
    (void)big.gradient();
    FAIL("no error");
  } catch (const einjit::Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("cannot differentiate this statement: its gradient would have more than "
                   "1048576 operations (1024 reads") != std::string::npos);
    CHECK(e.line() == 1);
    CHECK(e.column() == 1);
  }
  // Below the limit it differentiates: one statement per read, each against finite
  // differences for a product short enough that its values are not all tiny.
  einjit::Kernel wide = einjit::compile("y[i] := " + product(0, 256));
  const std::string grad = wide.gradient().source();
  std::size_t statements = 0;
  for (std::size_t at = grad.find("dx[i, u]"); at != std::string::npos;
       at = grad.find("dx[i, u]", at + 1))
    ++statements;
  CHECK(statements == 256);
  einjit::GradCheckResult r = einjit::gradcheck("y[i] := " + product(0, 8), {{"x", {3, 8}}});
  CHECK_MESSAGE(r.passed, r.why);
}
