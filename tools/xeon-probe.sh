#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".cpuk"] with cpuk.tar.xz and a tarball holding
# cpuk/einjit): GFLOP/s of the convolution and GEMM kernels at the bench's full shapes and at
# small shapes whose operands stay in L1/L2, default plans and 32-byte (AVX2) plans, on 1 and 2
# threads: tells the kernels' own speed on that CPU from what streaming the operands costs.
set -uo pipefail
out="${OUT:-/tmp/xeon-probe-out}"; run=/tmp/cpuk-run
mkdir -p "$out" "$run"
for a in .cpuk/*.tar.xz; do tar -C "$run" -xJf "$a"; done
cd "$run/cpuk"
lscpu | grep -E "Model name|^CPU\(s\)|L1d|L2|L3|Thread"
export EINJIT_CACHE_DIR="$run/cache" OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=passive
L="./lib/ld-linux-x86-64.so.2 --library-path ./lib"
for c in 0 0,1; do
  taskset -c $c $L ./bench_cpu --benchmark_filter=BM_FmaPeak --benchmark_min_time=0.3 2>/dev/null | grep FmaPeak
done
S1='y[n,o,h,w] := x[n,c,h+a,w+b] * k[o,c,a,b]'
S2='y[n,o,h,w] := x[n,c,2h+a,2w+b] * k[o,c,a,b]'
W1='dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+h,b+w] where a in 0:3, b in 0:3'
W2='dk[o,c,a,b] := dy[n,o,h,w] * x[n,c,a+2h,b+2w] where a in 0:3, b in 0:3'
G='C[i,k] := A[i,j] * B[j,k]'
cases=(
  "s1fwd-full|$S1|--shape x=8x64x56x56 --shape k=64x64x3x3|10"
  "s1fwd-small|$S1|--shape x=1x64x10x56 --shape k=64x64x3x3|40"
  "s2fwd-full|$S2|--shape x=8x64x56x56 --shape k=64x64x3x3|10"
  "s2fwd-small|$S2|--shape x=1x64x17x56 --shape k=64x64x3x3|40"
  "s1wgrad-full|$W1|--shape dy=8x64x54x54 --shape x=8x64x56x56|10"
  "s1wgrad-small|$W1|--shape dy=1x64x8x54 --shape x=1x64x10x56|40"
  "s2wgrad-full|$W2|--shape dy=8x64x27x27 --shape x=8x64x56x56|10"
  "s2wgrad-small|$W2|--shape dy=1x64x8x27 --shape x=1x64x17x56|40"
  "gemm1024|$G|--shape A=1024x1024 --shape B=1024x1024|10"
  "gemm-small|$G|--shape A=128x576 --shape B=576x128|40"
)
for round in 1 2; do
  for c in 0 0,1; do
    for cfg in default vb32; do
      for cs in "${cases[@]}"; do
        IFS='|' read -r name prog shapes reps <<<"$cs"
        env=(); [ $cfg = vb32 ] && env=(EINJIT_CPU_VECTOR_BYTES=32)
        # shellcheck disable=SC2086
        r=$(env "${env[@]}" taskset -c $c $L ./einjit bench "$prog" $shapes --reps $reps 2>&1 | awk '/GFLOP/ {print $(NF-1)}' | tail -1)
        echo "round $round cpus $c $cfg $name $r"
      done
    done
  done
done | tee "$out/probe.txt"
