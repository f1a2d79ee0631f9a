"""SPO (Xie et al. 2025, arXiv 2401.16025): its surrogate against a plain loop, the behaviour that
sets it apart from PPO's clip (a ratio outside the trust region is pulled back), and its wiring
(PPO's loop and settings, its own name, presets and defaults)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.algos import ALGORITHM_SECTIONS, ALGORITHMS
from diffrl.algos.ppo import ppo_policy_loss, spo_policy_loss
from diffrl.config.presets import PRESETS, resolve

jax.config.update("jax_platforms", "cpu")


def test_spo_loss_matches_a_plain_loop():
    rng = np.random.default_rng(0)
    lp, old, adv = rng.normal(0, 0.3, 64), rng.normal(0, 0.3, 64), rng.normal(0, 1.0, 64)
    eps = 0.2
    total, outside = 0.0, 0
    for i in range(64):
        rho = np.exp(lp[i] - old[i])
        total += rho * adv[i] - abs(adv[i]) / (2 * eps) * (rho - 1) ** 2
        outside += abs(rho - 1) > eps
    loss, frac = spo_policy_loss(jnp.asarray(lp), jnp.asarray(old), jnp.asarray(adv), eps)
    assert float(loss) == pytest.approx(-total / 64, rel=1e-5)
    assert float(frac) == pytest.approx(outside / 64)
    # the registered builds pass the surrogate as a value: SPO is PPO with another surrogate
    from diffrl.core.build import build

    for algo, surrogate in (("spo", spo_policy_loss), ("ppo", ppo_policy_loss)):
        _, built, _ = build(resolve(algo, "gymnax/Pendulum-v1", None).replace(num_envs=4, num_steps=4))
        assert built.policy_loss is surrogate and built.name == algo


def test_spo_pulls_a_ratio_back_where_the_clip_goes_flat():
    """At rho = 1 both surrogates have gradient -A d(log pi); at rho = 1.5 > 1 + eps with A > 0 the
    clip's gradient is exactly 0, SPO's points back toward the region (d loss / d log pi > 0);
    SPO's per-sample optimum is rho* = 1 + sign(A) eps, on the region's edge."""
    adv, old, eps = jnp.array([1.0]), jnp.array([0.0]), 0.2

    def grads(lp):
        g_ppo = jax.grad(lambda x: ppo_policy_loss(x, old, adv, eps)[0])(jnp.array([lp]))
        g_spo = jax.grad(lambda x: spo_policy_loss(x, old, adv, eps)[0])(jnp.array([lp]))
        return float(g_ppo[0]), float(g_spo[0])

    assert grads(0.0) == pytest.approx((-1.0, -1.0))
    g_ppo, g_spo = grads(float(np.log(1.5)))
    assert g_ppo == 0.0 and g_spo > 0
    for a in (1.0, -1.0):
        f = lambda r: float(spo_policy_loss(jnp.log(jnp.array([r])), old, jnp.array([a]), eps)[0])
        rs = np.linspace(0.5, 1.5, 1001)
        assert rs[np.argmin([f(r) for r in rs])] == pytest.approx(1 + np.sign(a) * eps, abs=1e-3)


def test_spo_is_registered_with_ppos_settings_and_presets():
    assert "spo" in ALGORITHMS and ALGORITHM_SECTIONS["spo"] == ALGORITHM_SECTIONS["ppo"]
    for name in (n for n in PRESETS if n.startswith("ppo-")):
        twin = PRESETS["spo-" + name[len("ppo-"):]]
        assert twin == {**PRESETS[name], "algo": "spo"}
    for env in ("playground/CartpoleBalance", "gymnax/Pendulum-v1", "toy/MirrorGoals"):
        assert resolve("spo", env, None).preset == resolve("ppo", env, None).preset.replace("ppo-", "spo-")
