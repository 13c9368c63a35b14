// compile() and Kernel: check once, then bind, validate and allocate per call; the device's
// Backend (Backend.h) computes it.
#include "einjit/einjit.h"

#include "dsl/Binding.h"
#include "dsl/Parser.h"
#include "dsl/Printer.h"
#include "dsl/Program.h"
#include "grad/Differentiate.h"

#include <algorithm>

#include "runtime/Backend.h"
#include "runtime/Caches.h"
#if EINJIT_HAVE_CUDA
#include "runtime/CudaDriver.h"
#endif

namespace einjit {

std::string Device::name() const {
  switch (kind) {
  case Kind::reference: return "reference";
  case Kind::cpu: return "cpu";
  case Kind::cuda: return "cuda:" + std::to_string(index);
  }
  return "?";
}

struct Kernel::Impl {
  dsl::Program program;
  Options options;
  std::vector<std::string> gradientInputs, gradientOutputs, scatters, masked; // gradient kernels
  std::unique_ptr<runtime::Backend> backend; // for options.device, with compiled code per binding
  // The backend for the options, its binding memo bounded (Options::maxVariants).
  void makeBackend() {
    backend = runtime::makeBackend(options);
    backend->limitVariants(runtime::variantLimit(options));
  }
};

// --- Outputs ---------------------------------------------------------------------------------

const Tensor& Outputs::operator[](std::size_t i) const {
  if (i >= outputs_.size())
    throw Error("output " + std::to_string(i) + " does not exist: the program has " +
                std::to_string(outputs_.size()) + " output(s)");
  return outputs_[i];
}

const Tensor& Outputs::operator[](std::string_view name) const {
  auto it = all_.find(name);
  if (it == all_.end()) {
    std::string known;
    for (const auto& [n, t] : all_)
      if (t.defined()) known += (known.empty() ? "" : ", ") + n;
    throw Error("no tensor named '" + std::string(name) + "' was computed (computed: " + known +
                ")");
  }
  if (!it->second.defined())
    throw Error("'" + std::string(name) +
                "' is an intermediate (a later statement reads it), not an output, and is not "
                "kept after the call: compile with Options::keepIntermediates = true to read it");
  return it->second;
}

void Outputs::checkCount(std::size_t n) const {
  if (n != outputs_.size())
    throw Error("the program has " + std::to_string(outputs_.size()) + " output(s), not " +
                std::to_string(n));
}

Outputs::operator Tensor() const {
  checkCount(1);
  return outputs_[0];
}

// --- Kernel ----------------------------------------------------------------------------------

namespace {

std::string joinNames(const dsl::Program& p, const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ", ") + p.tensors[static_cast<std::size_t>(id)].name;
  return s.empty() ? "none" : s;
}

std::string paramNames(const dsl::Program& p) {
  std::string s;
  for (const auto& prm : p.params) s += (s.empty() ? "" : ", ") + prm.name;
  return s.empty() ? "none" : s;
}

std::string expectedArguments(const dsl::Program& p) {
  return std::to_string(p.arguments.size() + p.params.size()) + ": " +
         std::to_string(p.arguments.size()) + " tensor(s) (" + joinNames(p, p.arguments) +
         ") then " + std::to_string(p.params.size()) + " scalar(s) (" + paramNames(p) + ")";
}

std::string stridesText(const Tensor& t) {
  std::string s;
  for (std::int64_t v : t.strides()) s += (s.empty() ? "" : ",") + std::to_string(v);
  return "(" + s + ")";
}

// True when two elements of t may share an address. Sufficient test: ordered by stride, each
// dimension's stride must exceed the span of all smaller-stride dimensions.
bool hasInternalOverlap(const Tensor& t) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims; // (stride, extent)
  for (int d = 0; d < t.rank(); ++d)
    if (t.dim(d) > 1) dims.push_back({t.strides()[static_cast<std::size_t>(d)], t.dim(d)});
  if (t.numel() <= 1) return false;
  std::sort(dims.begin(), dims.end());
  std::int64_t span = 0; // largest offset reachable by the smaller dimensions
  for (const auto& [stride, extent] : dims) {
    if (stride <= span) return true;
    span += stride * (extent - 1);
  }
  return false;
}

