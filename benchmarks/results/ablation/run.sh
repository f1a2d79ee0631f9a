#!/usr/bin/env bash
# The trust-region ablations and the baselines at the CPU budget of the README's suite (98,304 env
# steps per seed, each algorithm's dmc-cpu preset), 5 seeds per run in one vmapped program.
#   benchmarks/results/ablation/run.sh TASK JOBS...   e.g.  run.sh CartpoleSwingup trudi-trajectory dime
# JOBS: trudi-trajectory trudi-action trudi-none amdp-closed_form amdp-dual amdp-none reppo ppo spo fpo dppo
# (trudi-action is `--algo dime`, the same code with --diffusion.trust-region action as its default).
# Paper scale (GPU): add  --preset dmc-small --total-env-steps 50000000  to the stability.py line.
set -euo pipefail
cd "$(dirname "$0")/../../.."
task=$1; shift
PY=${PY:-.venv/bin/python}
for job in "$@"; do
  algo=${job%%-*}; mode=${job#*-}; set_args=()
  case $job in
    trudi-action) algo=dime ;;
    trudi-none) set_args=(--set diffusion.trust_region=none) ;;
    amdp-*) set_args=(--set adjoint.trust_region=$mode) ;;
  esac
  out=benchmarks/results/ablation/$(echo "$task" | sed 's/\([a-z]\)\([A-Z]\)/\1_\2/g' | tr A-Z a-z)_$job
  $PY benchmarks/stability.py --algos "$algo" --envs "playground/$task" --num-seeds 5 --num-evals 6 \
      --eval-envs 16 --total-env-steps 98304 --samplers sde,mean,zero-noise --out "$out" "${set_args[@]}"
  rm -rf "$out/runs"  # the per-run directories (checkpoints, tensorboard) are not committed
done
