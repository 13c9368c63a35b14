#!/usr/bin/env python3
"""The softmax / layernorm table of bench/RESULTS.md from bench/run_rows.sh's output folder:
per case the median over rounds of the copy (same bytes, bench_rows), einjit and PyTorch
times, einjit / copy (1.0 is the forward's bandwidth bound) and PyTorch / einjit (above 1:
einjit faster). (forward + gradients) / forward is given for both.

    summarize_rows.py DIR   (DIR: einjit-*.json and torch-*.jsonl; base-*.json, another
                             bench_rows run in the same rounds: a column of its own)"""
import glob
import json
import os
import statistics
import sys


def main():
    d = sys.argv[1]
    # ROWS_CPU_TIME=1 (run_rows.sh): CPU times on both sides, one thread only.
    cpu = os.environ.get("ROWS_CPU_TIME") == "1"
    clock = "cpu_time" if cpu else "real_time"
    ours, base, torch = {}, {}, {}  # (case, rows, cols, threads, dtype) -> [ms per round]
    for prefix, into in (("einjit", ours), ("base", base)):
        for path in sorted(glob.glob(os.path.join(d, prefix + "-*.json"))):
            with open(path) as f:
                data = json.load(f)
            for b in data["benchmarks"]:
                if b.get("run_type") != "iteration":
                    continue
                _, _, rows, cols, threads, dt = b["run_name"].split("/")[:6]
                label = b.get("label", "")
                case, dtype = label.rsplit(" ", 1)
                key = (case, int(rows), int(cols), int(threads), dtype)
                into.setdefault(key, []).append(b[clock])
    for path in sorted(glob.glob(os.path.join(d, "torch-*.jsonl"))):
        with open(path) as f:
            for line in f:
                j = json.loads(line)
                key = (j["case"], j["rows"], j["cols"], j["threads"], j["dtype"])
                torch.setdefault(key, []).append(j["ms"])
    med = lambda v: statistics.median(v) if v else float("nan")
    print(f"Medians over {len(glob.glob(os.path.join(d, 'einjit-*.json')))} alternated rounds"
          f"{', CPU time' if cpu else ''}.\n")
    hb = " base ms | base / einjit |" if base else ""
    print("| case | dtype | rows x cols | threads | copy ms | einjit ms | einjit / copy | "
          "PyTorch ms | PyTorch / einjit |" + hb)
    print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if base else ""))
    ratios = {}
    for key in sorted(ours, key=lambda k: (k[4], k[3], k[1], k[0])):
        case, rows, cols, threads, dtype = key
        if case == "copy":
            continue
        copy = med(ours.get(("copy", rows, cols, threads, dtype), []))
        e, t = med(ours[key]), med(torch.get(key, []))
        ratios[key] = (e, t)
        cb = ""
        if base:
            bm = med(base.get(key, []))
            cb = f" {bm:.2f} | {bm / e:.2f} |"
        print(f"| {case} | {dtype} | {rows} x {cols} | {threads} | {copy:.2f} | {e:.2f} | "
              f"{e / copy:.1f} | {t:.2f} | {t / e:.2f} |" + cb)
    print("\n| layer | dtype | rows x cols | threads | einjit (fwd+grads)/fwd | "
          "PyTorch (fwd+grads)/fwd |")
    print("|---|---|---|---|---|---|")
    for key, (e, t) in ratios.items():
        case, rows, cols, threads, dtype = key
        if not case.endswith("forward"):
            continue
        g = ratios.get((case + " + gradients", rows, cols, threads, dtype))
        if g:
            print(f"| {case.split()[0]} | {dtype} | {rows} x {cols} | {threads} | "
                  f"{g[0] / e:.2f} | {g[1] / t:.2f} |")


if __name__ == "__main__":
    main()
