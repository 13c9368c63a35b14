#!/usr/bin/env bash
# On the GPU machine (device tool, carry [".cpuk"] holding a bundle made by
# `tools/cpu-bundle.sh BUILD_DIR BASE_BENCH`, and this script copied into .cpuk/): the packed
# GEMM plan's experiment knobs (schedule/GemmKnobs.h, docs/CPU_SCHEDULES.md "Experiment knobs")
# swept over the convolution forwards on that machine's AVX-512 CPU, then the one-thread weight
# gradients with and without their staged output. Each process runs bench_cpu's BM_ConvAlt
# rows (einjit and oneDNN alternated per iteration in one process: the host's speed swings
# between processes, so a variant is judged by its in-process ratio to oneDNN), one variant (an
# environment) per process, the variants in a rotated order each round, on 1 thread
# (taskset -c 0) and 2 (taskset -c 0,1).
#   bash .cpuk/xeon-sweep.sh [ROUNDS] [MIN_TIME_S] [PART]   (default 3 0.3 all; PART fwd|wgrad|kc)
# PART kc: the six BM_ConvAlt rows and BM_Gemm 1024 (four forms, against OpenBLAS) for the
# bundle's binaries: bench_cpu.base, bench_cpu (`default`) and bench_cpu.kc (a later build, from
# avx30-extra*.tar.xz: the AVX-512 KC rule).
# Unpacks only its bundle, .cpuk/$CPUK_TAR (default avx30-cpuk.tar.xz), and .cpuk/avx30-extra*.tar.xz
# (cpuk/bench_cpu* of a later build) over it, into a fresh directory;
# stops starting processes after $BUDGET seconds (default 470) so that the summary still prints
# inside the device tool's limit.
# Prints per row, threads and variant the median over rounds of the ratio (oneDNN time / einjit
# time), `rel` (the median of the variant's ratio over the default's of the same round and
# threads: above 1, the variant is faster) and einjit's median GFLOP/s. Raw JSON in $OUT.
set -uo pipefail
rounds="${1:-3}"; mt="${2:-0.3}"; part="${3:-all}"
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/xeon-sweep-out}"; run="${CPUK_RUN:-/tmp/xeon-sweep-run}"
rm -rf "$run"; mkdir -p "$out" "$run"
t0=$(date +%s)
tar -C "$run" -xJf "$here/${CPUK_TAR:-avx30-cpuk.tar.xz}" || exit 1
# A later build's binaries over the bundle's (same libraries: einjit links statically).
for a in "$here"/avx30-extra*.tar.xz; do [ -e "$a" ] && tar -C "$run" -xJf "$a"; done
cd "$run/cpuk"
lscpu | grep -E "Model name|^CPU\(s\)|L1d|L2|L3"
export OPENBLAS_THREAD_TIMEOUT=4 OMP_WAIT_POLICY=passive
L="./lib/ld-linux-x86-64.so.2 --library-path ./lib"
# shellcheck disable=SC2086
taskset -c 0,1 $L ./bench_cpu --benchmark_filter=BM_FmaPeak --benchmark_min_time=0.2 2>/dev/null |
  awk '/FmaPeak/ {match($0, /GFLOP\/s=[0-9.]+/); print "FMA peak", $1, substr($0, RSTART, RLENGTH)}'
