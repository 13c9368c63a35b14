"""einjit: an einsum-style tensor language with symbolic gradients, compiled at run time.

    import numpy as np, einjit
    mm = einjit.compile("c[i,j] := a[i,k] * b[k,j]")
    c = mm(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))

Arguments are arrays of any DLPack-capable library (NumPy, PyTorch, JAX, CuPy, ...) or Python
numbers, by position (tensors in order of first appearance in the program, then scalar
parameters) or by name. They are read and written in place, without copies (JAX arrays, which
are immutable, are only read: a JAX array for a tensor the program writes is an error), on
the host or on a CUDA device (for a kernel compiled with device="cuda"); results come back as arrays of the
first array argument's library (NumPy when there is none), over einjit's memory, without
copies, on the arguments' device. CUDA calls run on the device's default stream, ordered with
PyTorch's and CuPy's current stream (see Kernel.__call__). Every mistake raises einjit.Error,
whose text is the diagnostic with the program line and a caret under the offending part.
"""
from __future__ import annotations

from . import _einjit
from ._einjit import Error

__all__ = ["Error", "Kernel", "compile", "cuda_available", "synchronize"]
__version__ = "0.1.0"


def _library(a) -> str:
    return type(a).__module__.split(".")[0]


def _framework_of(args):
    """The from_dlpack of the first array argument's library (no conversion when it is NumPy
    or unknown: host results are NumPy arrays already, and other results DLPack-capable)."""
    for a in args:
        if isinstance(a, (int, float)):
            continue
        module = _library(a)
        if module == "torch":
            import torch

            return torch.from_dlpack
        if module in ("jax", "jaxlib"):
            import jax.numpy

            return jax.numpy.from_dlpack
        if module == "cupy":
            import cupy

            return cupy.from_dlpack
        break
    return lambda a: a


class _StreamOrder:
    """Orders a call with the caller's current CUDA stream.

    einjit queues its CUDA work on the device's legacy default stream, which is also PyTorch's
    and CuPy's default stream: with default streams nothing needs doing, and a call returns
    before its kernels finish, like any other CUDA operation. When PyTorch's (or CuPy's)
    current stream is another one, the default stream waits for the work queued on it before
    the call, and it waits for the call's work after: both through events, without blocking the
    host."""

    def __init__(self, arrays):
        self._before = self._after = None
        for a in arrays:
            module = _library(a)
            if module == "torch" and a.is_cuda:
                import torch

                current = torch.cuda.current_stream(a.device)
                default = torch.cuda.default_stream(a.device)
                if current != default:
                    self._before = lambda: default.wait_stream(current)
                    self._after = lambda: current.wait_stream(default)
                return
            if module == "cupy":
                import cupy

                current = cupy.cuda.get_current_stream()
                if current.ptr != 0:
                    null = cupy.cuda.Stream.null
                    self._before = lambda: null.wait_event(current.record())
                    self._after = lambda: current.wait_event(null.record())
                return

    def __enter__(self):
        if self._before:
            self._before()

    def __exit__(self, *exc):
        if self._after:
            self._after()


