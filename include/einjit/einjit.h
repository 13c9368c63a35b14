#pragma once
// einjit: an einsum-style tensor language compiled at run time.
//
//   auto conv = einjit::compile("y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]");
//   einjit::Tensor y = conv(x, k);
//
// compile() parses and checks the program once (syntax, names, ranges); calling the Kernel
// binds the arguments' shapes, checks them, allocates the ':=' outputs and runs. Arguments
// are passed by position, tensors first in order of first appearance in the program text
// (inputs, and outputs written with '=' or '+='), then scalar parameters in order of first
// appearance; or by name with Kernel::call. Every mistake is an einjit::Error with a caret
// under the offending part of the program, and a call that fails its checks writes nothing.
#include "einjit/Error.h"
#include "einjit/Tensor.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace einjit {

namespace dsl {
struct Program;
}

struct Device {
  enum class Kind : std::uint8_t { reference, cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;
  static Device reference() { return {Kind::reference, 0}; } // the interpreter
  static Device cpu() {
    return {Kind::cpu, 0};
  } // the LLVM JIT (the interpreter in builds without LLVM)
  static Device cuda(int index = 0) { return {Kind::cuda, index}; }
  std::string name() const;
};

struct Options {
  Device device = Device::cpu();
  // Output dtype for programs that read no floating-point tensor.
  DType defaultDType = DType::f32;
  // Shown in diagnostics as the file name.
  std::string name = "<program>";
  // Bindings (shapes, strides, dtypes, integer subscript parameters) a kernel keeps compiled;
  // beyond it the least recently used is dropped (and compiled again if called again).
  // 0: $EINJIT_KERNEL_VARIANTS, else 64.
  std::size_t maxVariants = 0;
  // Every assigned tensor stays readable by name from the call's Outputs (the language's rule:
  // docs/LANGUAGE.md). Off, only the outputs and the arguments the program writes are: an
  // intermediate (a tensor a later statement reads) then need not exist in full, and the CPU
  // computes runs of row statements in blocks of rows with their intermediates in per-task
  // scratch (docs/CPU_SCHEDULES.md, "Row blocks"): set it off on a layer whose intermediates
  // are not read. Kernel::gradient() inherits it.
  bool keepIntermediates = true;
  // Tensors the forward saves for its gradient (docs/LANGUAGE.md, "Gradients"): each stays
  // readable by name from the call's Outputs (written in full, also without keepIntermediates),
  // and gradient() takes it as an input instead of recomputing it from the program's inputs
  // (softmax: {"m", "z"}; layernorm: {"mu", "var"}). Each must be the value of one ':='
  // statement that no other statement writes. Not inherited by the gradient kernel.
  std::vector<std::string> saved;
};

// The compiled-code caches (docs/RELIABILITY.md): each kernel keeps Options::maxVariants
// bindings; the process keeps memoryModules compiled modules per backend (least recently used
// dropped first; code stays loaded while a kernel holds it); the disk cache ($EINJIT_CACHE_DIR,
// else ~/.cache/einjit; "off" disables it) keeps at most diskBytes of entries, deleting the least
// recently used. Defaults: $EINJIT_CACHE_MEMORY (256) and $EINJIT_CACHE_DISK_MB (1024).
struct CacheLimits {
  std::size_t memoryModules = 256;
  std::uint64_t diskBytes = std::uint64_t{1} << 30;
};
CacheLimits cacheLimits();
// Applies at once (the caches are trimmed); an einjit::Error when a limit is 0.
void setCacheLimits(const CacheLimits& limits);

struct CacheStatus {
  std::string directory; // the disk cache's directory; empty when it is off
  std::string problem;   // why that directory is not used (refused, or no keyed hash in the build)
  std::size_t memoryModules = 0; // compiled modules held process-wide (CPU and CUDA)
  std::int64_t diskEntries = 0;
  std::uint64_t diskBytes = 0;
  std::int64_t diskHits = 0, diskRejected = 0, diskEvicted = 0; // this process's
};
CacheStatus cacheStatus();

// Drops the in-memory caches: the process-wide modules and every kernel's bindings (code that
// a running call uses stays loaded until it returns), and gives back the freed tensor blocks
// kept for reuse (1 MiB or more each, 256 MiB at most). With disk, also deletes every entry of
// the disk cache (its secret key stays) and returns how many.
std::int64_t clearCaches(bool disk = false);

// One positional argument: a tensor or a scalar parameter.
class Arg {
public:
  Arg(Tensor t) : v_(std::move(t)) {}
  Arg(double v) : v_(v) {}
  Arg(float v) : v_(static_cast<double>(v)) {}
  Arg(int v) : v_(static_cast<double>(v)) {}
  Arg(long v) : v_(static_cast<double>(v)) {}
  Arg(long long v) : v_(static_cast<double>(v)) {}
  bool isTensor() const { return std::holds_alternative<Tensor>(v_); }
  const Tensor& tensor() const { return std::get<Tensor>(v_); }
  double scalar() const { return std::get<double>(v_); }

private:
  std::variant<Tensor, double> v_;
};

// What a call returns: the program's outputs (assigned tensors no later statement reads), in
// statement order, plus every assigned tensor by name.
class Outputs {
public:
  Outputs() = default;
  Outputs(std::vector<Tensor> outputs, std::vector<std::string> names,
          std::map<std::string, Tensor, std::less<>> all)
      : outputs_(std::move(outputs)), outputNames_(std::move(names)), all_(std::move(all)) {}
  std::size_t size() const { return outputs_.size(); }
  const Tensor& operator[](std::size_t i) const;
  // An output or a written argument by name; any assigned tensor with
  // Options::keepIntermediates.
  const Tensor& operator[](std::string_view name) const;
  const std::vector<std::string>& names() const { return outputNames_; }
  std::vector<Tensor>::const_iterator begin() const { return outputs_.begin(); }
  std::vector<Tensor>::const_iterator end() const { return outputs_.end(); }
  // The single output; an error when the program has several.
  operator Tensor() const;
  template <std::size_t N>
  std::array<Tensor, N> take() const {
    checkCount(N);
    std::array<Tensor, N> a;
    for (std::size_t i = 0; i < N; ++i) a[i] = outputs_[i];
    return a;
  }

private:
  void checkCount(std::size_t n) const;
  std::vector<Tensor> outputs_;
  std::vector<std::string> outputNames_;
  std::map<std::string, Tensor, std::less<>> all_;
};

class Kernel {
public:
  template <class... A>
  Outputs operator()(A&&... args) const {
    return call(std::vector<Arg>{Arg(std::forward<A>(args))...});
  }
  Outputs call(const std::vector<Arg>& args) const;
  Outputs call(const std::map<std::string, Tensor>& tensors,
               const std::map<std::string, double>& scalars = {}) const;

