#!/usr/bin/env bash
# Regenerates table.md from the committed records: both tasks, each in the order TruDi's three
# trust-region modes, AMDP's three, REPPO, PPO, SPO, FPO, FPO++, DPPO.   benchmarks/results/ablation/table.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PY:-.venv/bin/python}
runs=()
for task in cartpole_swingup cheetah_run; do
  for pair in "TruDi: trajectory (TruDi)=trudi-trajectory" "TruDi: action (dime)=trudi-action" \
      "TruDi: none (plain DIME)=trudi-none" "AMDP: closed_form (preset)=amdp-closed_form" \
      "AMDP: dual=amdp-dual" "AMDP: none=amdp-none" "REPPO=reppo" "PPO=ppo" "SPO=spo" "FPO=fpo" "FPO++=fpo++" "DPPO=dppo"; do
    runs+=("${pair%%=*}=benchmarks/results/ablation/${task}_${pair#*=}")
  done
done
$PY benchmarks/ablation.py --out benchmarks/results/ablation/table.md "${runs[@]}"