// Binds a call: every shape, dtype and aliasing check, before anything is allocated or runs.
dsl::BoundProgram bindCall(const dsl::Program& p, const std::vector<Tensor>& tensors,
                           const std::vector<double>& scalars, const Options& opt) {
  const dsl::Source& src = *p.source;
  std::vector<dsl::ArgSpec> specs;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    const auto& info = p.tensors[static_cast<std::size_t>(p.arguments[i])];
    if (!t.defined())
      dsl::fail(src, info.firstUse,
                "tensor '" + info.name + "' is undefined (a default-constructed Tensor)");
    specs.push_back({t.dtype(), t.shape()});
  }
  // Tensors on a CUDA device: only for a kernel on that device, and all of them there.
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    const auto& info = p.tensors[static_cast<std::size_t>(p.arguments[i])];
    auto where = [](const Tensor& x) {
      return x.device() == DeviceKind::cpu ? std::string("the host")
                                           : "cuda:" + std::to_string(x.deviceIndex());
    };
    if (t.device() == DeviceKind::cuda && opt.device.kind != Device::Kind::cuda)
      dsl::fail(src, info.firstUse,
                "tensor '" + info.name + "' is on " + where(t) + " but the kernel runs on " +
                    opt.device.name() + "; copy it with cpu() or compile for Device::cuda()");
    if (t.device() == DeviceKind::cuda && t.deviceIndex() != opt.device.index)
      dsl::fail(src, info.firstUse,
                "tensor '" + info.name + "' is on " + where(t) + " but the kernel runs on " +
                    opt.device.name());
    if (i > 0 && t.device() != tensors[0].device()) {
      const auto& first = p.tensors[static_cast<std::size_t>(p.arguments[0])];
      dsl::fail(src, info.firstUse,
                "tensor '" + info.name + "' is on " + where(t) + " but '" + first.name +
                    "' is on " + where(tensors[0]) + "; pass every tensor on one device",
                {{first.firstUse, "'" + first.name + "' is passed here"}});
    }
  }
  dsl::BoundProgram bound = dsl::bind(p, specs, scalars, opt.defaultDType);

  // An output must not share memory with any other argument, nor have two elements at one
  // address: the result would depend on the order in which elements are computed.
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& wi = p.tensors[static_cast<std::size_t>(p.arguments[i])];
    if (!wi.writtenBy.empty() && hasInternalOverlap(tensors[i]))
      dsl::fail(src, wi.firstUse,
                "output '" + wi.name + "' has elements that share memory (strides " +
                    stridesText(tensors[i]) + "); pass a tensor whose elements are distinct");
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& wi = p.tensors[static_cast<std::size_t>(p.arguments[i])];
    if (wi.writtenBy.empty()) continue;
    for (std::size_t j = 0; j < tensors.size(); ++j) {
      if (i == j || tensors[i].numel() == 0 || tensors[j].numel() == 0) continue;
      if (!tensors[i].overlaps(tensors[j])) continue;
      const auto& wj = p.tensors[static_cast<std::size_t>(p.arguments[j])];
      dsl::fail(src, wi.firstUse,
                "output '" + wi.name + "' shares memory with argument '" + wj.name +
                    "'; pass separate memory for outputs",
                {{wj.firstUse, "'" + wj.name + "' is used here"}});
    }
  }
  return bound;
}

