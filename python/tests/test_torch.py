"""einjit.torch: layers as PyTorch operators. Gradients against finite differences in float64
(torch.autograd.gradcheck), results against PyTorch's own layers, and a model with einjit
layers inside torch.compile(fullgraph=True)."""
import math

import pytest

torch = pytest.importorskip("torch")
import einjit  # noqa: E402
import einjit.torch  # noqa: E402

CONV = """t[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]
y[n,o,h,w] := t[n,o,h,w] + bias[o]"""
ATTENTION = """s[i,j] := q[i,d] * k[j,d] / sqrt(size(q,1))
(max) m[i] := s[i,j]
e[i,j] := exp(s[i,j] - m[i])
z[i] := e[i,j]
y[i,c] := e[i,j] * v[j,c] / z[i]"""
LAYERNORM = """mu[i] := x[i,j] / size(x,1)
d[i,j] := x[i,j] - mu[i]
v[i] := d[i,j]^2 / size(x,1)
y[i,j] := d[i,j] / sqrt(v[i] + eps) * g[j] + b[j]"""
DISTANCE = "y[i,j] := (w[k,i] - x[k,j]) ^ 2"


def randn(*shape, requires_grad=True):
    g = torch.Generator().manual_seed(sum(shape) * 31 + len(shape))
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(requires_grad)


# (name, program, input shapes, scalars, PyTorch reference)
LAYERS = [
    ("conv", CONV, [(2, 3, 6, 5), (4, 3, 3, 2), (4,)], [],
     lambda x, k, b: torch.nn.functional.conv2d(x, k, b)),
    ("attention", ATTENTION, [(5, 4), (6, 4), (6, 3)], [],
     lambda q, k, v: torch.softmax(q @ k.T / math.sqrt(q.shape[1]), dim=1) @ v),
    ("layernorm", LAYERNORM, [(3, 8), (8,), (8,)], [1e-5],
     lambda x, g, b, eps: torch.nn.functional.layer_norm(x, (x.shape[1],), g, b, eps)),
    ("distance", DISTANCE, [(3, 4), (3, 5)], [],
     lambda w, x: ((w[:, :, None] - x[:, None, :]) ** 2).sum(0)),
]


@pytest.mark.parametrize("name,source,shapes,scalars,reference", LAYERS, ids=[l[0] for l in LAYERS])
def test_layer_matches_pytorch_and_passes_gradcheck(name, source, shapes, scalars, reference):
    layer = einjit.torch.layer(source)
    inputs = [randn(*s) for s in shapes]
    got = layer(*inputs, *scalars)
    torch.testing.assert_close(got, reference(*inputs, *scalars), rtol=1e-10, atol=1e-10)
    assert torch.autograd.gradcheck(lambda *xs: layer(*xs, *scalars), inputs, eps=1e-6, atol=1e-7)


def test_gradients_match_pytorch_autograd():
    layer = einjit.torch.layer(ATTENTION)
    q, k, v = randn(5, 4), randn(6, 4), randn(6, 3)
    dy = randn(5, 3, requires_grad=False)
    (layer(q, k, v) * dy).sum().backward()
    mine = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    reference = LAYERS[1][4]
    (reference(q, k, v) * dy).sum().backward()
    for a, t in zip(mine, (q, k, v)):
        torch.testing.assert_close(a, t.grad, rtol=1e-10, atol=1e-10)


class EinjitMLP(torch.nn.Module):
    """Linear + bias + GELU, then linear + bias, written in einjit."""

    hidden = einjit.torch.layer(
        "t[b,o] := x[b,i] * w[o,i]\n"
        "y[b,o] := 0.5 * (t[b,o] + c[o]) * (1 + erf((t[b,o] + c[o]) / sqrt(2)))"
    )
    linear = einjit.torch.layer("t[b,o] := x[b,i] * w[o,i]\ny[b,o] := t[b,o] + c[o]")

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.w1 = torch.nn.Parameter(torch.randn(16, 8, generator=g) * 0.3)
        self.c1 = torch.nn.Parameter(torch.zeros(16))
        self.w2 = torch.nn.Parameter(torch.randn(4, 16, generator=g) * 0.3)
        self.c2 = torch.nn.Parameter(torch.zeros(4))

    def forward(self, x):
        return self.linear(self.hidden(x, self.w1, self.c1), self.w2, self.c2)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_model_inside_torch_compile_fullgraph(backend):
    """aot_eager traces forward and backward through the fake implementations; inductor (the
    default backend) also generates code for the PyTorch operations around the einjit
    operators."""
    torch._dynamo.reset()
    model = EinjitMLP()
    x = torch.randn(32, 8, generator=torch.Generator().manual_seed(5))
    eager = model(x)
    eager.square().sum().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()

    compiled = torch.compile(model, fullgraph=True, backend=backend)
    out = compiled(x)
    out.square().sum().backward()
    torch.testing.assert_close(out, eager)
    for p, g in zip(model.parameters(), eager_grads):
        torch.testing.assert_close(p.grad, g)
    # The same as plain PyTorch.
    reference = torch.nn.functional.linear(
        torch.nn.functional.gelu(torch.nn.functional.linear(x, model.w1, model.c1)), model.w2, model.c2)
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-5)


def test_graph_has_no_break():
    model = EinjitMLP()
    x = torch.randn(4, 8)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1


def test_layer_rejects_in_place_outputs():
    with pytest.raises(einjit.Error, match="':='"):
        einjit.torch.layer("y[i] = x[i] * 2")


def test_torch_tensors_cross_without_copies():
    k = einjit.compile("y[i,j] += 2 * x[j,i]")
    y = torch.ones(3, 4)
    x = torch.arange(12.0).reshape(3, 4).T  # a transposed view, read in place
    out = k(y, x)
    assert isinstance(out, torch.Tensor) and out.data_ptr() == y.data_ptr()
    torch.testing.assert_close(y, 1 + 2 * x.T)
    fresh = einjit.compile("z[i] := x[i,j]")(x)
    assert isinstance(fresh, torch.Tensor)
    torch.testing.assert_close(fresh, x.sum(1))
