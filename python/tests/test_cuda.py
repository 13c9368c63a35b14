"""CUDA from Python: device arrays (PyTorch, CuPy) in and out without copies, bfloat16, the
order of a call with PyTorch's current stream, and einjit.torch layers on CUDA tensors
(forward and backward on einjit's CUDA kernels). The GPU tests run where a CUDA device is
usable and are skipped with the reason otherwise; the tests of device arrays' metadata (a
stand-in DLPack array that claims to be on a CUDA device) and of bfloat16 on the CPU run
everywhere."""
import ctypes
import math

import numpy as np
import pytest

import einjit
from einjit import _einjit

CUDA_OK, CUDA_WHY = _einjit.cuda_available()


def torch_cuda():
    """PyTorch with a usable GPU that einjit can use too, or a skip that says what is missing."""
    torch = pytest.importorskip("torch")
    if not CUDA_OK:
        pytest.skip(f"needs a CUDA GPU for einjit: {CUDA_WHY}")
    if not torch.cuda.is_available():
        pytest.skip("needs PyTorch built with CUDA and a GPU")
    return torch


# ---- everywhere: metadata of device arrays, bfloat16 on the CPU ------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class FakeDeviceArray:
    """A DLPack producer whose array claims to live on a CUDA device (device type 2), over host
    memory that nothing may read: enough to test what einjit does with a device array's
    metadata on a machine without a GPU."""

    def __init__(self, shape, device_id=0):
        self._memory = np.zeros(int(np.prod(shape)), np.float32)
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._managed = _DLManagedTensor()
        t = self._managed.dl_tensor
        t.data = self._memory.ctypes.data
        t.device = _DLDevice(2, device_id)
        t.ndim = len(shape)
        t.dtype = _DLDataType(2, 32, 1)  # float32
        t.shape = self._shape
        t.strides = None  # row-major
        self.device_id = device_id

    def __dlpack_device__(self):
        return (2, self.device_id)

    def __dlpack__(self, stream=None, **kwargs):
        if kwargs.get("max_version") is not None:
            raise TypeError("only the unversioned capsule")  # the consumer falls back to it
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._managed), b"dltensor", None)


def test_device_array_for_a_cpu_kernel_is_an_error_with_a_caret():
    k = einjit.compile("y[i,j] := x[i,j] * 2")
    fake = FakeDeviceArray((3, 4), device_id=1)
    if "no CUDA support" not in CUDA_WHY:
        with pytest.raises(einjit.Error) as e:
            k(fake)
        text = str(e.value)
        assert "tensor 'x' is on cuda:1 but the kernel runs on cpu" in text
        assert "   1 | y[i,j] := x[i,j] * 2\n     |           ^" in text
    else:  # a build without CUDA cannot view device memory at all
        with pytest.raises(einjit.Error, match="no CUDA support"):
            k(fake)


def test_bfloat16_torch_tensors_on_the_cpu():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(1)
    a = torch.randn(6, 5, generator=g).to(torch.bfloat16)
    b = torch.randn(5, 4, generator=g).to(torch.bfloat16)
    c = einjit.compile("c[i,j] := a[i,k] * b[k,j]")(a, b)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.bfloat16 and c.device.type == "cpu"
    # f32 arithmetic, one rounding to bf16 per stored element (docs/LANGUAGE.md "dtypes").
    expected = (a.float() @ b.float()).to(torch.bfloat16)
    torch.testing.assert_close(c, expected, rtol=1e-2, atol=1e-2)
    # Written in place without a copy.
    y = torch.zeros(6, 5, dtype=torch.bfloat16)
    out = einjit.compile("y[i,j] += a[i,j] * 2")(y, a)
    assert out.data_ptr() == y.data_ptr()
    torch.testing.assert_close(y, (2 * a.float()).to(torch.bfloat16), rtol=0, atol=0)


def test_bfloat16_result_for_a_numpy_caller_is_a_dlpack_array():
    """NumPy has no bfloat16: the result is a DLPack-capable array that PyTorch takes."""
    torch = pytest.importorskip("torch")
    r = einjit.compile("y[i] := i * 0.5 where i in 0:4", default_dtype="bf16")()
    assert not isinstance(r, np.ndarray)
    assert r.__dlpack_device__() == (1, 0)  # the host
    t = torch.from_dlpack(r)
    assert t.dtype == torch.bfloat16
    torch.testing.assert_close(t, torch.tensor([0, 0.5, 1, 1.5], dtype=torch.bfloat16), rtol=0, atol=0)


