#pragma once
// CUDA C for one call and its NVRTC compile, without a GPU: shared by the CUDA tests.
#include "Compare.h"

#include "dsl/Binding.h"
#include "runtime/CallLayout.h"
#include "runtime/CudaBackend.h"
#include "runtime/Nvrtc.h"

#include <doctest/doctest.h>

namespace einjit::test {

// The lowered program and CUDA C of one call, for code architecture `arch` (no GPU needed).
inline einjit::runtime::CudaProgram cudaFor(const Kernel& k,
                                            const std::map<std::string, Tensor>& tensors,
                                            const std::map<std::string, double>& scalars,
                                            DType dtype, int arch) {
  const auto& p = k.program();
  std::vector<einjit::dsl::ArgSpec> specs;
  std::vector<std::vector<std::int64_t>> strides;
  for (int id : p.arguments) {
    const Tensor& t = tensors.at(p.tensors[static_cast<std::size_t>(id)].name);
    specs.push_back({t.dtype(), t.shape()});
    strides.push_back(t.strides());
  }
  std::vector<double> sc;
  for (const auto& prm : p.params) sc.push_back(scalars.at(prm.name));
  auto bound = einjit::dsl::bind(p, specs, sc, dtype);
  // Fresh tensors are 16-byte aligned on the device (asynchronous tile copies where possible).
  return einjit::runtime::generateCuda(p, bound, einjit::runtime::callStrides(p, bound, strides),
                                       einjit::codegen::Aligned16(p.tensors.size(), true), arch);
}

// Generates the CUDA C of one call and compiles it with NVRTC for sm_90; bf16 contractions
// differ by architecture (wgmma on sm_90a, mma.sync tiles before), so bf16 for sm_80 too.
inline void compileCall(const Kernel& k, const std::map<std::string, Tensor>& tensors,
                        const std::map<std::string, double>& scalars, DType dtype) {
  for (int arch : dtype == DType::bf16 ? std::vector<int>{80, 90} : std::vector<int>{90}) {
    auto cp = cudaFor(k, tensors, scalars, dtype, arch);
    REQUIRE(!cp.cuda.kernels.empty() == !cp.lowered.funcs.empty());
    auto c = einjit::runtime::nvrtc::compile(cp.cuda.source, arch, cp.cuda.archSpecific);
    CHECK(c.cubin);
    CHECK(!c.image.empty());
    if (cp.cuda.archSpecific) CHECK(c.target == "sm_90a");
  }
}

} // namespace einjit::test
