"""User commands behind ``diffrl`` (dispatched by :mod:`diffrl.cli`): ``eval``, ``export`` and ``plot`` on
a trained run (``trained_run``), ``bench cost`` and its report (``bench_cost``, ``bench_cost_report``),
``envs`` (``env_listing``) and the generated references of docs/cli.md and docs/algorithms.md
(``cli_reference``, ``algorithms_reference``)."""
