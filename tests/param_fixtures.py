"""Parameter edits shared by the actor-loss tests: a policy away from its initialisation and a
critic whose action gradient is not flattened by its value prior."""
import jax
import jax.numpy as jnp


def perturbed(params, key, scale):
    """params + scale * N(0, 1) noise, independently per leaf."""
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(key, len(leaves))
    return jax.tree.unflatten(tree, [p + scale * jax.random.normal(k, p.shape) for p, k in zip(leaves, keys)])


def without_value_prior(critic_params):
    """A copy of CategoricalCritic params with the trainable HL-Gauss prior zeroed: the prior
    (40 z, a sharp peak at the initial value) makes a fresh critic flat in the action; without
    it the random Q head gives O(1) action gradients."""
    critic = jax.tree_util.tree_map(lambda x: x, critic_params)
    critic["params"]["value_prior"] = jnp.zeros_like(critic["params"]["value_prior"])
    return critic
