"""einjit's Python module with JAX arrays: JAX arrays in (over DLPack), JAX arrays out, values
against NumPy, a gradient against jax.grad, and a program that writes an argument refused for a
JAX array (JAX arrays are immutable) with nothing written.

scripts/test-python.sh installs JAX and sets EINJIT_REQUIRE_JAX=1, so that in CI a missing JAX
fails here instead of skipping; elsewhere the module is skipped with a message."""
import os

import numpy as np
import pytest

import einjit

if os.environ.get("EINJIT_REQUIRE_JAX") == "1":
    import jax
else:
    jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax)")
import jax.numpy as jnp  # noqa: E402

RNG = np.random.default_rng(11)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def test_jax_arrays_in_and_out_match_numpy():
    a, b = rand(5, 7), rand(7, 3)
    mm = einjit.compile("c[i,j] := a[i,k] * b[k,j]")
    got = mm(jnp.asarray(a), jnp.asarray(b))
    assert isinstance(got, jax.Array) and got.dtype == jnp.float32 and got.shape == (5, 3)
    np.testing.assert_allclose(np.asarray(got), a @ b, rtol=1e-5, atol=1e-5)  # fails on NaN


def test_jax_arrays_by_name_with_scalars_and_several_outputs():
    x = rand(4, 6)
    k = einjit.compile("s[i] := alpha * x[i,j]; (max) m[i] := x[i,j]")
    got = k.call_named(x=jnp.asarray(x), alpha=2)
    assert isinstance(got["s"], jax.Array) and isinstance(got["m"], jax.Array)
    np.testing.assert_allclose(np.asarray(got["s"]), 2 * x.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(got["m"]), x.max(1))


def test_jax_integer_gather():
    table, tok = rand(10, 4), np.array([3, 0, 9, 3], np.int32)
    got = einjit.compile("y[n,d] := E[tok[n], d]")(jnp.asarray(table), jnp.asarray(tok))
    assert isinstance(got, jax.Array)
    np.testing.assert_array_equal(np.asarray(got), table[tok])


def test_gradient_with_jax_arrays_matches_jax_grad():
    x, w, t = rand(8), rand(8), rand(8)
    k = einjit.compile("loss := (x[i] * w[i] - t[i])^2")
    g = k.gradient(["x", "w"])
    dx, dw = g(dloss=1.0, x=jnp.asarray(x), w=jnp.asarray(w), t=jnp.asarray(t))
    assert isinstance(dx, jax.Array) and isinstance(dw, jax.Array)

    def loss(x, w):
        return jnp.sum((x * w - jnp.asarray(t)) ** 2)

    want_dx, want_dw = jax.grad(loss, argnums=(0, 1))(jnp.asarray(x), jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(dx), np.asarray(want_dx), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(dw), np.asarray(want_dw), rtol=1e-5, atol=1e-5)
    # And by hand, in float64: d/dx = 2 (x w - t) w.
    np.testing.assert_allclose(np.asarray(dx), 2 * (x * w - t) * w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "source",
    ["y[i] = x[i] * 2", "y[i] += x[i] * 2", "y[i] = x[i]; z[i] := y[i] + 1"],
)
@pytest.mark.parametrize("by_name", [False, True])
def test_a_written_jax_array_is_an_error_and_nothing_is_written(source, by_name):
    x = jnp.asarray(np.arange(3, dtype=np.float32))
    y = jnp.full(3, 5.0, jnp.float32)
    k = einjit.compile(source)
    with pytest.raises(einjit.Error) as e:
        if by_name:
            k(x=x, y=y)
        else:
            k(y, x)  # tensors in order of first appearance
    text = str(e.value)
    assert "argument y: the program writes this tensor" in text
    assert "JAX arrays are immutable" in text and "':='" in text
    np.testing.assert_array_equal(np.asarray(y), [5, 5, 5])
    np.testing.assert_array_equal(np.asarray(x), [0, 1, 2])


def test_a_jax_array_read_next_to_a_written_numpy_array():
    x = rand(3)
    y = np.zeros(3, np.float32)
    einjit.compile("y[i] = x[i] * 2")(y, jnp.asarray(x))
    np.testing.assert_allclose(y, 2 * x, rtol=1e-6)


def test_the_advice_works_a_result_instead_of_a_written_argument():
    x, y = rand(3), rand(3)
    k = einjit.compile("y_new[i] := y[i] + x[i] * 2")
    got = k(jnp.asarray(y), jnp.asarray(x))
    assert isinstance(got, jax.Array)
    np.testing.assert_allclose(np.asarray(got), y + 2 * x, rtol=1e-6)
