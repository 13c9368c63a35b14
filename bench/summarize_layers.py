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
    "BM_F64Permuted_einjit/256": "permuted f64, n 256",
    "BM_F64Permuted_einjit/512": "permuted f64, n 512",
    "BM_F64Permuted_einjit/1024": "permuted f64, n 1024",
}
# BM_ConvPass_einjit/CASE/DTYPE/PASS (bench_cpu_conv.cpp): the convolutions as layers, f64
# passes and the 1x1 one.
CONV_CASES = ("conv s1", "conv s2", "conv 1x1 64->256")
PASSES = ("forward", "input gradient", "weight gradient", "forward + gradients (autograd)")
for case, cname in enumerate(CONV_CASES):
    for dt, dname in enumerate(("f32", "f64")):
        for p, pname in enumerate(PASSES):
            if case < 2 and dt == 0 and p in (1, 2):
                continue  # BM_Conv_einjit's rows
            LABELS[f"BM_ConvPass_einjit/{case}/{dt}/{p}"] = f"{cname} {pname} {dname}"


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
    print("| case (f32 unless named) | threads | einjit ms | PyTorch ms | einjit speed ÷ PyTorch |")
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
    layers = [(layer.lower(), f"BM_{layer}_einjit/0", f"BM_{layer}_einjit/1")
              for layer in ("Linear", "Distance")]
    layers += [(f"{cname} {dname}", f"BM_ConvPass_einjit/{case}/{dt}/0",
                f"BM_ConvPass_einjit/{case}/{dt}/3")
               for case, cname in enumerate(CONV_CASES)
               for dt, dname in enumerate(("f32", "f64"))]
    for layer, f, g in layers:
        for threads in (1, 2):
            ef, eg = med(ej.get((f, threads), [])), med(ej.get((g, threads), []))
            pf, pg = med(pt.get((f, threads), [])), med(pt.get((g, threads), []))
            if ef != ef and pf != pf:
                continue
            print(f"| {layer} | {threads} | {eg / ef:.2f} | {pg / pf:.2f} |")


if __name__ == "__main__":
    main()
