"""diffrl: diffusion policies with massively parallel on-policy RL in JAX."""
__version__ = "0.1.0"
