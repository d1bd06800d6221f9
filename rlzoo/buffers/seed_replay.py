"""The replay of a seed group: K seeds' buffers as one storage with a seed axis.

Every field is one tensor ``[K, T, E, ...]`` (the FIFO of valid starts ``[K, T * E]``); seed k's
:class:`~rlzoo.buffers.replay.ReplayBuffer` (``buffers[k]``) stores into its slice, keeps its own
counters and sampling generator, and writes and reads checkpoints exactly as a single run's
buffer does. What the group adds is the data path over all seeds at once:

* :meth:`SeedReplay.add` stores one vector step of every seed with one write per field (the
  counters move per seed: host integers only);
* :meth:`SeedReplay.sample` draws every seed's batch with one gather per field, ``[K, B, ...]``.

Each seed's draws come from its own generator, with the same calls its single run makes, and the
gathered values are that run's: seed k's slice of a group's batch is bit for bit the batch of
the single run of seed k on the same data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from rlzoo.buffers.batch import Batch
from rlzoo.buffers.replay import ONE_STEP, ReplayBuffer, end_flags, replay_storage
from rlzoo.buffers.sampling import Sampling
from rlzoo.buffers.storage import to_storage


class SeedReplay:
    """Replay storage of K seeds on ``device`` (the arguments of ``ReplayBuffer``, with one
    sampling generator per seed).

    Args:
        seeds: the K seeds; seed ``seeds[k]`` seeds buffer k's sampling generator.
        capacity: env steps kept per seed (rounded up to a multiple of ``num_envs``).
        obs_shape, action_shape: one observation's and one action's shape.
        num_envs: E, env columns per seed.
        device: where the storage and sampled batches live.
        state_dim: size of a global state stored like observations (0 = none).
        agent_rewards: N, per-agent rewards stored beside the team reward (0 = none).

    Attributes:
        buffers: seed k's ``ReplayBuffer`` over its slice of the storage.
    """

    def __init__(
        self,
        seeds: Sequence[int],
        capacity: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...],
        num_envs: int = 1,
        device: torch.device | str = "cpu",
        state_dim: int = 0,
        agent_rewards: int = 0,
    ) -> None:
        if capacity < 2 * num_envs:
            raise ValueError(f"buffer_size must be at least {2 * num_envs}, got {capacity}")
        self.device = torch.device(device)
        self.seeds, self.num_envs = len(seeds), num_envs
        self.rows = math.ceil(capacity / num_envs)
        self.fields = replay_storage(self.rows, num_envs, obs_shape, action_shape, self.device,
                                     state_dim, agent_rewards, seeds=(len(seeds),))
        self.buffers = [
            ReplayBuffer(capacity, obs_shape, action_shape, num_envs, self.device, state_dim,
                         agent_rewards, seed=seed,
                         storage={name: t[k] for name, t in self.fields.items()})
            for k, seed in enumerate(seeds)]
        self._host = ({name: t.numpy() for name, t in self.fields.items()}
                      if self.device.type == "cpu" else None)

    # ------------------------------------------------------------------ writing
    def add(
        self,
        seeds: np.ndarray,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        reset_step: np.ndarray,
        state: np.ndarray | None = None,
        next_state: np.ndarray | None = None,
        agent_reward: np.ndarray | None = None,
    ) -> None:
        """Store one vector step of the seeds ``seeds`` (``[n]`` indices into the group, in
        order): every other argument is ``ReplayBuffer.add``'s with a leading ``[n]`` axis,
        row i being seed ``seeds[i]``'s. When they are all K seeds at the same ring row (the
        usual case: seeds step together), each field is written once; otherwise seed by seed."""
        bufs = [self.buffers[k] for k in seeds]
        first = bufs[0]
        if len(bufs) != self.seeds or any(b.ptr != first.ptr or b.started != first.started
                                          for b in bufs):
            for i, b in enumerate(bufs):
                b.add(obs[i], action[i], reward[i], next_obs[i], terminated[i], truncated[i],
                      reset_step[i], None if state is None else state[i],
                      None if next_state is None else next_state[i],
                      None if agent_reward is None else agent_reward[i])
            return
        p, put = first.ptr, self._put
        if not first.started:
            put("obs", p, obs)
            put("state", p, state)
        valid, terminated, ended = end_flags(terminated, truncated, reset_step)
        put("action", p, action)
        put("reward", p, reward)
        put("terminated", p, terminated)
        put("ended", p, ended)
        put("agent_reward", p, agent_reward)
        nxt = (p + 1) % self.rows
        put("obs", nxt, next_obs)
        put("state", nxt, next_state)
        pushed = [b.advance(row, write_index=False) for b, row in zip(bufs, valid)]
        TE = self.rows * self.num_envs  # every seed's FIFO entries in one write
        at = np.concatenate([slots + k * TE for k, (slots, _) in enumerate(pushed)])
        if at.size:
            starts = np.concatenate([starts for _, starts in pushed])
            if self._host is not None:
                self._host["index"].reshape(-1)[at] = starts
            else:
                self.fields["index"].view(-1)[torch.as_tensor(at)] = (
                    torch.as_tensor(starts).to(self.device))

    def _put(self, field: str, row: int, value: Any) -> None:
        """Row ``row`` of every seed's ``field`` (if this replay has it) = ``value [K, E, ...]``."""
        if field not in self.fields:
            return
        if self._host is not None and not torch.is_tensor(value):
            self._host[field][:, row] = value
        else:
            self.fields[field][:, row] = to_storage(value, self.device)

    # ------------------------------------------------------------------ reading
    def sample(self, batch_size: int, sampling: Sampling = ONE_STEP) -> Batch:
        """Every seed's batch of ``batch_size`` transitions as ``ReplayBuffer.sample`` draws it
        (each from its own generator), stacked: every tensor ``[K, B, ...]``."""
        chunk = sampling.horizon > 1
        n = sampling.horizon if chunk else sampling.n_step
        exclude = n - 1 if chunk else 0
        slots = torch.stack([b.slots(batch_size, exclude) for b in self.buffers])  # [K, B]
        flat = self.fields["index"].gather(1, slots)  # [K, B], row * E + env in each seed
        if n > 1:
            return self._sample_window(flat, n, sampling.gamma, chunk)
        K, TE = self.seeds, self.rows * self.num_envs
        base = torch.arange(K, device=self.device)[:, None] * TE
        at, nxt = flat + base, (flat + self.num_envs) % TE + base

        def rows(name: str, where: torch.Tensor) -> torch.Tensor | None:
            t = self.fields.get(name)
            if t is None:
                return None
            # one gather over the flattened [K * T * E, ...] storage
            picked = t.reshape(K * TE, *t.shape[3:]).index_select(0, where.reshape(-1))
            return picked.reshape(K, batch_size, *t.shape[3:])

        terminated = rows("terminated", at).float()  # type: ignore[union-attr]
        return Batch(
            obs=rows("obs", at), action=rows("action", at), reward=rows("reward", at),
            next_obs=rows("obs", nxt), discount=sampling.gamma * (1.0 - terminated),
            terminated=terminated, state=rows("state", at), next_state=rows("state", nxt),
            agent_reward=rows("agent_reward", at),
        )

    def _sample_window(self, flat: torch.Tensor, n: int, gamma: float, chunk: bool) -> Batch:
        """``ReplayBuffer._sample_window`` for every seed at once (``flat [K, B]``)."""
        f, E, T = self.fields, self.num_envs, self.rows
        K = self.seeds
        seed = torch.arange(K, device=self.device)[:, None]  # [K, 1]
        row, env = flat // E, flat % E  # [K, B]
        steps = torch.arange(n, device=self.device)
        rows = (row[..., None] + steps) % T  # [K, B, n]
        envs = env[..., None].expand_as(rows)
        k3 = seed[..., None]
        ended = f["ended"][k3, rows, envs]
        ended_before = (ended.long().cumsum(-1) - ended.long()) > 0
        ptr = torch.tensor([b.ptr for b in self.buffers]).to(self.device, non_blocking=True)
        to_head = (ptr[:, None] - row) % T  # >= 1 for a valid start
        alive = (~ended_before) & (steps < to_head[..., None])
        alive_f = alive.float()
        k = alive.sum(-1)  # steps taken, >= 1
        discounts = gamma ** steps.float()
        reward = (f["reward"][k3, rows, envs] * alive_f * discounts).sum(-1)
        terminated = (f["terminated"][k3, rows, envs] & alive).any(-1).float()
        end_row = (row + k) % T
        discount = gamma ** k.float() * (1.0 - terminated)
        agent_reward = None
        if "agent_reward" in f:
            agent_reward = (f["agent_reward"][k3, rows, envs]
                            * (alive_f * discounts)[..., None]).sum(-2)
        if chunk:
            actions = f["action"][k3, rows, envs] * alive_f[..., None]  # [K, B, H, A]
            action, action_mask = actions.flatten(2), alive_f
        else:
            action, action_mask = f["action"][seed, row, env], None
        state = f.get("state")
        return Batch(
            obs=f["obs"][seed, row, env], action=action, reward=reward,
            next_obs=f["obs"][seed, end_row, env], discount=discount, terminated=terminated,
            state=None if state is None else state[seed, row, env],
            next_state=None if state is None else state[seed, end_row, env],
            agent_reward=agent_reward, action_mask=action_mask,
        )
