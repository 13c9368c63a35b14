// Bad inputs through the API, one table row each: huge shapes, zero-size dimensions, NaN and
// infinities, non-integer subscript parameters, aliasing and interleaved views, very long and
// deeply nested programs, non-UTF-8 bytes and embedded NUL. Each row ends in one of two ways,
// on the interpreter and on the CPU device alike: an einjit::Error whose message is checked
// (with a caret where the mistake has a place in the program) and after which every tensor
// the row passed in holds what it held before; or a result equal to values worked out by hand.
// Anything else (another exception, a crash, a sanitizer report, a wrong value) fails.
// Huge arguments that are only read (a gather from a 2^32-element table) are here too: the
// interpreter, which also gives the CPU JIT's errors for failed checks, reads them in place.
#include "Watch.h"
#include "einjit/einjit.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using einjit::Arg;
using einjit::Device;
using einjit::DType;
using einjit::Kernel;
using einjit::Shape;
using einjit::Tensor;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

using einjit::test::Watch;

// Memory that outlives the row's call, for views of caller memory (stride-0 views of one
// element stand for huge tensors without allocating them).
struct Buffers {
  std::vector<std::shared_ptr<std::vector<float>>> held;
  float* floats(std::size_t n, float value) {
    held.push_back(std::make_shared<std::vector<float>>(n, value));
    return held.back()->data();
  }
};

struct Row {
  const char* kind;
  std::string program;
  std::function<std::vector<Arg>(Watch&, Buffers&)> args;
  // Either the error's message (a substring) and whether it has a place in the program...
  const char* error;
  bool caret;
  // ...or the result: this output's shape and values (NaN matches NaN only).
  const char* output;
  Shape shape;
  std::vector<double> values;
};

Tensor vals(const Shape& s, const std::vector<double>& v, DType d = DType::f32) {
  return Tensor::fromValues(s, v, d);
}
Tensor ints(const Shape& s, const std::vector<double>& v) { return vals(s, v, DType::i64); }
Tensor rnd(const Shape& s) { return Tensor::random(s, DType::f32, 7); }

// A rank-1 view of `extent` elements that all are one float holding `value`.
Tensor broadcast(Buffers& b, std::int64_t extent, float value) {
  return Tensor::view(b.floats(1, value), DType::f32, {extent}, {0});
}

std::string repeated(int n, const std::string& first, const std::string& next) {
  std::string s = first;
  for (int i = 1; i < n; ++i) s += next;
  return s;
}

// t1[i] := x[i] + x[i]; t2[i] := t1[i] + x[i]; ... : statement k holds (k + 1) x.
std::string chain(int statements) {
  std::string s = "t1[i] := x[i] + x[i]\n";
  for (int k = 2; k <= statements; ++k)
    s += "t" + std::to_string(k) + "[i] := t" + std::to_string(k - 1) + "[i] + x[i]\n";
  return s;
}

using Args = std::vector<Arg>;

