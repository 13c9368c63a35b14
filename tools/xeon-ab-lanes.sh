#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".cpuk/DIR"] holding this script and a bundle
# $CPUK_TAR from `tools/cpu-bundle.sh BUILD BASE_BENCH`): base (bench_cpu.base) against head
# (bench_cpu) and two knob variants of head on the 3x3 rows, alternated as processes in rotated
# order, LANES lanes at once (lane l: 1 thread on core 4l, 2 on 4l and 4l+1); each process's
# rows are einjit and its peer alternated per iteration: the 3x3 and 1x1 convolutions, the demo
# and distance layers; first each lane's cold compiles (BM_Compile_packed, both binaries twice),
# and the head's test_gemm on cores 14-15. Rounds until BUDGET seconds (default 400), then the
# medians and `rel` (over base, same lane and round). Summary and JSON in $OUT.
#   BUDGET=370 [VARIANTS=...] bash .cpuk/DIR/xeon-ab-lanes.sh
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/ab32-out}"; run=/tmp/ab32-run
rm -rf "$run"; mkdir -p "$out" "$run"
t0=$(date +%s)
tar -C "$run" -xJf "$here/${CPUK_TAR:-cpuk.tar.xz}" || exit 1
# Binaries bundled apart (extra*.tar.xz of cpuk/...: test_gemm where the bundle lacks it).
for a in "$here"/extra*.tar.xz; do [ -e "$a" ] && tar -C "$run" -xJf "$a"; done
cd "$run/cpuk"
lscpu | tee "$out/lscpu.txt" | grep -E "Model name|^CPU\(s\)|L1d|L2|L3"
export OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=passive
L="./lib/ld-linux-x86-64.so.2 --library-path ./lib"
for c in 0 0,1; do taskset -c $c $L ./bench_cpu --benchmark_filter=BM_FmaPeak --benchmark_min_time=0.2 2>/dev/null |
  awk -v c=$c '/FmaPeak/ {match($0, /GFLOP\/s=[0-9.]+/); print "FMA peak cpus", c, substr($0, RSTART, RLENGTH)}'; done
# The head's test_gemm on this CPU (its AVX-512 plans and code against the interpreter), on two
# cores the lanes leave alone.
( EINJIT_CACHE_DIR=$run/cache-test taskset -c 14,15 $L ./test_gemm >"$out/test_gemm.log" 2>&1; echo "test_gemm rc=$?" >>"$out/test_gemm.log" ) &
tp=$!
echo "unpacked and peak in $(($(date +%s) - t0)) s"
ALL='BM_ConvAlt/|BM_ConvAlt1x1/|BM_DemoLayer|BM_DistanceAlt/[12]'
CONV='BM_ConvAlt/'
vs=(
  "base|bench_cpu.base||$ALL"
  "head|bench_cpu||$ALL"
  "lsrall|bench_cpu|EINJIT_JIT_LSR=1|$CONV"
  "kc576|bench_cpu|EINJIT_GEMM_KC=576|$CONV"
)
# VARIANTS: the variants instead, space-separated name|binary|environment|filter entries (an
# environment without spaces: entries joined by ','; the filter @ALL or @CONV for those above).
if [ -n "${VARIANTS:-}" ]; then
  read -ra vs <<<"$VARIANTS"
  for ((i = 0; i < ${#vs[@]}; ++i)); do vs[i]="${vs[i]//@ALL/$ALL}"; vs[i]="${vs[i]//@CONV/$CONV}"; vs[i]="${vs[i]//,/ }"; done
fi
n=${#vs[@]}
lane() { # L
  local l=$1 c1=$((4 * $1)) cpus r i name bin envs filter
  for b in bench_cpu.base bench_cpu bench_cpu.base bench_cpu; do
    taskset -c $c1,$((c1 + 1)) $L ./$b --benchmark_filter='BM_Compile_packed' --benchmark_min_time=0.1 \
      --benchmark_out="$out/c-$b-$l-$RANDOM.json" --benchmark_out_format=json >/dev/null 2>>"$out/stderr-$l.txt"
  done
  for ((r = 1; r <= 20; ++r)); do
    for cpus in $c1 $c1,$((c1 + 1)); do
      for ((i = 0; i < n; ++i)); do
        if (($(date +%s) - t0 > ${BUDGET:-400})); then echo "lane $l: budget spent at $cpus round $r"; return; fi
        IFS='|' read -r name bin envs filter <<<"${vs[$(((i + r + l) % n))]}"
        # shellcheck disable=SC2086
        env EINJIT_CACHE_DIR="$run/cache-$l-$name" $envs taskset -c "$cpus" $L ./$bin \
          --benchmark_filter="$filter" --benchmark_min_time=0.25 \
          --benchmark_out="$out/j-$name-$([[ $cpus == *,* ]] && echo 2 || echo 1)-$l.$r.json" --benchmark_out_format=json \
          >/dev/null 2>>"$out/stderr-$l.txt" || echo "$name $cpus round $r: rc=$?"
      done
    done
  done
}
pids=()
for ((l = 0; l < ${LANES:-4}; ++l)); do lane $l & pids+=($!); done
wait "${pids[@]}"
echo "runs done at $(($(date +%s) - t0)) s"
wait $tp
grep -E "^\[doctest\] (test cases|assertions)|rc=" "$out/test_gemm.log"
python3 - "$out" <<'PY'
import json, glob, os, sys, statistics as st, collections
rows = collections.defaultdict(list)
comp = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + '/*.json'):
    base = os.path.basename(f)[:-5]
    try: js = json.load(open(f))
    except Exception: continue
    if base.startswith('c-'):
        b = base.split('-')[1]
        for x in js['benchmarks']:
            comp[(x.get('label', x['name']), b)].append(x['real_time'])
        continue
    _, v, th, r = base.split('-')
    for x in js['benchmarks']:
        for k in ('ratio', 'fwd_speed', 'fwd_bwd_speed', 'einjit_bwd_ratio'):
            if k in x: rows[(x['name'], k, th, v)].append((r, x[k], x.get('einjit_GFLOPs', 0)))
full = open(sys.argv[1] + '/summary.txt', 'w')
def out(line):
    print(line); full.write(line + '\n')
out('row metric thr | variant: n median [head/base rel by lane] einjit GF')
for key in sorted({k[:3] for k in rows}):
    name, k, th = key
    b = {r: x for (r, x, g) in rows.get(key + ('base',), [])}
    parts = []
    for v in ['base', 'head'] + sorted({k[3] for k in rows} - {'base', 'head'}):
        xs = rows.get(key + (v,), [])
        if not xs: continue
        rel = [x / b[r] for (r, x, g) in xs if r in b and b[r]]
        parts.append('%s %d %.3f rel %.3f %.0fGF' % (v, len(xs), st.median(x for (r, x, g) in xs),
                     st.median(rel) if rel else 0, st.median(g for (r, x, g) in xs)))
    n2 = name.replace('BM_', '').replace('/manual_time', '').replace('/min_time:1.000', '')
    out('%-28s %-9s %s | %s' % (n2[:28], k[:9], th, ' | '.join(parts)))
out('compile (BM_Compile_packed, wall ms, 2 cores): case | base median | head median')
for case in sorted({k[0] for k in comp}):
    out('%-40s | %.1f | %.1f' % (case[:40], st.median(comp[(case, 'bench_cpu.base')] or [0]), st.median(comp[(case, 'bench_cpu')] or [0])))
PY
cd "$out" && tar -czf json.tgz $(ls *.json) && rm -f ./*.json
echo "total $(($(date +%s) - t0)) s"
