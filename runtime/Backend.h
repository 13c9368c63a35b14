#pragma once
// How a Kernel computes a call on its device. Kernel.cpp keeps everything the user sees before
// a call runs (argument mapping, binding, shape, dtype and aliasing checks, allocation of the
// outputs) and hands a bound call to the Kernel's one Backend, chosen by Options::device:
//   CpuBackend.cpp          the LLVM JIT and oneTBB (builds with LLVM)
//   CudaBackend.cpp         NVRTC and the CUDA driver (builds with the CUDA toolkit)
//   InterpreterBackend.cpp  the reference interpreter (Device::reference; the CPU without LLVM)
// Each backend prepares code per binding (memoised per Kernel, at most Options::maxVariants
// bindings), runs calls and explains what it runs.
#include "codegen/Interpreter.h"
#include "codegen/Lower.h"
#include "dsl/Binding.h"
#include "einjit/einjit.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace einjit::runtime {

// One call, bound and checked: the program, its binding and the tensor arguments as the caller
// passed them (Program::arguments order).
struct BoundCall {
  const dsl::Program& program;
  const dsl::BoundProgram& bound;
  const std::vector<Tensor>& arguments;
};

class Backend {
public:
  virtual ~Backend() = default;
  // Compiles the code for the call's binding, or finds it in this backend's memo.
  virtual void prepare(const BoundCall& call) const = 0;
  // Computes the call. `all` holds every tensor of the program by id: the arguments, then the
  // outputs and intermediates the caller allocated (on the arguments' device). A checked access
  // that fails reruns the call through the interpreter, which throws the error with its caret
  // (the caller's tensors as before) or computes the result.
  virtual void run(const BoundCall& call, std::vector<Tensor>& all) const = 0;
  // Kernel::explain's text for the call.
  virtual std::string explain(const BoundCall& call, bool llvmIR) const = 0;
  // Bindings prepared and kept; and the bound on them (Options::maxVariants).
  virtual std::size_t cachedVariants() const = 0;
  virtual void limitVariants(std::size_t n) = 0;
};

// The backend for options.device in this build (a CUDA device without CUDA support gets one
// whose calls fail with an einjit::Error).
std::unique_ptr<Backend> makeBackend(const Options& options);
std::unique_ptr<Backend> makeInterpreterBackend(std::string explainText);
#if EINJIT_HAVE_LLVM
// keepIntermediates: Options::keepIntermediates (every intermediate written in full).
std::unique_ptr<Backend> makeCpuBackend(bool keepIntermediates);
#endif
#if EINJIT_HAVE_CUDA
std::unique_ptr<Backend> makeCudaBackend(const Device& device);
#endif

// --- shared by the backends ---

// Every tensor as the interpreter's host buffer.
std::vector<codegen::HostBuffer> hostBuffers(const std::vector<Tensor>& all);
// The strides of every tensor of the call (CallLayout.h).
codegen::Strides stridesOf(const BoundCall& call);
// explain's line on run-time checks (Lower.h), or nothing.
std::string checkNote(const codegen::LoweredProgram& l);

} // namespace einjit::runtime
