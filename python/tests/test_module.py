"""einjit's Python module against NumPy: results, zero-copy arguments and results, calls by
position and by name, gradients, introspection and the caret errors."""
import gc

import numpy as np
import pytest

import einjit

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# (program, input shapes, NumPy reference) for programs of one output.
CASES = [
    ("c[i,j] := a[i,k] * b[k,j]", [(5, 7), (7, 3)], lambda a, b: a @ b),
    ("y[i] := relu(x[i])", [(11,)], lambda x: np.maximum(x, 0)),
    ("s := x[i] * x[i]", [(9,)], lambda x: np.sum(x * x)),
    (
        "y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]",
        [(2, 3, 6, 5), (4, 3, 3, 2)],
        lambda x, k: np.einsum(
            "nchwab,ocab->nohw",
            np.lib.stride_tricks.sliding_window_view(x, (3, 2), axis=(2, 3)),
            k,
        ),
    ),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("source,shapes,reference", CASES)
def test_matches_numpy(source, shapes, reference, dtype):
    args = [rand(*s, dtype=dtype) for s in shapes]
    got = einjit.compile(source)(*args)
    assert isinstance(got, np.ndarray) and got.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, reference(*args), rtol=tol, atol=tol)  # fails on NaN


def test_strided_views_are_read_in_place():
    a = rand(6, 4)
    b = rand(6, 5)[:, ::2]  # a non-contiguous column slice
    got = einjit.compile("c[i,j] := a[k,i] * b[k,j]")(a, b)
    np.testing.assert_allclose(got, a.T @ b, rtol=1e-5, atol=1e-5)


def test_outputs_written_in_place_and_results_share_memory():
    x = rand(8)
    y = np.full(8, 5.0, np.float32)
    out = einjit.compile("y[i] += 2 * x[i]")(y, x)  # tensors in order of first appearance
    np.testing.assert_allclose(y, 5.0 + 2 * x, rtol=1e-6)
    assert np.shares_memory(out, y)


def test_result_outlives_the_kernel():
    k = einjit.compile("y[i] := x[i] + 1")
    y = k(np.arange(4, dtype=np.float32))
    del k
    gc.collect()
    np.testing.assert_array_equal(y, [1, 2, 3, 4])


def test_scalars_by_position_and_by_name():
    k = einjit.compile("y[i] := alpha * x[i] + beta")
    x = rand(6)
    np.testing.assert_allclose(k(x, 2, 0.5), 2 * x + 0.5, rtol=1e-6)
    np.testing.assert_allclose(k(x=x, beta=0.5, alpha=2), 2 * x + 0.5, rtol=1e-6)
    np.testing.assert_allclose(k(x, beta=-1.0, alpha=3.0), 3 * x - 1, rtol=1e-6)
    assert k.tensor_arguments == ["x"] and k.scalar_arguments == ["alpha", "beta"]


def test_several_outputs():
    k = einjit.compile("s[i] := x[i,j]; m[i] := max(x[i,j], 0)")
    x = rand(3, 4)
    s, m = k(x)
    np.testing.assert_allclose(s, x.sum(1), rtol=1e-5)
    np.testing.assert_allclose(m, np.maximum(x, 0).sum(1), rtol=1e-5)
    named = k.call_named(x)
    assert list(named) == ["s", "m"]
    np.testing.assert_allclose(named["m"], m)


def test_gradient_of_matmul():
    k = einjit.compile("c[i,j] := a[i,k] * b[k,j]")
    g = k.gradient(["a", "b"])
    assert g.gradient_inputs == ["dc"] and g.gradient_outputs == ["da", "db"]
    a, b, dc = rand(4, 3, dtype=np.float64), rand(3, 5, dtype=np.float64), rand(4, 5, dtype=np.float64)
    da, db = g(dc=dc, a=a, b=b)
    np.testing.assert_allclose(da, dc @ b.T, rtol=1e-12)
    np.testing.assert_allclose(db, a.T @ dc, rtol=1e-12)


def test_source_ranges_and_explain():
    k = einjit.compile("y[i] := x[i+k] * w[k]")
    assert k.source == "y[i] := x[i + k] * w[k]"
    assert "k in 0:size(w,0)" in k.ranges.replace(", ", ",")
    text = k.explain(rand(10), rand(3))
    if "this build has no LLVM JIT" not in text:  # the CUDA-only build explains nothing here
        assert "y" in text and len(text) > 40
    assert k.device == "cpu"


def test_syntax_error_has_a_caret():
    with pytest.raises(einjit.Error) as e:
        einjit.compile("y[i] := x[i*j]")
    text = str(e.value)
    assert "<program>:1:11: error: subscript is not affine" in text
    assert "   1 | y[i] := x[i*j]\n     |           ^~~" in text
    assert (e.value.line, e.value.column) == (1, 11)


def test_shape_mismatch_is_an_error_and_writes_nothing():
    k = einjit.compile("y[i] = a[i] + b[i]")
    y = np.zeros(4, np.float32)
    with pytest.raises(einjit.Error) as e:
        k(y, rand(4), rand(5))
    assert "^" in str(e.value)
    assert not y.any()


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda k: k(np.zeros(3, np.float16)), "unsupported dtype"),
        (lambda k: k(np.zeros(3, np.float32)[::-1]), "negative stride"),
        (lambda k: k("text"), "expected an array"),
        (lambda k: k(x=np.zeros(3, np.float32), z=np.zeros(3, np.float32)), "z"),
    ],
)
def test_argument_errors(call, message):
    with pytest.raises(einjit.Error, match=message):
        call(einjit.compile("y[i] := x[i] * 2"))


def test_unknown_device():
    with pytest.raises(einjit.Error, match="unknown device"):
        einjit.compile("y[i] := x[i]", device="tpu")


def test_typing_stubs_are_installed():
    import pathlib

    package = pathlib.Path(einjit.__file__).parent
    stub = (package / "_einjit.pyi").read_text()
    assert "class Kernel:" in stub and "def compile(source: str" in stub
    assert (package / "py.typed").exists()


def test_read_only_array_for_a_written_tensor_is_an_error():
    y = np.zeros(3, np.float32)
    y.flags.writeable = False
    k = einjit.compile("y[i] += x[i]")
    for call in (lambda: k(y, np.ones(3, np.float32)), lambda: k(y=y, x=np.ones(3, np.float32))):
        with pytest.raises(einjit.Error, match="argument y: the program writes this tensor"):
            call()
    assert not y.any()
    # Read-only arrays are fine as inputs.
    x = np.ones(3, np.float32)
    x.flags.writeable = False
    np.testing.assert_array_equal(einjit.compile("z[i] := x[i] * 2")(x), [2, 2, 2])


def test_read_only_array_for_a_tensor_written_then_read_is_an_error():
    y = np.zeros(3, np.float32)
    y.flags.writeable = False
    k = einjit.compile("y[i] = x[i]\nz[i] := y[i] * 2")
    with pytest.raises(einjit.Error, match="argument y: the program writes this tensor"):
        k(y, np.ones(3, np.float32))