// Runs a program on tensors (by Program::arguments order) and scalars (by Program::params).
Outputs run(const Kernel::Impl& impl, const std::vector<Tensor>& tensors,
            const std::vector<double>& scalars) {
  const dsl::Program& p = impl.program;
  dsl::BoundProgram bound = bindCall(p, tensors, scalars, impl.options);

  const Device& device = impl.options.device;
  const bool onDevice = !tensors.empty() && tensors[0].device() == DeviceKind::cuda;
  std::vector<Tensor> all(p.tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i)
    all[static_cast<std::size_t>(p.arguments[i])] = tensors[i];
  for (std::size_t id = 0; id < p.tensors.size(); ++id)
    if (!p.tensors[id].isArgument)
      all[id] = onDevice ? Tensor::emptyCuda(bound.tensors[id].shape, bound.tensors[id].dtype,
                                             device.index)
                         : Tensor::empty(bound.tensors[id].shape, bound.tensors[id].dtype);
  impl.backend->run({p, bound, tensors}, all);

  std::vector<Tensor> outs;
  std::vector<std::string> names;
  for (int id : p.outputs) {
    outs.push_back(all[static_cast<std::size_t>(id)]);
    names.push_back(p.tensors[static_cast<std::size_t>(id)].name);
  }
  std::map<std::string, Tensor, std::less<>> byName;
  // An intermediate not kept (Options::keepIntermediates) is named with no tensor, so that
  // reading it says why.
  for (std::size_t id = 0; id < p.tensors.size(); ++id)
    if (!p.tensors[id].writtenBy.empty())
      byName[p.tensors[id].name] =
          impl.options.keepIntermediates || p.tensors[id].isArgument || p.tensors[id].saved ||
                  std::find(p.outputs.begin(), p.outputs.end(), static_cast<int>(id)) !=
                      p.outputs.end()
              ? all[id]
              : Tensor();
  return Outputs(std::move(outs), std::move(names), std::move(byName));
}

} // namespace

const Kernel::Impl& Kernel::impl() const {
  if (!impl_)
    throw Error("this Kernel is empty (default-constructed): create kernels with "
                "einjit::compile() or Kernel::gradient()");
  return *impl_;
}

std::pair<std::vector<Tensor>, std::vector<double>>
Kernel::splitArguments(const std::vector<Arg>& args) const {
  const dsl::Program& p = impl().program;
  const dsl::Source& src = *p.source;
  const std::size_t nt = p.arguments.size(), ns = p.params.size();
  if (args.size() != nt + ns) {
    dsl::SourceRange at = p.stmts.front().ast.outputRange;
    if (args.size() < nt)
      at = p.tensors[static_cast<std::size_t>(p.arguments[args.size()])].firstUse;
    else if (args.size() < nt + ns)
      at = p.params[args.size() - nt].firstUse;
    std::vector<dsl::Note> notes;
    if (args.size() < nt + ns)
      for (std::size_t i = args.size() > nt ? args.size() - nt : 0; i < ns; ++i)
        for (dsl::Note& n : dsl::parameterNotes(p, static_cast<int>(i))) notes.push_back(n);
    dsl::fail(src, at,
              "wrong number of arguments: got " + std::to_string(args.size()) + ", expected " +
                  expectedArguments(p),
              notes);
  }
  std::vector<Tensor> tensors;
  std::vector<double> scalars;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i < nt) {
      const auto& info = p.tensors[static_cast<std::size_t>(p.arguments[i])];
      if (!args[i].isTensor())
        dsl::fail(src, info.firstUse,
                  "argument " + std::to_string(i + 1) + " should be the tensor '" + info.name +
                      "', got a scalar; expected " + expectedArguments(p));
      tensors.push_back(args[i].tensor());
    } else {
      const auto& prm = p.params[i - nt];
      if (args[i].isTensor())
        dsl::fail(src, prm.firstUse,
                  "argument " + std::to_string(i + 1) + " should be the scalar '" + prm.name +
                      "', got a tensor; expected " + expectedArguments(p));
      scalars.push_back(args[i].scalar());
    }
  }
  return {std::move(tensors), std::move(scalars)};
}

Outputs Kernel::call(const std::vector<Arg>& args) const {
  auto [tensors, scalars] = splitArguments(args);
  return run(impl(), tensors, scalars);
}