  // The gradient program with respect to the named tensor arguments (all floating-point
  // inputs when empty), compiled like any program. It takes the gradients of this program's
  // outputs (named d<Y>; see gradientInputs()) and the forward inputs, and the tensors of
  // Options::saved that it reads (pass them from the forward call's Outputs); it returns d<X>
  // for each requested X, in order.
  Kernel gradient(const std::vector<std::string>& wrt = {}) const;
  // For a gradient kernel: the output-gradient names it takes (one per forward output), the
  // gradients it returns, the contributions it computes as scatters (a gather's gradient),
  // and those it computes as masked gathers (a sum over the whole forward domain per element,
  // where the index solver found no exact bounds; see docs/LANGUAGE.md).
  std::vector<std::string> gradientInputs() const;
  std::vector<std::string> gradientOutputs() const;
  std::vector<std::string> scatters() const;
  std::vector<std::string> maskedGathers() const;

  // Tensor arguments, then scalar parameters, in the order positional calls take them.
  std::vector<std::string> tensorArguments() const;
  std::vector<std::string> scalarArguments() const;
  std::vector<std::string> outputNames() const;
  // Bindings this kernel holds compiled on its device (at most Options::maxVariants).
  std::size_t cachedVariants() const;
  std::string source() const; // the canonical program text
  std::string ranges() const; // "i in LO:HI" per index of each statement, symbolic
  const Options& options() const;
  const dsl::Program& program() const; // the checked program (internal representation)

  // How a call with these arguments runs on the kernel's device: each statement's schedule and
  // the loop-nest IR, specialised to the arguments' shapes and strides; with llvmIR, also the
  // optimized LLVM IR. Nothing is written.
  std::string explain(const std::vector<Arg>& args, bool llvmIR = false) const;

  struct Impl; // opaque

private:
  friend Kernel compile(const std::string&, const Options&);
  const Impl& impl() const; // an einjit::Error for a default-constructed Kernel
  std::pair<std::vector<Tensor>, std::vector<double>>
  splitArguments(const std::vector<Arg>& args) const;
  std::shared_ptr<const Impl> impl_;
};

// Parses and checks the program (no device is needed yet; a call on Device::cuda() without a
// GPU is an error then).
Kernel compile(const std::string& source, const Options& options = {});

// Waits for the work queued on the device (calls with CUDA device tensors return before their
// kernels finish); nothing to do on the CPU.
void synchronize(Device device);

// Whether a CUDA device is usable; `why` says what is missing (no driver, no device, a build
// without CUDA).
bool cudaAvailable(std::string* why = nullptr);

// Checks a gradient against central finite differences in float64: random f64 inputs of the
// given shapes (index tensors get indices over the whole valid range of the dimension they
// gather into, both ends and a repeat included), a random gradient for each output,
// loss = sum <dY, Y>. One entry per differentiated input. The forward and gradient programs
// run on `device`.
// A check that can fail: an element where one of the two values is finite and the other is
// not (NaN, or an infinity of the other sign) fails the input, so does an input whose values
// are NaN in both everywhere; a check that compares nothing (no input to differentiate, empty
// inputs, empty outputs) is not passed, and `why` says so.
struct GradCheckResult {
  std::vector<std::string> inputs;      // X names
  std::vector<double> maxRelativeError; // max |fd - analytic| / max(1, max |fd|) where both are
                                        // finite; +inf for a failed element as above
  std::vector<std::int64_t> compared;   // elements compared per input
  bool passed = false;                  // something compared, every error <= tolerance
  std::string why;                      // when not passed: the first failure, or "nothing to
                                        // compare: ..."
};
GradCheckResult gradcheck(const std::string& source, const std::map<std::string, Shape>& shapes,
                          const std::map<std::string, double>& scalars = {},
                          const std::vector<std::string>& wrt = {}, std::uint64_t seed = 1,
                          double tolerance = 1e-6, Device device = Device::cpu());

} // namespace einjit
