#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".cpuk"] holding a bundle with cpuk/einjit): the
# GFLOP/s of a few packed kernels under code-generation knobs (LLVM's CPU model, loop strength
# reduction), the configurations alternated as processes in rounds, 1 thread (taskset -c 0).
#   tools/xeon-knobs.sh [ROUNDS]
set -uo pipefail
rounds="${1:-6}"
out="${OUT:-/tmp/xeon-knobs-out}"; run=/tmp/cpuk-run
mkdir -p "$out" "$run"
for a in .cpuk/*.tar.xz; do tar -C "$run" -xJf "$a"; done
cd "$run/cpuk"
export OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=passive
L="./lib/ld-linux-x86-64.so.2 --library-path ./lib"
S1='y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]'
S2='y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]'
G='C[i,k] := A[i,j] * B[j,k]'
cases=(
  "s1fwd|$S1|--shape x=4x64x56x56 --shape k=64x64x3x3|10"
  "s2fwd|$S2|--shape x=8x64x56x56 --shape k=64x64x3x3|10"
  "gemm1024|$G|--shape A=1024x1024 --shape B=1024x1024|8"
)
cfgs=("default|" "lsr|EINJIT_JIT_LSR=1" "skx|EINJIT_JIT_CPU=skylake-avx512" "icx|EINJIT_JIT_CPU=icelake-server")
for ((r = 1; r <= rounds; ++r)); do
  for cs in "${cases[@]}"; do
    IFS='|' read -r name prog shapes reps <<<"$cs"
    for cf in "${cfgs[@]}"; do
      IFS='|' read -r cname cenv <<<"$cf"
      env=(EINJIT_CACHE_DIR="$run/cache-$cname"); [ -n "$cenv" ] && env+=("$cenv")
      # shellcheck disable=SC2086
      g=$(env "${env[@]}" taskset -c 0 $L ./einjit bench "$prog" $shapes --reps $reps 2>&1 | awk '/GFLOP/ {print $(NF-1)}' | tail -1)
      echo "$r $name $cname $g"
    done
  done
done | tee "$out/knobs.txt"
# Per round, each configuration's GFLOP/s over the default's (mawk has no sort: sort -g per key).
echo "== per case and config: ratios to default by round"
awk '$3 == "default" {d[$1 " " $2] = $4} {v[$2 " " $3] = v[$2 " " $3] " " sprintf("%.2f", $4 / d[$1 " " $2])}
  END {for (k in v) print k ":" v[k]}' "$out/knobs.txt" | sort | tee "$out/summary.txt"
