#pragma once
// Split reductions (codegen/Schedule.h) on any device: the statement table (scalar sums, dot
// products, max/min/product, '+=' and '=' into a scalar, few rows with a long reduction, several
// reduction indices), compared with the interpreter at sizes 1 to 10^6+3 under the device's own
// split policy and under a forced one that splits tiny reductions too; the first extreme's
// gradient among many ties; bit-identical reruns. Shared by test_reduce (CPU), test_cuda_compile
// and test_cuda.
#include "Compare.h"

#include "codegen/Schedule.h"

#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace einjit::test {

// Every kernel compiled while it lives uses `policy` for its split reductions.
class ForcedSplit {
public:
  explicit ForcedSplit(const codegen::SplitPolicy& policy) {
    codegen::overrideSplitPolicy(&policy);
  }
  ~ForcedSplit() { codegen::overrideSplitPolicy(nullptr); }
  ForcedSplit(const ForcedSplit&) = delete;
  ForcedSplit& operator=(const ForcedSplit&) = delete;
};

// Splits every reduction of up to 4096 output elements into at most 5 chunks (uneven ones: 7
// iterations become 4 chunks of 2, 2, 2, 1); a GPU also takes single chunks (a block each).
inline codegen::SplitPolicy tinySplitPolicy(bool gpu) {
  codegen::SplitPolicy p;
  p.maxOutputs = 4096;
  p.minChunk = 1;
  p.maxChunks = 5;
  p.maxPartials = 1 << 20;
  p.minChunks = gpu ? 1 : 2;
  return p;
}

inline std::vector<unsigned char> bitsOf(const Tensor& t) {
  Tensor h = t.device() == einjit::DeviceKind::cuda ? t.cpu() : t;
  std::vector<unsigned char> b(static_cast<std::size_t>(h.numel()) * einjit::dtypeSize(h.dtype()));
  if (!b.empty()) std::memcpy(b.data(), h.data(), b.size());
  return b;
}

struct SplitCase {
  const char* program;
  // Arguments for size n, in the program's argument order.
  std::function<std::vector<Arg>(std::int64_t n)> args;
  bool large = true; // also at n = 10^6 + 3
};

inline Tensor vec(std::int64_t n, std::uint64_t seed) {
  return Tensor::random({n}, DType::f64, seed);
}

// Values in {0, 1, 2, 3}: many ties of the maximum and of the minimum.
inline Tensor ties(std::int64_t n, std::uint64_t seed) {
  return Tensor::randomInt({n}, 0, 4, DType::i64, seed).to(DType::f64);
}

inline const std::vector<SplitCase>& splitCases() {
  static const std::vector<SplitCase> cases = {
      {"s := x[i]", [](std::int64_t n) { return std::vector<Arg>{vec(n, 1)}; }},
      {"s := x[i] * y[i]",
       [](std::int64_t n) {
         return std::vector<Arg>{vec(n, 2), vec(n, 3)};
       }},
      {"(max) m := x[i]", [](std::int64_t n) { return std::vector<Arg>{vec(n, 4)}; }},
      {"(min) m := x[i]", [](std::int64_t n) { return std::vector<Arg>{vec(n, 5)}; }},
      {"(max) m := x[i]", [](std::int64_t n) { return std::vector<Arg>{ties(n, 6)}; }},
      // Products of 10^6 such factors lose more than f32's tolerance on any schedule.
      {"(*) p := 1 + x[i] / 4096", [](std::int64_t n) { return std::vector<Arg>{vec(n, 7)}; },
       false},
      // A product through zeros: exactly 0 whatever the chunking.
      {"(*) p := x[i]", [](std::int64_t n) { return std::vector<Arg>{ties(n, 8)}; }},
      {"s += x[i]",
       [](std::int64_t n) {
         return std::vector<Arg>{Tensor::full({}, 2.5, DType::f64), vec(n, 9)};
       }},
      {"(max) m += x[i] * 2",
       [](std::int64_t n) {
         return std::vector<Arg>{Tensor::full({}, 0.75, DType::f64), vec(n, 10)};
       }},
      {"s = x[i] * y[i]",
       [](std::int64_t n) {
         return std::vector<Arg>{Tensor::full({}, 7.0, DType::f64), vec(n, 11), vec(n, 12)};
       }},
      {"s := A[i,j] ^ 2",
       [](std::int64_t n) {
         return std::vector<Arg>{Tensor::random({2, n}, DType::f64, 13)};
       }},
      {"y[i] := A[i,j]",
       [](std::int64_t n) {
         return std::vector<Arg>{Tensor::random({3, n}, DType::f64, 14)};
       }},
      {"(min) y[i] := A[i,j] * 2 - B[i,j]",
       [](std::int64_t n) {
         return std::vector<Arg>{Tensor::random({2, n}, DType::f64, 15),
                                 Tensor::random({2, n}, DType::f64, 16)};
       }},
      {"y[k,i] += A[i,j] * B[j,k]",
       [](std::int64_t n) {
         return std::vector<Arg>{Tensor::random({3, 2}, DType::f64, 17),
                                 Tensor::random({2, n}, DType::f64, 18),
                                 Tensor::random({n, 3}, DType::f64, 19)};
       }},
      {"s := T[i,j,k] * w[k] + T[i,j,k] * x[j]",
       [](std::int64_t n) {
         return std::vector<Arg>{Tensor::random({3, n, 2}, DType::f64, 20),
                                 Tensor::random({2}, DType::f64, 21), vec(n, 22)};
       },
       false},
      {"s := A[j,i] * v[i] where j in 0:2",
       [](std::int64_t n) {
         return std::vector<Arg>{Tensor::random({3, n}, DType::f64, 23), vec(n, 24)};
       }},
  };
  return cases;
}

