// einjit._einjit: the nanobind module under the einjit Python package (python/einjit). Arrays
// cross in both directions through DLPack without copies: an argument becomes an einjit::Tensor
// view of the caller's memory that keeps the caller's array alive; a result is handed out as a
// DLPack-capable array that keeps the einjit::Tensor alive. The Python side (einjit/__init__.py)
// converts results to the caller's framework and maps names to positions.
#include "einjit/einjit.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// einjit.Error, created at import; a module-lifetime reference (never released: Python may
// still raise it while the interpreter shuts down).
PyObject* errorType = nullptr;

using Array = nb::ndarray<nb::ro>;

einjit::DType toDType(const nb::dlpack::dtype& t) {
  using Code = nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    if (t.code == static_cast<std::uint8_t>(Code::Float) && t.bits == 32) return einjit::DType::f32;
    if (t.code == static_cast<std::uint8_t>(Code::Float) && t.bits == 64) return einjit::DType::f64;
    if (t.code == static_cast<std::uint8_t>(Code::Int) && t.bits == 32) return einjit::DType::i32;
    if (t.code == static_cast<std::uint8_t>(Code::Int) && t.bits == 64) return einjit::DType::i64;
    if (t.code == static_cast<std::uint8_t>(Code::Bfloat) && t.bits == 16)
      return einjit::DType::bf16;
  }
  throw einjit::Error("an array of an unsupported dtype (code " + std::to_string(t.code) +
                      ", " + std::to_string(t.bits) +
                      " bits): einjit's Python module takes float32, float64, bfloat16, int32 "
                      "and int64");
}

nb::dlpack::dtype fromDType(einjit::DType t) {
  switch (t) {
  case einjit::DType::f32: return nb::dtype<float>();
  case einjit::DType::f64: return nb::dtype<double>();
  case einjit::DType::i32: return nb::dtype<std::int32_t>();
  case einjit::DType::i64: return nb::dtype<std::int64_t>();
  case einjit::DType::bf16:
    return {static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
  }
  throw einjit::Error("a result of an unknown dtype");
}

// A view of the caller's array (host or CUDA memory); the view holds the array (and so its
// DLPack owner) alive.
einjit::Tensor toTensor(const Array& a, const std::string& name) {
  const bool host = a.device_type() == nb::device::cpu::value;
  if (!host && a.device_type() != nb::device::cuda::value)
    throw einjit::Error("argument " + name + ": an array on DLPack device type " +
                        std::to_string(a.device_type()) +
                        ": einjit takes host (CPU) and CUDA arrays");
  einjit::Shape shape(a.ndim()), strides(a.ndim());
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    shape[d] = static_cast<std::int64_t>(a.shape(d));
    strides[d] = a.stride(d);
    if (strides[d] < 0)
      throw einjit::Error("argument " + name +
                          ": an array with a negative stride (a reversed view); pass a copy");
  }
  const einjit::DType dtype = toDType(a.dtype());
  std::shared_ptr<void> owner(new Array(a), [](void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<Array*>(p);
  });
  void* data = const_cast<void*>(a.data());
  if (host) return einjit::Tensor::view(data, dtype, shape, strides, std::move(owner));
  return einjit::Tensor::viewCuda(data, dtype, shape, strides, std::move(owner), a.device_id());
}

// The tensor as an array over the same memory, owning a handle to it: a NumPy array for host
// results NumPy can hold, else a DLPack-capable nanobind array (CUDA results, bfloat16); the
// Python side hands either to the caller's framework without a copy.
nb::object fromTensor(const einjit::Tensor& t) {
  auto* handle = new einjit::Tensor(t);
  nb::capsule owner(handle, [](void* p) noexcept { delete static_cast<einjit::Tensor*>(p); });
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  std::vector<std::int64_t> strides(t.strides().begin(), t.strides().end());
  const bool host = t.device() == einjit::DeviceKind::cpu;
  if (host && t.dtype() != einjit::DType::bf16)
    return nb::cast(nb::ndarray<nb::numpy>(t.data(), t.shape().size(), shape.data(), owner,
                                           strides.data(), fromDType(t.dtype()),
                                           nb::device::cpu::value));
  // array_api: an object with __dlpack__ and __dlpack_device__ (a bare capsule would do for
  // PyTorch only).
  return nb::cast(nb::ndarray<nb::array_api>(
      t.data(), t.shape().size(), shape.data(), owner, strides.data(), fromDType(t.dtype()),
      host ? nb::device::cpu::value : nb::device::cuda::value, t.deviceIndex()));
}

