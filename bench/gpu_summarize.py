#!/usr/bin/env python3
"""Joins bench_cuda's JSON (einjit, and cuBLAS in the same process) with gpu_peers.py's JSON
(PyTorch: cuBLAS/cuDNN) by case name into the Markdown table of bench/RESULTS.md.

Usage: gpu_summarize.py bench_cuda.json peers.json"""
import json
import sys


def main():
    with open(sys.argv[1]) as f:
        ej = json.load(f)
    peers = {}
    try:
        with open(sys.argv[2]) as f:
            pj = json.load(f)
        for c in pj["cases"]:
            peers[(c["name"], c["dtype"])] = c
    except (OSError, ValueError, KeyError):
        pj = {}
    rows = {}
    for b in ej["benchmarks"]:
        if b.get("aggregate_name", "median") != "median" or b.get("error_occurred"):
            continue
        label = b.get("label", "")
        who = "cuBLAS" if "_cuBLAS" in b["run_name"] else "einjit"
        rows.setdefault(label, {})[who] = b
    ctx = ej["context"]
    print(f"GPU: {ctx.get('gpu', '?')}, NVRTC {ctx.get('nvrtc', '?')}, date {ctx.get('date', '?')}; "
          f"PyTorch {pj.get('torch', '?')}, cuDNN {pj.get('cudnn', '?')}\n")
    print("| case | dtype | einjit ms | einjit TFLOP/s | cuBLAS here TFLOP/s | PyTorch TFLOP/s | einjit / best peer |")
    print("|---|---|---|---|---|---|---|")
    for label, r in rows.items():
        e = r.get("einjit")
        if not e or label.startswith("nvrtc"):
            continue
        name, _, dt = label.partition("@")
        dt = dt or "f32"
        ms = e["real_time"]
        tf = e.get("GFLOP/s", 0) / 1e12
        cb = r.get("cuBLAS", {}).get("GFLOP/s", 0) / 1e12
        pt = peers.get((name, dt), {}).get("tflops") or 0
        best = max(cb, pt)
        ratio = f"{tf / best:.2f}" if best else "-"
        print(f"| {name} | {dt} | {ms:.3f} | {tf:.2f} | {cb:.2f} | {pt:.2f} | {ratio} |")
    lf, lb = rows.get("linear_fwd", {}).get("einjit"), rows.get("linear_fwdbwd", {}).get("einjit")
    if lf and lb:
        peer = peers.get(("linear_fwdbwd", "f32"), {}).get("ratio_to_fwd")
        print(f"\nLinear 784->1024, batch 4096: (forward + gradients) / forward = "
              f"{lb['real_time'] / lf['real_time']:.2f} (PyTorch: {peer if peer else '-'})")
    for k in ("nvrtc_cold", "nvrtc_disk_cache"):
        e = rows.get(k, {}).get("einjit")
        if e:
            print(f"\n{k.replace('_', ' ')}: {e['real_time']:.1f} ms per kernel (compile, load, first run)")


if __name__ == "__main__":
    main()