def test_bfloat16_layer_on_the_cpu():
    torch = pytest.importorskip("torch")
    import einjit.torch

    linear = einjit.torch.layer("y[b,o] := x[b,i] * w[o,i]")
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 8, generator=g).to(torch.bfloat16).requires_grad_()
    w = torch.randn(3, 8, generator=g).to(torch.bfloat16).requires_grad_()
    y = linear(x, w)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), x.float() @ w.float().T, rtol=2e-2, atol=2e-2)
    y.float().sum().backward()
    assert x.grad.dtype == torch.bfloat16
    torch.testing.assert_close(x.grad.float(), w.float().sum(0).expand(4, 8), rtol=2e-2, atol=2e-2)


def test_layer_device_names_the_cpu_backend():
    pytest.importorskip("torch")
    import einjit.torch

    with pytest.raises(einjit.Error, match='device is the backend for CPU tensors'):
        einjit.torch.layer("y[i] := x[i] * 2", device="cuda")


def test_explain_shows_the_cuda_source_without_a_gpu():
    """explain() lowers and prints the CUDA code for these shapes; it needs no GPU."""
    if "no CUDA support" in CUDA_WHY:
        pytest.skip(CUDA_WHY)
    k = einjit.compile("c[i,j] := a[i,k] * b[k,j]", device="cuda")
    text = k.explain(np.ones((64, 32), np.float32), np.ones((32, 16), np.float32))
    assert "# target: CUDA (cuda:0)" in text and "__global__" in text


class _Stream:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def wait_stream(self, other):
        self.log.append(f"{self.name} waits for {other.name}")


class _TorchCudaTensor:
    """Stands for a PyTorch CUDA tensor in the stream-order logic (no GPU here)."""

    is_cuda = True
    device = "cuda:0"


_TorchCudaTensor.__module__ = "torch.stand_in"


@pytest.mark.parametrize("side_stream", [True, False])
def test_call_order_with_torchs_current_stream(monkeypatch, side_stream):
    """The default stream (einjit's) waits for the current one before the call, and the
    current one for the default stream after it; nothing to do when they are the same."""
    torch = pytest.importorskip("torch")
    log = []
    default = _Stream("default", log)
    current = _Stream("side", log) if side_stream else default
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: current)
    monkeypatch.setattr(torch.cuda, "default_stream", lambda device=None: default)
    with einjit._StreamOrder([1.5, _TorchCudaTensor()]):
        log.append("call")
    if side_stream:
        assert log == ["default waits for side", "call", "side waits for default"]
    else:
        assert log == ["call"]


def test_cuda_skip_message_says_why():
    """Where there is no GPU, the GPU tests below are skipped with einjit's reason."""
    if CUDA_OK:
        assert CUDA_WHY == "" or isinstance(CUDA_WHY, str)
    else:
        assert CUDA_WHY, "einjit says why CUDA is unusable"


# ---- on a GPU ---------------------------------------------------------------------------------

def test_torch_cuda_tensors_in_and_out_without_copies():
    torch = torch_cuda()
    g = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(65, 33, device="cuda", generator=g)
    b = torch.randn(47, 33, device="cuda", generator=g).T  # a transposed view, read in place
    mm = einjit.compile("c[i,j] := a[i,k] * b[k,j]", device="cuda")
    c = mm(a, b)
    assert isinstance(c, torch.Tensor) and c.device == a.device and c.dtype == torch.float32
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    by_name = mm(b=b, a=a)
    torch.testing.assert_close(by_name, c)
    # '+=' into a CUDA tensor, in place.
    y = torch.ones(65, 33, device="cuda")
    out = einjit.compile("y[i,j] += 2 * a[i,j]", device="cuda")(y, a)
    assert out.data_ptr() == y.data_ptr()
    torch.testing.assert_close(y, 1 + 2 * a)


