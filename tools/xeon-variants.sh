#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".cpuk"] holding a bundle made by
# `tools/cpu-bundle.sh BUILD_DIR BASE_BENCH` and this script copied into .cpuk/): plan variants
# (the base build and this build under experiment knobs, schedule/GemmKnobs.h) measured on that
# machine's CPU in three parts, then the cold compile of the packed kernels.
#   1. the stride-2 forward and the README demo layer under every variant of S2_VARIANTS;
#   2. the six 3x3 convolution rows under every variant of ALL_VARIANTS;
#   3. BM_Compile_packed (EINJIT_CACHE_DIR=off) for each variant of COMPILE_VARIANTS, COMPILE_ROUNDS
#      rounds (default 1) on the CPUs COMPILE_CPUS (default 0: one thread; 0,1 as the Zen 4
#      figures are taken), then one compile of each kernel under EINJIT_DEBUG_JIT=1 (its modules).
# Each process runs one variant (an environment) with einjit and oneDNN alternated per iteration
# (BM_ConvAlt, BM_DemoLayer: only a ratio inside one process is a figure on a shared host), the
# variants in a rotated order each round, on 1 thread (taskset -c 0) and 2 (0,1).
#   bash .cpuk/xeon-variants.sh [ROUNDS_S2] [ROUNDS_ALL] [MIN_TIME_S]   (default 3 2 0.3)
# ROUNDS_ALL 0 skips part 2. A variant is "name|binary|environment"; the lists can be set in the
# environment (space-separated variants, each without spaces: environment entries joined by
# ','). Stops starting processes after $BUDGET seconds (default 480). Prints per row, threads and variant the median over rounds
# of each measure (BM_ConvAlt: ratio, oneDNN time / einjit time; the demo layer: fwd_bwd_speed,
# fwd_speed, einjit_bwd_ratio) and `rel`, the median over rounds of the variant's over the
# `default` variant's (above 1: the variant better for a speed, worse for a bwd ratio).
set -uo pipefail
r_s2="${1:-3}"; r_all="${2:-2}"; mt="${3:-0.3}"
here="$(cd "$(dirname "$0")" && pwd)"
# The device tool brings back at most 8 files from $OUT: the JSON goes there as one archive.
dest="${OUT:-/tmp/xeon-variants-out}"; run=/tmp/xeon-variants-run; out=$run/out
rm -rf "$run"; mkdir -p "$dest" "$out"
t0=$(date +%s)
tar -C "$run" -xJf "$here/${CPUK_TAR:-cpuk.tar.xz}" || exit 1
cd "$run/cpuk"
lscpu | tee "$out/lscpu.txt" | grep -E "Model name|^CPU\(s\)|L1d|L2|L3"
export OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=passive
L="./lib/ld-linux-x86-64.so.2 --library-path ./lib"
# shellcheck disable=SC2086
taskset -c 0,1 $L ./bench_cpu --benchmark_filter=BM_FmaPeak --benchmark_min_time=0.2 2>/dev/null |
  awk '/FmaPeak/ {match($0, /GFLOP\/s=[0-9.]+/); print "FMA peak", $1, substr($0, RSTART, RLENGTH)}'
