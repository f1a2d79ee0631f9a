#!/usr/bin/env bash
# The trust-region ablations and the baselines at the CPU budget of the README's suite (98,304 env
# steps per seed, each algorithm's dmc-cpu preset), 5 seeds per run in one vmapped program.
#   benchmarks/results/ablation/run.sh TASK JOBS...   e.g.  run.sh CartpoleSwingup trudi-trajectory dime
# JOBS: trudi-trajectory trudi-action trudi-none amdp-closed_form amdp-dual amdp-none reppo ppo spo fpo fpo++ dppo
# (trudi-action is `--algo dime`, the same code with --reppo.trust-region action as its default).
# Paper scale (GPU): PAPER=1 run.sh TASK JOBS... uses the paper presets (PPO family `*-dmc`, the others
# `*-dmc-small`), 1024 envs per seed and 50M env steps, as benchmarks/suite.py --paper.
# A job that was killed continues from its latest checkpoint when run.sh is run again (--resume); a job
# already recorded is read back, not retrained (remove its directory to train it again).
set -euo pipefail
cd "$(dirname "$0")/../../.."
task=$1; shift
PY=${PY:-.venv/bin/python}
for job in "$@"; do
  algo=${job%%-*}; mode=${job#*-}; set_args=()
  case $job in
    trudi-action) algo=dime ;;
    trudi-none) set_args=(--set reppo.trust_region=none) ;;
    amdp-*) set_args=(--set reppo.kl_multiplier=$mode) ;;
  esac
  scale=(--total-env-steps 98304 --num-evals 6)
  if [ "${PAPER:-0}" = 1 ]; then
    case $algo in ppo|spo|fpo|dppo) family=dmc ;; *) family=dmc-small ;; esac
    scale=(--total-env-steps 50000000 --num-evals 20 --preset "$algo=$algo-$family" --set num_envs=1024)
  fi
  out=benchmarks/results/ablation/$(echo "$task" | sed 's/\([a-z]\)\([A-Z]\)/\1_\2/g' | tr A-Z a-z)_$job
  [ "${PAPER:-0}" = 1 ] && out=${out}_paper
  $PY benchmarks/stability.py --algos "$algo" --envs "playground/$task" --num-seeds 5 --eval-envs 16 \
      --samplers sde,mean,zero-noise --out "$out" --resume "${scale[@]}" "${set_args[@]}"
  rm -rf "$out/runs"  # the per-run directories (checkpoints, tensorboard) are not committed
done
