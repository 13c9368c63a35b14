#!/usr/bin/env bash
# On the GPU machine (device tool, carry: [".cpuk"] made by `tools/cpu-bundle.sh BUILD_DIR
# BASE_BENCH`): the six convolution rows on that machine's AVX-512 CPU, einjit and oneDNN
# alternated per iteration in one process (BM_ConvAlt: the host is shared and its speed swings
# 20-57% between runs, so only a ratio inside one process is a figure). Each round runs this
# build's bench_cpu and, where bundled, the base build's (bench_cpu.base: the plans before the
# change), one after the other, on 2 threads (taskset -c 0,1) and then 1 (taskset -c 0).
# Prints per binary, threads and row the median over rounds of each process's median ratio
# (oneDNN time / einjit time: above 1, einjit faster) and einjit's median GFLOP/s; the raw
# JSON of every process and the FMA peak go to $OUT.
#   tools/xeon-conv.sh [ROUNDS_2_THREADS] [ROUNDS_1_THREAD] [MIN_TIME_S]   (default 4 3 0.4)
set -uo pipefail
r2="${1:-4}"; r1="${2:-3}"; mt="${3:-0.4}"
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${OUT:-/tmp/xeon-conv-out}"
run="${CPUK_RUN:-/tmp/cpuk-run}" # where the bundle is unpacked
mkdir -p "$out" "$run"
for a in "$root"/.cpuk/*.tar.xz; do tar -C "$run" -xJf "$a"; done
cd "$run/cpuk"
lscpu | tee "$out/lscpu.txt" | grep -E "Model name|^CPU\(s\)|L1d|L2|L3"
bins=(bench_cpu)
[ -x bench_cpu.base ] && bins=(bench_cpu.base bench_cpu)
export EINJIT_CACHE_DIR="$run/cache"
# bench_cpu sets these itself by starting again through /proc/self/exe, which under the bundled
# loader is the loader: set here, it does not.
export OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=passive
bench() { # BIN CPUS FILTER JSON
  taskset -c "$2" ./lib/ld-linux-x86-64.so.2 --library-path ./lib "./$1" \
    --benchmark_filter="$3" --benchmark_min_time="$mt" --benchmark_out="$4" \
    --benchmark_out_format=json >/dev/null 2>>"$out/stderr.txt"
}
for cpus in 0,1 0; do
  bench bench_cpu "$cpus" 'BM_FmaPeak' "$out/peak-$cpus.json"
  rounds=$r2; [ "$cpus" = 0 ] && rounds=$r1
  for ((r = 1; r <= rounds; ++r)); do
    for b in "${bins[@]}"; do
      bench "$b" "$cpus" 'BM_ConvAlt' "$out/conv-$b-$cpus-$r.json" || echo "$b $cpus round $r: rc=$?"
    done
  done
done
# Each JSON: one line per row "bin cpus row ratio einjit_GFLOPs oneDNN_GFLOPs".
for f in "$out"/conv-*.json; do
  base="$(basename "$f" .json)"; rest="${base#conv-}"
  b="${rest%-*-*}"; cpus="$(echo "$rest" | awk -F- '{print $(NF-1)}')"
  awk -v b="$b" -v c="$cpus" '
    /"name": "BM_ConvAlt/ { split($0, q, "\""); split(q[4], p, "/"); row = p[2] "/" p[3] }
    /"einjit_GFLOPs"/ { e = $2 + 0 } /"oneDNN_GFLOPs"/ { d = $2 + 0 }
    /"ratio"/ { print b, c, row, $2 + 0, e, d }' "$f"
done >"$out/rows.txt"
echo "== FMA peak, GFLOP/s:"
for p in "$out"/peak-*.json; do
  echo "$(basename "$p" .json): $(grep -h -E '"(name|GFLOP/s)"' "$p" | tr -d ' ",' | paste -s -d ' ')"
done
names=([10]="stride 1 forward" [11]="stride 1 input gradient" [12]="stride 1 weight gradient"
       [20]="stride 2 forward" [21]="stride 2 input gradient" [22]="stride 2 weight gradient")
med() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "== median over rounds: oneDNN time / einjit time (each round's per-process median), einjit GFLOP/s"
printf '%-26s %-16s %-8s %-34s %s\n' row bin threads "ratios by round" \
  "median: ratio, einjit / oneDNN GFLOP/s"
for cpus in 0,1 0; do
  for key in 10 11 12 20 21 22; do
    row="${key:0:1}/${key:1:1}"
    for b in "${bins[@]}"; do
      sel() { awk -v b="$b" -v c="$cpus" -v r="$row" '$1 == b && $2 == c && $3 == r' "$out/rows.txt"; }
      [ -n "$(sel)" ] || continue
      th=2; [ "$cpus" = 0 ] && th=1
      printf '%-26s %-16s %-8s %-34s %.3f, %.1f / %.1f\n' "${names[$key]}" "$b" "$th" \
        "$(sel | awk '{printf "%.2f ", $4}')" "$(sel | awk '{print $4}' | med)" \
        "$(sel | awk '{print $5}' | med)" "$(sel | awk '{print $6}' | med)"
    done
  done
done | tee "$out/summary.txt"
