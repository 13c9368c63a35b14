#!/usr/bin/env python3
"""Turns bench_cpu's JSON (default OpenBLAS run, SkylakeX run) into the tables of RESULTS.md.

Medians of the repetitions; einjit/peer ratios are taken within one run (same process)."""
import json
import sys


def medians(path):
    rows = {}
    with open(path) as f:
        data = json.load(f)
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        rows[name] = {"ms": b["real_time"] if b["time_unit"] == "ms" else b["real_time"] / 1e3,
                      "us": b["real_time"], "unit": b["time_unit"],
                      "gflops": b.get("GFLOP/s", 0) / 1e9, "label": b.get("label", "")}
    return data["context"], rows


def args(name):
    parts = name.split("/")
    return parts[0], "/".join(p for p in parts[1:] if p != "real_time")


def main():
    ctx, d = medians(sys.argv[1])
    # The SkylakeX run exists only on a CPU with AVX-512 (bench/run_cpu.sh).
    s = medians(sys.argv[2])[1] if len(sys.argv) > 2 else {}
    print(f"Machine: {ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz (as reported), "
          f"date {ctx.get('date')}\n")
    print("| case | einjit GFLOP/s | OpenBLAS default | OpenBLAS SkylakeX | Eigen | einjit / best peer |")
    print("|---|---|---|---|---|---|")
    for name, r in d.items():
        kind, a = args(name)
        if not kind.endswith("_einjit") or not (kind.startswith("BM_Matmul") or kind.startswith("BM_Permuted")):
            continue
        base = kind[: -len("_einjit")]
        ob = d.get(f"{base}_OpenBLAS/{a}/real_time", {}).get("gflops", 0)
        sk = s.get(f"{base}_OpenBLAS/{a}/real_time", {}).get("gflops", 0)
        ei = d.get(f"{base}_Eigen/{a}/real_time", {}).get("gflops", 0)
        best = max(ob, sk, ei) or 1
        n = a.split("/")[-1]
        print(f"| {r['label'] or base} n={n} | {r['gflops']:.1f} | {ob:.1f} | {sk:.1f} | "
              f"{ei:.1f} | {r['gflops'] / best:.2f} |")
    print("\n| conv2d N8 C64 O64 56x56 3x3 | einjit GFLOP/s | oneDNN GFLOP/s | einjit / oneDNN |")
    print("|---|---|---|---|")
    for name, r in d.items():
        kind, a = args(name)
        if kind != "BM_Conv_einjit":
            continue
        peer = d.get(f"BM_Conv_oneDNN/{a}/real_time", {}).get("gflops", 0) or 1
        print(f"| {r['label']} | {r['gflops']:.1f} | {peer:.1f} | {r['gflops'] / peer:.2f} |")
    print("\n| layer (784->1024, batch 4096) | einjit ms | OpenBLAS default ms | OpenBLAS SkylakeX ms |")
    print("|---|---|---|---|")
    for layer in ("Linear", "Distance"):
        for a in ("0", "1"):
            e = d.get(f"BM_{layer}_einjit/{a}/real_time")
            if not e:
                continue
            ob = d.get(f"BM_{layer}_OpenBLAS/{a}/real_time", {}).get("ms")
            sk = s.get(f"BM_{layer}_OpenBLAS/{a}/real_time", {}).get("ms")
            fmt = lambda v: f"{v:.1f}" if v else "-"
            print(f"| {layer} {e['label']} | {e['ms']:.1f} | {fmt(ob)} | {fmt(sk)} |")
        f0 = d.get(f"BM_{layer}_einjit/0/real_time")
        f1 = d.get(f"BM_{layer}_einjit/1/real_time")
        if f0 and f1:
            print(f"| {layer}: (forward + gradients) / forward | {f1['ms'] / f0['ms']:.2f} | "
                  + (f"{d[f'BM_{layer}_OpenBLAS/1/real_time']['ms'] / d[f'BM_{layer}_OpenBLAS/0/real_time']['ms']:.2f}"
                     if f"BM_{layer}_OpenBLAS/1/real_time" in d else "-") + " | |")
    # BM_Align_einjit/KERNEL/OUTPUT_SHIFT/OPERAND_SHIFT: the spread over shifts (issue 24: 1.2x).
    align = {}
    for name, r in d.items():
        kind, a = args(name)
        if kind == "BM_Align_einjit":
            kernel, out, operands = a.split("/")
            align.setdefault(kernel, {})[(int(out), int(operands))] = r["ms"]
    if align:
        print("\n| kernel | shift (output / operands, bytes): ms | slowest / fastest |")
        print("|---|---|---|")
        for kernel, rows in sorted(align.items()):
            cells = ", ".join(f"{o}/{i}: {ms:.2f}" for (o, i), ms in sorted(rows.items()))
            spread = max(rows.values()) / min(rows.values())
            print(f"| {'GEMM 1024' if kernel == '0' else 'conv s1 forward'} | {cells} | {spread:.2f} |")
    print("\n| compile / call | time |")
    print("|---|---|")
    for name, r in d.items():
        kind, _ = args(name)
        if kind.startswith("BM_Compile") or kind.startswith("BM_Call"):
            print(f"| {kind[3:]} | {r['us']:.3g} {r['unit']} |")


if __name__ == "__main__":
    main()
