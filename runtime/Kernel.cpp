// compile() and Kernel: check once, then bind, validate, allocate and run per call.
#include "einjit/einjit.h"

#include "codegen/Interpreter.h"
#include "dsl/Binding.h"
#include "dsl/Parser.h"
#include "dsl/Printer.h"
#include "dsl/Program.h"
#include "grad/Differentiate.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "runtime/Caches.h"
#include "runtime/CallLayout.h"
#if EINJIT_HAVE_LLVM
#include "runtime/CpuBackend.h"
#endif
#if EINJIT_HAVE_CUDA
#include "runtime/CudaBackend.h"
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
#if EINJIT_HAVE_LLVM
  mutable runtime::PreparedCache prepared; // compiled code per binding
#endif
#if EINJIT_HAVE_CUDA
  mutable runtime::PreparedCudaCache preparedCuda;
#endif
  // Bounds the binding memos (Options::maxVariants).
  void limitVariants() {
    [[maybe_unused]] const std::size_t n = runtime::variantLimit(options);
#if EINJIT_HAVE_LLVM
    prepared.setCapacity(n);
#endif
#if EINJIT_HAVE_CUDA
    preparedCuda.setCapacity(n);
#endif
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
    for (const auto& [n, t] : all_) known += (known.empty() ? "" : ", ") + n;
    throw Error("no tensor named '" + std::string(name) + "' was computed (computed: " + known +
                ")");
  }
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

#if EINJIT_HAVE_LLVM
// Copies src into dst element by element (same shape and dtype, any strides).
void copyElements(const Tensor& dst, const Tensor& src) {
  const std::size_t es = dtypeSize(src.dtype());
  const std::int64_t n = src.numel();
  if (n == 0) return;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(src.rank()), 0);
  auto* d = static_cast<std::byte*>(dst.data());
  const auto* s = static_cast<const std::byte*>(src.data());
  for (std::int64_t lin = 0; lin < n; ++lin) {
    std::int64_t od = 0, os = 0;
    for (std::size_t k = 0; k < idx.size(); ++k) {
      od += idx[k] * dst.strides()[k];
      os += idx[k] * src.strides()[k];
    }
    std::memcpy(d + od * static_cast<std::int64_t>(es), s + os * static_cast<std::int64_t>(es), es);
    for (std::size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < src.shape()[k]) break;
      idx[k] = 0;
    }
  }
}
#endif

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

std::vector<codegen::HostBuffer> hostBuffers(const std::vector<Tensor>& all) {
  std::vector<codegen::HostBuffer> bufs;
  for (const Tensor& t : all) bufs.push_back({t.dtype(), t.data(), t.shape(), t.strides()});
  return bufs;
}

codegen::Strides stridesOf(const dsl::Program& p, const dsl::BoundProgram& bound,
                           const std::vector<Tensor>& tensors) {
  std::vector<std::vector<std::int64_t>> argStrides;
  for (const Tensor& t : tensors) argStrides.push_back(t.strides());
  return runtime::callStrides(p, bound, argStrides);
}

#if EINJIT_HAVE_LLVM
std::shared_ptr<const runtime::PreparedCpu> prepare(const Kernel::Impl& impl,
                                                    const dsl::BoundProgram& bound,
                                                    const std::vector<Tensor>& tensors,
                                                    bool keepIR = false) {
  const dsl::Program& p = impl.program;
  codegen::Strides strides = stridesOf(p, bound, tensors);
  if (keepIR) return runtime::prepareCpu(p, bound, strides, true);
  return impl.prepared.get(runtime::bindingSignature(p, bound, strides),
                           [&] { return runtime::prepareCpu(p, bound, strides); });
}

// Runs through the JIT. False when a checked access failed: the caller's tensors are as
// before (written arguments went through scratch copies) and the interpreter must report it.
bool runCpu(const Kernel::Impl& impl, const dsl::BoundProgram& bound,
            const std::vector<Tensor>& tensors, std::vector<Tensor>& all) {
  const dsl::Program& p = impl.program;
  auto prep = prepare(impl, bound, tensors);
  std::vector<Tensor> work = all;
  if (prep->scratch)
    for (int id : p.arguments)
      if (!p.tensors[static_cast<std::size_t>(id)].writtenBy.empty())
        work[static_cast<std::size_t>(id)] = all[static_cast<std::size_t>(id)].clone();
  std::vector<void*> ptrs;
  std::vector<std::int64_t> zero(work.size(), 0);
  for (const Tensor& t : work) ptrs.push_back(t.data());
  for (int id : prep->lowered.zeroFill) {
    const Tensor& t = work[static_cast<std::size_t>(id)];
    zero[static_cast<std::size_t>(id)] =
        t.numel() * static_cast<std::int64_t>(dtypeSize(t.dtype()));
  }
  if (runtime::executeCpu(*prep, ptrs, bound.params, zero) != 0) return false;
  if (prep->scratch)
    for (int id : p.arguments)
      if (!p.tensors[static_cast<std::size_t>(id)].writtenBy.empty())
        copyElements(all[static_cast<std::size_t>(id)], work[static_cast<std::size_t>(id)]);
  return true;
}
#endif