// clang-format off
std::vector<Row> rows() {
  const std::int64_t big = std::int64_t{1} << 32;
  return {
    // --- huge shapes -----------------------------------------------------------------------
    // An output of 2^64 elements: its element count overflows; an error, not a bad_alloc.
    {"':=' output whose element count overflows", "y[i,j] := a[i] * b[j]",
     [=](Watch&, Buffers& b) { return Args{broadcast(b, big, 1), broadcast(b, big, 2)}; },
     "too large", false, nullptr, {}, {}},
#if !defined(__SANITIZE_ADDRESS__)
    // A ':=' output too large to allocate: the allocation's failure is an einjit::Error.
    // Not under AddressSanitizer, whose operator new ends the process on a failed allocation
    // instead of throwing std::bad_alloc (allocator_may_return_null does not change that).
    {"':=' output too large to allocate", "y[i,j] := a[i] * b[j]",
     [=](Watch&, Buffers& b) {
       return Args{broadcast(b, std::int64_t{1} << 24, 1), broadcast(b, std::int64_t{1} << 24, 2)};
     },
     "cannot allocate 1125899906842624 bytes for a 16777216x16777216 f32 tensor", false, nullptr,
     {}, {}},
#endif
    // A table of 2^32 elements (16 GiB as floats, here one float seen through stride 0) that
    // a gather only indexes: read in place, never copied, on every device and on the CPU
    // JIT's error path.
    {"a gather from a 2^32-element table", "y[i] := E[tok[i]]",
     [=](Watch&, Buffers& b) {
       return Args{broadcast(b, big, 3.5f), ints({3}, {0, 7, 4294967295.0})};
     },
     nullptr, false, "y", {3}, {3.5, 3.5, 3.5}},
    {"a gather past the end of a 2^32-element table", "y[i] = E[tok[i]]",
     [=](Watch& w, Buffers& b) {
       return Args{w(Tensor::full({2}, 7.0)), broadcast(b, big, 3.5f),
                   w(ints({2}, {0, 4294967296.0}))};
     },
     "gather index 4294967296 is out of bounds for 'E' (extent 4294967296)", true, nullptr, {},
     {}},

    // --- zero-size dimensions --------------------------------------------------------------
    {"a sum over an empty dimension is 0", "y[i] := x[i,j] * w[j]",
     [](Watch&, Buffers&) { return Args{Tensor::zeros({3, 0}), Tensor::zeros({0})}; },
     nullptr, false, "y", {3}, {0, 0, 0}},
    {"a max over an empty dimension is -inf", "(max) m[i] := x[i,j]",
     [](Watch&, Buffers&) { return Args{Tensor::zeros({2, 0})}; },
     nullptr, false, "m", {2}, {-kInf, -kInf}},
    {"a product over an empty dimension is 1", "(*) p[i] := x[i,j]",
     [](Watch&, Buffers&) { return Args{Tensor::zeros({2, 0})}; },
     nullptr, false, "p", {2}, {1, 1}},
    {"an output with an empty dimension", "y[i,j] := x[i,j] * 2",
     [](Watch&, Buffers&) { return Args{Tensor::zeros({0, 4})}; },
     nullptr, false, "y", {0, 4}, {}},
    {"gathers through an empty index tensor", "y[i] := E[tok[i]]",
     [](Watch&, Buffers&) { return Args{Tensor::zeros({0}), Tensor::zeros({0}, DType::i64)}; },
     nullptr, false, "y", {0}, {}},
    {"a gather into an empty table", "y[i] = E[tok[i]]",
     [](Watch& w, Buffers&) {
       return Args{w(Tensor::full({2}, 7.0)), w(Tensor::zeros({0})), w(ints({2}, {0, 0}))};
     },
     "gather index 0 is out of bounds for 'E' (extent 0)", true, nullptr, {}, {}},
    {"a shifted read of an empty tensor", "y[i] = x[i+1] where i in 0:2",
     [](Watch& w, Buffers&) { return Args{w(Tensor::full({2}, 7.0)), w(Tensor::zeros({0}))}; },
     "subscript 'i+1' goes out of bounds", true, nullptr, {}, {}},

    // --- NaN and infinities ----------------------------------------------------------------
    {"NaN and infinities pass through arithmetic", "y[i] := x[i] * 2 + 1",
     [](Watch&, Buffers&) { return Args{vals({4}, {kNaN, kInf, -kInf, 1})}; },
     nullptr, false, "y", {4}, {kNaN, kInf, -kInf, 3}},
    {"inf - inf in a sum is NaN", "s := x[i]",
     [](Watch&, Buffers&) { return Args{vals({3}, {kInf, 1, -kInf})}; },
     nullptr, false, "s", {}, {kNaN}},
    {"NaN never replaces a max's accumulator", "(max) m := x[i]",
     [](Watch&, Buffers&) { return Args{vals({4}, {1, kNaN, 3, kNaN})}; },
     nullptr, false, "m", {}, {3}},
    {"a min over NaN only is its identity", "(min) m := x[i]",
     [](Watch&, Buffers&) { return Args{vals({2}, {kNaN, kNaN})}; },
     nullptr, false, "m", {}, {kInf}},
    {"NaN cast to an integer is 0, infinities saturate", "y[i] := i32(x[i])",
     [](Watch&, Buffers&) { return Args{vals({4}, {kNaN, kInf, -kInf, -2.7})}; },
     nullptr, false, "y", {4}, {0, 2147483647.0, -2147483648.0, -2}},
    {"a NaN scalar parameter used as a value", "y[i] := x[i] * alpha",
     [](Watch&, Buffers&) { return Args{vals({2}, {1, 2}), kNaN}; },
     nullptr, false, "y", {2}, {kNaN, kNaN}},

    // --- non-integer subscript parameters --------------------------------------------------
    {"an infinite subscript parameter", "y[i] = x[i+N]",
     [](Watch& w, Buffers&) { return Args{w(Tensor::full({2}, 7.0)), w(rnd({4})), kInf}; },
     "parameter 'N' is used in a subscript or a range and must be an integer", true, nullptr, {},
     {}},
    {"a subscript parameter past 64 bits", "y[i] = x[i+N]",
     [](Watch& w, Buffers&) { return Args{w(Tensor::full({2}, 7.0)), w(rnd({4})), 1e300}; },
     "parameter 'N' is used in a subscript or a range and must be an integer", true, nullptr, {},
     {}},
    {"a fractional range bound", "y[i] := x[pad(i)] where i in 0:N",
     [](Watch& w, Buffers&) { return Args{w(rnd({3})), 2.5}; },
     "parameter 'N' is used in a subscript or a range and must be an integer", true, nullptr, {},
     {}},
    {"an integral parameter given as a double", "y[i] := x[i+N] where i in 0:2",
     [](Watch&, Buffers&) { return Args{vals({4}, {1, 2, 3, 4}), 2.0}; },
     nullptr, false, "y", {2}, {3, 4}},

    // --- aliasing and interleaved views ----------------------------------------------------
    // The even and odd elements of one buffer share no element, but their byte ranges
    // interleave: a written tensor must not overlap another argument's range at all.
    {"written tensor interleaved with an input", "y[i] = x[i] * 2",
     [](Watch& w, Buffers&) {
       Tensor buf = w(vals({6}, {1, 2, 3, 4, 5, 6}));
       return Args{buf.slice(0, 0, 6, 2), buf.slice(0, 1, 6, 2)};
     },
     "output 'y' shares memory with argument 'x'", true, nullptr, {}, {}},
    {"written tensor whose own elements overlap", "y[i,j] = x[i,j]",
     [](Watch& w, Buffers& b) {
       Tensor y = w(Tensor::view(b.floats(4, 7), DType::f32, {2, 3}, {1, 1}));
       return Args{y, rnd({2, 3})};
     },
     "output 'y'", true, nullptr, {}, {}},
    // Reads may alias each other: nothing is written through them.
    {"two inputs interleaved in one buffer", "y[i] := a[i] * b[i]",
     [](Watch&, Buffers&) {
       Tensor buf = vals({6}, {1, 2, 3, 4, 5, 6});
       return Args{buf.slice(0, 0, 6, 2), buf.slice(0, 1, 6, 2)};
     },
     nullptr, false, "y", {3}, {2, 12, 30}},
    {"one tensor passed as two inputs", "y[i] := a[i] - b[i] + a[i] * b[i]",
     [](Watch&, Buffers&) {
       Tensor x = vals({3}, {1, 2, 3});
       return Args{x, x};
     },
     nullptr, false, "y", {3}, {1, 4, 9}},
    {"an input read through its transpose", "y[i,j] := a[i,j] + b[i,j]",
     [](Watch&, Buffers&) {
       Tensor x = vals({2, 2}, {1, 2, 3, 4});
       return Args{x, x.transpose(0, 1)};
     },
     nullptr, false, "y", {2, 2}, {2, 5, 5, 8}},

    // --- very long and deeply nested programs ----------------------------------------------
    {"a sum of 30,000 reads", "y[i] := " + repeated(30000, "x[i]", " + x[i]"),
     [](Watch& w, Buffers&) { return Args{w(rnd({2}))}; },
     "expression too long", true, nullptr, {}, {}},
    {"a subscript of 100,000 terms", "y[i] := x[" + repeated(100000, "i", "+0") + "]",
     [](Watch& w, Buffers&) { return Args{w(rnd({2}))}; },
     "expression too long", true, nullptr, {}, {}},
    {"2,000 nested parentheses", "y[i] := " + repeated(2000, "(", "(") + "x[i]" +
     repeated(2000, ")", ")"),
     [](Watch& w, Buffers&) { return Args{w(rnd({2}))}; },
     "expression nested too deeply", true, nullptr, {}, {}},
    {"a 10 MB comment", "y[i] := x[i] * 2  #" + std::string(10 << 20, 'c'),
     [](Watch&, Buffers&) { return Args{vals({2}, {1, 2})}; },
     nullptr, false, "y", {2}, {2, 4}},
    // The statement limit (docs/LANGUAGE.md, "Limits"): 1,024 compile and run, 1,025 do not.
    {"a chain of 1,024 statements (the limit)", chain(1024),
     [](Watch&, Buffers&) { return Args{vals({2}, {1, -0.5})}; },
     nullptr, false, "t1024", {2}, {1025, -512.5}},
    {"a chain of 1,025 statements", chain(1025),
     [](Watch& w, Buffers&) { return Args{w(vals({2}, {1, -0.5}))}; },
     "too many statements: a program may have at most 1024 (this is statement 1025)", true,
     nullptr, {}, {}},

    // --- non-UTF-8 bytes and embedded NUL --------------------------------------------------
    {"a byte that is not UTF-8", "y[i] := x[i] * \xff",
     [](Watch& w, Buffers&) { return Args{w(rnd({2}))}; },
     "unexpected character '\\xff'", true, nullptr, {}, {}},
    {"a UTF-8 letter in a name", "y[i] := x\xc3\xa9[i]",
     [](Watch& w, Buffers&) { return Args{w(rnd({2}))}; },
     "unexpected character '\\xc3'", true, nullptr, {}, {}},
    {"an embedded NUL", std::string("y[i] := x[i]\0 * 2", 17),
     [](Watch& w, Buffers&) { return Args{w(rnd({2}))}; },
     "unexpected character '\\x00'", true, nullptr, {}, {}},
    {"invalid UTF-8 and NUL inside a comment", std::string("y[i] := x[i] * 2 # \xff\xfe\0 \xc3", 24),
     [](Watch&, Buffers&) { return Args{vals({2}, {1, 2})}; },
     nullptr, false, "y", {2}, {2, 4}},
  };
}
// clang-format on

