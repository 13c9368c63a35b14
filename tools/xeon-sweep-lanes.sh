#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".cpuk/DIR"] holding this script and a bundle
# $CPUK_TAR made by tools/cpu-bundle.sh): the packed plan's experiment knobs (schedule/GemmKnobs,
# docs/CPU_SCHEDULES.md "Experiment knobs") and code generation knobs swept over the six 3x3
# BM_ConvAlt rows (einjit and oneDNN alternated per iteration in one process), 1 and 2 threads.
# LANES lanes (default 4) run at once on disjoint cores, each its own rotation of the variants,
# rounds until BUDGET seconds (default 450); prints per row, threads and variant the median
# ratio (oneDNN time / einjit time) and `rel`, the variant's ratio over the default's of the
# same lane and round (median; per lane in brackets). Summary and JSON (json.tgz) in $OUT.
#   BUDGET=440 bash .cpuk/DIR/xeon-sweep-lanes.sh [ROUNDS] [MIN_TIME_S]   (default 3 0.25)
set -uo pipefail
rounds="${1:-3}"; mt="${2:-0.25}"
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/s32-out}"; run=/tmp/s32-run
rm -rf "$run"; mkdir -p "$out" "$run"
t0=$(date +%s)
tar -C "$run" -xJf "$here/${CPUK_TAR:-cpuk.tar.xz}" || exit 1
cd "$run/cpuk"
lscpu | tee "$out/lscpu.txt" | grep -E "Model name|^CPU\(s\)|L1d|L2|L3"
export OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=passive
L="./lib/ld-linux-x86-64.so.2 --library-path ./lib"
for c in 0 0,1; do taskset -c $c $L ./bench_cpu --benchmark_filter=BM_FmaPeak --benchmark_min_time=0.2 2>/dev/null |
  awk -v c=$c '/FmaPeak/ {match($0, /GFLOP\/s=[0-9.]+/); print "FMA peak cpus", c, substr($0, RSTART, RLENGTH)}'; done
echo "unpacked and peak in $(($(date +%s) - t0)) s"
vs=(
  "default|"
  "kc576|EINJIT_GEMM_KC=576"
  "kc144|EINJIT_GEMM_KC=144"
  "mr8|EINJIT_GEMM_MR=8"
  "mr11|EINJIT_GEMM_MR=11"
  "nr1|EINJIT_GEMM_NR_VECTORS=1"
  "nr1mr16|EINJIT_GEMM_NR_VECTORS=1 EINJIT_GEMM_MR=16"
  "sets2mr7|EINJIT_GEMM_KSETS=2 EINJIT_GEMM_MR=7"
  "packB|EINJIT_GEMM_PACK_B=1"
  "nr1packB|EINJIT_GEMM_NR_VECTORS=1 EINJIT_GEMM_PACK_B=1"
  "nopfo|EINJIT_GEMM_PREFETCH_OUT=0"
  "lsr|EINJIT_JIT_LSR=1"
  "zen4|EINJIT_JIT_CPU=znver4"
  "stage0|EINJIT_GEMM_STAGE=0"
)
n=${#vs[@]}
# LANES lanes run at once, each on its own cores (lane l: one thread on core 4l, two on 4l and
# 4l+1), each its own rotation of the variants: more rounds in the same time; every ratio is
# still einjit against oneDNN in one process, and a variant's rel is against the default of
# the same lane and round.
lane() { # L
  local l=$1 c1=$((4 * $1)) cpus r i name envs
  for ((r = 1; r <= rounds; ++r)); do
    for cpus in $c1 $c1,$((c1 + 1)); do
      for ((i = 0; i < n; ++i)); do
        if (($(date +%s) - t0 > ${BUDGET:-450})); then echo "lane $l: budget spent at $cpus round $r"; return; fi
        IFS='|' read -r name envs <<<"${vs[$(((i + r + 5 * l) % n))]}"
        [ "$name" = stage0 ] && [ "$cpus" != $c1 ] && continue
        # shellcheck disable=SC2086
        env EINJIT_CACHE_DIR="$run/cache-$l-$name" $envs taskset -c "$cpus" $L ./bench_cpu \
          --benchmark_filter='BM_ConvAlt/[12]/[012]/' --benchmark_min_time="$mt" \
          --benchmark_out="$out/j-$name-$([[ $cpus == *,* ]] && echo 2 || echo 1)-$l.$r.json" --benchmark_out_format=json \
          >/dev/null 2>>"$out/stderr-$l.txt" || echo "$name $cpus round $r: rc=$?"
      done
    done
  done
}
for ((l = 0; l < ${LANES:-4}; ++l)); do lane $l & done
wait
echo "runs done at $(($(date +%s) - t0)) s"
python3 - "$out" <<'PY'
import json, glob, os, sys, statistics as st, collections
rows = collections.defaultdict(list)  # (row, threads, variant) -> [(lane.round, ratio, gf, peer)]
for f in glob.glob(sys.argv[1] + '/j-*.json'):
    _, v, th, r = os.path.basename(f)[:-5].split('-')
    try: js = json.load(open(f))
    except Exception: continue
    for b in js['benchmarks']:
        row = b['name'].split('/')[1] + '/' + b['name'].split('/')[2]
        rows[(row, th, v)].append((r, b['ratio'], b['einjit_GFLOPs'], b['oneDNN_GFLOPs']))
names = {'1/0': 's1fwd', '1/1': 's1dx', '1/2': 's1dk', '2/0': 's2fwd', '2/1': 's2dx', '2/2': 's2dk'}
full = open(sys.argv[1] + '/summary.txt', 'w')
print('row   thr variant  n  median  rel   [rel by lane: median]  einjit/oneDNN GF')
for row in sorted(names):
    for th in ('1', '2'):
        d = {r: x for (r, x, g, p) in rows.get((row, th, 'default'), [])}
        for v in sorted({k[2] for k in rows if k[0] == row and k[1] == th}, key=lambda v: (v != 'default', v)):
            xs = sorted(rows[(row, th, v)])
            rel = [x / d[r] for (r, x, g, p) in xs if r in d]
            lanes = collections.defaultdict(list)
            for (r, x, g, p) in xs:
                if r in d: lanes[r.split('.')[0]].append(x / d[r])
            line = '%-5s %s %-9s %2d %.3f %.3f [%s] %.0f/%.0f' % (names[row], th, v, len(xs),
                  st.median([x for (r, x, g, p) in xs]), st.median(rel) if rel else 0,
                  ' '.join('%.2f' % st.median(lanes[l]) for l in sorted(lanes)),
                  st.median([g for (r, x, g, p) in xs]), st.median([p for (r, x, g, p) in xs]))
            print(line)
            full.write(line + ' | ' + ' '.join('%s:%.3f' % (r, x) for (r, x, g, p) in xs) + '\n')
PY
tar -C "$out" -czf "$out/json.tgz" $(cd "$out" && ls j-*.json) && rm -f "$out"/j-*.json
echo "total $(($(date +%s) - t0)) s"
