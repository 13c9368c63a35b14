// Where the backends must agree with the interpreter at the edges of the language: gathered
// offsets under pad/clamp/wrap read from i32 and i64 index tensors (mixed integer widths in
// generated helpers), and casts of non-finite and out-of-range values to integers (one meaning
// everywhere: toward zero, NaN to 0, saturating). The interpreter against hand-worked values,
// the CPU JIT against the interpreter, and the generated CUDA through NVRTC (no GPU needed; on
// a GPU, against the interpreter too).
#include "Compare.h"
#if EINJIT_HAVE_CUDA
#include "CudaCompile.h"
#endif

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace einjit::test;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// {program with MODE, shapes} — MODE is replaced by pad, clamp and wrap.
struct OffsetRow {
  std::string program;
  std::vector<std::pair<std::string, Shape>> shapes; // tensors in argument order
};

const std::vector<OffsetRow> kOffsetRows = {
    // The hidden corpus's program: an '=' output, two gathered offsets.
    {"out[x,y] = mat[MODE(x+oa[k]), MODE(y+ob[k])] * 10",
     {{"out", {4, 5}}, {"mat", {4, 5}}, {"oa", {6}}, {"ob", {6}}}},
    {"y[i] := v[MODE(i + o[k])] * w[k] where i in 0:size(v,0)",
     {{"v", {7}}, {"o", {6}}, {"w", {6}}}},
    {"y[i] := v[MODE(2i + o[k] - 1)] where i in 0:size(v,0)", {{"v", {7}}, {"o", {6}}}},
    {"y[i,j] := m[MODE(i + o[i,j]), j]", {{"m", {4, 5}}, {"o", {4, 5}}}},
    {"(max) y[i] := v[MODE(o[k] - i)] where i in 0:size(v,0)", {{"v", {7}}, {"o", {6}}}},
};

bool isOffset(const std::string& name) { return name[0] == 'o' && name != "out"; }

// Offsets far outside the tensors, both signs, edges and repeats.
Tensor offsets(const Shape& s, DType dt) {
  const std::vector<double> pool = {-9, -1, 0, 2, 3, 11, 0, -4, 6, 1};
  std::int64_t n = 1;
  for (std::int64_t e : s) n *= e;
  std::vector<double> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(pool[static_cast<std::size_t>(i) % pool.size()]);
  return Tensor::fromValues(s, v, dt);
}

// Unused in a build with neither the JIT nor CUDA.
[[maybe_unused]] std::vector<Arg> offsetArgs(const OffsetRow& row, DType offsetType,
                                             std::uint64_t seed) {
  std::vector<Arg> args;
  for (const auto& [name, shape] : row.shapes)
    args.push_back(isOffset(name) ? offsets(shape, offsetType)
                                  : Tensor::random(shape, DType::f64, ++seed));
  return args;
}

std::string withMode(std::string program, const std::string& mode) {
  for (std::size_t at; (at = program.find("MODE")) != std::string::npos;)
    program.replace(at, 4, mode);
  return program;
}

// Every row under each of pad, clamp and wrap, with i32 and i64 offsets, in f32 and f64.
template <class F>
void forEachOffsetCase(F&& f) {
  for (const OffsetRow& row : kOffsetRows)
    for (const char* mode : {"pad", "clamp", "wrap"})
      for (DType it : {DType::i32, DType::i64})
        for (DType dt : {DType::f32, DType::f64}) {
          const std::string program = withMode(row.program, mode);
          CAPTURE(program);
          CAPTURE(einjit::dtypeName(it));
          CAPTURE(einjit::dtypeName(dt));
          f(row, program, it, dt);
        }
}

} // namespace

TEST_CASE("backends: gathered offsets under clamp, by hand on the interpreter") {
  // out[x,y] = 10 * sum_k mat[clamp(x + oa[k]), clamp(y + ob[k])] with oa = {-3, 1},
  // ob = {5, 0} on a 2x2 mat: 10 * (mat[0, 1] + mat[min(x+1, 1), y]).
  for (DType it : {DType::i32, DType::i64}) {
    Kernel k = einjit::compile("out[x,y] = mat[clamp(x+oa[k]), clamp(y+ob[k])] * 10",
                               on(Device::reference()));
    Tensor out = Tensor::zeros({2, 2}, DType::f64);
    Tensor mat = Tensor::fromValues({2, 2}, {1, 2, 3, 4}, DType::f64);
    k(out, mat, Tensor::fromValues({2}, {-3, 1}, it), Tensor::fromValues({2}, {5, 0}, it));
    CHECK(out.toVector() ==
          std::vector<double>{10 * (2 + 3), 10 * (2 + 4), 10 * (2 + 3), 10 * (2 + 4)});
  }
  // wrap and pad of the same read: wrap(-3) = 1 and wrap(5) = 1; pad reads 0 outside.
  Tensor mat = Tensor::fromValues({2, 2}, {1, 2, 3, 4}, DType::f64);
  Tensor oa = Tensor::fromValues({2}, {-3, 1}, DType::i64);
  Tensor ob = Tensor::fromValues({2}, {5, 0}, DType::i64);
  Tensor w = Tensor::zeros({2, 2}, DType::f64), p = Tensor::zeros({2, 2}, DType::f64);
  einjit::compile("out[x,y] = mat[wrap(x+oa[k]), wrap(y+ob[k])]", on(Device::reference()))(w, mat,
                                                                                           oa, ob);
  einjit::compile("out[x,y] = mat[pad(x+oa[k]), pad(y+ob[k])]", on(Device::reference()))(p, mat, oa,
                                                                                         ob);
  // x=0: wrap(-3)=1, wrap(y+5)=wrap(y+1); x+1 wraps at x=1.
  CHECK(w.toVector() == std::vector<double>{4 + 3, 3 + 4, 2 + 1, 1 + 2});
  CHECK(p.toVector() == std::vector<double>{3, 4, 0, 0});
}

