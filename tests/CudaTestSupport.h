#pragma once
// Helpers shared by the CUDA tests (test_cuda_compile, test_cuda_schedule, test_cuda): argument
// lists and maps, the tile tables' inputs, views placed off alignment.
#include "Compare.h"
#include "CudaTables.h"
#include "SplitReduction.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace einjit::test {

inline std::vector<Arg> args(const std::vector<Tensor>& ts) { return {ts.begin(), ts.end()}; }

inline std::map<std::string, Tensor> byName(const Kernel& k, const std::vector<Arg>& args) {
  std::map<std::string, Tensor> m;
  auto names = k.tensorArguments();
  for (std::size_t i = 0; i < names.size(); ++i) m[names[i]] = args[i].tensor();
  return m;
}

inline std::map<std::string, double> scalarsOf(const Kernel& k, const std::vector<Arg>& args) {
  std::map<std::string, double> m;
  auto names = k.scalarArguments();
  const std::size_t nt = k.tensorArguments().size();
  for (std::size_t i = 0; i < names.size(); ++i) m[names[i]] = args[nt + i].scalar();
  return m;
}

// Scatters: an embedding's gradient (repeated tokens) and a non-injective affine '+='.
inline const char* const kEmbeddingGrad = "dE[tok[b], d] += dy[b, d]";
inline const char* const kOverlapAdd = "y[2i+a] += x[i] * w[a]";

inline int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The input gradient of a convolution case: the kernel and its arguments (dy, k, x).
inline std::pair<Kernel, std::vector<Tensor>> dgradOf(const ConvCase& c, DType dt) {
  Kernel fwd = einjit::compile(c.program, on(Device::cuda(), dt));
  Tensor x = Tensor::random(c.x, dt, 1), k = Tensor::random(c.k, dt, 2);
  const Tensor y = einjit::compile(c.program, on(Device::reference(), dt))(x, k);
  return {fwd.gradient({"x"}), {Tensor::random(y.shape(), dt, 3), k, x}};
}

// A copy of t in a buffer whose rows are `pad` elements longer, starting `first` elements in:
// (8, 1) gives a pointer that is not 16-byte aligned, (1, 0) a row stride that is not a whole
// number of 16-byte vectors. The tiles then stage through registers. On the device with
// `device`.
inline Tensor placed(const Tensor& t, std::int64_t pad, std::int64_t first, bool device = false) {
  Shape big = t.shape();
  big.back() += pad;
  Tensor b = Tensor::full(big, 5.0, t.dtype());
  Tensor v = b.slice(t.rank() - 1, first, first + t.shape().back());
  setValues(v, t);
  if (device) return b.cuda().slice(t.rank() - 1, first, first + t.shape().back());
  return v;
}

inline std::vector<Tensor> randomInputs(const Kernel& k, const std::map<std::string, Shape>& shapes,
                                        DType dt) {
  std::vector<Tensor> in;
  std::uint64_t seed = 40;
  for (int id : k.program().arguments)
    in.push_back(Tensor::random(shapes.at(k.program().tensors[static_cast<std::size_t>(id)].name),
                                dt, ++seed));
  return in;
}

inline std::vector<Arg> convertedArgs(const std::vector<Arg>& args, DType dt) {
  std::vector<Arg> out;
  for (const Arg& a : args) out.push_back(a.isTensor() ? Arg(converted(a.tensor(), dt)) : a);
  return out;
}

inline int largeSplitCases() {
  int n = 0;
  for (const SplitCase& c : splitCases()) n += c.large ? 1 : 0;
  return n;
}

} // namespace einjit::test
