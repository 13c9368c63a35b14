// What the packed GEMM path's tests (test_gemm.cpp, test_gemm_conv.cpp) share: the JIT checked
// against the reference interpreter in three views of its arguments (contiguous, strided,
// offset), on 1 and 2 oneTBB threads with the same bits, and whether `explain` shows the packed
// path.
#pragma once

#include "Compare.h"

#include "einjit/einjit.h"
#include "runtime/Jit.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#if EINJIT_HAVE_TBB
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#endif

namespace einjit::test {

// The rows' expected paths depend on the micro-kernel's MR x NR, which the vector width fixes
// (6 x 2 vectors with AVX2's 16 registers, 14 x 2 with AVX-512's 32): a row is written for
// 32-byte vectors, and where the path differs, for 64-byte ones too. CI runs this suite a second
// time with EINJIT_CPU_VECTOR_BYTES=64, so the AVX-512 tiles are checked on AVX2 machines.
inline bool wideVectors() { return einjit::runtime::hostTarget().vectorBytes >= 64; }

// A view of a copy of t that starts one row into a larger buffer (a nonzero offset).
inline Tensor offsetView(const Tensor& t) {
  Shape big = t.shape();
  big[0] += 1;
  Tensor b = Tensor::full(big, 5.0, t.dtype());
  Tensor v = b.slice(0, 1, big[0]);
  setValues(v, t);
  return v;
}

// Whether (and how many) statements take the packed path: a product ("packed GEMM") or an
// element-wise summand ("packed contraction").
inline bool takesPacked(const Kernel& k, const std::vector<Arg>& args,
                        std::size_t* count = nullptr) {
  const std::string text = k.explain(args);
  std::size_t n = 0;
  for (const char* what : {"packed GEMM", "packed contraction"})
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
      ++n;
  if (count) *count = n;
  return n > 0;
}

inline std::vector<unsigned char> bits(const Outputs& o) {
  std::vector<unsigned char> b;
  for (std::size_t i = 0; i < o.size(); ++i)
    for (double v : o[i].toVector()) {
      const auto* p = reinterpret_cast<const unsigned char*>(&v);
      b.insert(b.end(), p, p + sizeof v);
    }
  return b;
}

#if EINJIT_HAVE_TBB
// The bits of a call on one oneTBB thread: a plan made for two threads runs its tasks in turn.
inline std::vector<unsigned char> oneThreadBits(const Kernel& jit, const std::vector<Arg>& args) {
  std::vector<unsigned char> one;
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
  tbb::task_arena arena(1);
  arena.execute([&] { one = bits(jit.call(args)); });
  return one;
}
#endif

// The JIT on `args` (in a view of each kind) against the interpreter's `ref`, under 1 and 2
// threads, the two bit-identical.
inline void checkViews(const Kernel& jit, const std::map<std::string, Tensor>& in,
                const std::vector<std::string>& order, const Outputs& ref,
                const std::vector<std::string>& names, DType dt, bool packed) {
  for (int view = 0; view < 3; ++view) {
    CAPTURE(view);
    std::vector<Arg> args;
    for (const std::string& n : order) {
      const Tensor& t = in.at(n);
      args.push_back(view == 0 ? t.clone() : view == 1 ? strided(t) : offsetView(t));
    }
    CHECK(takesPacked(jit, args) == packed);
    const Outputs got = jit.call(args);
    checkSame(got, ref, names, dt);
#if EINJIT_HAVE_TBB
    CHECK(oneThreadBits(jit, args) == bits(got));
#endif
  }
}


// A table row's reference kernel and random inputs: the program itself or, with `wrt`, its
// gradient program with a random dy of the forward output's shape.
inline std::pair<Kernel, std::map<std::string, Tensor>> referenceRow(
    const std::string& program, const std::map<std::string, Shape>& shapes,
    const std::vector<std::string>& wrt, DType dt) {
  Kernel ref = einjit::compile(program, on(Device::reference(), dt));
  auto in = randomArgs(ref.program(), shapes, dt, 5);
  if (!wrt.empty()) {
    std::vector<Arg> args;
    for (const std::string& n : ref.tensorArguments()) args.push_back(in.at(n));
    const Outputs y = ref.call(args);
    ref = ref.gradient(wrt);
    in["dy"] = Tensor::random(y[std::size_t{0}].shape(), dt, 13);
  }
  return {std::move(ref), std::move(in)};
}

} // namespace einjit::test