#if EINJIT_HAVE_LLVM || EINJIT_HAVE_CUDA
// explain's line on run-time checks (Lower.h), or nothing: both backends' explain print it.
std::string checkNote(const codegen::LoweredProgram& l) {
  if (!l.checked) return "";
  std::string s = "# some accesses are checked at run time (gathers or unproven subscripts)";
  if (l.prechecked)
    s += ", by " + std::to_string(l.checks) +
         " function(s) run first: written arguments are used in place";
  return s + "\n";
}
#endif

#if EINJIT_HAVE_CUDA
// Which tensors reach the kernels through 16-byte aligned pointers (runCuda): a host argument
// is copied to fresh device memory at its offset from the lowest byte it spans; a device one
// is used in place or copied the same way; the program's own tensors are fresh allocations.
codegen::Aligned16 alignedOnDevice(const dsl::Program& p, const std::vector<Tensor>& tensors) {
  codegen::Aligned16 a(p.tensors.size(), true);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.numel() == 0) continue;
    const auto lo = reinterpret_cast<std::uintptr_t>(t.byteExtent().first);
    const auto at = reinterpret_cast<std::uintptr_t>(t.data());
    bool ok = (at - lo) % 16 == 0;
    if (t.device() == DeviceKind::cuda) ok = ok && at % 16 == 0;
    a[static_cast<std::size_t>(p.arguments[i])] = ok;
  }
  return a;
}

std::shared_ptr<const runtime::PreparedCuda> prepareCuda(const Kernel::Impl& impl,
                                                         const dsl::BoundProgram& bound,
                                                         const std::vector<Tensor>& tensors) {
  const dsl::Program& p = impl.program;
  codegen::Strides strides = stridesOf(p, bound, tensors);
  codegen::Aligned16 aligned = alignedOnDevice(p, tensors);
  std::string key = runtime::bindingSignature(p, bound, strides) + "aligned:";
  for (bool b : aligned) key += b ? '1' : '0';
  return impl.preparedCuda.get(key, [&] {
    return runtime::prepareCuda(p, bound, strides, aligned, impl.options.device.index);
  });
}

// Device memory for one tensor of a call, freed with it.
struct DeviceSpan {
  int device = 0;
  runtime::cuda::DevicePtr base = 0;
  DeviceSpan() = default;
  DeviceSpan(int d, std::size_t bytes) : device(d), base(runtime::cuda::allocate(d, bytes)) {}
  DeviceSpan(const DeviceSpan&) = delete;
  DeviceSpan& operator=(const DeviceSpan&) = delete;
  ~DeviceSpan() {
    try {
      runtime::cuda::release(device, base);
    } catch (...) {
    }
  }
};

std::size_t spanBytes(const Tensor& t) {
  const auto [lo, hi] = t.byteExtent();
  return static_cast<std::size_t>(hi - lo);
}

