"""einjit programs as PyTorch operators with einjit gradients.

    import torch, einjit.torch
    conv = einjit.torch.layer("y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]")
    y = conv(x, k)          # torch tensors in, a torch tensor out; y.backward() works

layer(source) compiles the program and its gradient program and registers both as custom
operators (torch.ops.einjit.*) through torch.library: the forward operator with a fake
(meta) implementation, so torch.compile(fullgraph=True) traces through it without a graph
break, and an autograd formula whose backward is the einjit gradient kernel, itself a custom
operator. Tensors cross without copies (DLPack). Arguments are tensors, then scalar parameters
as Python numbers, in the program's positional order (Layer.arguments).

A layer runs where its tensors are: CPU tensors on einjit's CPU JIT (or the interpreter, with
device="reference"), CUDA tensors on einjit's CUDA backend on their device, forward and
backward, ordered with PyTorch's current stream (einjit.Kernel.__call__ says how).

This is also how einjit runs on several machines: its layers are ordinary operators inside
PyTorch's distributed engines (DistributedDataParallel, FSDP).
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch

from . import Error
from . import compile as _compile

__all__ = ["Layer", "layer"]

_library = torch.library.Library("einjit", "FRAGMENT")
_layers: dict[str, "Layer"] = {}

_TORCH_DTYPES = {
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.int64): torch.int64,
}
_NUMPY_DTYPES = {v: k for k, v in _TORCH_DTYPES.items()}
# NumPy has no bfloat16: shape inference runs bf16 inputs as float32 stand-ins (a program's
# floating-point tensors share one dtype, docs/LANGUAGE.md "dtypes", so its float results are
# bf16 exactly when its inputs are).
_NUMPY_DTYPES[torch.bfloat16] = np.dtype(np.float32)


def _schema_tuple(n: int) -> str:
    return "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"


class Layer:
    """A program as a differentiable PyTorch operator. Call it with the program's tensor
    arguments, then its scalar parameters, by position."""

    def __init__(self, source: str, device: str = "cpu"):
        if device not in ("cpu", "reference"):
            raise Error(
                f'layer(device="{device}"): device is the backend for CPU tensors, "cpu" or '
                '"reference"; CUDA tensors always run on einjit\'s CUDA backend on their device'
            )
        self.forward_kernel = _compile(source, device)
        k = self.forward_kernel
        written = [y for y in k.output_names if y in k.tensor_arguments]
        if written:
            raise Error(
                f"a layer's program creates its outputs with ':=' ({', '.join(written)} is "
                "written in place): PyTorch operators return new tensors"
            )
        self.tensors = k.tensor_arguments
        self.scalars = k.scalar_arguments
        self.outputs = k.output_names
        self.backward_kernel = k.gradient()
        # (forward, backward) kernels per CUDA device, compiled on first use there.
        self._cuda_kernels: dict = {}
        self.differentiable = [d[1:] for d in self.backward_kernel.gradient_outputs]
        key = hashlib.sha256(f"{device}\n{k.source}".encode()).hexdigest()[:16]
        self.name = f"p{key}"
        self._shape_cache: dict = {}
        if self.name not in _layers:
            self._register()
            _layers[self.name] = self
        self.op = getattr(torch.ops.einjit, self.name).default
        self.backward_op = getattr(torch.ops.einjit, self.name + "_backward").default

    @property
    def arguments(self) -> list:
        """The positional order: tensor arguments, then scalar parameters."""
        return self.tensors + self.scalars

    def __call__(self, *args):
        return self.op(*args)

    # The operators.

    def _register(self):
        params = [f"Tensor {t}" for t in self.tensors] + [f"float {s}" for s in self.scalars]
        grads = ["Tensor d" + y for y in self.outputs]
        _library.define(f"{self.name}({', '.join(params)}) -> {_schema_tuple(len(self.outputs))}")
        _library.define(
            f"{self.name}_backward({', '.join(grads + params)}) -> "
            f"{_schema_tuple(len(self.differentiable))}"
        )
        qualname = f"einjit::{self.name}"
        for key in ("CPU", "CUDA"):
            torch.library.impl(qualname, key, lib=_library)(self._forward)
            torch.library.impl(qualname + "_backward", key, lib=_library)(self._backward)
        torch.library.register_fake(qualname, lib=_library)(self._forward_fake)
        torch.library.register_fake(qualname + "_backward", lib=_library)(self._backward_fake)
        torch.library.register_autograd(
            qualname, self._autograd_backward, setup_context=self._setup_context, lib=_library
        )

    def _kernels(self, tensors):
        """(forward, backward) kernels for the device of the call's tensors."""
        device = tensors[0].device if tensors else torch.device("cpu")
        if device.type == "cpu":
            return self.forward_kernel, self.backward_kernel
        if device.type != "cuda":
            raise Error(f"einjit layers run on CPU and CUDA tensors, not on {device.type}")
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index not in self._cuda_kernels:
            forward = _compile(self.forward_kernel.source, f"cuda:{index}")
            self._cuda_kernels[index] = (forward, forward.gradient())
        return self._cuda_kernels[index]

    def _run(self, kernel, args):
        results = kernel(*args)
        if not isinstance(results, tuple):
            results = (results,)
        # einjit's own memory, handed over without a copy; PyTorch owns the handle from now.
        return tuple(torch.from_dlpack(r) for r in results)

    def _forward(self, *args):
        forward, _ = self._kernels(args[: len(self.tensors)])
        out = self._run(forward, args)
        return out[0] if len(out) == 1 else out

    def _forward_fake(self, *args):
        # The output shapes come from einjit's range inference: run the kernel once per
        # signature on inputs of the right shapes whose every stride is 0 (one element of
        # memory each), and remember the shapes.
        tensors = args[: len(self.tensors)]
        key = tuple((tuple(t.shape), t.dtype) for t in tensors) + tuple(args[len(self.tensors):])
        if key not in self._shape_cache:
            stand_ins = [
                np.broadcast_to(np.zeros(1, _NUMPY_DTYPES[t.dtype]), tuple(int(s) for s in t.shape))
                for t in tensors
            ]
            # For CUDA tensors the CUDA kernel runs on the stand-ins (copied to the device: one
            # element each), which is quicker than the CPU kernel where that is the interpreter
            # (a CUDA-only build).
            cuda = bool(tensors) and tensors[0].device.type == "cuda"
            kernel = self._kernels(tensors)[0] if cuda else self.forward_kernel
            results = kernel(*stand_ins, *args[len(self.tensors):])
            if not isinstance(results, tuple):
                results = (results,)
            bf16 = any(t.dtype == torch.bfloat16 for t in tensors)
            self._shape_cache[key] = [
                (r.shape, torch.bfloat16 if bf16 and r.dtype == np.float32 else _TORCH_DTYPES[r.dtype])
                for r in results
            ]
        ref = tensors[0]
        out = tuple(ref.new_empty(shape, dtype=dtype) for shape, dtype in self._shape_cache[key])
        return out[0] if len(out) == 1 else out

    def _backward_args(self, grads, args):
        names = ["d" + y for y in self.outputs] + self.arguments
        values = [g.contiguous() for g in grads] + list(args)
        taken = set(self.backward_kernel.tensor_arguments + self.backward_kernel.scalar_arguments)
        return {n: v for n, v in zip(names, values) if n in taken}

    def _backward(self, *args):
        n = len(self.outputs)
        named = self._backward_args(args[:n], args[n:])
        _, backward = self._kernels(args[n: n + len(self.tensors)])
        results = backward.call_named(**named)
        out = tuple(torch.from_dlpack(results["d" + x]) for x in self.differentiable)
        return out[0] if len(out) == 1 else out

    def _backward_fake(self, *args):
        n = len(self.outputs)
        inputs = dict(zip(self.tensors, args[n:]))
        out = tuple(torch.empty_like(inputs[x]) for x in self.differentiable)
        return out[0] if len(out) == 1 else out

    def _setup_context(self, ctx, inputs, output):
        ctx.save_for_backward(*inputs[: len(self.tensors)])
        ctx.scalars = inputs[len(self.tensors):]

    def _autograd_backward(self, ctx, *grads):
        tensors = ctx.saved_tensors
        grads = [torch.zeros_like(g) if g is None else g for g in grads]
        dx = self.backward_op(*grads, *tensors, *ctx.scalars)
        if not isinstance(dx, (tuple, list)):
            dx = (dx,)
        by_name = dict(zip(self.differentiable, dx))
        return tuple(by_name.get(t) for t in self.tensors) + (None,) * len(self.scalars)


def layer(source: str, device: str = "cpu") -> Layer:
    """The program as a differentiable PyTorch operator (see the module's doc). device: the
    backend for CPU tensors, "cpu" (the LLVM JIT) or "reference" (the interpreter); CUDA
    tensors run on einjit's CUDA backend."""
    return Layer(source, device)
