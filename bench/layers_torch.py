#!/usr/bin/env python3
"""PyTorch's CPU kernels and autograd on the layer cases of bench/bench_cpu*.cpp (the same
programs and shapes): Linear 784 -> 1024 x 4096 and the distance layer (f32; forward, forward +
gradients of every input), conv2d 3x3 NCHW N 8, C = O = 64, 56x56, stride 1 and 2 (f32:
forward, input gradient, weight gradient: F.conv2d and torch.nn.grad), the same convolutions
and the 1x1 one (C 64 -> O 256) as layers: forward and forward + the gradients of x and k
through autograd, f32 and f64, and every pass of those in f64 (BM_ConvPass_einjit), and the
permuted batched contraction C[i,k,b] := A[i,j,b] * B[b,k,j] (torch.einsum; f32
BM_Permuted_einjit, f64 BM_F64Permuted_einjit). Prints one
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


def conv_pass_cases():
    """BM_ConvPass_einjit/CASE/DTYPE/PASS: CASE 0 3x3 stride 1, 1 3x3 stride 2 (C = O = 64),
    2 1x1 64 -> 256; DTYPE 0 f32, 1 f64; PASS 0 forward, 1 input gradient, 2 weight gradient,
    3 the layer (forward + the gradients of x and k, autograd)."""
    out = []
    for case, (o, ks, stride) in enumerate(((O, 3, 1), (O, 3, 2), (256, 1, 1))):
        for dt, dtype in ((0, torch.float32), (1, torch.float64)):
            torch.manual_seed(4)
            x = rnd(N, C, H, H).to(dtype)
            k = rnd(o, C, ks, ks).to(dtype)
            dy = rnd(N, o, (H - ks) // stride + 1, (H - ks) // stride + 1).to(dtype)
            xg, kg = x.clone().requires_grad_(True), k.clone().requires_grad_(True)

            def layer(s=stride, xg=xg, kg=kg, dy=dy):
                xg.grad = kg.grad = None
                F.conv2d(xg, kg, stride=s).backward(dy)

            passes = [
                lambda x=x, k=k, s=stride: F.conv2d(x, k, stride=s),
                lambda x=x, k=k, d=dy, s=stride: torch.nn.grad.conv2d_input(x.shape, k, d, stride=s),
                lambda x=x, k=k, d=dy, s=stride: torch.nn.grad.conv2d_weight(x, k.shape, d, stride=s),
                layer,
            ]
            # bench_cpu's rows (BM_ConvPass_einjit's registration): f32 3x3 forward and layer
            # only (the other passes are BM_Conv_einjit's), everything else all four.
            for p, fn in enumerate(passes):
                if case < 2 and dt == 0 and p in (1, 2):
                    continue
                out.append((f"BM_ConvPass_einjit/{case}/{dt}/{p}", fn))
    return out


def permuted_cases():
    out = []
    for n in (256, 512, 1024):
        torch.manual_seed(3)
        a, b = rnd(n, n, 4), rnd(4, n, n)
        out.append((f"BM_Permuted_einjit/{n}",
                    lambda a=a, b=b: torch.einsum("ijb,bkj->ikb", a, b).contiguous()))
        a, b = a.double(), b.double()
        out.append((f"BM_F64Permuted_einjit/{n}",
                    lambda a=a, b=b: torch.einsum("ijb,bkj->ikb", a, b).contiguous()))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    cases = layer_cases() + conv_cases() + conv_pass_cases() + permuted_cases()
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        for name, fn in cases:
            grad = (name.endswith("einjit/1") and not name.startswith("BM_Conv")) or (
                name.startswith("BM_ConvPass") and name.endswith("/3"))
            with torch.enable_grad() if grad else torch.no_grad():
                ms = timed(fn, args.reps)
            print(json.dumps({"case": name, "threads": threads, "ms": ms}), flush=True)


if __name__ == "__main__":
    main()