// Whether the kernel's schedule for these arguments splits some statement.
inline bool splits(const Kernel& k, const std::vector<Arg>& args) {
  return k.explain(args).find("split reduction") != std::string::npos;
}

// Every case at every size, f64 and f32, against the interpreter; returns how many calls ran a
// split reduction (so that a caller can check the split path was taken).
inline int compareSplitCases(Device device, const std::vector<std::int64_t>& sizes) {
  int split = 0;
  for (const SplitCase& c : splitCases())
    for (std::int64_t n : sizes) {
      if (n > 100000 && !c.large) continue;
      const std::vector<Arg> args = c.args(n);
      for (DType dt : {DType::f64, DType::f32}) {
        INFO(c.program << " n=" << n << " " << einjit::dtypeName(dt));
        try {
          compareCall(c.program, args, dt, false, device);
          std::vector<Arg> conv;
          for (const Arg& a : args) conv.push_back(converted(a.tensor(), dt));
          if (splits(einjit::compile(c.program, on(device, dt)), conv)) ++split;
        } catch (const std::exception& e) {
          FAIL_CHECK("threw: " << std::string(e.what()));
        }
      }
    }
  return split;
}

// Forward and gradient of (max)/(min) over values with many ties: the gradient program's
// helper statements ((min) first_m := ...) are split reductions too, and the whole gradient
// must land on the first extreme in iteration order, as in the interpreter.
inline void checkFirstExtremeGradient(Device device, std::int64_t n, DType dt) {
  for (const char* program : {"(max) m := x[i]", "(min) m := x[i]"}) {
    INFO(program << " n=" << n << " " << einjit::dtypeName(dt));
    const bool isMax = std::string(program).find("max") != std::string::npos;
    Tensor x = ties(n, static_cast<std::uint64_t>(n)).to(dt);
    std::vector<double> xv = x.toVector();
    std::size_t first = 0;
    for (std::size_t i = 1; i < xv.size(); ++i)
      if (isMax ? xv[i] > xv[first] : xv[i] < xv[first]) first = i;
    Kernel ref = einjit::compile(program, on(Device::reference(), dt));
    Kernel g = einjit::compile(ref.gradient().source(), on(device, dt));
    Tensor xd = device.kind == Device::Kind::cuda ? x.cuda() : x.clone();
    Tensor dx = g.call({{"x", xd}}, {{"dm", 1.5}})["dx"];
    Tensor want = ref.gradient().call({{"x", x}}, {{"dm", 1.5}})["dx"];
    CHECK(bitsOf(dx) == bitsOf(want));
    std::vector<double> got = dx.toVector();
    REQUIRE(got.size() == xv.size());
    CHECK(got[first] == 1.5);
    double rest = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (i != first) rest += std::fabs(got[i]);
    CHECK(rest == 0);
  }
}

// Calls a kernel twice, each time on fresh copies of the arguments ('+=' and '=' write their
// first one), and returns the first result's bits, checking that the second is the same.
inline std::vector<unsigned char> rerunBits(const Kernel& k, const std::vector<Arg>& args) {
  auto once = [&] {
    std::vector<Arg> fresh;
    for (const Arg& a : args) {
      const Tensor& t = a.tensor();
      fresh.push_back(t.device() == einjit::DeviceKind::cuda ? t.cpu().cuda(t.deviceIndex())
                                                             : t.clone());
    }
    return bitsOf(k.call(fresh)[std::size_t{0}]);
  };
  std::vector<unsigned char> first = once();
  CHECK(first.size() > 0);
  CHECK(once() == first);
  return first;
}

} // namespace einjit::test