void checkValues(const Tensor& got, const Shape& shape, const std::vector<double>& want) {
  REQUIRE(got.shape() == shape);
  const std::vector<double> g = got.toVector();
  REQUIRE(g.size() == want.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(g[i]));
    } else if (std::isinf(want[i])) {
      CHECK(g[i] == want[i]);
    } else {
      CHECK(g[i] == doctest::Approx(want[i]).epsilon(1e-6));
      CHECK(!std::isnan(g[i]));
    }
  }
}

void runRow(const Row& row, Device device) {
  Watch watch;
  Buffers buffers;
  try {
    einjit::Options options;
    options.device = device;
    Kernel k = einjit::compile(row.program, options);
    einjit::Outputs out = k.call(row.args(watch, buffers));
    if (row.error) {
      FAIL_CHECK("the call succeeded; expected: " << row.error);
      return;
    }
    checkValues(out[std::string_view(row.output)], row.shape, row.values);
  } catch (const einjit::Error& e) {
    const std::string what = e.what();
    CAPTURE(what.substr(0, 400));
    if (!row.error) {
      FAIL_CHECK("expected a result");
      return;
    }
    CHECK(what.find(row.error) != std::string::npos);
    if (row.caret) {
      CHECK(e.line() > 0);
      CHECK(what.find("\n     | ") != std::string::npos);
      CHECK(what.find('^') != std::string::npos);
    }
    for (std::size_t t = 0; t < watch.tensors.size(); ++t) {
      CAPTURE(t);
      const std::vector<double> now = watch.tensors[t].toVector();
      REQUIRE(now.size() == watch.before[t].size());
      for (std::size_t i = 0; i < now.size(); ++i)
        CHECK((now[i] == watch.before[t][i] ||
               (std::isnan(now[i]) && std::isnan(watch.before[t][i]))));
    }
  } catch (const std::exception& e) {
    FAIL_CHECK("threw something other than einjit::Error: " << std::string(e.what()));
  }
}

} // namespace

