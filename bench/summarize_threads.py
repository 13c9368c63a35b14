#!/usr/bin/env python3
"""Turns bench_cpu's JSON of BM_Threads (bench/bench_threads.cpp) into the two-threads table of
RESULTS.md: per case the medians over repetitions of einjit's one-thread plan on 1 thread and
two-thread plan on 2 threads (ms), its speedup (issue 24: at least 1.8 above 10^8 flops),
plan_cost (the two-thread plan on 1 thread over the one-thread plan), plan_scaling, the peer's
speedup in the same iterations (the machine's reference) and cpu_growth.

    summarize_threads.py threads.json"""
import json
import sys

FIELDS = ("einjit_1t_ms", "einjit_2t_ms", "speedup", "plan_cost", "plan_scaling", "peer_speedup",
          "cpu_growth")


def main():
    with open(sys.argv[1]) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        name = b.get("run_name", b["name"])
        if not name.startswith("BM_Threads") or "speedup" not in b:
            continue
        # Medians where the run has aggregates, else the single run.
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        row = int(name.split("/")[1])
        if b.get("run_type") == "aggregate" or row not in rows:
            rows[row] = (b.get("label", name), [b.get(k, 0.0) for k in FIELDS])
    print(f"Date {data['context'].get('date')}; load average "
          f"{data['context'].get('load_avg', '?')}.\n")
    print("| case | one-thread plan, 1 thread (ms) | two-thread plan, 2 threads (ms) | speedup | "
          "plan_cost | plan_scaling | peer speedup | cpu_growth |")
    print("|---|---|---|---|---|---|---|---|")
    for row in sorted(rows):
        label, v = rows[row]
        mark = "**" if v[2] < 1.8 and not label.startswith("demo") else ""
        print(f"| {label} | {v[0]:.2f} | {v[1]:.2f} | {mark}{v[2]:.2f}{mark} | {v[3]:.3f} | "
              f"{v[4]:.2f} | {v[5]:.2f} | {v[6]:.2f} |")


if __name__ == "__main__":
    main()
