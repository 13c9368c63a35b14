// The reference interpreter as a backend: Device::reference, and the CPU in builds without
// LLVM. Nothing is prepared; each call evaluates the bound program (codegen/Interpreter.h).
#include "runtime/Backend.h"

namespace einjit::runtime {

namespace {

class InterpreterBackend final : public Backend {
public:
  explicit InterpreterBackend(std::string explainText) : explainText_(std::move(explainText)) {}
  void prepare(const BoundCall&) const override {}
  void run(const BoundCall& call, std::vector<Tensor>& all) const override {
    codegen::interpret(call.program, call.bound, hostBuffers(all));
  }
  std::string explain(const BoundCall&, bool) const override { return explainText_; }
  std::size_t cachedVariants() const override { return 0; }
  void limitVariants(std::size_t) override {}

private:
  std::string explainText_;
};

} // namespace

std::unique_ptr<Backend> makeInterpreterBackend(std::string explainText) {
  return std::make_unique<InterpreterBackend>(std::move(explainText));
}

} // namespace einjit::runtime
