"""The run's side of the input normalizers (``normalize.*``; ``rlzoo.nets.normalizers``).

* :func:`attach_normalizers` builds them from the config and attaches them to an algorithm
  (``rlzoo.config.build.build_algorithm``, so the trainer, the evaluator and ``load_policy`` all
  rebuild the same modules and their statistics load with the weights);
* :func:`check_observations` refuses, in one line, an env whose observations a running mean and
  variance cannot describe;
* :func:`fold_collected` updates a seed's statistics from what its training envs collected;
  :func:`fold_seeds` is the loop's one call, for every seed (each into its own statistics).

When the statistics change, relative to acting and updating, follows SimbaV2's
``run_online.py`` and wrappers exactly (github.com/dojeon-ai/SimbaV2, commit 14fafb2): at each
training step, *before* the policy acts on observation ``o_t``, ``o_t`` is merged into the
observation statistics and the previous transition's reward into the return statistics; the
step's updates then run with those statistics. So the updates after step ``t`` have seen
``o_1 .. o_t`` and ``r_1 .. r_{t-1}`` (FlashSAC merges ``r_t`` before its updates: one transition
earlier). The observation an env hands back when its episode ends (the final one, which
SimbaV2's gymnasium autoreset keeps in ``info["final_obs"]``) is never merged, the one after a
reset is; the very first observation of a run is not (SimbaV2 starts at its second step). Random
warm-up steps count: SimbaV2 feeds its wrappers during the warm-up too. Only training envs feed
the statistics; evaluation and ``Policy`` read them frozen.

What a step leaves for the next one to merge is the member's ``pending`` record, checkpointed
with the loop's state, so a resumed run merges it exactly when the uninterrupted run would have.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium.spaces import Box
from omegaconf import DictConfig

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.config.settings import Normalize, read_normalize
from rlzoo.envs.base import StepResult, VecEnv
from rlzoo.errors import UserError
from rlzoo.nets.normalizers import ObservationNormalizer, RewardScaler


def attach_normalizers(algo: Algorithm, cfg: DictConfig, spec: EnvSpec,
                       normalize: Normalize | None = None) -> None:
    """Attach what ``cfg.normalize`` asks for to ``algo`` (nothing at all when it is off, so the
    algorithm's ``state_dict`` is the same as without normalizers): an observation normalizer
    of shape ``[O]`` (``[N, O]`` per agent), a state normalizer ``[S]`` for a multi-agent env's
    global state, and a reward scaler over ``num_envs`` running returns with ``algo.gamma``."""
    s = normalize or read_normalize(cfg)  # the trainer's Settings.normalize, else cfg's
    multi = spec.n_agents > 1 or spec.state_dim > 0
    obs = state = reward = None
    if s.obs:
        shape = (spec.n_agents, spec.obs_dim) if multi else (spec.obs_dim,)
        obs = ObservationNormalizer(shape, s.epsilon)
        if spec.state_dim > 0:
            state = ObservationNormalizer((spec.state_dim,), s.epsilon)
    if s.reward:
        reward = RewardScaler(s.envs, algo.gamma, s.reward_g_max, s.epsilon)
    algo.attach_normalizers(obs=obs, state=state, reward=reward)


def check_observations(env: VecEnv, s: Normalize, env_name: str) -> None:
    """With ``normalize.obs=true``, refuse in one line an env with an observation space that is
    not a ``Box`` (``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Dict``, ``Tuple``, ...):
    the adapters flatten those to numbers, but a running mean and variance of category indices
    or flags is no normalization of them."""
    if not s.obs:
        return
    for name, space in getattr(env, "obs_spaces", {}).items():
        if not isinstance(space, Box):  # a Box subclass is a Box too
            raise UserError(
                f"normalize.obs=true cannot normalize env={env_name}'s observations: "
                f"{name} has a {type(space).__name__} observation space (a running mean and "
                "variance needs Box observations); set normalize.obs=false"
            )


def pending(result: StepResult) -> dict[str, np.ndarray]:
    """What the step ``result`` leaves to merge before the next action: its rewards, which of
    its observations are final ones (never merged) and which envs made a transition."""
    ended = np.asarray(result.terminated | result.truncated, dtype=bool)
    return {"reward": np.asarray(result.reward, dtype=np.float32), "ended": ended,
            "valid": ~np.asarray(result.reset_step, dtype=bool)}


def fold_collected(algo: Algorithm, obs: np.ndarray, state: Any,
                   last: dict[str, np.ndarray] | None, device: torch.device) -> None:
    """Merge one seed's collected data into its statistics (``algo``'s normalizers, with that
    seed's slices in place in a group: :func:`fold_seeds`), just before its policy acts on
    ``obs``.

    Args:
        algo: the algorithm whose normalizers to update.
        obs: ``[E, *obs_shape]`` the observations about to be acted on (raw).
        state: ``[E, S]`` the global state beside them (multi-agent), else None.
        last: :func:`pending` of the step that returned them; None before the first step
            (nothing is merged then).
        device: the algorithm's device.
    """
    if last is None or not algo.normalizes:
        return
    keep = np.flatnonzero(~last["ended"])  # the final observation of an episode is not merged
    if keep.size:
        for normalizer, value in ((algo.obs_normalizer, obs), (algo.state_normalizer, state)):
            if normalizer is not None and value is not None:
                normalizer.update(float32_on(value, device)[torch.as_tensor(keep, device=device)])
    envs = np.flatnonzero(last["valid"])
    if algo.reward_scaler is not None and envs.size:
        algo.reward_scaler.update(
            torch.as_tensor(last["reward"], device=device),
            torch.as_tensor(last["ended"], device=device),
            torch.as_tensor(envs, device=device))


def float32_on(value: Any, device: torch.device) -> torch.Tensor:
    """``value`` (a numpy array, or a tensor on any device: env.backend=warp's observations) as
    a float32 tensor on ``device``; the same numbers either way."""
    if torch.is_tensor(value):
        return value.to(device=device, dtype=torch.float32)
    return torch.as_tensor(np.asarray(value, dtype=np.float32), device=device)


def fold_seeds(algo: Algorithm, seeds: np.ndarray, obs: Any, state: Any,
               last: list[dict[str, np.ndarray] | None], device: torch.device) -> None:
    """:func:`fold_collected` of each seed k of ``seeds`` (``obs [K, E, ...]``, ``state [K, E,
    S]`` or None, ``last[k]`` seed k's pending record) into its own statistics: through the
    seed axis (``SeedAxis.each``), which puts seed k's slices of the weights in place, as for
    any other update of them, so each seed's arithmetic is its single run's."""
    if not algo.normalizes:
        return
    algo.seed_axis.each(algo, lambda k: fold_collected(
        algo, obs[k], None if state is None else state[k], last[k], device), seeds)
