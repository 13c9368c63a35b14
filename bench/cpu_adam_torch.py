#!/usr/bin/env python3
"""PyTorch's CPU Adam on the sizes of bench/bench_adam.cpp: one step of torch.optim.Adam on
10^7 f32 parameters, with foreach=False (the per-parameter loop) and foreach=True, median of
the timed steps; the first step (state allocation) is timed on its own.

Install CPU torch first (pip install torch, or the CPU wheel index). Usage:
    python3 bench/cpu_adam_torch.py [--n 10000000] [--reps 20] [--threads 0]
"""
import argparse
import statistics
import time

import torch


def run(n, reps, foreach):
    torch.manual_seed(1)
    p = torch.nn.Parameter(torch.rand(n, dtype=torch.float32) * 2 - 1)
    p.grad = torch.rand(n, dtype=torch.float32) * 2 - 1
    opt = torch.optim.Adam([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, foreach=foreach)
    t0 = time.perf_counter()
    opt.step()
    first = (time.perf_counter() - t0) * 1e3
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
    return first, statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {a.n} f32 parameters, "
          f"median of {a.reps} steps")
    for foreach in (False, True):
        first, step = run(a.n, a.reps, foreach)
        print(f"  torch.optim.Adam foreach={foreach}: first step {first:.1f} ms, step {step:.2f} ms")


if __name__ == "__main__":
    main()
