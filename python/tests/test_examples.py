"""The Python examples in the test suite. The training example (examples/python/train_digits.py):
the full einjit run reaches its accuracy, and its first steps follow plain PyTorch's losses
(same initialisation, same batches), which checks the einjit gradients and SGD step end to end.
The layer examples (examples/python/layers.py): each layer from NumPy and from PyTorch against
NumPy's and PyTorch's own results and gradients."""
import importlib.util
import os
import pathlib

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def load_example(name="train_digits"):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def digits(example):
    """The data: scikit-learn's, or the copy of its file named by $EINJIT_DIGITS (the GPU
    machine has no scikit-learn; tools/gpu-python.sh carries the file)."""
    try:
        import sklearn  # noqa: F401

        return example.load()
    except ImportError:
        if os.environ.get("EINJIT_DIGITS"):
            return example.load(path=os.environ["EINJIT_DIGITS"])
        pytest.skip("needs scikit-learn (or EINJIT_DIGITS=path/to/digits.csv.gz)")


def test_digits_reaches_95_percent():
    example = load_example()
    result = example.train_einjit(digits(example), epochs=40)
    assert result["accuracy"] >= 0.95, result["accuracy"]
    assert np.mean(result["losses"][-20:]) < 0.2 * np.mean(result["losses"][:20])


def test_einjit_training_follows_pytorch():
    pytest.importorskip("torch")
    example = load_example()
    data = digits(example)
    mine = example.train_einjit(data, epochs=1)
    theirs = example.train_torch(data, epochs=1)
    assert len(mine["losses"]) == len(theirs["losses"]) > 40
    np.testing.assert_allclose(mine["losses"], theirs["losses"], rtol=1e-3)


def test_sgd_step_runs_in_place():
    """The example's optimizer step updates the parameter arrays themselves, with no snapshot
    copy (every statement reads only the element it writes)."""
    example = load_example()
    import einjit

    sgd = einjit.compile(example.SGD)
    assert "_old" not in sgd.source
    params = example.initial_parameters(1)
    before = {n: p.copy() for n, p in params.items()}
    rng = np.random.default_rng(3)
    grads = {"d" + n: rng.standard_normal(p.shape).astype(np.float32) for n, p in params.items()}
    buffers = {n: p.ctypes.data for n, p in params.items()}
    sgd(lr=0.1, **params, **grads)
    for n, p in params.items():
        assert p.ctypes.data == buffers[n]
        expected = before[n] - np.float32(0.1) * grads["d" + n]
        np.testing.assert_allclose(p, expected, rtol=1e-6, atol=1e-7)
        assert not np.array_equal(p, before[n])


def test_digits_from_the_csv_file_equal_scikit_learns():
    """The GPU machine has no scikit-learn: it reads a copy of the data file, which must give
    the same split."""
    example = load_example()
    pytest.importorskip("sklearn")
    import sklearn.datasets

    path = pathlib.Path(sklearn.datasets.__file__).parent / "data" / "digits.csv.gz"
    for a, b in zip(example.load(), example.load(path=str(path))):
        np.testing.assert_array_equal(a, b)
    xtr, xte, ytr, yte = example.load()
    assert (len(ytr), len(yte)) == (1438, 359) and xtr.shape == (1438, 64)
    # Stratified: every class has 20% of its images (rounded) in the test set.
    for c in range(10):
        n = np.sum(ytr == c) + np.sum(yte == c)
        assert np.sum(yte == c) == round(0.2 * n)


def test_einjit_training_on_cuda_follows_pytorch_on_cuda():
    from einjit import _einjit

    torch = pytest.importorskip("torch")
    ok, why = _einjit.cuda_available()
    if not ok or not torch.cuda.is_available():
        pytest.skip(f"needs a CUDA GPU for einjit and PyTorch: {why or 'PyTorch has no CUDA'}")
    example = load_example()
    data = digits(example)
    mine = example.train_einjit(data, epochs=1, device="cuda")
    theirs = example.train_torch(data, epochs=1, device="cuda")
    np.testing.assert_allclose(mine["losses"], theirs["losses"], rtol=1e-3)


def test_layer_examples_from_numpy():
    checks = load_example("layers").check_numpy()
    assert checks.failures == 0


def test_layer_examples_from_pytorch():
    pytest.importorskip("torch")
    checks = load_example("layers").check_torch()
    assert checks.failures == 0
