"""The C++ examples' layers from Python: attention, layernorm, a GELU MLP block, conv + bias +
relu, an embedding bag and an Adam step, each one einjit program.

- From NumPy (`einjit.compile`): each result against the same layer written in NumPy, and the
  Adam step updating the NumPy arrays themselves, in place.
- From PyTorch (`einjit.torch.layer`): each layer as a differentiable PyTorch operator, its
  forward and its gradients (einjit kernels) against PyTorch's own layers and autograd, and
  the Adam step against `torch.optim.Adam`.

    python examples/python/layers.py          # prints one line per check; exit status 1 on a failure

tests: python/tests/test_examples.py runs `check_numpy()` and `check_torch()`.
"""
from __future__ import annotations

import math
import sys

import numpy as np

import einjit

ATTENTION = """s[i,j] := q[i,d] * k[j,d] / sqrt(size(q,1))
(max) m[i] := s[i,j]
e[i,j] := exp(s[i,j] - m[i])
z[i] := e[i,j]
y[i,c] := e[i,j] * v[j,c] / z[i]"""

LAYERNORM = """mu[i] := x[i,j] / size(x,1)
d[i,j] := x[i,j] - mu[i]
v[i] := d[i,j]^2 / size(x,1)
y[i,j] := d[i,j] / sqrt(v[i] + eps) * g[j] + b[j]"""

# y = W2 GELU(W1 x + b1) + b2, GELU with erf (an expression: no function of its own).
GELU_MLP = """t[b,h] := x[b,i] * w1[h,i]
a[b,h] := 0.5 * (t[b,h] + b1[h]) * (1 + erf((t[b,h] + b1[h]) / sqrt(2)))
u[b,o] := a[b,h] * w2[o,h]
y[b,o] := u[b,o] + b2[o]"""

CONV_RELU = """t[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]
y[n,o,h,w] := relu(t[n,o,h,w] + bias[o])"""

EMBEDDING_BAG = "y[b,d] := E[tok[b,j], d]"

# One Adam step, every tensor updated in place (c1 = 1 - b1^t, c2 = 1 - b2^t).
ADAM = """m[i] = b1*m[i] + (1-b1)*g[i]
v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
p[i] = p[i] - lr*(m[i]/c1)/(sqrt(v[i]/c2) + eps)"""


class Checks:
    """Counts and prints results; a NaN on either side is a failure."""

    def __init__(self):
        self.failures = 0

    def close(self, what, got, want, rtol=1e-5):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        ok = got.shape == want.shape and want.size > 0
        err = math.inf
        if ok:
            err = float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))
            ok = bool(err <= rtol)  # NaN fails
        print(f"{'ok  ' if ok else 'FAIL'} {what}: max relative error {err:.2g}")
        self.failures += not ok


def _erf(x):
    return np.vectorize(math.erf)(x)


def check_numpy(checks: Checks | None = None) -> Checks:
    """Each layer from NumPy arrays (float32), against the same layer in NumPy (float64)."""
    c = checks or Checks()
    rng = np.random.default_rng(0)

    def rand(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    q, k, v = rand(5, 8), rand(7, 8), rand(7, 3)
    s = q.astype(np.float64) @ k.T / math.sqrt(8)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    c.close("numpy: attention", einjit.compile(ATTENTION)(q, k, v), e / e.sum(1, keepdims=True) @ v)

    x, g, b = rand(4, 16), rand(16), rand(16)
    d = x - x.astype(np.float64).mean(1, keepdims=True)
    want = d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5) * g + b
    c.close("numpy: layernorm", einjit.compile(LAYERNORM)(x, g, b, 1e-5), want)

    x, w1, b1, w2, b2 = rand(3, 8), rand(16, 8), rand(16), rand(8, 16), rand(8)
    t = x.astype(np.float64) @ w1.T + b1
    want = (0.5 * t * (1 + _erf(t / math.sqrt(2)))) @ w2.T + b2
    c.close("numpy: GELU MLP", einjit.compile(GELU_MLP)(x, w1, b1, w2, b2), want)

    x, kern, bias = rand(2, 3, 9, 9), rand(4, 3, 3, 3), rand(4)
    want = np.zeros((2, 4, 4, 4))
    for h in range(4):
        for w in range(4):
            patch = x[:, :, 2 * h:2 * h + 3, 2 * w:2 * w + 3].astype(np.float64)
            want[:, :, h, w] = np.einsum("ncab,ocab->no", patch, kern)
    want = np.maximum(want + bias[None, :, None, None], 0)
    c.close("numpy: conv + bias + relu", einjit.compile(CONV_RELU)(x, kern, bias), want)

    table, tok = rand(20, 6), rng.integers(0, 20, size=(5, 4))
    c.close("numpy: embedding bag", einjit.compile(EMBEDDING_BAG)(table, tok),
            table.astype(np.float64)[tok].sum(1))

    # The Adam step writes m, v and p, the caller's arrays, in place.
    p, grad = rand(1000), rand(1000)
    m, vv = np.zeros(1000, np.float32), np.zeros(1000, np.float32)
    b1_, b2_, lr, eps = 0.9, 0.999, 1e-3, 1e-8
    want_p = p.astype(np.float64).copy()
    want_m, want_v = np.zeros(1000), np.zeros(1000)
    adam = einjit.compile(ADAM)
    for t in range(1, 4):
        c1, c2 = 1 - b1_**t, 1 - b2_**t
        adam(m, grad, vv, p, b1_, b2_, lr, c1, c2, eps)
        want_m = b1_ * want_m + (1 - b1_) * grad
        want_v = b2_ * want_v + (1 - b2_) * grad.astype(np.float64) ** 2
        want_p = want_p - lr * (want_m / c1) / (np.sqrt(want_v / c2) + eps)
    c.close("numpy: Adam step, in place (3 steps)", p, want_p)
    return c


