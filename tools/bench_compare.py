"""Summarises tools/gpu-bench-compare.sh: for each benchmark, the median real time of BASE
and HEAD over the rounds and their ratio; rows where HEAD is more than 3% slower are marked.
Usage: bench_compare.py DIR ROUNDS"""
import json
import statistics
import sys

folder, rounds = sys.argv[1], int(sys.argv[2])
times = {"base": {}, "head": {}}
units = {}
for side in times:
    for r in range(1, rounds + 1):
        with open(f"{folder}/{side}-{r}.json") as f:
            for b in json.load(f)["benchmarks"]:
                if b.get("run_type") == "aggregate" or "error_occurred" in b:
                    continue
                times[side].setdefault(b["name"], []).append(b["real_time"])
                units[b["name"]] = b.get("time_unit", "ns")
print("| case | base | head | unit | head / base |")
print("|---|---|---|---|---|")
worst, slower = 0.0, 0
for name, base in times["base"].items():
    head = times["head"].get(name)
    if not head:
        continue
    mb, mh = statistics.median(base), statistics.median(head)
    ratio = mh / mb
    worst = max(worst, ratio)
    flag = " **slower**" if ratio > 1.03 else ""
    slower += ratio > 1.03
    print(f"| {name} | {mb:.4g} | {mh:.4g} | {units[name]} | {ratio:.3f}{flag} |")
print(f"\n{len(times['base'])} cases, {rounds} rounds; worst head / base {worst:.3f}; "
      f"{slower} rows more than 3% slower")
