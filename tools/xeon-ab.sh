#!/usr/bin/env bash
# On the GPU machine (device tool): a bundle .cpuk/$CPUK_TAR (tools/cpu-bundle.sh BUILD BASE_BENCH,
# or any tar.xz of cpuk/ with bench_cpu, bench_cpu.base and lib/) unpacked, then the base and
# the head bench_cpu alternated as processes on that machine's CPU (1 thread: taskset -c 0; 2:
# 0,1), 3 rounds, the 3x3 convolutions, the demo layer and the distance layer; prints per row
# the median over rounds of each side's in-process ratios. Stops starting processes after 330 s.
#   bash tools/xeon-ab.sh   (copied into .cpuk/ beside the bundle)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"; out="${OUT:-/tmp/x31}"; run=/tmp/x31run
rm -rf $run; mkdir -p $run $out; tar -C $run -xJf "$here/${CPUK_TAR:-cpuk.tar.xz}"; cd $run/cpuk
lscpu | grep -E "Model name|^CPU\(s\)|L2" ; export OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=passive
L="./lib/ld-linux-x86-64.so.2 --library-path ./lib"
taskset -c 0,1 $L ./bench_cpu --benchmark_filter=BM_FmaPeak --benchmark_min_time=0.2 2>/dev/null | grep FmaPeak
t0=$(date +%s)
for r in 1 2 3; do for cpus in 0,1 0; do for b in bench_cpu.base bench_cpu; do
  (( $(date +%s) - t0 > 330 )) && break 3
  env EINJIT_CACHE_DIR=$run/c-$b taskset -c $cpus $L ./$b --benchmark_filter='BM_ConvAlt/|BM_DemoLayer|BM_DistanceAlt/[12]' --benchmark_min_time=0.3 \
    --benchmark_out=$out/$b-${cpus/,/+}-$r.json --benchmark_out_format=json >/dev/null 2>>$out/err.txt
done; done; done
echo "elapsed $(( $(date +%s) - t0 ))"
python3 - $out <<'PY'
import json,glob,os,sys,statistics,collections
d=collections.defaultdict(list)
for f in glob.glob(sys.argv[1]+'/*.json'):
    b,cpus,r=os.path.basename(f)[:-5].rsplit('-',2)
    for x in json.load(open(f))['benchmarks']:
        for k in ('ratio','fwd_bwd_speed','fwd_speed','peer/forward','grads/forward','einjit_bwd_ratio'):
            if k in x: d[(x['name'],cpus,k,b)].append(x[k])
keys=sorted({k[:3] for k in d})
for k in keys:
    a=d.get(k+('bench_cpu.base',),[]); h=d.get(k+('bench_cpu',),[])
    print('%-45s %-4s %-16s base %s head %s'%(k[0][:45],k[1],k[2],'%.2f'%statistics.median(a) if a else '-','%.2f'%statistics.median(h) if h else '-'))
PY