class Kernel:
    """A compiled einjit program; call it with arrays and numbers."""

    def __init__(self, native: _einjit.Kernel):
        self._k = native

    def _run(self, args, kwargs):
        """(names, arrays, from_dlpack) of a call: positional only, or by name."""
        if not kwargs:
            with _StreamOrder(args):
                names, arrays = self._k.call(list(args))
            return names, arrays, _framework_of(args)
        order = list(self._k.tensor_arguments) + list(self._k.scalar_arguments)
        if len(args) > len(order):
            raise Error(f"{len(args)} positional arguments given, the program takes "
                        f"{len(order)}: " + ", ".join(order))
        values = dict(zip(order, args))
        for name, value in kwargs.items():
            if name in values:
                raise Error(f"argument '{name}' given both by position and by name")
            values[name] = value
        scalars = {n: float(v) for n, v in values.items() if isinstance(v, (int, float))}
        arrays = {n: v for n, v in values.items() if n not in scalars}
        with _StreamOrder(arrays.values()):
            names, results = self._k.call_named(arrays, scalars)
        return names, results, _framework_of(list(arrays.values()))

    def __call__(self, *args, **kwargs):
        """Runs the program. One output: that array; several: a tuple in statement order.

        With CUDA arrays (a kernel compiled for "cuda"), the call queues its work on the
        device's legacy default stream and returns without waiting (einjit.synchronize()
        waits). When PyTorch's or CuPy's current stream is not the default stream, the call is
        ordered after the work queued on it and before the work queued on it later (events,
        no host wait). Results are einjit memory allocated and released in the default stream's
        order, like a PyTorch tensor allocated on the default stream: work on another stream
        that reads one must finish before the last reference to it goes (PyTorch's rule for
        tensors used across streams)."""
        _, arrays, convert = self._run(args, kwargs)
        results = tuple(convert(a) for a in arrays)
        return results[0] if len(results) == 1 else results

    def call_named(self, *args, **kwargs) -> dict:
        """Like calling the kernel, but returns {output name: array}."""
        names, arrays, convert = self._run(args, kwargs)
        return {n: convert(a) for n, a in zip(names, arrays)}

    def gradient(self, wrt=()) -> "Kernel":
        """The gradient program with respect to the named inputs (all floating-point inputs
        when empty). It takes d<Y> for each output Y and the forward inputs, by name or
        position (see tensor_arguments), and returns d<X> for each X of wrt, in order."""
        return Kernel(self._k.gradient(list(wrt)))

    def explain(self, *args, llvm_ir: bool = False, **kwargs) -> str:
        """How a call with these arguments runs: schedules and loop-nest IR (and the
        optimized LLVM IR with llvm_ir=True). Nothing is written."""
        if kwargs:
            order = list(self._k.tensor_arguments) + list(self._k.scalar_arguments)
            values = dict(zip(order, args))
            values.update(kwargs)
            args = [values[n] for n in order if n in values]
        return self._k.explain(list(args), llvm_ir)

    @property
    def source(self) -> str:
        """The canonical program text."""
        return self._k.source

    @property
    def ranges(self) -> str:
        """'i in LO:HI' per index of each statement, symbolic."""
        return self._k.ranges

    @property
    def tensor_arguments(self) -> list:
        """Tensor argument names in positional order."""
        return list(self._k.tensor_arguments)

    @property
    def scalar_arguments(self) -> list:
        """Scalar parameter names, after the tensors in positional order."""
        return list(self._k.scalar_arguments)

    @property
    def output_names(self) -> list:
        """The program's outputs, in the order a call returns them."""
        return list(self._k.output_names)

    @property
    def gradient_inputs(self) -> list:
        """For a gradient kernel: the output-gradient names (d<Y>) it takes."""
        return list(self._k.gradient_inputs)

    @property
    def gradient_outputs(self) -> list:
        """For a gradient kernel: the gradients (d<X>) it returns."""
        return list(self._k.gradient_outputs)

    @property
    def device(self) -> str:
        """The device the kernel runs on."""
        return self._k.device

    def __repr__(self) -> str:
        return f"einjit.Kernel({self.source!r}, device={self.device!r})"


def compile(source: str, device: str = "cpu", *, default_dtype: str | None = None,
            name: str | None = None) -> Kernel:
    """Parses and checks a program. device: "cpu" (the LLVM JIT), "cuda", "cuda:N" or
    "reference" (the interpreter). default_dtype: the output dtype (f32, f64, ...) of programs
    that read no floating-point tensor. name: shown in diagnostics as the file name."""
    return Kernel(_einjit.compile(source, device, default_dtype, name))


def cuda_available() -> bool:
    """Whether a CUDA device is usable."""
    return _einjit.cuda_available()[0]


def synchronize(device: str = "cuda") -> None:
    """Waits for the work queued on the device."""
    _einjit.synchronize(device)
