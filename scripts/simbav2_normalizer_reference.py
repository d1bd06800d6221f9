"""Record SimbaV2's official normalizer wrappers over a whole rlzoo env stream, for
tests/test_normalizer_reference.py.

Writes ``tests/fixtures/simbav2_normalizer_reference.npz``: the stream of an rlzoo training env
(``env=Hopper``, one env, seed 0, uniform random actions as in a run's warm-up, ``CALLS`` calls of
``VecEnv.step`` with rlzoo's next-step autoreset, many episodes ending by termination), and what
the official ``ObservationNormalizer`` and ``RewardNormalizer`` (github dojeon-ai/SimbaV2 at
commit 14fafb27e6f78f0b65d19b8873b4433547a2193c, ``scale_rl/agents/wrappers/normalization.py``,
unchanged) hold after each of their ``sample_actions(training=True)`` calls: observation mean,
var and count, the return statistics, ``G_r_max``, and the reward divisor an update would use
then (``1 / _scale_reward(1.0)``).

The stream reaches the wrappers as the reference's ``run_online.py`` hands it to them: one
``prev_timestep`` per env transition, whose ``next_observation`` is the observation the policy
acts on next (the reset one after an episode end; gymnasium's autoreset keeps the final one in
``info["final_obs"]``). The script's own code is only that translation, the stream and a stub for
``flax.training.checkpoints`` (imported by the wrappers' module, used only by save/load). It needs
numpy, gymnasium and rlzoo (for the stream), not JAX:

    python scripts/simbav2_normalizer_reference.py /path/to/SimbaV2 \\
        tests/fixtures/simbav2_normalizer_reference.npz
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

CALLS = 3000
GAMMA, G_MAX = 0.995, 5.0  # SimbaV2's discount for 1000-step episodes, normalized_g_max


def rlzoo_stream() -> dict[str, np.ndarray]:
    """``CALLS`` calls of an rlzoo Hopper env: ``obs [C + 1, O]`` (row 0 the first reset's),
    ``reward``, ``terminated``, ``truncated``, ``reset_step`` ``[C]``."""
    from hydra import compose, initialize_config_module

    from rlzoo.config.build import make_env

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=["algo=simbav2", "env=Hopper"])
    env = make_env(cfg, 1, 0)
    rng = np.random.default_rng(0)
    obs = [env.reset(seed=0)[0][0]]
    rows: dict[str, list[Any]] = {"reward": [], "terminated": [], "truncated": [], "reset_step": []}
    for _ in range(CALLS):
        result = env.step(rng.uniform(-1.0, 1.0, size=(1, env.act_shape[-1])))
        obs.append(result.obs[0])
        for key in rows:
            rows[key].append(getattr(result, key)[0])
    env.close()
    return {"obs": np.asarray(obs, dtype=np.float32),
            **{k: np.asarray(v) for k, v in rows.items()}}


def official_wrappers(checkout: str, obs_dim: int) -> Any:
    """The reference's wrappers around an agent that does nothing, wrapped as its
    ``create_agent`` wraps them (observation inside, reward outside)."""
    flax = types.ModuleType("flax")
    training = types.ModuleType("flax.training")
    training.checkpoints = types.ModuleType("flax.training.checkpoints")  # type: ignore[attr-defined]
    sys.modules.update({"flax": flax, "flax.training": training,
                        "flax.training.checkpoints": training.checkpoints})  # type: ignore[attr-defined]
    sys.path.insert(0, checkout)
    import gymnasium as gym
    from scale_rl.agents.base_agent import BaseAgent
    from scale_rl.agents.wrappers.normalization import ObservationNormalizer, RewardNormalizer

    class Idle(BaseAgent):
        def sample_actions(self, interaction_step, prev_timestep, training):  # type: ignore[no-untyped-def]
            return None

        def update(self, update_step, batch):  # type: ignore[no-untyped-def]
            return batch

        def save(self, path):  # type: ignore[no-untyped-def]
            pass

        def load(self, path):  # type: ignore[no-untyped-def]
            pass

    space = gym.spaces.Box(-np.inf, np.inf, (1, obs_dim), np.float32)
    inner = ObservationNormalizer(Idle(space, space, None), load_rms=False)
    return inner, RewardNormalizer(inner, gamma=GAMMA, g_max=G_MAX, load_rms=False)


def main(checkout: str, out: str) -> None:
    stream = rlzoo_stream()
    inner, agent = official_wrappers(checkout, stream["obs"].shape[1])
    names = ("obs_mean", "obs_var", "obs_count", "ret_mean", "ret_var", "ret_max", "divisor")
    record: dict[str, list[Any]] = {k: [] for k in names}
    calls = []  # the rlzoo call each record precedes
    step, timestep = 0, None
    for t in range(CALLS):
        if stream["reset_step"][t]:
            continue  # rlzoo's reset call: gymnasium did it inside the previous step
        if timestep is not None:
            step += 1
            agent.sample_actions(step, dict(timestep), training=True)
            record["obs_mean"].append(np.array(inner.obs_rms.mean[0]))
            record["obs_var"].append(np.array(inner.obs_rms.var[0]))
            record["obs_count"].append(inner.obs_rms.count)
            record["ret_mean"].append(float(np.asarray(agent.G_rms.mean).reshape(-1)[0]))
            record["ret_var"].append(float(np.asarray(agent.G_rms.var).reshape(-1)[0]))
            record["ret_max"].append(float(agent.G_r_max))
            scaled = np.asarray(agent._scale_reward(1.0)).reshape(-1)[0]
            record["divisor"].append(1.0 / float(scaled))
            calls.append(t)
        ended = bool(stream["terminated"][t] or stream["truncated"][t])
        # the observation acted on next: the reset call's after an episode end
        nxt = stream["obs"][t + 2] if ended and t + 1 < CALLS else stream["obs"][t + 1]
        timestep = {"reward": np.array([stream["reward"][t]], dtype=np.float32),
                    "terminated": np.array([stream["terminated"][t]]),
                    "truncated": np.array([stream["truncated"][t]]),
                    "next_observation": nxt[None]}
    ended = stream["terminated"] | stream["truncated"]
    binding = np.asarray(record["ret_max"]) / G_MAX > np.sqrt(np.asarray(record["ret_var"]) + 1e-8)
    print(f"{CALLS} calls, {len(calls)} records, {int(ended.sum())} episode ends "
          f"({int(stream['terminated'].sum())} terminated); G_max binds at {int(binding.sum())}")
    np.savez_compressed(out, **{f"stream/{k}": v for k, v in stream.items()},
                        calls=np.asarray(calls), gamma=GAMMA, g_max=G_MAX,
                        **{f"official/{k}": np.asarray(v, dtype=np.float64)
                           for k, v in record.items()})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
