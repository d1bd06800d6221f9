"""Does an evaluation's batch shape change its returns? Evaluate one checkpoint twice, per episode.

    python scripts/eval_batch_shape.py RUN_DIR [--checkpoint PATH] [--episodes 10]

The first evaluation is ``rlzoo.evaluate``'s (``rlzoo.envs.base.run_episodes``: the policy acts on
the episodes still running, so its batch shrinks as episodes end); the second acts on every
episode at every step (the batch stays ``[1, episodes]``; finished episodes are not stepped), as
rlzoo's seed-group evaluation did, for all seeds at once, before commit df8c362. Both run one seed
alone through the plain policy call, not a group's batched path. The policy and the env seeds
are the same, so any difference comes from how a matrix product over fewer rows rounds. Prints
both returns and lengths per episode, and the episodes whose returns differ, by how much.

``RUN_DIR`` may be one seed of a seed group (``rlzoo.evaluate`` finds the group's checkpoint).
Single-agent runs only. The two ``eval_*.json`` records ``rlzoo.evaluate`` writes are removed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

import rlzoo.policy.episodes as episodes_module
from rlzoo.envs.base import Episodes, VecEnv
from rlzoo.evaluate import evaluate_run


def every_episode_each_step(
    envs: Sequence[VecEnv], obs: Sequence[np.ndarray],
    policy: Callable[[np.ndarray], np.ndarray], horizon: int = 1, on_step: object = None,
) -> list[Episodes]:
    """``run_episodes`` for one single-agent vector env, with the policy called on all ``E``
    observations ``[1, E, ...]`` at every step (finished episodes keep their last observation)."""
    (env,) = envs
    n = env.num_envs
    returns, lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
    active = np.ones(n, dtype=bool)
    current = np.asarray(obs[0]).copy()
    while active.any():
        chunk = np.asarray(policy(current[None])).reshape(n, horizon, *env.act_shape)
        for h in range(horizon):
            result = env.step(chunk[:, h].astype(np.float32), active=active)
            live = active.copy()
            current[live] = result.obs[live]
            returns[live] += result.reward[live]
            lengths[live] += 1
            active &= ~(result.terminated | result.truncated)
            if not active.any():
                break
    return [Episodes(returns, lengths, None)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--checkpoint", type=Path, default=None)
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args()
    shrinking = evaluate_run(args.run_dir, episodes=args.episodes, checkpoint=args.checkpoint)
    Path(shrinking["path"]).unlink()
    if "agent_returns" in shrinking:
        raise SystemExit("eval_batch_shape.py: single-agent runs only")
    episodes_module.run_episodes = every_episode_each_step  # type: ignore[assignment]
    fixed = evaluate_run(args.run_dir, episodes=args.episodes, checkpoint=args.checkpoint)
    Path(fixed["path"]).unlink()
    a, b = np.asarray(shrinking["returns"]), np.asarray(fixed["returns"])
    print("lengths, running only   ", list(shrinking["lengths"]))
    print("lengths, every episode  ", list(fixed["lengths"]))
    print("returns, running only   ", np.round(a, 4).tolist())
    print("returns, every episode  ", np.round(b, 4).tolist())
    differ = [(i, float(a[i] - b[i])) for i in range(len(a)) if a[i] != b[i]]
    print(f"episodes that differ ({len(differ)} of {len(a)}):",
          ", ".join(f"{i} by {d:.3g}" for i, d in differ) or "none")


if __name__ == "__main__":
    main()