// Runs on the GPU. Host tensors are copied to the device (each argument's whole byte span, so
// views keep their strides) and written ones back; device tensors are used in place, through
// scratch copies when a checked program writes arguments (unless its checks run first:
// LoweredProgram::prechecked). False when a checked access failed:
// the caller's tensors are as before and the interpreter must report it.
bool runCuda(const Kernel::Impl& impl, const dsl::BoundProgram& bound,
             const std::vector<Tensor>& tensors, std::vector<Tensor>& all) {
  const dsl::Program& p = impl.program;
  const int dev = impl.options.device.index;
  runtime::cuda::setDevice(dev);
  auto prep = prepareCuda(impl, bound, tensors);
  // Written arguments go through copies when a failed check could leave them half written.
  const bool checked = prep->program.lowered.lateChecks();
  const std::size_t n = all.size();
  std::vector<runtime::cuda::DevicePtr> ptrs(n, 0);
  std::vector<std::unique_ptr<DeviceSpan>> staged(n);
  auto isWrittenArg = [&](std::size_t id) {
    return p.tensors[id].isArgument && !p.tensors[id].writtenBy.empty();
  };
  for (std::size_t id = 0; id < n; ++id) {
    const Tensor& t = all[id];
    const auto [lo, hi] = t.byteExtent();
    const auto offset = static_cast<std::size_t>(static_cast<const std::byte*>(t.data()) - lo);
    if (t.device() == DeviceKind::cuda && !(checked && isWrittenArg(id))) {
      ptrs[id] = reinterpret_cast<runtime::cuda::DevicePtr>(t.data());
      continue;
    }
    staged[id] = std::make_unique<DeviceSpan>(dev, std::max<std::size_t>(spanBytes(t), 1));
    ptrs[id] = staged[id]->base + offset;
    if (!p.tensors[id].isArgument) continue;
    if (t.device() == DeviceKind::cuda)
      runtime::cuda::copyOnDevice(dev, staged[id]->base,
                                  reinterpret_cast<runtime::cuda::DevicePtr>(lo), spanBytes(t));
    else
      runtime::cuda::copyToDevice(dev, staged[id]->base, lo, spanBytes(t));
  }
  // EINJIT_POISON=1: fresh outputs start as NaN (all bits set), so an element no kernel
  // writes shows up in a test.
  static const bool poison = std::getenv("EINJIT_POISON") && *std::getenv("EINJIT_POISON") == '1';
  if (poison)
    for (std::size_t id = 0; id < n; ++id)
      if (!p.tensors[id].isArgument) runtime::cuda::fill(dev, ptrs[id], spanBytes(all[id]), 0xff);
  std::vector<std::int64_t> zero(n, 0);
  for (int id : prep->program.lowered.zeroFill) {
    const Tensor& t = all[static_cast<std::size_t>(id)];
    zero[static_cast<std::size_t>(id)] =
        t.numel() * static_cast<std::int64_t>(dtypeSize(t.dtype()));
  }
  if (runtime::executeCuda(*prep, dev, ptrs, bound.params, zero) != 0) return false;
  for (std::size_t id = 0; id < n; ++id) {
    if (!staged[id] || p.tensors[id].writtenBy.empty()) continue;
    const Tensor& t = all[id];
    const auto [lo, hi] = t.byteExtent();
    (void)hi;
    if (t.device() == DeviceKind::cuda)
      runtime::cuda::copyOnDevice(dev, reinterpret_cast<runtime::cuda::DevicePtr>(lo),
                                  staged[id]->base, spanBytes(t));
    else
      runtime::cuda::copyToHost(dev, const_cast<std::byte*>(lo), staged[id]->base, spanBytes(t));
  }
  return true;
}

// The interpreter's run of a device call whose checked access failed: on host copies with the
// same strides; results (when it does not throw) copied back into the device tensors.
void interpretOnHost(const dsl::Program& p, const dsl::BoundProgram& bound,
                     std::vector<Tensor>& all, int dev) {
  std::vector<Tensor> host(all.size());
  std::vector<std::shared_ptr<std::byte[]>> bufs(all.size());
  for (std::size_t id = 0; id < all.size(); ++id) {
    const Tensor& t = all[id];
    const auto [lo, hi] = t.byteExtent();
    const std::size_t bytes = static_cast<std::size_t>(hi - lo);
    bufs[id] = std::shared_ptr<std::byte[]>(new std::byte[std::max<std::size_t>(bytes, 1)]);
    runtime::cuda::copyToHost(dev, bufs[id].get(), reinterpret_cast<runtime::cuda::DevicePtr>(lo),
                              bytes);
    const auto offset = static_cast<const std::byte*>(t.data()) - lo;
    host[id] = Tensor::view(bufs[id].get() + offset, t.dtype(), t.shape(), t.strides(), bufs[id]);
  }
  codegen::interpret(p, bound, hostBuffers(host));
  for (std::size_t id = 0; id < all.size(); ++id) {
    if (p.tensors[id].writtenBy.empty()) continue;
    const auto [lo, hi] = all[id].byteExtent();
    runtime::cuda::copyToDevice(dev, reinterpret_cast<runtime::cuda::DevicePtr>(lo), bufs[id].get(),
                                static_cast<std::size_t>(hi - lo));
  }
}
#endif

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

  bool done = false;
#if EINJIT_HAVE_LLVM
  if (device.kind == Device::Kind::cpu) done = runCpu(impl, bound, tensors, all);
