#include "runtime/RandomInputs.h"

#include <algorithm>
#include <random>

namespace einjit {

dsl::BoundProgram bindShapes(const dsl::Program& p, const std::map<std::string, Shape>& shapes,
                             const std::map<std::string, double>& scalars, DType dtype) {
  std::vector<dsl::ArgSpec> args;
  for (int id : p.arguments) {
    const dsl::TensorInfo& t = p.tensors[static_cast<std::size_t>(id)];
    auto it = shapes.find(t.name);
    if (it == shapes.end())
      dsl::fail(*p.source, t.firstUse, "missing shape for tensor argument '" + t.name + "'");
    args.push_back({t.readAsIndex ? DType::i64 : dtype, it->second});
  }
  std::vector<double> params;
  for (std::size_t i = 0; i < p.params.size(); ++i) {
    auto it = scalars.find(p.params[i].name);
    if (it == scalars.end())
      dsl::fail(*p.source, p.params[i].firstUse,
                "missing scalar argument '" + p.params[i].name + "'",
                dsl::parameterNotes(p, static_cast<int>(i)));
    params.push_back(it->second);
  }
  return dsl::bind(p, args, params, dtype);
}

Tensor randomIndices(const dsl::Program& p, const dsl::BoundProgram& b, int tensor,
                     const Shape& shape, std::uint64_t seed) {
  std::int64_t n = 1;
  for (std::int64_t e : shape) n *= e;
  auto [lo, hi] = dsl::gatherValueRange(p, b, tensor);
  std::vector<double> values(static_cast<std::size_t>(n), 0.0);
  if (lo <= hi && n > 0) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> pick(lo, hi);
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<double>(i == 0 || i == 2 ? lo : i == 1 ? hi : pick(rng));
    std::shuffle(values.begin(), values.end(), rng);
  }
  return Tensor::fromValues(shape, values, DType::i64);
}

} // namespace einjit
