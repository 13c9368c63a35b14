"""A small network trained on scikit-learn's bundled digits data set (8x8 images, 10 classes,
no download), written in einjit: the forward pass and loss are one einjit program, the
gradients come from einjit's symbolic differentiation of it, and the SGD step is an einjit
program that updates the parameters in place (docs/LANGUAGE.md "In-place statements"). The
same model in plain PyTorch runs beside it for comparison.

    python examples/python/train_digits.py                 # the full run (prints the numbers)
    python examples/python/train_digits.py --plot docs/digits-loss.png
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import einjit

HIDDEN = 64

# Cross-entropy of a 64-64-10 ReLU network, averaged over the batch; y is one-hot.
FORWARD = """
t[b,o] := x[b,i] * w1[o,i]
h[b,o] := relu(t[b,o] + c1[o])
z[b,k] := h[b,o] * w2[k,o]
l[b,k] := z[b,k] + c2[k]
(max) m[b] := l[b,k]
s[b] := exp(l[b,k] - m[b])
p[b] := l[b,k] * y[b,k]
loss := (log(s[b]) + m[b] - p[b]) / size(x,0)
"""
LOGITS = """
t[b,o] := x[b,i] * w1[o,i]
h[b,o] := relu(t[b,o] + c1[o])
z[b,k] := h[b,o] * w2[k,o]
l[b,k] := z[b,k] + c2[k]
"""
# Each statement reads only the element it writes: it runs in place, with no copy.
SGD = """
w1[o,i] = w1[o,i] - lr * dw1[o,i]
c1[o] = c1[o] - lr * dc1[o]
w2[k,o] = w2[k,o] - lr * dw2[k,o]
c2[k] = c2[k] - lr * dc2[k]
"""
PARAMS = ["w1", "c1", "w2", "c2"]
WARMUP = 10  # steps left out of the time per step (compilation, first-call set-up)


def load(seed: int = 0, path: str | None = None):
    """(x_train, x_test, y_train, y_test): 80/20, stratified by class, shuffled by `seed`.
    The images come from scikit-learn (load_digits), or from `path`, a copy of its
    datasets/data/digits.csv.gz (64 pixel values, then the label, per row) for machines
    without scikit-learn."""
    if path is None:
        from sklearn.datasets import load_digits

        digits = load_digits()
        pixels, labels = digits.data, digits.target
    else:
        table = np.loadtxt(path, delimiter=",")
        pixels, labels = table[:, :-1], table[:, -1]
    x = (pixels / 16.0).astype(np.float32)
    y = labels.astype(np.int64)
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), bool)
    for c in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == c))
        test[members[: int(round(0.2 * len(members)))]] = True
    train_order, test_order = rng.permutation(np.flatnonzero(~test)), np.flatnonzero(test)
    return x[train_order], x[test_order], y[train_order], y[test_order]


def initial_parameters(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((HIDDEN, 64)) * np.sqrt(2 / 64)).astype(np.float32),
        "c1": np.zeros(HIDDEN, np.float32),
        "w2": (rng.standard_normal((10, HIDDEN)) * np.sqrt(2 / HIDDEN)).astype(np.float32),
        "c2": np.zeros(10, np.float32),
    }


def batches(n: int, batch: int, rng):
    order = rng.permutation(n)
    for start in range(0, n - batch + 1, batch):
        yield order[start:start + batch]


def train_einjit(data, epochs: int, batch: int = 32, lr: float = 0.1, seed: int = 0,
                 device: str = "cpu"):
    """device "cpu": NumPy arrays on einjit's CPU JIT. "cuda": PyTorch CUDA tensors (data,
    parameters and gradients stay on the GPU) on einjit's CUDA kernels."""
    xtr, xte, ytr, yte = data
    forward = einjit.compile(FORWARD, device)
    gradient = forward.gradient(PARAMS)
    logits = einjit.compile(LOGITS, device)
    sgd = einjit.compile(SGD, device)
    params = initial_parameters(seed)
    onehot = np.eye(10, dtype=np.float32)[ytr]
    if device == "cpu":
        take = lambda a, idx: np.ascontiguousarray(a[idx])  # noqa: E731
        predict = lambda l: np.argmax(l, axis=1)  # noqa: E731
    else:
        import torch

        on = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
        params = {n: on(p) for n, p in params.items()}
        xtr, xte, onehot = on(xtr), on(xte), on(onehot)
        take = lambda a, idx: a[torch.from_numpy(idx).to(device)]  # noqa: E731
        predict = lambda l: l.argmax(1).cpu().numpy()  # noqa: E731
    rng = np.random.default_rng(seed)
    losses, steps, elapsed = [], 0, 0.0
    for _ in range(epochs):
        for idx in batches(len(xtr), batch, rng):
            start = time.perf_counter()
            x, y = take(xtr, idx), take(onehot, idx)
            loss = forward(x=x, y=y, **params)
            # The loss is a scalar output: its gradient program takes dloss as a number.
            grads = gradient.call_named(dloss=1.0, x=x, y=y, **params)
            sgd(lr=lr, **params, **grads)  # writes the parameter arrays in place
            losses.append(float(loss))  # waits for the step, as PyTorch's loss.item() does
            if len(losses) > WARMUP:
                elapsed += time.perf_counter() - start
                steps += 1
    predicted = predict(logits(x=xte, **params))
    return {"losses": losses, "accuracy": float(np.mean(predicted == yte)),
            "step_ms": 1e3 * elapsed / max(steps, 1), "params": params}


