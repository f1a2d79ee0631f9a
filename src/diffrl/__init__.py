"""diffrl: diffusion policies with massively parallel on-policy RL in JAX."""
__version__ = "0.1.0"


def load_policy(path, sampler=None):
    """Load an exported policy: ``act(obs, key) -> action`` (see ``diffrl export``)."""
    from diffrl.artefacts.export import load_policy as _load

    return _load(path, sampler)