echo "unpacked and peak in $(($(date +%s) - t0)) s"
# Variants: name|binary|environment. The default is the binary's own plan.
fwd=(
  "default|bench_cpu|"
  "lsr|bench_cpu|EINJIT_JIT_LSR=1"
  "packB|bench_cpu|EINJIT_GEMM_PACK_B=1"
  "mr14|bench_cpu|EINJIT_GEMM_MR=14"
  "mr8|bench_cpu|EINJIT_GEMM_MR=8"
  "nr1|bench_cpu|EINJIT_GEMM_NR_VECTORS=1"
  "nr1mr16|bench_cpu|EINJIT_GEMM_NR_VECTORS=1 EINJIT_GEMM_MR=16"
  "nr2|bench_cpu|EINJIT_GEMM_NR_VECTORS=2"
  "nr3|bench_cpu|EINJIT_GEMM_NR_VECTORS=3"
  "kc96|bench_cpu|EINJIT_GEMM_KC=96"
  "kc288|bench_cpu|EINJIT_GEMM_KC=288"
  "kc576|bench_cpu|EINJIT_GEMM_KC=576"
  "sets2mr7|bench_cpu|EINJIT_GEMM_KSETS=2 EINJIT_GEMM_MR=7"
  "nopfo|bench_cpu|EINJIT_GEMM_PREFETCH_OUT=0"
)
kcv=(
  "default|bench_cpu|"
  "kcl1|bench_cpu.kc|"
  "base|bench_cpu.base|"
)
wgrad=(
  "base|bench_cpu.base|"
  "default|bench_cpu|"
  "stage0|bench_cpu|EINJIT_GEMM_STAGE=0"
)
sweep() { # TAG FILTER CPUS_LIST VARIANTS...
  local tag="$1" filter="$2" cpuses="$3"; shift 3
  local vs=("$@") n=$#
  for cpus in $cpuses; do
    for ((r = 1; r <= rounds; ++r)); do
      for ((i = 0; i < n; ++i)); do
        if (($(date +%s) - t0 > ${BUDGET:-470})); then echo "budget spent: $tag $cpus round $r on skipped"; return; fi
        IFS='|' read -r name bin envs <<<"${vs[$(((i + r) % n))]}"
        [ -x "$bin" ] || continue
        # shellcheck disable=SC2086
        env EINJIT_CACHE_DIR="$run/cache-$tag-$name" $envs taskset -c "$cpus" $L "./$bin" \
          --benchmark_filter="$filter" --benchmark_min_time="$mt" \
          --benchmark_out="$out/$tag-$name-$cpus-$r.json" --benchmark_out_format=json \
          >/dev/null 2>>"$out/stderr.txt" || echo "$tag $name $cpus round $r: rc=$?"
      done
    done
  done
}
case "$part" in all | fwd) sweep fwd 'BM_ConvAlt/[12]/0/' "0 0,1" "${fwd[@]}" ;; esac
echo "forwards done at $(($(date +%s) - t0)) s"
case "$part" in all | wgrad) sweep wgrad 'BM_ConvAlt/[12]/2/|BM_ConvAlt1x1/[0-9]+/[0-9]+/2/' "0" "${wgrad[@]}" ;; esac
echo "weight gradients done at $(($(date +%s) - t0)) s"
case "$part" in kc)
  sweep kc 'BM_ConvAlt/[12]/[012]/|BM_Gemm/[0-3]/1024/0/1/' "0" "${kcv[@]}"
  sweep kc 'BM_ConvAlt/[12]/[012]/|BM_Gemm/[0-3]/1024/0/2/' "0,1" "${kcv[@]}" ;;
esac
# One line per JSON row: tag variant cpus round row ratio einjit_GFLOPs oneDNN_GFLOPs.
for f in "$out"/*.json; do
  [ -e "$f" ] || continue
  IFS=- read -r tag name cpus r <<<"$(basename "$f" .json)"
  awk -v t="$tag" -v v="$name" -v c="$cpus" -v r="$r" '
    /"name": "BM_/ { split($0, q, "\""); row = q[4]; sub(/^BM_ConvAlt/, "", row); sub(/^BM_Gemm/, "gemm", row)
      sub(/\/manual_time$/, "", row); sub(/\/min_time:[0-9.]+/, "", row) }
    /"einjit_GFLOPs"/ { e = $2 + 0 } /"(oneDNN|peer)_GFLOPs"/ { d = $2 + 0 }
    /"ratio"/ { print t, v, c, r, row, $2 + 0, e, d }' "$f"
done >"$out/rows.txt"
med() { sort -g | awk '{v[NR] = $1} END {if (NR) print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "== row (BM_ConvAlt: /stride/pass; 1x1: /C/O/pass; gemm/form/n/dtype/threads), threads, variant: ratios by round | median ratio (peer time / einjit time) | rel to default | einjit / peer GFLOP/s"
for tag in fwd wgrad kc; do
  for row in $(awk -v t=$tag '$1 == t {print $5}' "$out/rows.txt" | sort -u); do
    for cpus in 0 0,1; do
      th=1; [ "$cpus" = 0,1 ] && th=2
      for v in $(awk -v t=$tag '$1 == t {print $2}' "$out/rows.txt" | awk '!s[$0]++'); do
        sel() { awk -v t=$tag -v v="$v" -v c="$cpus" -v w="$row" '$1 == t && $2 == v && $3 == c && $5 == w' "$out/rows.txt"; }
        [ -n "$(sel)" ] || continue
        rel=$(awk -v t=$tag -v v="$v" -v c="$cpus" -v w="$row" '$1 == t && $3 == c && $5 == w && $2 == "default" {d[$4] = $6}
          $1 == t && $3 == c && $5 == w && $2 == v {x[$4] = $6} END {for (r in x) if (d[r] > 0) print x[r] / d[r]}' "$out/rows.txt" | med)
        printf '%-5s %-12s %s %-9s %-22s | %.3f | %.3f | %.1f / %.1f\n' "$tag" "$row" "$th" "$v" \
          "$(sel | sort -k4n | awk '{printf "%.2f ", $6}')" "$(sel | awk '{print $6}' | med)" \
          "${rel:-0}" "$(sel | awk '{print $7}' | med)" "$(sel | awk '{print $8}' | med)"
      done
    done
  done
done | tee "$out/summary.txt"
echo "total $(($(date +%s) - t0)) s"
