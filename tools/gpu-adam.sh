#!/usr/bin/env bash
# On the GPU machine: one Adam step on 10^7 f32 parameters, einjit (the program of
# examples/Optimizers.h through `einjit bench --device cuda`) and PyTorch's fused and foreach
# Adam (bench/gpu_adam_torch.py), alternated twice. tools/gpu-adam.sh BUILD_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cli="$1/cli/einjit"
prog='m[i] = b1*m[i] + (1-b1)*g[i]
v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
p[i] = p[i] - lr*(m[i]/c1)/(sqrt(v[i]/c2) + eps)'
n=10000000
for round in 1 2; do
  echo "--- round $round"
  rm -rf "$1/adam-cache"
  EINJIT_CACHE_DIR="$1/adam-cache" "$cli" bench "$prog" --device cuda --reps 50 \
    --shape m=$n --shape v=$n --shape g=$n --shape p=$n --scalar b1=0.9 --scalar b2=0.999 \
    --scalar lr=0.001 --scalar c1=0.1 --scalar c2=0.001 --scalar eps=1e-8
  python3 "$root/bench/gpu_adam_torch.py" --n $n
done