#endif
#if EINJIT_HAVE_CUDA
  if (device.kind == Device::Kind::cuda) {
    done = runCuda(impl, bound, tensors, all);
    if (!done && onDevice) {
      interpretOnHost(p, bound, all, device.index);
      done = true;
    }
  }
#else
  if (device.kind == Device::Kind::cuda)
    throw Error("device " + device.name() +
                " is not available: this build of einjit has no CUDA "
                "support (configure with the CUDA toolkit present)");
#endif
  // The interpreter: the reference device, and the JIT's slow path when a checked access
  // failed (it throws the error with its caret, or computes the result when the failure came
  // from a branch the interpreter does not evaluate).
  if (!done) codegen::interpret(p, bound, hostBuffers(all));

  std::vector<Tensor> outs;
  std::vector<std::string> names;
  for (int id : p.outputs) {
    outs.push_back(all[static_cast<std::size_t>(id)]);
    names.push_back(p.tensors[static_cast<std::size_t>(id)].name);
  }
  std::map<std::string, Tensor, std::less<>> byName;
  for (std::size_t id = 0; id < p.tensors.size(); ++id)
    if (!p.tensors[id].writtenBy.empty()) byName[p.tensors[id].name] = all[id];
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
  if (impl().options.device.kind == Device::Kind::cuda) {
#if EINJIT_HAVE_CUDA
    runtime::CudaProgram cp =
        runtime::generateCuda(p, bound, stridesOf(p, bound, tensors), alignedOnDevice(p, tensors),
                              runtime::codeArch(impl().options.device.index));
    std::string out = "# target: CUDA (" + impl().options.device.name() + ")\n";
    for (std::size_t k = 0; k < p.stmts.size(); ++k)
      out += "# statement " + std::to_string(k + 1) + ": " + cp.lowered.notes[k] + "\n";
    for (int id : cp.lowered.zeroFill)
      out += "# zero-filled first: " + p.tensors[static_cast<std::size_t>(id)].name + "\n";
    out += checkNote(cp.lowered);
    for (const auto& k : cp.cuda.kernels)
      out += "# launch " + k.name + ": " + std::to_string(k.grid) + " block(s) of " +
             std::to_string(k.block) + " thread(s)\n";
    if (llvmIR)
      for (const auto& f : cp.lowered.funcs) out += codegen::ir::print(f);
    return out + "\n" + cp.cuda.source;
#else
    throw Error("this build of einjit has no CUDA support");
#endif
  }
  if (impl().options.device.kind != Device::Kind::cpu)
    return "device " + impl().options.device.name() +
           ": the reference interpreter runs the checked program directly\n";
#if EINJIT_HAVE_LLVM
  auto prep = prepare(impl(), bound, tensors, llvmIR);
  std::string out = "# target: " + runtime::hostDescription() + "\n";
  out += "# code: " + prep->code->origin + "\n";
  for (std::size_t k = 0; k < p.stmts.size(); ++k)
    out += "# statement " + std::to_string(k + 1) + ": " + prep->lowered.notes[k] + "\n";
  for (int id : prep->lowered.zeroFill)
    out += "# zero-filled first: " + p.tensors[static_cast<std::size_t>(id)].name + "\n";
  out += checkNote(prep->lowered);
  for (const auto& f : prep->lowered.funcs) out += codegen::ir::print(f);
  if (llvmIR) out += "\n; optimized LLVM IR\n" + prep->code->llvmIR;
  return out;
#else
  (void)bound;
  (void)llvmIR;
  return "this build has no LLVM JIT: the reference interpreter runs the checked program\n";
#endif
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
  made->gradientInputs = g.outputGrads;
  made->gradientOutputs = g.inputGrads;
  made->scatters = g.scatters;
  made->masked = g.masked;
  made->limitVariants();
  Kernel k;
  k.impl_ = std::move(made);
  return k;
}

std::vector<std::string> Kernel::gradientInputs() const { return impl().gradientInputs; }
std::vector<std::string> Kernel::gradientOutputs() const { return impl().gradientOutputs; }
std::vector<std::string> Kernel::scatters() const { return impl().scatters; }
std::vector<std::string> Kernel::maskedGathers() const { return impl().masked; }

std::size_t Kernel::cachedVariants() const {
  std::size_t n = 0;
#if EINJIT_HAVE_LLVM
  n += impl().prepared.size();
#endif
#if EINJIT_HAVE_CUDA
  n += impl().preparedCuda.size();
#endif
  return n;
}

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
  impl->options = options;
  impl->limitVariants();
  Kernel k;
  k.impl_ = std::move(impl);
  return k;
}

} // namespace einjit
