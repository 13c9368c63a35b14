#include "runtime/CallLayout.h"

#include "einjit/Tensor.h"

namespace einjit::runtime {

using namespace einjit::dsl;

codegen::Strides callStrides(const Program& p, const BoundProgram& b,
                             const std::vector<std::vector<std::int64_t>>& argStrides) {
  codegen::Strides s(p.tensors.size());
  for (std::size_t i = 0; i < p.arguments.size(); ++i)
    s[static_cast<std::size_t>(p.arguments[i])] = argStrides[i];
  for (std::size_t t = 0; t < p.tensors.size(); ++t)
    if (!p.tensors[t].isArgument) s[t] = contiguousStrides(b.tensors[t].shape);
  return s;
}

std::string bindingSignature(const Program& p, const BoundProgram& b,
                             const codegen::Strides& strides) {
  std::string sig = std::string(dtypeName(b.dtype)) + ";";
  for (std::size_t t = 0; t < p.tensors.size(); ++t) {
    sig += dtypeName(b.tensors[t].dtype);
    for (std::int64_t e : b.tensors[t].shape) sig += "," + std::to_string(e);
    sig += "/";
    for (std::int64_t e : strides[t]) sig += std::to_string(e) + ",";
    sig += ";";
  }
  for (std::size_t i = 0; i < p.params.size(); ++i)
    if (p.params[i].usedInIndex) sig += p.params[i].name + "=" + std::to_string(b.params[i]) + ";";
  return sig;
}

} // namespace einjit::runtime