// Whether the program writes the tensor argument `name` ('=' and '+=' outputs, whether or not
// a later statement reads them): whether it is the left-hand side of a statement of the
// canonical source, one statement per line, "[(op) ]name[...] =".
bool written(const einjit::Kernel& k, const std::string& name) {
  const std::string source = k.source();
  std::size_t line = 0;
  while (line < source.size()) {
    std::size_t end = source.find('\n', line);
    if (end == std::string::npos) end = source.size();
    std::size_t at = line;
    if (source[at] == '(') at = source.find(") ", at) + 2;
    if (source.compare(at, name.size(), name) == 0) {
      const char next = at + name.size() < end ? source[at + name.size()] : ' ';
      if (next == '[' || next == ' ') return true;
    }
    line = end + 1;
  }
  return false;
}

// Whether h is a JAX array (jax.Array, whose concrete type lives in jaxlib). JAX arrays are
// immutable, and other code (JAX's own caches, arrays that share the buffer) relies on that,
// but their DLPack export does not mark them read-only: the read-only check below would let
// a write through.
bool isJaxArray(nb::handle h) {
  const std::string module = nb::cast<std::string>(nb::handle(h.type()).attr("__module__"));
  const std::string top = module.substr(0, module.find('.'));
  return top == "jax" || top == "jaxlib";
}

Array toArray(nb::handle h, const std::string& name, bool write) {
  Array a;
  if (!nb::try_cast(h, a))
    throw einjit::Error("argument " + name + ": expected an array (any DLPack-capable one: "
                        "NumPy, PyTorch, JAX, CuPy) or a Python number, got " +
                        nb::cast<std::string>(nb::str(h.type())));
  if (write && isJaxArray(h))
    throw einjit::Error("argument " + name +
                        ": the program writes this tensor ('=' or '+='), but it is a JAX array, "
                        "and JAX arrays are immutable: make '" + name +
                        "' a result instead (assign it with ':=' and take it from the call's "
                        "return value; for '+=', add the old value in the program, e.g. '" +
                        name + "_new[...] := " + name + "[...] + ...')");
  nb::ndarray<> writable;
  if (write && !nb::try_cast(h, writable))
    throw einjit::Error("argument " + name +
                        ": the program writes this tensor, but the array is read-only");
  return a;
}

// A positional argument: an array or a Python number.
std::vector<einjit::Arg> toArgs(const einjit::Kernel& k, const std::vector<nb::object>& args) {
  std::vector<std::string> names = k.tensorArguments();
  for (auto& s : k.scalarArguments()) names.push_back(s);
  std::vector<einjit::Arg> out;
  out.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : "#" + std::to_string(i + 1);
    const nb::handle h = args[i];
    if (PyFloat_Check(h.ptr()) || PyLong_Check(h.ptr())) {
      out.emplace_back(nb::cast<double>(h));
      continue;
    }
    out.emplace_back(toTensor(toArray(h, name, written(k, name)), name));
  }
  return out;
}

einjit::Device parseDevice(const std::string& d) {
  if (d == "cpu") return einjit::Device::cpu();
  if (d == "reference") return einjit::Device::reference();
  if (d == "cuda") return einjit::Device::cuda(0);
  if (d.rfind("cuda:", 0) == 0 && d.size() > 5 &&
      d.find_first_not_of("0123456789", 5) == std::string::npos)
    return einjit::Device::cuda(std::stoi(d.substr(5)));
  throw einjit::Error("unknown device \"" + d + "\": use \"cpu\", \"cuda\", \"cuda:N\" or "
                      "\"reference\"");
}

