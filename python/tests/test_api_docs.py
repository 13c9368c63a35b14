"""docs/API.md documents every public name of the Python package (the C++ headers have their
own check, tests/package/check_api_docs.py)."""
import pathlib
import re

import pytest

import einjit

API = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "API.md").read_text()
CODE = " ".join(re.findall(r"`([^`]+)`", API))


def documented(name):
    return re.search(r"(?<![\w.])" + re.escape(name) + r"(?!\w)", CODE) is not None


def public(obj):
    names = {n for n in dir(obj) if not n.startswith("_")}
    names |= {n for n in getattr(obj, "__dict__", {}) if not n.startswith("_")}
    return sorted(names)


def test_module_names_are_documented():
    missing = [f"einjit.{n}" for n in einjit.__all__ if not documented(f"einjit.{n}")]
    missing += [f"Kernel.{n}" for n in public(einjit.Kernel) + ["__call__"]
                if not documented(f"Kernel.{n}")]
    assert not missing, f"not in docs/API.md: {missing}"


def test_torch_layer_names_are_documented():
    pytest.importorskip("torch")
    import einjit.torch

    layer = einjit.torch.layer("y[i] := x[i] * w[i]")
    missing = [f"einjit.torch.{n}" for n in einjit.torch.__all__
               if not documented(f"einjit.torch.{n}")]
    missing += [f"Layer.{n}" for n in public(layer) + ["__call__"] if not documented(f"Layer.{n}")]
    assert not missing, f"not in docs/API.md: {missing}"


def test_the_check_finds_a_missing_name():
    assert documented("Kernel.gradient") and not documented("Kernel.no_such_member")
