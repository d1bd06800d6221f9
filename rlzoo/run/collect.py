"""The loop's data path with the seed axis first: one act call, one env-step call over the
``K x E`` training envs, one finiteness check per array and one storage write per field for all
K seeds at each env step.

:class:`Collector` holds the seeds' loop arrays stacked (the observations acted on
``[K, E, ...]``, the global state, the action chunks in flight ``[K, E, H, ...]`` and their
positions, the open episodes' returns); each member's own arrays are views of its slice, so
its checkpoint part and everything that reads a member are unchanged.

A seed does exactly what its single run does: its warm-up draws come from its own generator,
its envs, storage and statistics see only its data, and the policy acts for it only when its
single run would (past its own warm-up, when an env of it needs a fresh chunk): for a seed that
does not act, its slice of the algorithm's state (FlashSAC's repeated noise,
``rlzoo.algos.exploration``) and its generator are as before the act call
(``SeedAxis.call_rows``), so a seed leaving its warm-up later than another starts acting from
its single run's state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlzoo.algos.base import Algorithm
from rlzoo.buffers.replay import ReplayBuffer
from rlzoo.buffers.rollout import RolloutBuffer
from rlzoo.config.normalization import fold_seeds, pending
from rlzoo.config.settings import Settings
from rlzoo.envs.base import StepResult, VecEnv, tensor_device
from rlzoo.run.finite import check_env_output
from rlzoo.run.member import Member


class Collector:
    """Acts, steps the envs, checks and stores one vector step of every seed at once.

    Args:
        members: the run's members, first seed first.
        algo: the algorithm (group) that acts for them (through its ``seed_axis``).
        storage: the storage of every seed (``[K, ...]``).
        settings: the run's settings.
        env_name: the env's name, for the one-line errors.
        where: where a stopped run can go back to (``rlzoo.run.restore.last_good_note``).
    """

    def __init__(self, members: list[Member], algo: Algorithm,
                 storage: ReplayBuffer | RolloutBuffer, settings: Settings, env_name: str,
                 where: Callable[[], str]) -> None:
        self.members, self.algo, self.axis, self.storage = members, algo, algo.seed_axis, storage
        self.s, self.env_name, self.where = settings, env_name, where
        self.horizon = algo.action_horizon
        self.envs: list[VecEnv] = [m.env for m in members]
        # envs that keep their worlds as tensors (env.backend=warp, env.backend=batched MPE,
        # env=vmas): the device their observations (and global state) stay on, [K, E, ...]
        # tensors there, to the policy, the normalizers and the storage; else None (numpy)
        self.device = tensor_device(self.envs)
        self.seeds = [m.seed for m in members]
        self.everyone = np.arange(len(members))
        # the policy's call for every seed, obs [K, E, ...] -> [K, E, H * A]; replayed from a
        # CUDA graph under cudagraphs (rlzoo.run.accel.GraphedAct, set by the trainer)
        self.policy_call: Callable[[torch.Tensor], torch.Tensor] = (
            lambda obs: self.axis.call(self.algo, self.algo.act, obs))

    # ------------------------------------------------------------------ the loop arrays
    def reset(self) -> None:
        """Every env's first reset (a fresh run), then the checks of its observations."""
        for m in self.members:
            m.reset_envs(self.horizon)
        self.gather()
        self.check(self.everyone, obs=self.obs, state=self.env_state)

    def gather(self) -> None:
        """Stack the members' loop arrays (after a reset or a restore) and make each member's
        arrays views of its slice."""
        ms = self.members
        self.obs = self.stacked([m.obs for m in ms])
        self.env_state = None if ms[0].env_state is None else self.stacked(
            [m.env_state for m in ms])
        self.chunk = np.stack([m.chunk for m in ms])
        self.chunk_pos = np.stack([m.chunk_pos for m in ms])
        self.episode_return = np.stack([m.episode_return for m in ms])
        self.episode_length = np.stack([m.episode_length for m in ms])
        self.agent_return = (None if ms[0].agent_return is None
                             else np.stack([m.agent_return for m in ms]))
        for k, m in enumerate(ms):
            m.obs, m.chunk, m.chunk_pos = self.obs[k], self.chunk[k], self.chunk_pos[k]
            m.episode_return, m.episode_length = self.episode_return[k], self.episode_length[k]
            if self.env_state is not None:
                m.env_state = self.env_state[k]
            if self.agent_return is not None:
                m.agent_return = self.agent_return[k]

    def stacked(self, arrays: list[Any]) -> Any:
        """The members' ``[E, ...]`` arrays (from a reset or a checkpoint: numpy) as one ``[K,
        E, ...]`` array, a tensor on the envs' device when they keep their worlds there."""
        stack = np.stack([np.asarray(a) for a in arrays])
        return stack if self.device is None else torch.as_tensor(stack).to(self.device)

    # ------------------------------------------------------------------ one env step
    def collect(self) -> None:
        """Act, step the envs, store the step, log finished episodes, for every seed that has
        not reached ``total_steps`` (on-policy: every seed, as rollouts fill together)."""
        s = self.s
        steps = np.array([m.step for m in self.members])
        live = np.ones(len(steps), dtype=bool) if s.on_policy else steps < s.total_steps
        seeds = np.flatnonzero(live)
        if self.algo.normalizes:  # the statistics take in what the last step collected
            fold_seeds(self.algo, seeds, self.obs, self.env_state,
                       [m.pending for m in self.members], s.device)
        action, pre_tanh = self.choose_actions(live, steps)
        result = self.step_envs(action, seeds)
        # the action first: a policy gone NaN is the cause of the NaN it then gets back
        self.check(seeds, action=action, reward=result.reward, agent_reward=result.agent_reward,
                   obs=result.obs, state=result.state)
        all_live = len(seeds) == len(steps)

        def mine(a: np.ndarray | None) -> np.ndarray | None:
            return a if a is None or all_live else a[seeds]

        # on-policy: every seed's rollout (all live); off-policy: the live seeds' replays
        extra = {"pre_tanh": pre_tanh} if s.on_policy else {
            "which": None if all_live else seeds}
        self.storage.add(mine(self.obs), action, result.reward, result.obs,
                         result.terminated, result.truncated, result.reset_step,
                         state=mine(self.env_state), next_state=result.state,
                         agent_reward=result.agent_reward, **extra)
        if all_live:
            self.chunk_pos[result.reset_step] = self.horizon
        else:
            self.chunk_pos[seeds] = np.where(result.reset_step, self.horizon,
                                             self.chunk_pos[seeds])
        if self.algo.normalizes:  # merged before the next action (rlzoo.config.normalization)
            for i, k in enumerate(seeds):
                self.members[k].pending = pending(_row(result, i))
        self.advance(seeds, result, all_live)

    def choose_actions(self, live: np.ndarray,
                       steps: np.ndarray) -> tuple[np.ndarray, torch.Tensor | None]:
        """The actions ``[n, E, *act_shape]`` in ``[-1, 1]`` of the ``n`` seeds in ``live [K]``
        (and the policy's pre-tanh sample for an on-policy rollout): uniform random during a
        seed's warm-up, from its own generator; then the policy, one call for every seed;
        action chunks run open-loop."""
        s, H, K = self.s, self.horizon, len(live)
        obs = torch.as_tensor(self.obs, dtype=torch.float32).to(s.device, non_blocking=True)
        if s.on_policy:
            action, pre = self.axis.call(self.algo, self.algo.explore, obs)  # type: ignore[attr-defined]
            return action.cpu().numpy(), pre
        warm = steps < s.learning_starts
        renew = self.chunk_pos >= H  # [K, E]: this env needs a fresh chunk
        acting = live & ~warm & renew.any(axis=1)
        if acting.any():  # every env of an acting seed, as its single run acts on all of them
            rows = np.repeat(acting[:, None], len(renew[0]), axis=1)
            fresh = self.axis.call_rows(self.algo, self.algo.act, obs, rows,
                                        whole=self.policy_call).cpu().numpy()
            chunk = self.chunk
            new = fresh.reshape(chunk.shape)
            update = renew & acting[:, None]
            chunk[update] = new[update]
            self.chunk_pos[update] = 0
        E = self.chunk_pos.shape[1]
        at = np.minimum(self.chunk_pos, H - 1)  # a seed in its warm-up has no chunk
        action = self.chunk[np.arange(K)[:, None], np.arange(E)[None, :], at]
        self.chunk_pos[live & ~warm] += 1
        for k in np.flatnonzero(live & warm):
            m = self.members[k]
            random = m.rng.uniform(-1.0, 1.0, size=(E, *m.env.act_shape))
            action[k] = random.astype(np.float32) * m.env.act_mask  # padding 0
        return (action if live.all() else action[live]), None

    def step_envs(self, action: np.ndarray, seeds: np.ndarray) -> StepResult:
        """Step the envs of the seeds ``seeds`` (``[n]`` indices, in order) with ``action [n,
        E, *act_shape]``; one :class:`StepResult` whose arrays are ``[n, E, ...]``, row i
        being seed ``seeds[i]``'s (the other seeds' envs are left as they are). Envs in worker
        processes (``step_async``/``step_wait``) of every seed step at the same time."""
        chosen: list[Any] = [self.envs[k] for k in seeds]
        if all(hasattr(env, "step_async") for env in chosen):  # env workers: all at once
            for i, env in enumerate(chosen):
                env.step_async(action[i])
            results = [env.step_wait() for env in chosen]
        elif self.device is not None:  # observations and state stay tensors on it
            results = [env.step_device(action[i]) for i, env in enumerate(chosen)]
        else:
            results = [env.step(action[i]) for i, env in enumerate(chosen)]
        first = results[0]

        def stack(name: str) -> Any:
            if getattr(first, name) is None:
                return None
            values = [getattr(r, name) for r in results]
            return torch.stack(values) if torch.is_tensor(values[0]) else np.stack(values)

        return StepResult(stack("obs"), stack("reward"), stack("terminated"),
                          stack("truncated"), stack("reset_step"), state=stack("state"),
                          agent_reward=stack("agent_reward"))

    def advance(self, seeds: np.ndarray, result: StepResult, all_live: bool) -> None:
        """Take in the step ``result`` (rows: ``seeds``): add its rewards to the open episodes,
        log the episodes it ended, move to its observations, count each seed's transitions (a
        reset call of next-step autoreset is none)."""
        valid = ~result.reset_step
        n_new = valid.sum(axis=1)
        at = slice(None) if all_live else seeds
        self.episode_return[at] += np.where(valid, result.reward, 0.0)
        self.episode_length[at] += valid
        if self.agent_return is not None:
            self.agent_return[at] += np.where(valid[..., None], result.agent_reward, 0.0)
        ended = (result.terminated | result.truncated) & valid
        for i in np.flatnonzero(ended.any(axis=1)):
            self.members[seeds[i]].log_episodes(ended[i], int(n_new[i]))
        self.obs[at] = result.obs
        if self.env_state is not None:
            self.env_state[at] = result.state
        for i, k in enumerate(seeds):
            self.members[k].step += int(n_new[i])

    def check(self, seeds: np.ndarray, **arrays: Any) -> None:
        """Stop before storing a NaN/inf array (``[n, E, ...]``, rows: ``seeds``) with one line
        (``rlzoo.run.finite.check_env_output``)."""
        check_env_output(self.seeds, [int(k) for k in seeds],
                         [self.members[k].step + 1 for k in seeds], self.env_name, self.where,
                         **arrays)


def _row(result: StepResult, i: int) -> StepResult:
    """Row ``i`` of a stacked step result: one seed's ``[E, ...]`` arrays."""
    return StepResult(*(None if v is None else v[i] for v in (
        result.obs, result.reward, result.terminated, result.truncated, result.reset_step,
        result.state, result.agent_reward)))  # type: ignore[arg-type]
