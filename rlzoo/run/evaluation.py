"""The loop's evaluation: every seed's policy on its own eval envs, all seeds acting through one
call per step (``rlzoo.envs.base.run_episodes``), then each seed's returns logged and handed to
the ``on_eval`` callback.

Episode ``i`` of every evaluation of seed ``s`` starts from env seed ``s + 10_000 + i``:
evaluations differ only by the policy, keep no state between them (so resuming cannot shift
them), and ``rlzoo.evaluate`` reproduces the last one exactly.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from rlzoo.algos.base import Algorithm
from rlzoo.config.build import EVAL_SEED_OFFSET, make_env
from rlzoo.envs.base import run_episodes
from rlzoo.run.callbacks import EvalCallback, Evaluation
from rlzoo.run.member import Member
from rlzoo.run.signals import NonFiniteError


def reset_eval_env(m: Member, episodes: int) -> np.ndarray:
    """``m``'s eval envs (``episodes`` of them, made once) reset to seeds
    ``m.seed + 10_000 + i``; returns their first observations ``[episodes, ...]``."""
    seed0 = m.seed + EVAL_SEED_OFFSET
    if m.eval_env is None or m.eval_env.num_envs != episodes:
        if m.eval_env is not None:
            m.eval_env.close()
        m.eval_env = make_env(m.cfg, episodes, seed0)
    return m.eval_env.reset(seed=seed0)[0]  # the same seeds at every evaluation


def evaluate(members: list[Member], algo: Algorithm, horizon: int, episodes: int,
             device: torch.device, deterministic: bool = True) -> list[np.ndarray]:
    """``episodes`` episodes of every member at once, each on its own eval envs, acted by
    ``algo`` (through its seed axis); returns each member's (team) returns ``[episodes]`` and
    keeps each agent's mean return in its ``last_eval_agents [N]`` (multi-agent)."""
    obs = [reset_eval_env(m, episodes) for m in members]
    axis = algo.seed_axis
    act = functools.partial(algo.act, deterministic=deterministic)

    def policy(batch: np.ndarray, live: np.ndarray) -> np.ndarray:  # [K, B, ...] -> [K, B, H * A]
        x = torch.as_tensor(batch, dtype=torch.float32).to(device, non_blocking=True)
        return axis.call_rows(algo, act, x, live).cpu().numpy()  # each seed on its running envs

    # a sampling evaluation draws on from each seed's generator, as its single run draws on
    # from the process's (which the loop forks), and leaves training's draws where they were
    with axis.forked():
        results = run_episodes([m.eval_env for m in members], obs, policy,  # type: ignore[misc]
                               horizon, tensors=True,  # tensor envs: obs on their device
                               rows=True)
    for m, result in zip(members, results):
        if result.agent_returns is not None:
            m.last_eval_agents = result.agent_returns.mean(axis=0)
    return [result.returns for result in results]


def log_evaluation(members: list[Member], every: list[np.ndarray], step: int, env_name: str,
                   on_eval: EvalCallback | None) -> bool:
    """Keep and log each member's evaluation ``every[k]`` (its returns) at ``step`` and call
    ``on_eval`` once per member; returns whether a callback asked to stop. Stops the run with
    one line (``NonFiniteError``) on a non-finite return."""
    stop = False
    for m, returns in zip(members, every):
        if not np.isfinite(returns).all():
            raise NonFiniteError(
                f"evaluation at step {step} returned a non-finite return (NaN or inf) on "
                f"env={env_name}; check the env's rewards"
            )
        m.last_eval = (float(returns.mean()), float(returns.std()))
        scalars = {"eval/return": m.last_eval[0], "eval/return_std": m.last_eval[1]}
        if m.last_eval_agents is not None:
            scalars.update({f"eval/return/agent_{i}": float(r)
                            for i, r in enumerate(m.last_eval_agents)})
        assert m.logger is not None
        m.logger.scalars(scalars, step)
        m.logger.flush()
        if on_eval is not None and on_eval(Evaluation(step, *m.last_eval, returns, m.run_dir)):
            stop = True
    return stop
