#!/usr/bin/env python3
"""The table of bench/run_layers.sh: einjit (bench_cpu JSON, one file per round and thread
count) beside PyTorch (layers_torch.py JSON lines), medians over the rounds, and each layer's
(forward + gradients) / forward for both.

    python3 bench/summarize_layers.py DIR
"""
import glob
import json
import os
import statistics
import sys

LABELS = {
    "BM_Linear_einjit/0": "Linear forward",
    "BM_Linear_einjit/1": "Linear forward + gradients",
    "BM_Distance_einjit/0": "distance forward",
    "BM_Distance_einjit/1": "distance forward + gradients",
    "BM_Conv_einjit/1/0": "conv s1 forward",
    "BM_Conv_einjit/1/1": "conv s1 input gradient",
    "BM_Conv_einjit/1/2": "conv s1 weight gradient",
    "BM_Conv_einjit/2/0": "conv s2 forward",
    "BM_Conv_einjit/2/1": "conv s2 input gradient",
    "BM_Conv_einjit/2/2": "conv s2 weight gradient",
    "BM_Permuted_einjit/256": "permuted C[i,k,b] := A[i,j,b]*B[b,k,j], n 256",
    "BM_Permuted_einjit/512": "permuted, n 512",
    "BM_Permuted_einjit/1024": "permuted, n 1024",
}


def main():
    d = sys.argv[1]
    ej, pt = {}, {}
    for f in sorted(glob.glob(os.path.join(d, "einjit-*-*.json"))):
        threads = int(os.path.basename(f).split("-")[1])
        for b in json.load(open(f))["benchmarks"]:
            name = b["name"].replace("/real_time", "")
            unit = {"ms": 1.0, "us": 1e-3, "ns": 1e-6}[b["time_unit"]]
            ej.setdefault((name, threads), []).append(b["real_time"] * unit)
    for f in sorted(glob.glob(os.path.join(d, "torch-*.jsonl"))):
        for line in open(f):
            r = json.loads(line)
            pt.setdefault((r["case"], r["threads"]), []).append(r["ms"])
    med = lambda v: statistics.median(v) if v else float("nan")
    print("| case (f32) | threads | einjit ms | PyTorch ms | einjit speed ÷ PyTorch |")
    print("|---|---|---|---|---|")
    for name, label in LABELS.items():
        for threads in (1, 2):
            e, p = med(ej.get((name, threads), [])), med(pt.get((name, threads), []))
            if e != e and p != p:
                continue
            print(f"| {label} | {threads} | {e:.2f} | {p:.2f} | {p / e:.2f} |")
    print()
    print("| layer | threads | einjit (fwd+grads)/fwd | PyTorch (fwd+grads)/fwd |")
    print("|---|---|---|---|")
    for layer in ("Linear", "Distance"):
        for threads in (1, 2):
            f = f"BM_{layer}_einjit/0"
            g = f"BM_{layer}_einjit/1"
            ef, eg = med(ej.get((f, threads), [])), med(ej.get((g, threads), []))
            pf, pg = med(pt.get((f, threads), [])), med(pt.get((g, threads), []))
            print(f"| {layer.lower()} | {threads} | {eg / ef:.2f} | {pg / pf:.2f} |")


if __name__ == "__main__":
    main()
