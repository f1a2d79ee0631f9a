"""Write your own environment, register it, and train on it by name.

An environment is any object with a ``spec`` (:class:`diffrl.envs.EnvSpec`) and two
pure, jittable methods on ONE instance (no batch axis):

* ``reset(key) -> EnvState``
* ``step(state, action) -> EnvState`` with ``action`` in the native bounds of ``spec``.

Batching, time limits, auto-reset, action rescaling and episode statistics are added
by ``diffrl.envs.wrap``; the env only says what its dynamics do. It must not reset
itself on termination, and ``step`` must return the same pytree structure as
``reset`` (so keep every ``info`` key present in both).

Run:  python examples/custom_env.py            (check the env, then a short PPO run)
      python examples/custom_env.py --no-train (only the checks)
From the command line, by ``module:factory`` (docs/environments.md, "Your own environment"):
      PYTHONPATH=examples diffrl train --algo ppo --env custom_env:Navigate2D
"""
from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp

from diffrl import envs
from diffrl.envs import EnvSpec, EnvState


class Navigate2D:
    """Drive a point to a random goal in the unit square.

    obs = (position, goal) in [0, 1]^4; action = velocity in [-0.1, 0.1]^2 (native
    bounds; the policy acts in [-1, 1] and ``RescaleAction`` maps). Reward is the
    negative distance to the goal; reaching within ``radius`` TERMINATES the episode
    (no bootstrapping), while running out of time is a TRUNCATION added by the
    ``TimeLimit`` wrapper after ``spec.episode_length`` steps.
    """

    def __init__(self, radius: float = 0.05, episode_length: int = 50):
        self.radius = radius
        self.spec = EnvSpec(
            name="user/Navigate2D",
            obs_size=4,
            action_size=2,
            action_low=(-0.1, -0.1),
            action_high=(0.1, 0.1),
            episode_length=episode_length,
        )
        envs.check_spec(self.spec)

    def reset(self, key: jax.Array) -> EnvState:
        key_position, key_goal = jax.random.split(key)
        position = jax.random.uniform(key_position, (2,))
        goal = jax.random.uniform(key_goal, (2,))
        inner = {"position": position, "goal": goal}  # everything the dynamics need
        # EnvState.create fills the bookkeeping fields (owned by the wrappers).
        return EnvState.create(
            inner=inner,
            obs=jnp.concatenate([position, goal]),
            info={"distance": jnp.linalg.norm(goal - position)},
        )

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        goal = state.inner["goal"]
        position = jnp.clip(state.inner["position"] + action, 0.0, 1.0)
        distance = jnp.linalg.norm(goal - position)
        return EnvState.create(
            inner={"position": position, "goal": goal},
            obs=jnp.concatenate([position, goal]),
            reward=-distance,
            terminated=distance < self.radius,
            info={"distance": distance},
        )


def check(env_name: str, num_envs: int = 8, num_steps: int = 120) -> None:
    """Run the wrapped, batched env with a greedy policy and print finished episodes."""
    env = envs.wrap(envs.make(env_name))  # actions now in [-1, 1], batch axis first

    def greedy(obs):  # head for the goal at full speed (in policy units)
        return jnp.clip(10.0 * (obs[:, 2:] - obs[:, :2]), -1.0, 1.0)

    @jax.jit
    def run(key):
        state = env.reset(jax.random.split(key, num_envs))

        def body(s, _):
            s = env.step(s, greedy(s.obs))
            return s, (s.info["returned_episode"], s.info["returned_episode_return"],
                       s.info["returned_episode_length"], s.terminated, s.truncated)

        return jax.lax.scan(body, state, None, length=num_steps)[1]

    ended, returns, lengths, terminated, truncated = jax.device_get(run(jax.random.PRNGKey(0)))
    print(f"{env_name}: {int(ended.sum())} episodes finished "
          f"({int(terminated.sum())} reached the goal, {int(truncated.sum())} timed out); "
          f"mean return {returns[ended].mean():.3f}, mean length {lengths[ended].mean():.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-train", action="store_true", help="only check the env")
    parser.add_argument("--total-env-steps", type=int, default=100_000)
    parser.add_argument("--out", default="runs/custom_env_example", help="run directory to write")
    args = parser.parse_args()

    # 1. Register a factory under a name; kwargs of make() go to the factory.
    envs.register("user/Navigate2D", Navigate2D)
    print(envs.describe("user/Navigate2D"))
    check("user/Navigate2D")

    # 2. Train on it by name, exactly as on a built-in env. (The `diffrl` command runs
    #    in a fresh process that has not imported this file, so it does not know this
    #    registration: there, name the class itself, --env custom_env:Navigate2D.)
    if not args.no_train:
        from diffrl.config import TrainConfig
        from diffrl.core.trainer import Trainer

        config = TrainConfig(
            algo="ppo", env="user/Navigate2D", total_env_steps=args.total_env_steps,
            num_envs=64, num_steps=32, num_evals=4, eval_envs=16, progress=False,
            tensorboard=False, out=args.out,
        )
        summary = Trainer(config).run()
        final = summary["final"]
        print(f"trained {summary['env_steps']} steps: eval return "
              f"{final.get('eval/episode_return', float('nan')):.3f} (greedy policy above: "
              "about -1.3)")


if __name__ == "__main__":
    main()
