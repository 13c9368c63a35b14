// compile() and Kernel: argument order, calls by position and by name, outputs, views and
// strided outputs, repeat calls, options.
#include "einjit/einjit.h"

#include <doctest/doctest.h>

using einjit::DType;
using einjit::Tensor;

namespace {

std::vector<double> values(const Tensor& t) { return t.toVector(); }

} // namespace

TEST_CASE("arguments: tensors in order of first appearance, then scalars") {
  auto k = einjit::compile("y[i] += alpha * w[j] * x[i,j] + beta; z[i] := y[i] * x[i,0] * N");
  CHECK(k.tensorArguments() == std::vector<std::string>{"y", "w", "x"});
  CHECK(k.scalarArguments() == std::vector<std::string>{"alpha", "beta", "N"});
  CHECK(k.outputNames() == std::vector<std::string>{"z"});
}

TEST_CASE("positional and by-name calls agree") {
  auto k = einjit::compile("y[i] := a * x[i,j] * w[j]");
  Tensor x = Tensor::fromValues({2, 3}, {1, 2, 3, 4, 5, 6}, DType::f64);
  Tensor w = Tensor::fromValues({3}, {1, 0, -1}, DType::f64);
  Tensor y1 = k(x, w, 2.0);
  Tensor y2 = k.call({{"x", x}, {"w", w}}, {{"a", 2.0}});
  CHECK(values(y1) == std::vector<double>{-4, -4});
  CHECK(values(y2) == values(y1));
  CHECK_THROWS_WITH_AS(k.call({{"x", x}, {"q", w}}, {{"a", 2.0}}), doctest::Contains("'q' is not"),
                       einjit::Error);
  CHECK_THROWS_WITH_AS(k.call({{"x", x}}, {{"a", 2.0}}),
                       doctest::Contains("missing tensor argument 'w'"), einjit::Error);
  CHECK_THROWS_WITH_AS(k.call({{"x", x}, {"w", w}}),
                       doctest::Contains("missing scalar argument 'a'"), einjit::Error);
}

TEST_CASE("outputs: program outputs in order, every assigned tensor by name") {
  einjit::Options keep;
  keep.keepIntermediates = true;
  auto k = einjit::compile("t[i] := x[i] * 2\nu[i] := t[i] + 1\nv[i] := x[i] - 1", keep);
  Tensor x = Tensor::fromValues({2}, {1, 2}, DType::f64);
  einjit::Outputs r = k(x);
  REQUIRE(r.size() == 2);
  CHECK(r.names() == std::vector<std::string>{"u", "v"});
  CHECK(values(r[0]) == std::vector<double>{3, 5});
  CHECK(values(r["v"]) == std::vector<double>{0, 1});
  CHECK(values(r["t"]) == std::vector<double>{2, 4}); // an intermediate
  auto [u, v] = r.take<2>();
  CHECK(values(u) == std::vector<double>{3, 5});
  CHECK(values(v) == std::vector<double>{0, 1});
  CHECK_THROWS_AS((void)static_cast<Tensor>(r), einjit::Error); // two outputs
  CHECK_THROWS_AS((void)r.take<1>(), einjit::Error);
  CHECK_THROWS_AS((void)r["nope"], einjit::Error);
  CHECK_THROWS_AS((void)r[5], einjit::Error);
  // By default every assigned tensor is readable by name (the language's rule); without
  // keepIntermediates an intermediate is not, on every device.
  for (einjit::Device d : {einjit::Device::cpu(), einjit::Device::reference()}) {
    einjit::Options o;
    o.device = d;
    const char* three = "t[i] := x[i] * 2\nu[i] := t[i] + 1\nv[i] := x[i] - 1";
    einjit::Outputs all = einjit::compile(three, o)(x);
    CHECK(values(all["t"]) == std::vector<double>{2, 4});
    o.keepIntermediates = false;
    einjit::Outputs q = einjit::compile(three, o)(x);
    CHECK(values(q["u"]) == std::vector<double>{3, 5});
    CHECK_THROWS_WITH_AS((void)q["t"],
                         "'t' is an intermediate (a later statement reads it), not an output, and "
                         "is not kept after the call: compile with Options::keepIntermediates = "
                         "true to read it",
                         einjit::Error);
    CHECK_THROWS_WITH_AS((void)q["nope"], "no tensor named 'nope' was computed (computed: u, v)",
                         einjit::Error);
  }
  // A gradient kernel inherits the setting.
  einjit::Kernel sq = einjit::compile("t[i] := x[i] * x[i]\ny := t[i]");
  CHECK(sq.options().keepIntermediates);
  CHECK(sq.gradient().options().keepIntermediates);
  einjit::Options lean;
  lean.keepIntermediates = false;
  CHECK_FALSE(einjit::compile("t[i] := x[i] * x[i]\ny := t[i]", lean).gradient().options().keepIntermediates);
}

