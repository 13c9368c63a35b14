#!/usr/bin/env python3
"""PyTorch's CPU softmax and layer_norm, forward and forward + backward, on the cases of
bench/bench_rows.cpp (the same rows x columns, dtypes and thread counts). Prints one JSON
object per case: {"case", "rows", "cols", "threads", "dtype", "ms"} (median of the timed
calls). bench/run_rows.sh alternates it with bench_rows; summarize_rows.py reads both.

    python3 bench/rows_torch.py [--reps 20] [--dtypes f32,f64] [--threads 1,2] [--cpu-time]

--cpu-time: the calling thread's CPU time instead of wall time (one thread only: bench_rows'
cpu_time is the same measure; run_rows.sh's ROWS_CPU_TIME=1).
"""
import argparse
import json
import time

import torch

from torch_timing import timed

SHAPES = [(4096, 1024), (1024, 4096)]


def cases(rows, cols, dtype):
    torch.manual_seed(1)
    x = torch.rand(rows, cols, dtype=dtype) * 2 - 1
    dy = torch.rand(rows, cols, dtype=dtype) * 2 - 1
    g = torch.rand(cols, dtype=dtype) * 2 - 1
    b = torch.rand(cols, dtype=dtype) * 2 - 1
    xg = x.clone().requires_grad_(True)
    gg = g.clone().requires_grad_(True)
    bg = b.clone().requires_grad_(True)

    def softmax_fwd():
        torch.softmax(x, dim=1)

    def softmax_grad():
        xg.grad = None
        torch.softmax(xg, dim=1).backward(dy)

    def layernorm_fwd():
        torch.nn.functional.layer_norm(x, (cols,), g, b, 1e-5)

    def layernorm_grad():
        xg.grad = gg.grad = bg.grad = None
        torch.nn.functional.layer_norm(xg, (cols,), gg, bg, 1e-5).backward(dy)

    return [("softmax forward", softmax_fwd), ("softmax forward + gradients", softmax_grad),
            ("layernorm forward", layernorm_fwd),
            ("layernorm forward + gradients", layernorm_grad)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--dtypes", default="f32,f64")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--cpu-time", action="store_true")
    a = ap.parse_args()
    clock = time.thread_time if a.cpu_time else time.perf_counter
    types = {"f32": torch.float32, "f64": torch.float64}
    for dname in a.dtypes.split(","):
        for threads in (int(t) for t in a.threads.split(",")):
            torch.set_num_threads(threads)
            for rows, cols in SHAPES:
                for name, fn in cases(rows, cols, types[dname]):
                    print(json.dumps({"case": name, "rows": rows, "cols": cols,
                                      "threads": threads, "dtype": dname,
                                      "ms": timed(fn, a.reps, clock)}), flush=True)


if __name__ == "__main__":
    main()