def train_torch(data, epochs: int, batch: int = 32, lr: float = 0.1, seed: int = 0,
                threads: int = 1, device: str = "cpu"):
    """threads: PyTorch's intra-op threads; one by default, since at these sizes more threads
    only add synchronisation (and stall badly on a loaded machine)."""
    import torch

    torch.set_num_threads(threads)
    xtr, xte, ytr, yte = (torch.from_numpy(a).to(device) for a in data)
    init = initial_parameters(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 10))
    with torch.no_grad():
        model[0].weight.copy_(torch.from_numpy(init["w1"]))
        model[0].bias.copy_(torch.from_numpy(init["c1"]))
        model[2].weight.copy_(torch.from_numpy(init["w2"]))
        model[2].bias.copy_(torch.from_numpy(init["c2"]))
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    losses, steps, elapsed = [], 0, 0.0
    for _ in range(epochs):
        for idx in batches(len(xtr), batch, rng):
            start = time.perf_counter()
            index = torch.from_numpy(idx).to(device)
            x, y = xtr[index], ytr[index]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) > WARMUP:
                elapsed += time.perf_counter() - start
                steps += 1
    with torch.no_grad():
        accuracy = (model(xte).argmax(1) == yte).float().mean().item()
    return {"losses": losses, "accuracy": accuracy, "step_ms": 1e3 * elapsed / max(steps, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--plot", help="write the loss curves to this PNG (needs matplotlib)")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch model")
    parser.add_argument("--torch-threads", type=int, default=1, help="PyTorch's intra-op threads")
    parser.add_argument("--device", default="cpu", help='"cpu" or "cuda" (PyTorch CUDA tensors)')
    parser.add_argument("--data", help="digits.csv.gz to read instead of scikit-learn's")
    args = parser.parse_args()
    data = load(path=args.data)
    results = {"einjit": train_einjit(data, args.epochs, device=args.device)}
    if not args.no_torch:
        results["PyTorch"] = train_torch(data, args.epochs, threads=args.torch_threads,
                                         device=args.device)
    print(f"device {args.device}")
    for name, r in results.items():
        print(f"{name:8s} test accuracy {100 * r['accuracy']:.2f}%  final loss "
              f"{np.mean(r['losses'][-20:]):.4f}  {r['step_ms']:.3f} ms/step "
              f"({len(r['losses'])} steps of batch 32)")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        styles = {"einjit": dict(lw=4, alpha=0.5), "PyTorch": dict(lw=1, ls="--", color="k")}
        for name, r in results.items():
            ax.plot(np.convolve(r["losses"], np.ones(20) / 20, mode="valid"), label=name,
                    **styles[name])
        ax.set_xlabel("step (batch of 32)")
        ax.set_ylabel("training loss (mean of 20 steps)")
        ax.set_yscale("log")
        ax.set_title("digits, 64-64-10 ReLU MLP, SGD lr 0.1")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)


if __name__ == "__main__":
    main()
