#pragma once
// The CPU backend: one call's binding -> lowered loop nests (codegen/Lower.h) -> JIT-compiled
// functions (Jit.h) -> run, parallel loops split among oneTBB workers.
//
// Kernels are specialised per binding: dtypes, shapes and strides of every tensor and the
// values of integer parameters used in subscripts. Floating-point parameters are read at run
// time, so changing a learning rate does not recompile.
#include "codegen/Lower.h"
#include "dsl/Binding.h"
#include "runtime/Jit.h"

#include <map>
#include <mutex>

namespace einjit::runtime {

struct PreparedCpu {
  codegen::LoweredProgram lowered;
  std::shared_ptr<const CompiledCode> code;
  // The program checks accesses at run time and writes tensors the caller passed: those are
  // computed in dense scratch copies and copied back only when the call succeeds.
  bool scratch = false;
};

// The strides each tensor will have during the call: arguments as passed, ':=' outputs dense.
codegen::Strides callStrides(const dsl::Program& p, const dsl::BoundProgram& b,
                             const std::vector<std::vector<std::int64_t>>& argStrides);

// Text that identifies a binding: equal texts lower to the same code.
std::string bindingSignature(const dsl::Program& p, const dsl::BoundProgram& b,
                             const codegen::Strides& strides);

std::shared_ptr<const PreparedCpu> prepareCpu(const dsl::Program& p, const dsl::BoundProgram& b,
                                              codegen::Strides strides, bool keepIR = false);

// Runs every function in order (zero fills first). Returns the status: 0, or nonzero when a
// checked access went out of bounds (the results are then meaningless).
int executeCpu(const PreparedCpu& prep, const std::vector<void*>& buffers,
               const std::vector<double>& params, const std::vector<std::int64_t>& zeroBytes);

// Per-Kernel memo of prepared bindings, thread-safe.
class PreparedCache {
public:
  std::shared_ptr<const PreparedCpu>
  get(const std::string& signature,
      const std::function<std::shared_ptr<const PreparedCpu>()>& make);

private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const PreparedCpu>> map_;
};

} // namespace einjit::runtime