#if EINJIT_HAVE_LLVM
TEST_CASE("backends: gathered offsets under pad, clamp and wrap, CPU JIT against the interpreter") {
  int compared = 0;
  forEachOffsetCase([&](const OffsetRow& row, const std::string& program, DType it, DType dt) {
    compareCall(program, offsetArgs(row, it, 3), dt, false, Device::cpu());
    ++compared;
  });
  CHECK(compared == static_cast<int>(kOffsetRows.size()) * 12);
}
#endif

#if EINJIT_HAVE_CUDA
TEST_CASE("backends: gathered offsets under pad, clamp and wrap compile through NVRTC") {
  std::string why;
  REQUIRE_MESSAGE(einjit::runtime::nvrtc::available(&why), why);
  forEachOffsetCase([&](const OffsetRow& row, const std::string& program, DType it, DType dt) {
    Kernel k = einjit::compile(program, on(Device::cuda(), dt));
    std::map<std::string, Tensor> tensors;
    std::vector<Arg> args = offsetArgs(row, it, 3);
    for (std::size_t i = 0; i < args.size(); ++i)
      tensors[row.shapes[i].first] = converted(args[i].tensor(), dt);
    try {
      compileCall(k, tensors, {}, dt);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << std::string(e.what()));
    }
    if (einjit::cudaAvailable()) compareCall(program, args, dt, false, Device::cuda());
  });
}
#endif

namespace {

// x -> i32(x) and i64(x), worked out by hand: toward zero, NaN to 0, saturating.
struct CastRow {
  double x, i32, i64;
};

const double kI32Max = 2147483647.0, kI32Min = -2147483648.0;
const double kI64Max = 9223372036854775807.0, kI64Min = -9223372036854775808.0;

const std::vector<CastRow> kCasts = {
    {kNaN, 0, 0},
    {-kNaN, 0, 0},
    {kInf, kI32Max, kI64Max},
    {-kInf, kI32Min, kI64Min},
    {2.75, 2, 2},
    {-2.75, -2, -2},
    {-0.5, 0, 0},
    {3e9, kI32Max, 3e9},
    {-3e9, kI32Min, -3e9},
    {1e30, kI32Max, kI64Max},
    {-1e30, kI32Min, kI64Min},
};

void checkCasts(Device device, DType dt) {
  std::vector<double> xs;
  for (const CastRow& r : kCasts) xs.push_back(r.x);
  Tensor x = Tensor::fromValues({static_cast<std::int64_t>(xs.size())}, xs, dt);
  Kernel k = einjit::compile("a[i] := i32(x[i]); b[i] := i64(x[i]); c[i] := i64(sqrt(x[i] - 5))",
                             on(device, dt));
  Outputs r = k(x);
  std::vector<double> a = r["a"].toVector(), b = r["b"].toVector(), c = r["c"].toVector();
  for (std::size_t i = 0; i < kCasts.size(); ++i) {
    CAPTURE(kCasts[i].x);
    // Values beyond f32's 24 bits are compared as the output dtype stores them.
    auto stored = [&](double v) { return dt == DType::f32 ? double(float(v)) : v; };
    double xi = dt == DType::f32 ? double(float(kCasts[i].x)) : kCasts[i].x;
    CHECK(a[i] == stored(kCasts[i].i32));
    CHECK(b[i] == stored(kCasts[i].i64));
    // sqrt of a negative number is NaN: 0, the rest truncates.
    double s = std::sqrt(xi - 5);
    double want = std::isnan(s) ? 0 : std::isinf(s) ? kI64Max : std::trunc(s);
    CHECK(c[i] == stored(want));
  }
}

} // namespace

TEST_CASE("backends: casts of NaN, infinities and out-of-range values to integers, interpreter") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(einjit::dtypeName(dt));
    checkCasts(Device::reference(), dt);
  }
}

#if EINJIT_HAVE_LLVM
TEST_CASE("backends: casts of NaN, infinities and out-of-range values to integers, CPU JIT") {
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(einjit::dtypeName(dt));
    checkCasts(Device::cpu(), dt);
  }
}
#endif

#if EINJIT_HAVE_CUDA
TEST_CASE("backends: casts to integers in CUDA go through one saturating helper (NVRTC)") {
  std::string why;
  REQUIRE_MESSAGE(einjit::runtime::nvrtc::available(&why), why);
  for (DType dt : {DType::f32, DType::f64}) {
    Kernel k = einjit::compile("a[i] := i32(x[i]); b[i] := i64(x[i]) + i64(sqrt(x[i]))",
                               on(Device::cuda(), dt));
    std::map<std::string, Tensor> tensors{{"x", Tensor::random({9}, dt, 1)}};
    auto cp = cudaFor(k, tensors, {}, dt, 90);
    CHECK(cp.cuda.source.find("ej_f2i(") != std::string::npos);
    CHECK(cp.cuda.source.find("ej_f2ll(") != std::string::npos);
    CHECK(cp.cuda.source.find("__double2ll_rz") == std::string::npos);
    CHECK(cp.cuda.source.find("__float2int_rz") == std::string::npos);
    compileCall(k, tensors, {}, dt);
    if (einjit::cudaAvailable()) checkCasts(Device::cuda(), dt);
  }
}
#endif