def test_cuda_float64_and_gradient_kernels():
    torch = torch_cuda()
    g = torch.Generator(device="cuda").manual_seed(4)
    a = torch.randn(9, 7, device="cuda", dtype=torch.float64, generator=g)
    b = torch.randn(7, 5, device="cuda", dtype=torch.float64, generator=g)
    dc = torch.randn(9, 5, device="cuda", dtype=torch.float64, generator=g)
    grad = einjit.compile("c[i,j] := a[i,k] * b[k,j]", device="cuda").gradient(["a", "b"])
    da, db = grad(dc=dc, a=a, b=b)
    assert da.is_cuda and db.is_cuda
    torch.testing.assert_close(da, dc @ b.T, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(db, a.T @ dc, rtol=1e-12, atol=1e-12)


def test_cuda_bfloat16():
    torch = torch_cuda()
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(128, 64, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(64, 96, device="cuda", generator=g).to(torch.bfloat16)
    c = einjit.compile("c[i,j] := a[i,k] * b[k,j]", device="cuda")(a, b)
    assert c.dtype == torch.bfloat16 and c.is_cuda
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


def test_cuda_call_follows_torchs_current_stream():
    """On a side stream, a long PyTorch kernel, then einjit reading its result, then PyTorch
    reading einjit's: each waits for the one before (no host synchronisation in between)."""
    torch = torch_cuda()
    scale = einjit.compile("y[i,j] := x[i,j] * 3", device="cuda")
    n = 2048
    side = torch.cuda.Stream()
    base = torch.full((n, n), 1.0, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        x = base
        for _ in range(20):  # long enough that an unordered read would see an old value
            x = x @ base / n
        y = scale(x)
        z = y + 1
    torch.cuda.synchronize()
    torch.testing.assert_close(z, torch.full((n, n), 4.0, device="cuda"))


def test_cuda_mixed_devices_are_an_error():
    torch = torch_cuda()
    k = einjit.compile("y[i] := a[i] + b[i]", device="cuda")
    with pytest.raises(einjit.Error, match="pass every tensor on one device"):
        k(torch.ones(4, device="cuda"), torch.ones(4))
    with pytest.raises(einjit.Error, match="but the kernel runs on cpu"):
        einjit.compile("y[i] := a[i] + b[i]")(torch.ones(4, device="cuda"), torch.ones(4, device="cuda"))


def test_cupy_arrays_in_and_out():
    cupy = pytest.importorskip("cupy")
    if not CUDA_OK:
        pytest.skip(f"needs a CUDA GPU for einjit: {CUDA_WHY}")
    a = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    y = einjit.compile("y[j] := a[i,j]", device="cuda")(a)
    assert isinstance(y, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(y), np.arange(12, dtype=np.float32).reshape(3, 4).sum(0))


def _layers():
    from test_torch import LAYERS

    return LAYERS


@pytest.mark.parametrize("index", range(4), ids=["conv", "attention", "layernorm", "distance"])
def test_layers_on_cuda_match_pytorch_and_pass_gradcheck(index):
    torch = torch_cuda()
    import einjit.torch

    name, source, shapes, scalars, reference = _layers()[index]
    layer = einjit.torch.layer(source)
    g = torch.Generator(device="cuda").manual_seed(index)
    inputs = [torch.randn(*s, device="cuda", dtype=torch.float64, generator=g).requires_grad_()
              for s in shapes]
    got = layer(*inputs, *scalars)
    assert got.is_cuda
    torch.testing.assert_close(got, reference(*inputs, *scalars), rtol=1e-10, atol=1e-10)
    assert torch.autograd.gradcheck(lambda *xs: layer(*xs, *scalars), inputs, eps=1e-6, atol=1e-7)


def test_model_on_cuda_inside_torch_compile():
    torch = torch_cuda()
    from test_torch import EinjitMLP

    model = EinjitMLP().cuda()
    x = torch.randn(32, 8, device="cuda", generator=torch.Generator(device="cuda").manual_seed(5))
    eager = model(x)
    eager.square().sum().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(x)
    out.square().sum().backward()
    torch.testing.assert_close(out, eager)
    for p, g in zip(model.parameters(), eager_grads):
        assert p.grad.is_cuda
        torch.testing.assert_close(p.grad, g)
    reference = torch.nn.functional.linear(
        torch.nn.functional.gelu(torch.nn.functional.linear(x, model.w1, model.c1)), model.w2, model.c2)
    torch.testing.assert_close(out, reference, rtol=1e-4, atol=1e-4)
    assert math.isfinite(out.sum().item())
