#include "runtime/Backend.h"

#include "runtime/CallLayout.h"

namespace einjit::runtime {

namespace {

// A CUDA device in a build without CUDA support: compiling is allowed, every call fails.
class UnavailableBackend final : public Backend {
public:
  explicit UnavailableBackend(const Device& device) : device_(device) {}
  void prepare(const BoundCall&) const override { fail(); }
  void run(const BoundCall&, std::vector<Tensor>&) const override { fail(); }
  std::string explain(const BoundCall&, bool) const override {
    throw Error("this build of einjit has no CUDA support");
  }
  std::size_t cachedVariants() const override { return 0; }
  void limitVariants(std::size_t) override {}

private:
  [[noreturn]] void fail() const {
    throw Error("device " + device_.name() +
                " is not available: this build of einjit has no CUDA "
                "support (configure with the CUDA toolkit present)");
  }
  Device device_;
};

} // namespace

std::unique_ptr<Backend> makeBackend(const Options& options) {
  const Device& device = options.device;
  switch (device.kind) {
  case Device::Kind::reference: break;
  case Device::Kind::cpu:
#if EINJIT_HAVE_LLVM
    return makeCpuBackend(options.keepIntermediates);
#else
    return makeInterpreterBackend(
        "this build has no LLVM JIT: the reference interpreter runs the checked program\n");
#endif
  case Device::Kind::cuda:
#if EINJIT_HAVE_CUDA
    return makeCudaBackend(device);
#else
    return std::make_unique<UnavailableBackend>(device);
#endif
  }
  return makeInterpreterBackend("device " + device.name() +
                                ": the reference interpreter runs the checked program directly\n");
}

std::vector<codegen::HostBuffer> hostBuffers(const std::vector<Tensor>& all) {
  std::vector<codegen::HostBuffer> bufs;
  for (const Tensor& t : all) bufs.push_back({t.dtype(), t.data(), t.shape(), t.strides()});
  return bufs;
}

codegen::Strides stridesOf(const BoundCall& call) {
  std::vector<std::vector<std::int64_t>> argStrides;
  for (const Tensor& t : call.arguments) argStrides.push_back(t.strides());
  return callStrides(call.program, call.bound, argStrides);
}

std::string checkNote(const codegen::LoweredProgram& l) {
  if (!l.checked) return "";
  std::string s = "# some accesses are checked at run time (gathers or unproven subscripts)";
  if (l.prechecked)
    s += ", by " + std::to_string(l.checks) +
         " function(s) run first: written arguments are used in place";
  return s + "\n";
}

} // namespace einjit::runtime
