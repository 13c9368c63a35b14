"""The training example (examples/python/train_digits.py) in the test suite: the full einjit
run reaches its accuracy, and its first steps follow plain PyTorch's losses (same
initialisation, same batches), which checks the einjit gradients and SGD step end to end."""
import importlib.util
import pathlib

import numpy as np
import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "train_digits.py"


def load_example():
    pytest.importorskip("sklearn")
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_digits_reaches_95_percent():
    example = load_example()
    result = example.train_einjit(example.load(), epochs=40)
    assert result["accuracy"] >= 0.95, result["accuracy"]
    assert np.mean(result["losses"][-20:]) < 0.2 * np.mean(result["losses"][:20])


def test_einjit_training_follows_pytorch():
    pytest.importorskip("torch")
    example = load_example()
    data = example.load()
    mine = example.train_einjit(data, epochs=1)
    theirs = example.train_torch(data, epochs=1)
    assert len(mine["losses"]) == len(theirs["losses"]) > 40
    np.testing.assert_allclose(mine["losses"], theirs["losses"], rtol=1e-3)
