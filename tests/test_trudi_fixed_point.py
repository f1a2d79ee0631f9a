"""TruDi's actor objective on a state-free toy moves the policy toward exp(Q / alpha).

With a known Q and no state, REPPO/TruDi's pathwise actor loss is
E[alpha * ell(a) - Q(a)] with ell DIME's path log-ratio (an upper bound on log pi(a),
dis_chain E7). Its minimiser over path measures has the action marginal
pi*(a) ∝ exp(Q(a) / alpha) (Celik et al. 2025, DIME, Sec. 3), so plain gradient descent on it,
starting from the zero-control chain (the squashed prior), must move the samples toward pi*,
past what merely spreading them out (uniform actions) gives: here a bimodal Q whose
max-entropy optimum has two equal modes at +-0.5.

How close 1500 Adam steps get depends on the squash. The reference tanh saturates the
N(0, 2.5^2) prior (most initial actions near +-1), and the chain has to pull that mass in and
contract each mode to an x-width of ~0.04: total variation 0.77 -> 0.37, spread still 4x the
target's. erf(x / (sqrt(2) 2.5)) maps the prior to Uniform(-1, 1) and makes each peak 3x wider
in x: total variation 0.13, spread 1.6x the target's (measured; the trudi-bandit preset uses erf
for this reason).
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from diffrl.policies.diffusion import DiffusionPolicy, DiffusionPolicyConfig
from bimodal_toy import bimodal_q, target_bins
from multiseed import long_only

jax.config.update("jax_platforms", "cpu")

ALPHA = 0.5


def folded_tv(actions, p_bins, edges):
    """Total variation between the histogram of |a| and pi*'s (mode weights folded out)."""
    hist = np.histogram(actions, edges)[0] / actions.size
    half = len(p_bins) // 2
    return 0.5 * np.abs(hist[half:] + hist[:half][::-1] - p_bins[half:] - p_bins[:half][::-1]).sum()


# (squash, TV bound, spread bound): measured 0.37 / 0.047 (tanh) and 0.13 / 0.018 (erf); the
# bounds leave ~0.05 TV (sampling error of TV with 10k samples in 20 bins is ~0.02) and ~25 %.
# 1500 Adam steps each: compute-bound, about 45 s at the test processes' XLA level 0 (conftest.py)
@pytest.mark.heavy(40)
@pytest.mark.parametrize("squash,max_tv,max_spread", [
    # CI keeps the erf squash (the bandit presets'); tanh's run is the same code in the long tier
    pytest.param("tanh", 0.45, 0.06, marks=long_only("the tanh twin of the erf case, ~55 s")),
    ("erf", 0.2, 0.025)])
def test_pathwise_max_entropy_objective_moves_diffusion_policy_toward_boltzmann_q(squash, max_tv, max_spread):
    config = DiffusionPolicyConfig(num_steps=8, hidden=(64, 64), squash=squash)
    policy = DiffusionPolicy(config, action_size=1)
    steps, batch = 1500, 512
    opt = optax.adam(optax.cosine_decay_schedule(3e-3, steps, 0.05))
    params0 = policy.init(jax.random.PRNGKey(0), 1)
    obs = jnp.zeros((batch, 1))

    def loss(params, key):
        sample = policy.rsample(params, obs, key)
        return jnp.mean(ALPHA * sample.log_prob - bimodal_q(sample.action))

    def step(carry, key):
        params, opt_state = carry
        grads = jax.grad(loss)(params, key)
        updates, opt_state = opt.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), None

    train = jax.jit(lambda p, k: jax.lax.scan(step, (p, opt.init(p)), jax.random.split(k, steps))[0][0])
    params = train(params0, jax.random.PRNGKey(1))
    sample = jax.jit(lambda p: policy.sample(p, jnp.zeros((10_000, 1)), jax.random.PRNGKey(2))[0][:, 0])
    before, after = (np.asarray(sample(p), np.float64) for p in (params0, params))

    edges = np.linspace(-1.0, 1.0, 41)
    p_bins, spread = target_bins(edges, ALPHA)
    uniform = np.linspace(-1.0, 1.0, 10_000)
    tv_before, tv_after, tv_uniform = (folded_tv(x, p_bins, edges) for x in (before, after, uniform))
    # The initial policy is the squashed prior: tanh puts most mass near +-1 (TV 0.77), erf is
    # uniform. Uniform actions are at TV 0.54 (pi* has 94 % of its mass within 0.2 of the
    # peaks), so merely spreading out is not enough.
    assert tv_after < max_tv < tv_uniform - 0.05, (tv_before, tv_after, tv_uniform)
    # Symmetric Q: both modes kept. The untrained policy is symmetric too, so the split of all
    # actions by sign proves nothing; the mass WITHIN 0.2 of each peak does: pi* has 47 % there
    # per mode, the initial policy 20 % (erf: uniform) or 9 % (tanh: mass near +-1), and a policy
    # that collapsed onto one peak would lose the other. Measured after training: 29 % / 31 %
    # (tanh) and 44 % / 43 % (erf); binomial sd at 10k samples: 0.5 %.
    near = lambda x: np.array([np.mean(np.abs(x + 0.5) < 0.2), np.mean(np.abs(x - 0.5) < 0.2)])
    near_before, near_after = near(before), near(after)
    assert np.all(near_after > near_before + 0.15), (near_before, near_after)
    assert abs(near_after[0] - near_after[1]) < 0.05, near_after
    # Within-mode spread E[(|a| - 0.5)^2]: pi* 0.011; before training 0.16 (tanh) and 0.084
    # (erf, uniform: 1/12); measured after 0.047 and 0.018. Both bounds must hold: below the
    # parametrised bound and at most half the untrained policy's spread.
    spread_before, spread_after = (np.mean((np.abs(x) - 0.5) ** 2) for x in (before, after))
    assert spread_after < max_spread and spread_after < 0.5 * spread_before, (spread_before, spread_after, spread)
