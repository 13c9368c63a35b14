#!/usr/bin/env python3
"""Times AVX-512 micro-kernel inner loops alone, A and B in L1, against a register-only FMA loop.

Each loop is one reduction step of an MR x NR register tile written in assembly (MR rows, one or
two vectors of B, A broadcast into a register or folded into the FMA as {1toN}); the figure is
its time per 512-bit FMA (a 256-bit FMA counts as half) over the peak loop's (24 independent
chains, no memory operand), the minimum over 300 alternated trials, so a loaded machine still
reads the uncontended speed. 1.00: the tile runs at the FMA peak. Written for Zen 4 (512-bit
operations in halves, bench/RESULTS.md "the 3x3 convolutions on Zen 4, session 31").

  tools/fma-loops.py [OUT_DIR]     writes OUT_DIR/loops.c, builds it with cc, runs it
"""
import os
import subprocess
import sys

K = 64  # reduction steps per call (A: K x MR floats, B: K x NR, both in L1)


def loop(name, mr, nv, vec, folded, scale):
    lanes, vb = (16, 64) if vec == "zmm" else (8, 32)
    body, bregs = [], [31 - j for j in range(nv)]
    for j, b in enumerate(bregs):
        body.append(f"vmovups {j * vb}(%%rbx), %%{vec}{b}")
    for i in range(mr):
        if not folded:
            body.append(f"vbroadcastss {4 * i}(%%rax), %%{vec}29")
        for j in range(nv):
            a = f"{4 * i}(%%rax)%{{1to{lanes}%}}" if folded else f"%%{vec}29"
            body.append(f"vfmadd231ps {a}, %%{vec}{bregs[j]}, %%{vec}{i + j * mr}")
    body += [f"add ${4 * mr}, %%rax", f"add ${nv * vb}, %%rbx"]
    text = "\\n".join(body)
    return f"""static double {name}(void) {{
  double t = now();
  for (long r = 0; r < REP; ++r)
    asm volatile("mov %0, %%rax\\n mov %1, %%rbx\\n mov ${K}, %%ecx\\n 1:\\n{text}\\n dec %%ecx\\n jnz 1b\\n"
                 :: "r"(A), "r"(B) : "rax", "rbx", "ecx", "memory");
  return {scale} * (now() - t) / ((double)REP * {K} * {mr * nv});
}}
"""


# name, MR, vectors of B, register, A folded into the FMA, FMAs per 512-bit FMA
LOOPS = [("zmm_13x2", 13, 2, "zmm", False, 1), ("zmm_14x2", 14, 2, "zmm", False, 1),
         ("zmm_13x2_folded", 13, 2, "zmm", True, 1), ("zmm_14x2_folded", 14, 2, "zmm", True, 1),
         ("zmm_13x1_folded", 13, 1, "zmm", True, 1), ("zmm_22x1_folded", 22, 1, "zmm", True, 1),
         ("zmm_28x1_folded", 28, 1, "zmm", True, 1), ("zmm_24x1", 24, 1, "zmm", False, 1),
         ("ymm_14x2", 14, 2, "ymm", False, 2), ("ymm_14x2_folded", 14, 2, "ymm", True, 2),
         ("ymm_12x2_folded", 12, 2, "ymm", True, 2), ("ymm_24x1_folded", 24, 1, "ymm", True, 2)]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/fma-loops"
    os.makedirs(out, exist_ok=True)
    peak = "".join(f"vfmadd231ps %%zmm30, %%zmm31, %%zmm{i}\\n" for i in range(24))
    src = f"""#include <stdio.h>
#include <time.h>
static double now(void) {{ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }}
static float A[8192] __attribute__((aligned(64)));
static float B[16384] __attribute__((aligned(64)));
#define REP 2000
static double peak(void) {{
  double t = now();
  for (long r = 0; r < REP; ++r)
    asm volatile("mov ${K}, %%ecx\\n 1:\\n{peak}dec %%ecx\\n jnz 1b\\n" ::: "ecx", "memory");
  return (now() - t) / ((double)REP * {K} * 24);
}}
"""
    src += "".join(loop(*l) for l in LOOPS)
    names = ", ".join(l[0] for l in LOOPS)
    src += f"""typedef double (*fn)(void);
static const fn F[] = {{{names}}};
static const char* N[] = {{{", ".join('"%s"' % l[0] for l in LOOPS)}}};
int main(void) {{
  enum {{ n = sizeof F / sizeof F[0] }};
  double bp = 1e9, bk[n];
  for (int i = 0; i < n; ++i) bk[i] = 1e9;
  for (int t = 0; t < 300; ++t) {{
    double p = peak();
    if (p < bp) bp = p;
    for (int i = 0; i < n; ++i) {{ double x = F[i](); if (x < bk[i]) bk[i] = x; }}
  }}
  printf("peak loop: %.4f ns per 512-bit FMA (%.1f GFLOP/s on one core)\\n", bp * 1e9, 32 / bp * 1e-9);
  for (int i = 0; i < n; ++i) printf("%-18s %.2f x the peak loop's time per 512-bit FMA\\n", N[i], bk[i] / bp);
  return 0;
}}
"""
    with open(os.path.join(out, "loops.c"), "w") as f:
        f.write(src)
    subprocess.run(["cc", "-O2", "-o", os.path.join(out, "loops"), os.path.join(out, "loops.c")], check=True)
    subprocess.run([os.path.join(out, "loops")], check=True)


if __name__ == "__main__":
    main()
