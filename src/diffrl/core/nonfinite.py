"""Training that produced NaN/inf: the error the trainer stops with (``--check-finite``, on by default; exit
status 3 from ``diffrl train``) and the one line that says where: the first iteration, seed and cause."""
from __future__ import annotations

import numpy as np


class NonFiniteError(FloatingPointError):
    """Training produced NaN/inf; the message says where and when."""


NONFINITE_CAUSE_ORDER = ("observations", "rewards", "losses", "parameters")
"""The ``nonfinite/*`` flags in the order NaN/inf flows through an iteration: when several are raised in the
same iteration, the message names the earliest (a NaN reward makes every loss NaN, not the reverse)."""


def first_nonfinite(metrics: dict, iteration0: int) -> str | None:
    """metrics: (seeds, iters) arrays. Describe the first non-finite event, if any: the earliest
    iteration, then the lowest seed, then the earliest cause in :data:`NONFINITE_CAUSE_ORDER`."""
    flags = {k.split("/", 1)[1]: np.asarray(v) for k, v in metrics.items() if k.startswith("nonfinite/")}
    events = []
    for where, f in flags.items():
        hits = np.argwhere(f > 0)
        if len(hits):
            seed, it = hits[np.argmin(hits[:, 1])]
            order = NONFINITE_CAUSE_ORDER
            rank = order.index(where) if where in order else len(order)
            events.append((int(it), int(seed), rank, where))
    if not events:
        return None
    it, seed, _, where = min(events)
    bad_losses = [k for k, v in metrics.items()
                  if not k.startswith("nonfinite/") and not np.all(np.isfinite(np.asarray(v)[seed, it]))]
    detail = f" (non-finite metrics: {', '.join(bad_losses)})" if bad_losses else ""
    return (f"non-finite {where} at iteration {iteration0 + it + 1}, seed {seed}{detail}; "
            f"stopping so that nothing is trained on NaN/inf")