TEST_CASE("strided and transposed views are read in place") {
  auto mm = einjit::compile("C[i,k] := A[i,j] * B[j,k]");
  Tensor a = Tensor::random({3, 4}, DType::f64, 1);
  Tensor b = Tensor::random({5, 4}, DType::f64, 2); // used as its transpose
  Tensor bt = b.transpose(0, 1);
  CHECK_FALSE(bt.isContiguous());
  Tensor c = mm(a, bt);
  Tensor c2 = mm(a, bt.contiguous());
  // The two layouts may get different schedules (summation orders): equal to rounding.
  const auto v = values(c), v2 = values(c2);
  REQUIRE(v.size() == v2.size());
  for (std::size_t e = 0; e < v.size(); ++e) CHECK(v[e] == doctest::Approx(v2[e]).epsilon(1e-14));
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t k = 0; k < 5; ++k) {
      double acc = 0;
      for (std::int64_t j = 0; j < 4; ++j) acc += a.get({i, j}) * b.get({k, j});
      CHECK(c.get({i, k}) == doctest::Approx(acc).epsilon(1e-14));
    }
}

TEST_CASE("'=' writes through a strided output view and leaves other elements alone") {
  auto k = einjit::compile("y[i] = x[i] * 10");
  std::vector<double> buffer(8, -1.0);
  Tensor y = Tensor::view(buffer.data(), {4}, {2}); // every second element
  Tensor x = Tensor::fromValues({4}, {1, 2, 3, 4}, DType::f64);
  k(y, x);
  CHECK(buffer == std::vector<double>{10, -1, 20, -1, 30, -1, 40, -1});
}

TEST_CASE("a kernel called twice gives identical results; kernels are shared handles") {
  auto k = einjit::compile("(max) y[i] := x[i,j] * w[j]");
  Tensor x = Tensor::random({7, 33}, DType::f32, 3), w = Tensor::random({33}, DType::f32, 4);
  Tensor y1 = k(x, w);
  einjit::Kernel copy = k;
  Tensor y2 = copy(x, w);
  CHECK(values(y1) == values(y2));
  CHECK(y1.data() != y2.data()); // fresh outputs each call
  CHECK(y1.dtype() == DType::f32);
}

TEST_CASE("source() and ranges() show the canonical program") {
  auto k = einjit::compile("y[i]:=x[i+k]*w[k]");
  CHECK(k.source() == "y[i] := x[i + k] * w[k]");
  CHECK(k.ranges() ==
        "y[i] := x[i + k] * w[k]\n  i in 0:size(x,0) - size(w,0) + 1\n  k in 0:size(w,0)\n");
}

TEST_CASE("devices: reference and cpu run; cuda without a GPU is a clear error at the call") {
  Tensor x = Tensor::fromValues({3}, {1, 2, 3}, DType::f64);
  for (auto dev : {einjit::Device::reference(), einjit::Device::cpu()}) {
    einjit::Options o;
    o.device = dev;
    Tensor y = einjit::compile("y[i] := x[i] * x[i]", o)(x);
    CHECK(values(y) == std::vector<double>{1, 4, 9});
  }
  einjit::Options o;
  o.device = einjit::Device::cuda(0);
  std::string why;
  if (!einjit::cudaAvailable(&why)) {
    CHECK(!why.empty());
    // compile() only parses and checks; the call needs the device.
    einjit::Kernel k = einjit::compile("y[i] := x[i]", o);
    CHECK_THROWS_WITH_AS(k(x), doctest::Contains("not available"), einjit::Error);
  }
  o.device = einjit::Device::cuda(99);
  if (einjit::cudaAvailable())
    CHECK_THROWS_WITH_AS(einjit::compile("y[i] := x[i]", o)(x),
                         doctest::Contains("CUDA device 99 does not exist"), einjit::Error);
}

TEST_CASE("defaultDType sets the output dtype of programs that read no float tensor") {
  einjit::Options o;
  o.defaultDType = DType::f64;
  Tensor y = einjit::compile("y[i] := i * 0.5 where i in 0:4", o)();
  CHECK(y.dtype() == DType::f64);
  CHECK(values(y) == std::vector<double>{0, 0.5, 1, 1.5});
  Tensor tok = Tensor::fromValues({3}, {2, 0, 1}, DType::i64);
  Tensor z = einjit::compile("z[i] := tok[i] * 2")(tok); // integers read as values
  CHECK(z.dtype() == DType::f32);
  CHECK(values(z) == std::vector<double>{4, 0, 2});
}

TEST_CASE("the options' name is used as the file name in diagnostics") {
  einjit::Options o;
  o.name = "layer.ein";
  CHECK_THROWS_WITH_AS(einjit::compile("y[i] := q(x[i])", o), doctest::Contains("layer.ein:1:9:"),
                       einjit::Error);
}

TEST_CASE("a tensor used only in size() is passed for its shape, of any rank") {
  auto k = einjit::compile("y[i] := x[i] * size(z, 1) where i in 0:size(x, 0)");
  CHECK(k.tensorArguments() == std::vector<std::string>{"x", "z"});
  Tensor x = Tensor::fromValues({2}, {1, 2}, DType::f64);
  Tensor y = k(x, Tensor::zeros({4, 5, 6}, DType::f64));
  CHECK(values(y) == std::vector<double>{5, 10});
  CHECK_THROWS_WITH_AS(k(x, Tensor::zeros({4}, DType::f64)),
                       doctest::Contains("dimension 1 is out of range for 'z'"), einjit::Error);
}
