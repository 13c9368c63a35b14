#!/usr/bin/env python3
"""PyTorch's GPU Adam on the sizes of bench/bench_adam.cpp: one step of torch.optim.Adam on
10^7 f32 parameters with fused=True and with foreach=True, timed with CUDA events (median of
the timed steps, after warm-up steps that allocate the state). The einjit side is
`bench_adam N REPS --cuda` on the same machine (tools/gpu-adam.sh runs both).
Usage: python3 bench/gpu_adam_torch.py [--n 10000000] [--reps 50]
"""
import argparse
import statistics

import torch


def run(n, reps, **kind):
    torch.manual_seed(1)
    p = torch.nn.Parameter(torch.rand(n, device="cuda") * 2 - 1)
    p.grad = torch.rand(n, device="cuda") * 2 - 1
    opt = torch.optim.Adam([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, **kind)
    for _ in range(3):
        opt.step()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        opt.step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, {a.n} f32 parameters, "
          f"median of {a.reps} steps")
    for name, kind in (("fused=True", {"fused": True}), ("foreach=True", {"foreach": True})):
        ms = run(a.n, a.reps, **kind)
        # Adam reads p, g, m, v and writes p, m, v: 7 x 4 bytes per parameter.
        print(f"  torch.optim.Adam {name}: {ms:.3f} ms per step, {28 * a.n / ms / 1e6:.0f} GB/s")


if __name__ == "__main__":
    main()
