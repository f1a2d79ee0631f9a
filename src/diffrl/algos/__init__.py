"""Algorithm registry: name -> factory(config, env_spec) -> Algorithm."""
from __future__ import annotations

import difflib
from typing import Callable


def _ppo(config, spec):
    from diffrl.algos.ppo import make_ppo

    return make_ppo(config, spec)


def _reppo(config, spec):
    from diffrl.algos.reppo import make_reppo

    return make_reppo(config, spec)


def _trudi(config, spec):
    """TruDi = REPPO's loop with the DIME diffusion actor (trajectory KL, DIME bound)."""
    from diffrl.algos.reppo import REPPO
    from diffrl.policies.diffusion import DiffusionPolicy

    return REPPO(config, spec, DiffusionPolicy(config.diffusion, spec.action_size), name="trudi")


def _amdp(config, spec):
    from diffrl.algos.amdp import make_amdp

    return make_amdp(config, spec)


def _amdp_backprop(config, spec):
    """The reverse-KL baseline AMDP is measured against: REPPO's pathwise actor loss
    (alpha * log-pi bound - Q, backpropagated through the simulated chain) on AMDP's
    policy and reference process; the trust region uses the path KL of the chain."""
    from diffrl.algos.reppo import REPPO
    from diffrl.policies.adjoint import AdjointPolicy

    return REPPO(config, spec, AdjointPolicy(config.adjoint, spec.action_size), name="amdp-backprop")


ALGORITHMS: dict[str, Callable] = {
    "amdp": _amdp,
    "amdp-backprop": _amdp_backprop,
    "trudi": _trudi,
    "ppo": _ppo,
    "reppo": _reppo,
}


def close_matches(name: str) -> str:
    near = difflib.get_close_matches(name, list(ALGORITHMS), n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(near)}? " if near else ""
    return f"{hint}available: {', '.join(sorted(ALGORITHMS))}"