def check_torch(checks: Checks | None = None) -> Checks:
    """Each layer as a PyTorch operator (float64): forward and gradients against PyTorch's
    layers and autograd; the Adam step against torch.optim.Adam."""
    import torch

    import einjit.torch as et

    c = checks or Checks()
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64, requires_grad=True)

    def both(what, layer, reference, inputs, scalars=()):
        """The einjit layer's output and the gradients of a weighted sum of it, against
        PyTorch's, on the same inputs."""
        mine = layer(*inputs, *scalars)
        theirs = reference(*inputs, *scalars)
        c.close(f"torch: {what}", mine.detach(), theirs.detach())
        weights = torch.randn(mine.shape, generator=gen, dtype=torch.float64)
        floats = [x for x in inputs if x.is_floating_point()]
        got = torch.autograd.grad((mine * weights).sum(), floats)
        want = torch.autograd.grad((theirs * weights).sum(), floats)
        for i, (a, b) in enumerate(zip(got, want)):
            c.close(f"torch: {what}, gradient {i}", a, b)

    both("attention", et.layer(ATTENTION),
         lambda q, k, v: torch.softmax(q @ k.T / math.sqrt(q.shape[1]), dim=1) @ v,
         [rand(5, 8), rand(7, 8), rand(7, 3)])
    both("layernorm", et.layer(LAYERNORM),
         lambda x, g, b, eps: torch.nn.functional.layer_norm(x, (x.shape[1],), g, b, eps),
         [rand(4, 16), rand(16), rand(16)], (1e-5,))
    both("GELU MLP", et.layer(GELU_MLP),
         lambda x, w1, b1, w2, b2: torch.nn.functional.linear(
             torch.nn.functional.gelu(torch.nn.functional.linear(x, w1, b1)), w2, b2),
         [rand(3, 8), rand(16, 8), rand(16), rand(8, 16), rand(8)])
    both("conv + bias + relu", et.layer(CONV_RELU),
         lambda x, k, b: torch.relu(torch.nn.functional.conv2d(x, k, b, stride=2)),
         [rand(2, 3, 9, 9), rand(4, 3, 3, 3), rand(4)])
    tok = torch.randint(0, 20, (5, 4), generator=gen)
    both("embedding bag", et.layer(EMBEDDING_BAG),
         lambda table, t: torch.nn.functional.embedding_bag(t, table, mode="sum"),
         [rand(20, 6), tok])

    # Adam: einjit's in-place step on the parameter's own memory, against torch.optim.Adam.
    theirs = torch.randn(1000, generator=gen, dtype=torch.float64)
    p = theirs.clone()
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    param = torch.nn.Parameter(theirs)
    opt = torch.optim.Adam([param], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, foreach=False)
    adam = einjit.compile(ADAM)
    for t in range(1, 4):
        grad = torch.randn(1000, generator=gen, dtype=torch.float64)
        adam(m, grad, v, p, 0.9, 0.999, 1e-3, 1 - 0.9**t, 1 - 0.999**t, 1e-8)
        param.grad = grad.clone()
        opt.step()
    c.close("torch: Adam step against torch.optim.Adam (3 steps)", p, param.detach(), rtol=1e-12)
    return c


def main() -> int:
    checks = check_numpy()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch is not installed: the torch checks are left out")
    else:
        check_torch(checks)
    print("all checks passed" if checks.failures == 0 else f"{checks.failures} checks failed")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