einjit::DType parseDTypeName(const std::string& s) {
  if (auto t = einjit::parseDType(s)) return *t;
  throw einjit::Error("unknown dtype \"" + s + "\": use f32, f64, i32, i64 or bf16");
}

// (names, arrays) of a call's outputs, in the program's output order.
nb::tuple outputsOf(const einjit::Outputs& outs) {
  nb::list arrays;
  for (const auto& t : outs) arrays.append(fromTensor(t));
  return nb::make_tuple(outs.names(), arrays);
}

} // namespace

NB_MODULE(_einjit, m) {
  m.doc() = "einjit's native module; use the einjit package.";
  // Kernels of layers registered with torch.library stay referenced by PyTorch's operator
  // registry until the interpreter exits; nanobind would report them as leaks then.
  nb::set_leak_warnings(false);
  errorType = PyErr_NewExceptionWithDoc(
      "einjit.Error",
      "A mistake in an einjit program or call; str() is the diagnostic with the source line "
      "and a caret under the offending part. line and column: its 1-based position in the "
      "program text (0 when it has none).",
      PyExc_Exception, nullptr);
  m.attr("Error") = nb::handle(errorType);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const einjit::Error& e) {
      nb::object err = nb::handle(errorType)(e.what());
      err.attr("line") = e.line();
      err.attr("column") = e.column();
      PyErr_SetObject(errorType, err.ptr());
    }
  });

  nb::class_<einjit::Kernel>(m, "Kernel")
      .def("call",
           [](const einjit::Kernel& k, const std::vector<nb::object>& args) {
             std::vector<einjit::Arg> a = toArgs(k, args);
             einjit::Outputs outs;
             {
               nb::gil_scoped_release release;
               outs = k.call(a);
             }
             return outputsOf(outs);
           })
      .def("call_named",
           [](const einjit::Kernel& k, const std::map<std::string, nb::object>& arrays,
              const std::map<std::string, double>& scalars) {
             std::map<std::string, einjit::Tensor> tensors;
             for (const auto& [name, value] : arrays)
               tensors[name] = toTensor(toArray(value, name, written(k, name)), name);
             einjit::Outputs outs;
             {
               nb::gil_scoped_release release;
               outs = k.call(tensors, scalars);
             }
             return outputsOf(outs);
           })
      .def("gradient", &einjit::Kernel::gradient, "wrt"_a = std::vector<std::string>{})
      .def("explain",
           [](const einjit::Kernel& k, const std::vector<nb::object>& args, bool llvmIR) {
             return k.explain(toArgs(k, args), llvmIR);
           })
      .def_prop_ro("source", &einjit::Kernel::source)
      .def_prop_ro("ranges", &einjit::Kernel::ranges)
      .def_prop_ro("tensor_arguments", &einjit::Kernel::tensorArguments)
      .def_prop_ro("scalar_arguments", &einjit::Kernel::scalarArguments)
      .def_prop_ro("output_names", &einjit::Kernel::outputNames)
      .def_prop_ro("gradient_inputs", &einjit::Kernel::gradientInputs)
      .def_prop_ro("gradient_outputs", &einjit::Kernel::gradientOutputs)
      .def_prop_ro("device", [](const einjit::Kernel& k) { return k.options().device.name(); });

  m.def(
      "compile",
      [](const std::string& source, const std::string& device,
         const std::optional<std::string>& defaultDType, const std::optional<std::string>& name) {
        einjit::Options o;
        o.device = parseDevice(device);
        if (defaultDType) o.defaultDType = parseDTypeName(*defaultDType);
        if (name) o.name = *name;
        return einjit::compile(source, o);
      },
      "source"_a, "device"_a = "cpu", "default_dtype"_a = nb::none(), "name"_a = nb::none());
  m.def("cuda_available", [] {
    std::string why;
    bool ok = einjit::cudaAvailable(&why);
    return nb::make_tuple(ok, why);
  });
  m.def("synchronize", [](const std::string& device) { einjit::synchronize(parseDevice(device)); });
}
