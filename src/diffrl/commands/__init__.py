"""User commands behind ``diffrl`` (dispatched by :mod:`diffrl.cli`): ``train`` (``train``, its command
line read by ``train_flags``, a failed run's last line by ``verdict``), ``eval``, ``export`` and ``plot`` on
a trained run (``trained_run``), ``bench cost``, what it measures and its report (``bench_cost``,
``bench_cost_plan``, ``bench_cost_report``),
``envs`` (``env_listing``), ``presets`` (``presets_listing``) and the generated references of docs/cli.md
and docs/algorithms.md (``cli_reference``, ``algorithms_reference``)."""