TEST_CASE("bad inputs: einjit::Error or a correct result, nothing written on error") {
  const std::vector<Row> table = rows();
  for (const Row& row : table) {
    const std::string kind = row.kind;
    CAPTURE(kind);
    for (Device device : {Device::reference(), Device::cpu()}) {
      const std::string on = device.name();
      CAPTURE(on);
      runRow(row, device);
    }
  }
}

TEST_CASE("bad inputs: the statement limit's caret, and gradient programs count too") {
  try {
    einjit::compile(chain(1025) + "t1026[i] := t1025[i] + x[i]\n");
    FAIL("a program of 1,026 statements compiled");
  } catch (const einjit::Error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    // At statement 1,025 (line 1,025), the whole statement underlined.
    CHECK(e.line() == 1025);
    CHECK(e.column() == 1);
    CHECK(what.find("1025 | t1025[i] := t1024[i] + x[i]\n") != std::string::npos);
    CHECK(what.find("\n     | ^" + std::string(26, '~') + "\n") != std::string::npos);
    CHECK(what.find("split the program into several kernels") != std::string::npos);
  }
  // A gradient program is a program: the gradient of a chain of n statements has 2n - 1.
  const Kernel fine = einjit::compile(chain(512));
  CHECK(fine.gradient({"x"}).source().size() > 0);
  const Kernel big = einjit::compile(chain(513));
  CHECK_THROWS_WITH_AS(big.gradient({"x"}), doctest::Contains("too many statements"),
                       einjit::Error);
}

TEST_CASE("bad inputs: tensors of impossible shapes are einjit::Errors") {
  const std::int64_t big = std::int64_t{1} << 40;
  CHECK_THROWS_WITH_AS(Tensor::empty({big, big}), doctest::Contains("too large"), einjit::Error);
  CHECK_THROWS_WITH_AS(Tensor::zeros({3, -1}), doctest::Contains("negative"), einjit::Error);
  float one = 1;
  CHECK_THROWS_AS(Tensor::view(&one, DType::f32, {big, big}, {big, 1}), einjit::Error);
}
