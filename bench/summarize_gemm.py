#!/usr/bin/env python3
"""Turns bench_cpu's JSON of the BM_Gemm* cases (bench/bench_gemm.cpp) into the packed-GEMM
table of RESULTS.md: per case the medians over repetitions of each side's GFLOP/s and of the
per-iteration ratio einjit / OpenBLAS (both timed alternately in one process).

    summarize_gemm.py gemm.json"""
import json
import sys


def main():
    with open(sys.argv[1]) as f:
        data = json.load(f)
    rows, peak = [], {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        if name.startswith("BM_FmaPeak"):
            peak[name.split("/")[1]] = b.get("GFLOP/s", 0) / 1e9
            continue
        if not name.startswith("BM_Gemm") or "einjit_GFLOPs" not in b:
            continue
        parts = name.split("/")
        rows.append((parts, b.get("label", ""), b["einjit_GFLOPs"], b["peer_GFLOPs"], b["ratio"]))
    ctx = data["context"]
    print(f"Date {ctx.get('date')}; FMA peak (f32) measured in the same run: "
          f"{peak.get('1', 0):.1f} GFLOP/s on 1 thread, {peak.get('2', 0):.1f} on 2.\n")
    print("| case | n | threads | einjit GFLOP/s | OpenBLAS GFLOP/s | einjit / OpenBLAS |")
    print("|---|---|---|---|---|---|")
    for parts, label, e, p, r in rows:
        kind = parts[0]
        if kind == "BM_Gemm":
            n, threads = parts[2], parts[4]
        elif kind == "BM_GemmPermuted":
            n, threads = parts[1], parts[3]
        elif kind == "BM_GemmLinear":
            n, threads = "-", parts[2]
        else:
            continue
        print(f"| {label} | {n} | {threads} | {e:.1f} | {p:.1f} | {r:.2f} |")


if __name__ == "__main__":
    main()
