#!/usr/bin/env python3
"""PyTorch's CPU kernels and autograd on the layer cases of bench/bench_cpu.cpp (the same
programs, shapes and dtype: f32): Linear 784 -> 1024 x 4096 and the distance layer
(forward, forward + gradients of every input), conv2d 3x3 NCHW N 8, C = O = 64, 56x56,
stride 1 and 2 (forward, input gradient, weight gradient: F.conv2d and torch.nn.grad), and
the permuted batched contraction C[i,k,b] := A[i,j,b] * B[b,k,j] (torch.einsum). Prints one
JSON object per case: {"case", "threads", "ms"} (median of the timed calls), with the case
named as bench_cpu's benchmark (summarize_layers.py pairs them). run_layers.sh alternates it
with bench_cpu round by round.

    python3 bench/layers_torch.py [--reps 10] [--threads 1,2]
"""
import argparse
import json

import torch
import torch.nn.functional as F

from torch_timing import timed

IN, OUT, BATCH = 784, 1024, 4096
N, C, O, H = 8, 64, 64, 56


def rnd(*shape):
    return torch.rand(*shape, dtype=torch.float32) * 2 - 1


def layer_cases():
    torch.manual_seed(1)
    w, x, b = rnd(IN, OUT), rnd(IN, BATCH), rnd(OUT)
    dy = rnd(OUT, BATCH)
    wg, xg, bg = (t.clone().requires_grad_(True) for t in (w, x, b))

    def linear(w_, x_, b_):
        return w_.t() @ x_ + b_[:, None]

    def distance(w_, x_):
        # |w_i|^2 + |x_j|^2 - 2 w_i . x_j: the best composition of library calls
        return (w_ * w_).sum(0)[:, None] + (x_ * x_).sum(0)[None, :] - 2 * (w_.t() @ x_)

    def linear_grads():
        wg.grad = xg.grad = bg.grad = None
        linear(wg, xg, bg).backward(dy)

    def distance_grads():
        wg.grad = xg.grad = None
        distance(wg, xg).backward(dy)

    return [
        ("BM_Linear_einjit/0", lambda: linear(w, x, b)),
        ("BM_Linear_einjit/1", linear_grads),
        ("BM_Distance_einjit/0", lambda: distance(w, x)),
        ("BM_Distance_einjit/1", distance_grads),
    ]


def conv_cases():
    torch.manual_seed(2)
    x, k = rnd(N, C, H, H), rnd(O, C, 3, 3)
    out = []
    for stride in (1, 2):
        oh = (H - 3) // stride + 1
        dy = rnd(N, O, oh, oh)
        out += [
            (f"BM_Conv_einjit/{stride}/0", lambda s=stride: F.conv2d(x, k, stride=s)),
            (f"BM_Conv_einjit/{stride}/1",
             lambda s=stride, d=dy: torch.nn.grad.conv2d_input(x.shape, k, d, stride=s)),
            (f"BM_Conv_einjit/{stride}/2",
             lambda s=stride, d=dy: torch.nn.grad.conv2d_weight(x, k.shape, d, stride=s)),
        ]
    return out


def permuted_cases():
    out = []
    for n in (256, 512, 1024):
        torch.manual_seed(3)
        a, b = rnd(n, n, 4), rnd(4, n, n)
        out.append((f"BM_Permuted_einjit/{n}",
                    lambda a=a, b=b: torch.einsum("ijb,bkj->ikb", a, b).contiguous()))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    cases = layer_cases() + conv_cases() + permuted_cases()
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        for name, fn in cases:
            grad = name.endswith("einjit/1") and not name.startswith("BM_Conv")
            with torch.enable_grad() if grad else torch.no_grad():
                ms = timed(fn, args.reps)
            print(json.dumps({"case": name, "threads": threads, "ms": ms}), flush=True)


if __name__ == "__main__":
    main()
