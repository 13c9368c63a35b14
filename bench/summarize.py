#!/usr/bin/env python3
"""Turns bench_cpu's JSON (default OpenBLAS run, SkylakeX run) into the tables of RESULTS.md.

Medians of the repetitions; einjit/peer ratios are taken within one run (same process).

    summarize.py default.json [skylakex.json] [--one-thread onethread.json]

onethread.json: the cases that alternate einjit and their peer per iteration (BM_ConvAlt,
BM_ConvAlt1x1) run again on one CPU (bench/run_cpu.sh: taskset -c 0); their table gets a
one-thread column."""
import json
import sys


# The counters of the cases that time einjit and its peer alternately in one process.
ALTERNATED = ("ratio", "cpu_ratio", "einjit_GFLOPs", "oneDNN_GFLOPs", "peer/forward", "grads/forward",
              "cpu_grads/forward", "einjit_bwd_ratio", "onednn_bwd_ratio", "fwd_speed",
              "fwd_bwd_speed")


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
        rows[name].update({k: b[k] for k in ALTERNATED if k in b})
    return data["context"], rows


def args(name):
    parts = name.split("/")
    return parts[0], "/".join(p for p in parts[1:] if p not in ("real_time", "manual_time"))


def main():
    argv = sys.argv[1:]
    one = {}
    if "--one-thread" in argv:
        i = argv.index("--one-thread")
        one = medians(argv[i + 1])[1]
        del argv[i : i + 2]
    ctx, d = medians(argv[0])
    # The SkylakeX run exists only on a CPU with AVX-512 (bench/run_cpu.sh).
    s = medians(argv[1])[1] if len(argv) > 1 else {}
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
    # Convolutions: einjit and oneDNN alternated per iteration (BM_ConvAlt: 3x3, C = O = 64;
    # BM_ConvAlt1x1: 1x1, C -> O), the medians of the per-iteration ratios oneDNN time / einjit
    # time (issue 24's floor: 0.7 on 2 threads).
    print("\n| conv2d NCHW, N 8, 56x56 (alternated with oneDNN) | einjit GFLOP/s | oneDNN GFLOP/s "
          "| einjit / oneDNN | 1 thread: einjit GFLOP/s | oneDNN | einjit / oneDNN | the same, "
          "CPU time |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in d.items():
        kind, a = args(name)
        if kind not in ("BM_ConvAlt", "BM_ConvAlt1x1") or "ratio" not in r:
            continue
        shape = "3x3 C64 O64 " if kind == "BM_ConvAlt" else ""
        o = one.get(name, {})
        cells = (f"{o['einjit_GFLOPs']:.1f} | {o['oneDNN_GFLOPs']:.1f} | {o['ratio']:.2f} | "
                 f"{o.get('cpu_ratio', 0):.2f}" if "ratio" in o else "- | - | - | -")
        print(f"| {shape}{r['label']} | {r['einjit_GFLOPs']:.1f} | {r['oneDNN_GFLOPs']:.1f} | "
              f"{r['ratio']:.2f} | {cells} |")
    # The distance layer (BM_DistanceAlt) and the README demo's layer (BM_DemoLayer), each
    # alternated with its peer per iteration; range: threads.
    dist = [(args(n)[1], r) for n, r in d.items() if args(n)[0] == "BM_DistanceAlt"]
    if dist:
        print("\n| distance layer (alternated) | threads | forward: composition time / einjit time "
              "| einjit (forward + gradients) / forward | the same, CPU time |")
        print("|---|---|---|---|---|")
        for a, r in dist:
            print(f"| {r['label']} | {a.split('/')[0]} | {r.get('peer/forward', 0):.2f} | "
                  f"{r.get('grads/forward', 0):.2f} | {r.get('cpu_grads/forward', 0):.2f} |")
    demo = [(args(n)[1], r) for n, r in d.items() if args(n)[0] == "BM_DemoLayer"]
    if demo:
        print("\n| the demo's layer (alternated with oneDNN) | threads | einjit (fwd + bwd) / fwd "
              "| oneDNN (fwd + bwd) / fwd | forward: oneDNN / einjit | fwd + bwd: oneDNN / einjit |")
        print("|---|---|---|---|---|---|")
        for a, r in demo:
            print(f"| {r['label']} | {a.split('/')[0]} | {r.get('einjit_bwd_ratio', 0):.2f} | "
                  f"{r.get('onednn_bwd_ratio', 0):.2f} | {r.get('fwd_speed', 0):.2f} | "
                  f"{r.get('fwd_bwd_speed', 0):.2f} |")
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
        kind, a = args(name)
        if kind.startswith("BM_Compile") or kind.startswith("BM_Call"):
            what = " ".join(w for w in (kind[3:], a, r["label"]) if w)
            print(f"| {what} | {r['us']:.3g} {r['unit']} |")


if __name__ == "__main__":
    main()