Outputs Kernel::call(const std::map<std::string, Tensor>& tensors,
                     const std::map<std::string, double>& scalars) const {
  const dsl::Program& p = impl().program;
  const dsl::Source& src = *p.source;
  for (const auto& [name, t] : tensors) {
    int id = p.findTensor(name);
    if (id < 0 || !p.tensors[static_cast<std::size_t>(id)].isArgument)
      throw Error("'" + name + "' is not a tensor argument of this program; it takes " +
                  joinNames(p, p.arguments));
  }
  for (const auto& [name, v] : scalars)
    if (p.findParam(name) < 0)
      throw Error("'" + name + "' is not a scalar parameter of this program; it takes " +
                  paramNames(p));
  std::vector<Tensor> ts;
  for (int id : p.arguments) {
    const auto& info = p.tensors[static_cast<std::size_t>(id)];
    auto it = tensors.find(info.name);
    if (it == tensors.end())
      dsl::fail(src, info.firstUse, "missing tensor argument '" + info.name + "'");
    ts.push_back(it->second);
  }
  std::vector<double> ss;
  for (const auto& prm : p.params) {
    auto it = scalars.find(prm.name);
    if (it == scalars.end())
      dsl::fail(src, prm.firstUse, "missing scalar argument '" + prm.name + "'",
                dsl::parameterNotes(p, static_cast<int>(&prm - p.params.data())));
    ss.push_back(it->second);
  }
  return run(impl(), ts, ss);
}

std::string Kernel::explain(const std::vector<Arg>& args, bool llvmIR) const {
  auto [tensors, scalars] = splitArguments(args);
  const dsl::Program& p = impl().program;
  dsl::BoundProgram bound = bindCall(p, tensors, scalars, impl().options);
  return impl().backend->explain({p, bound, tensors}, llvmIR);
}

std::vector<std::string> Kernel::tensorArguments() const {
  std::vector<std::string> v;
  for (int id : impl().program.arguments)
    v.push_back(impl().program.tensors[static_cast<std::size_t>(id)].name);
  return v;
}

std::vector<std::string> Kernel::scalarArguments() const {
  std::vector<std::string> v;
  for (const auto& prm : impl().program.params) v.push_back(prm.name);
  return v;
}

std::vector<std::string> Kernel::outputNames() const {
  std::vector<std::string> v;
  for (int id : impl().program.outputs)
    v.push_back(impl().program.tensors[static_cast<std::size_t>(id)].name);
  return v;
}

Kernel Kernel::gradient(const std::vector<std::string>& wrt) const {
  const Impl& self = impl();
  grad::Gradient g = grad::differentiate(self.program, wrt);
  auto made = std::make_shared<Kernel::Impl>();
  made->program = dsl::check(dsl::printProgram(g.program), self.options.name + " (gradient)");
  made->options = self.options;
  made->options.saved.clear(); // names of the forward program
  made->gradientInputs = g.outputGrads;
  made->gradientOutputs = g.inputGrads;
  made->scatters = g.scatters;
  made->masked = g.masked;
  made->makeBackend();
  Kernel k;
  k.impl_ = std::move(made);
  return k;
}

std::vector<std::string> Kernel::gradientInputs() const { return impl().gradientInputs; }
std::vector<std::string> Kernel::gradientOutputs() const { return impl().gradientOutputs; }
std::vector<std::string> Kernel::scatters() const { return impl().scatters; }
std::vector<std::string> Kernel::maskedGathers() const { return impl().masked; }

std::size_t Kernel::cachedVariants() const { return impl().backend->cachedVariants(); }

std::string Kernel::source() const { return dsl::printProgram(impl().program.ast); }
std::string Kernel::ranges() const { return dsl::describeRanges(impl().program); }
const Options& Kernel::options() const { return impl().options; }
const dsl::Program& Kernel::program() const { return impl().program; }

void synchronize(Device device) {
  if (device.kind != Device::Kind::cuda) return;
#if EINJIT_HAVE_CUDA
  runtime::cuda::synchronize(device.index);
#else
  throw Error("device " + device.name() +
              " is not available: this build of einjit has no CUDA support");
#endif
}

bool cudaAvailable(std::string* why) {
#if EINJIT_HAVE_CUDA
  return runtime::cuda::available(why);
#else
  if (why) *why = "this build of einjit has no CUDA support";
  return false;
#endif
}

Kernel compile(const std::string& source, const Options& options) {
  auto impl = std::make_shared<Kernel::Impl>();
  impl->program = dsl::check(source, options.name);
  grad::markSaved(impl->program, options.saved);
  impl->options = options;
  impl->makeBackend();
  Kernel k;
  k.impl_ = std::move(impl);
  return k;
}

} // namespace einjit
