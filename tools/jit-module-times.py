#!/usr/bin/env python3
"""The JIT's module CPU times of the packed kernels' cold compiles (BM_Compile_packed).

Runs each BM_Compile_packed case as a process of its own (EINJIT_CACHE_DIR=off,
EINJIT_DEBUG_JIT=1), ROUNDS times, and prints per case the largest module's thread CPU ms (the
middle end + code generation, its LLVM instructions as emitted), the modules' sum, the longest
thread of a 2-thread schedule of the modules (longest first onto the less loaded thread, as
runtime/Jit.cpp orders them) and half the sum (what splitting the modules perfectly could reach);
medians over the rounds. Thread CPU time, not wall time: it reads the same on a loaded machine.
The wall time of a cold compile is about the 2-thread schedule plus a few milliseconds of
emission, packing and loading.

  tools/jit-module-times.py BENCH_CPU [--rounds N] [--cases 0,5,11] [VAR=VALUE ...]

VAR=VALUE pairs go into each process's environment (EINJIT_JIT_CPU=rocketlake for the Xeon's
code and pipeline on another machine, EINJIT_JIT_LLVM_ARGS=..., a JIT knob).
"""
import os
import re
import statistics as st
import subprocess
import sys


def run_case(bench, case, env):
    out = subprocess.run(
        [bench, f"--benchmark_filter=BM_Compile_packed/{case}/", "--benchmark_min_time=0.01"],
        env=env, capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    mods, label = {}, ""
    for line in text.splitlines():
        m = re.search(r"einjit jit: (.*?), \d+-byte object, CPU ms: (.*)", line)
        if m:
            name, rest = m.groups()
            total = float(re.search(r"total ([0-9.]+)", rest).group(1))
            mid = re.search(r"(?:explicit-code pipeline|O3) ([0-9.]+)", rest)
            cg = re.search(r" codegen ([0-9.]+)", rest)
            ins = re.search(r"\((\d+) instructions\)", rest)
            mods[name] = (total, float(mid.group(1)) if mid else 0.0,
                          float(cg.group(1)) if cg else 0.0, int(ins.group(1)) if ins else 0)
        elif "BM_Compile_packed/" in line:
            label = line.split()[-1] if line.split() else ""
            tail = re.search(r"cpu_ms_min=[0-9.]+ (.*)", line)
            label = tail.group(1) if tail else label
    return mods, label


def schedule(times, threads=2):
    loads = [0.0] * threads
    for t in sorted(times, reverse=True):
        loads[loads.index(min(loads))] += t
    return max(loads)


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    bench, rounds, cases, extra = args[0], 3, list(range(15)), {}
    i = 1
    while i < len(args):
        if args[i] == "--rounds":
            rounds, i = int(args[i + 1]), i + 2
        elif args[i] == "--cases":
            cases, i = [int(c) for c in args[i + 1].split(",")], i + 2
        elif "=" in args[i]:
            k, v = args[i].split("=", 1)
            extra[k], i = v, i + 1
        else:
            sys.exit(f"unknown argument {args[i]}\n{__doc__}")
    env = dict(os.environ, EINJIT_CACHE_DIR="off", EINJIT_DEBUG_JIT="1", **extra)
    runs = {c: [] for c in cases}
    labels = {}
    for _ in range(rounds):
        for c in cases:
            mods, label = run_case(bench, c, env)
            runs[c].append(mods)
            labels[c] = label
    print("| case | largest module: CPU ms (middle end + codegen, instructions) | sum | "
          "2-thread schedule | sum / 2 |")
    print("|---|---|---|---|---|")
    for c in cases:
        names = set().union(*[set(m) for m in runs[c]])
        med = {n: tuple(st.median(m[n][k] for m in runs[c] if n in m) for k in range(4))
               for n in names}
        big = max(med, key=lambda n: med[n][0])
        total = st.median(sum(v[0] for v in m.values()) for m in runs[c])
        sched = st.median(schedule([v[0] for v in m.values()]) for m in runs[c])
        t, mid, cg, ins = med[big]
        print(f"| {c} {labels[c]} | `{big}` {t:.1f} ({mid:.1f} + {cg:.1f}, {ins:.0f}) | "
              f"{total:.1f} | {sched:.1f} | {total / 2:.1f} |")


if __name__ == "__main__":
    main()