echo "unpacked and peak in $(($(date +%s) - t0)) s"
read -ra s2v <<<"${S2_VARIANTS:-base|bench_cpu.base| default|bench_cpu| s2rows|bench_cpu|EINJIT_GEMM_S2_TILE=0 s2packed|bench_cpu|EINJIT_GEMM_S2_IN_PLACE=0}"
read -ra allv <<<"${ALL_VARIANTS:-base|bench_cpu.base| default|bench_cpu|}"
read -ra compv <<<"${COMPILE_VARIANTS:-base|bench_cpu.base| default|bench_cpu|}"
sweep() { # TAG FILTER ROUNDS VARIANTS...
  local tag="$1" filter="$2" rounds="$3"; shift 3
  local vs=("$@") n=$#
  for ((r = 1; r <= rounds; ++r)); do
    for cpus in 0 0,1; do
      for ((i = 0; i < n; ++i)); do
        if (($(date +%s) - t0 > ${BUDGET:-480})); then echo "budget spent: $tag round $r on skipped"; return; fi
        IFS='|' read -r name bin envs <<<"${vs[$(((i + r) % n))]}"
        # shellcheck disable=SC2086
        env EINJIT_CACHE_DIR="$run/cache-$name" ${envs//,/ } taskset -c "$cpus" $L "./$bin" \
          --benchmark_filter="$filter" --benchmark_min_time="$mt" \
          --benchmark_out="$out/$tag-$name-${cpus/,/_}-$r.json" --benchmark_out_format=json \
          >/dev/null 2>>"$out/stderr.txt" || echo "$tag $name $cpus round $r: rc=$?"
      done
    done
  done
  echo "$tag done at $(($(date +%s) - t0)) s"
}
sweep s2 'BM_ConvAlt/2/0/|BM_DemoLayer' "$r_s2" "${s2v[@]}"
sweep all 'BM_ConvAlt/[12]/[012]/' "$r_all" "${allv[@]}"
for ((r = 1; r <= ${COMPILE_ROUNDS:-1}; ++r)); do
  for v in "${compv[@]}"; do
    IFS='|' read -r name bin envs <<<"$v"
    # shellcheck disable=SC2086
    env EINJIT_CACHE_DIR=off ${envs//,/ } taskset -c "${COMPILE_CPUS:-0}" $L "./$bin" \
      --benchmark_filter=BM_Compile_packed --benchmark_min_time=0.2 \
      --benchmark_out="$out/compile-$name-$r.json" --benchmark_out_format=json \
      >/dev/null 2>>"$out/stderr.txt" || echo "compile $name: rc=$?"
  done
done
# The module times of one compile of each packed kernel (this build, its plans).
EINJIT_DEBUG_JIT=1 EINJIT_CACHE_DIR=off taskset -c "${COMPILE_CPUS:-0}" $L ./bench_cpu --benchmark_filter=BM_Compile_packed \
  --benchmark_min_time=0.001 >/dev/null 2>"$out/debug-jit.txt"
echo "compile done at $(($(date +%s) - t0)) s"
python3 - "$out" <<'PY' | tee "$dest/summary.txt"
import json, glob, os, sys, statistics, collections
d = collections.defaultdict(dict)  # (tag,row,cpus,key,variant) -> {round: value}
comp = collections.defaultdict(dict)
for f in sorted(glob.glob(sys.argv[1] + '/*.json')):
    base = os.path.basename(f)[:-5]
    js = json.load(open(f))['benchmarks']
    if base.startswith('compile-'):
        _, name, r = base.split('-')
        for x in js:
            comp[x.get('label', x['name'])].setdefault(name, []).append(x['real_time'])
        continue
    tag, name, cpus, r = base.split('-')
    for x in js:
        row = x['name'].replace('/manual_time', '').split('/min_time')[0]
        for k in ('ratio', 'fwd_bwd_speed', 'fwd_speed', 'einjit_bwd_ratio'):
            if k in x: d[(tag, row, cpus, k, name)][r] = x[k]
med = statistics.median
for key in sorted({k[:4] for k in d}):
    vs = [k[4] for k in d if k[:4] == key]
    order = sorted(vs, key=lambda v: ['base', 'default'].index(v) if v in ('base', 'default') else 2)
    dflt = d.get(key + ('default',), {})
    for v in order:
        x = d[key + (v,)]
        rel = [x[r] / dflt[r] for r in x if r in dflt and dflt[r] > 0]
        print('%-4s %-22s %-3s %-16s %-8s %s | %.3f | rel %.3f' % (
            key[0], key[1][:22], '1' if key[2] == '0' else '2', key[3], v,
            ' '.join('%.2f' % x[r] for r in sorted(x)), med(x.values()), med(rel) if rel else 0))
print('== BM_Compile_packed (ms, wall, EINJIT_CACHE_DIR=off; each variant: its rounds | median)')
for label, m in comp.items():
    print('%-34s %s' % (label[:34], '  '.join('%s %s | %.1f' % (v, ' '.join('%.1f' % t for t in ts), med(ts))
                                            for v, ts in m.items())))
PY
tar -C "$out" -czf "$dest/out.tar.gz" .
echo "total $(($(date +%s) - t0)) s"
