"""Replay storage with each observation stored once, sampled uniformly, n-step or as H-step windows.

Layout: a ring of ``T = ceil(capacity / num_envs)`` rows by ``num_envs`` columns; row ``t`` of
column ``e`` holds the observation env ``e`` returned at vector step ``t`` and the action, reward
and end flags of the step taken from it. The next observation is simply row ``t + 1``. This works
because the envs follow gymnasium 1.x "next-step" autoreset: the step that ends an episode returns
the *final* observation (stored like any other), and the following call resets the env, ignores
its action and returns the reset observation. That reset step is stored with ``valid = False`` and
is never sampled as a transition. A truncated episode therefore keeps its final observation to
bootstrap from, and observations cost ``T * E * O`` floats instead of twice that.

Valid transition starts are kept, oldest first, in a FIFO of flat indices (``row * E + env``);
when the ring overwrites a row, that row's entries are the oldest and leave the FIFO. Sampling is
therefore exactly uniform over stored transitions with host-side integer bookkeeping only: no
device-to-host synchronisation.

Multi-step modes share that storage: a window starting at row ``t`` walks forward up to ``n``
steps and stops after a step that ended the episode (terminated or truncated) or before the write
head; the target bootstraps from the observation where it stopped with ``gamma^k`` and no bootstrap
after a termination.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from rlzoo.buffers.batch import Batch
from rlzoo.buffers.replay_state import check_replay_state, saved_rows
from rlzoo.buffers.sampling import Sampling
from rlzoo.buffers.storage import leading_rows, load_leading_rows, to_storage, zeros

ONE_STEP = Sampling()


class ReplayBuffer:
    """Preallocated replay storage on ``device``.

    Args:
        capacity: number of env steps kept (rounded up to a multiple of ``num_envs``).
        obs_shape: shape of one observation, e.g. ``(O,)`` or ``(N, O)`` for N agents.
        action_shape: shape of one action, e.g. ``(A,)`` or ``(N, A)``.
        num_envs: E, the number of parallel env columns.
        device: where the storage and sampled batches live.
        state_dim: size of a global state stored like observations (0 = none).
        agent_rewards: N, per-agent rewards stored beside the team reward (0 = none).
        seed: seed of the buffer's own sampling generator.
        storage: the tensors to store into instead of allocating them (``obs``, ``action``,
            ``reward``, ``terminated``, ``ended``, ``index`` and, when used, ``state`` and
            ``agent_reward``, shaped as this buffer's own would be): one seed's views of a
            :class:`~rlzoo.buffers.seed_replay.SeedReplay`. They stay this buffer's storage
            (a checkpoint is copied into them, never adopted).
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...],
        num_envs: int = 1,
        device: torch.device | str = "cpu",
        state_dim: int = 0,
        agent_rewards: int = 0,
        seed: int = 0,
        storage: dict[str, torch.Tensor] | None = None,
    ) -> None:
        if capacity < 2 * num_envs:
            raise ValueError(f"buffer_size must be at least {2 * num_envs}, got {capacity}")
        self.device = torch.device(device)
        self.num_envs = num_envs
        self.rows = math.ceil(capacity / num_envs)
        T, E = self.rows, num_envs
        given = storage or replay_storage(T, E, obs_shape, action_shape, self.device,
                                          state_dim, agent_rewards)
        self.shared = storage is not None  # a group's views: load copies into them
        self.obs, self.action, self.reward = given["obs"], given["action"], given["reward"]
        self.terminated, self.ended = given["terminated"], given["ended"]
        self.state = given.get("state")
        self.agent_reward = given.get("agent_reward")
        # FIFO ring of flat indices of valid transition starts.
        self.index = given["index"]
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        # On CPU, numpy views of the storage: writes cost no tensor construction per field.
        self._host: dict[str, np.ndarray] | None = (
            self._host_views() if self.device.type == "cpu" else None)
        self.row_count = np.zeros(T, dtype=np.int64)  # valid starts pushed per row
        self.ptr = 0  # row that holds the newest observation (no action yet)
        self.head = 0  # FIFO push counter (monotonic)
        self.tail = 0  # FIFO pop counter (monotonic)
        self.started = False
        self.filled = 0  # rows [0, filled) have been written; the rows after are all zero

    # ------------------------------------------------------------------ writing
    def add(
        self,
        obs: np.ndarray | torch.Tensor,
        action: np.ndarray | torch.Tensor,
        reward: np.ndarray | torch.Tensor,
        next_obs: np.ndarray | torch.Tensor,
        terminated: np.ndarray,
        truncated: np.ndarray,
        reset_step: np.ndarray,
        state: np.ndarray | None = None,
        next_state: np.ndarray | None = None,
        agent_reward: np.ndarray | None = None,
    ) -> None:
        """Store one vector step of all E envs.

        ``obs [E, ...]`` is the observation acted on, ``next_obs [E, ...]`` what the env returned;
        ``terminated``, ``truncated``, ``reset_step`` are ``[E]`` bools (``reset_step``: this call
        only reset the env, so no transition happened). ``reward [E]``.
        """
        p = self.ptr
        put = self._put
        if not self.started:
            put("obs", p, obs)
            if self.state is not None:
                put("state", p, state)
        valid, terminated, ended = end_flags(terminated, truncated, reset_step)
        put("action", p, action)
        put("reward", p, reward)
        put("terminated", p, terminated)
        put("ended", p, ended)
        if self.agent_reward is not None:
            put("agent_reward", p, agent_reward)
        nxt = (p + 1) % self.rows
        put("obs", nxt, next_obs)
        if self.state is not None:
            put("state", nxt, next_state)
        self.advance(valid)

    def advance(self, valid: np.ndarray,
                write_index: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The bookkeeping of one stored vector step, once its rows ``ptr`` and ``ptr + 1`` are
        written: the transitions of the row about to be overwritten leave the FIFO (they are
        the oldest), the envs where ``valid [E]`` push their start, and ``ptr`` moves on.
        Returns the FIFO slots and the starts pushed into them; ``write_index=False`` leaves
        writing them to ``index`` to the caller (a group writes every seed's at once)."""
        T, E, p = self.rows, self.num_envs, self.ptr
        self.started = True
        nxt = (p + 1) % T
        self.tail += int(self.row_count[nxt])
        self.row_count[nxt] = 0
        starts = np.flatnonzero(valid) + p * E
        n = len(starts)
        slots = np.arange(self.head, self.head + n) % (T * E)
        if n and write_index:
            if self._host is not None:
                self._host["index"][slots] = starts
            else:
                self.index[torch.as_tensor(slots)] = torch.as_tensor(starts).to(self.device)
        self.head += n
        self.row_count[p] = n
        self.ptr = nxt
        self.filled = max(self.filled, min(p + 2, T))  # rows p and p + 1 (T once the ring wraps)
        return slots, starts

    def _host_views(self) -> dict[str, np.ndarray]:
        """Numpy views of the CPU storage, by field name."""
        names = ("obs", "action", "reward", "terminated", "ended", "index", "state",
                 "agent_reward")
        return {n: getattr(self, n).numpy() for n in names if getattr(self, n) is not None}

    def _put(self, field: str, row: int, value: Any) -> None:
        """``self.<field>[row] = value``: through a numpy view of the storage on CPU (no tensor
        is created per write), as a host-to-device copy otherwise."""
        if self._host is not None and not torch.is_tensor(value):
            self._host[field][row] = value
        else:
            getattr(self, field)[row] = to_storage(value, self.device)

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        """Number of stored (valid) transitions."""
        return self.head - self.tail

    @property
    def nbytes(self) -> int:
        """Bytes allocated by the storage tensors."""
        tensors = [self.obs, self.action, self.reward, self.terminated, self.ended, self.index]
        tensors += [t for t in (self.state, self.agent_reward) if t is not None]
        return sum(t.numel() * t.element_size() for t in tensors)

    @property
    def used_nbytes(self) -> int:
        """Bytes of the rows that hold data, ``[0, filled)`` of every field (:attr:`nbytes`
        once the ring has wrapped; what a checkpoint stores of the buffer)."""
        return self.nbytes * self.filled // self.rows

    def slots(self, batch_size: int, exclude_newest_rows: int = 0) -> torch.Tensor:
        """``[batch_size]`` FIFO slots drawn uniformly (from this buffer's generator) among
        the valid starts, leaving out those in the newest ``exclude_newest_rows`` rows; the
        slots' ``index`` entries are the starts."""
        available = len(self)
        if exclude_newest_rows:
            newest = [(self.ptr - 1 - i) % self.rows for i in range(exclude_newest_rows)]
            available -= int(self.row_count[newest].sum())
        if available <= 0:
            raise RuntimeError("cannot sample from a replay buffer without complete transitions")
        offsets = torch.randint(
            available, (batch_size,), device=self.device, generator=self.generator
        )
        return (offsets + self.tail) % self.index.numel()

    def _sample_starts(self, batch_size: int, exclude_newest_rows: int = 0) -> torch.Tensor:
        return self.index[self.slots(batch_size, exclude_newest_rows)]

    def sample(self, batch_size: int, sampling: Sampling = ONE_STEP) -> Batch:
        """Sample ``batch_size`` transitions uniformly, as ``sampling`` says.

        Args:
            batch_size: B.
            sampling: ``n_step`` rewards summed before bootstrapping (cut at episode ends),
                ``horizon`` H > 1 for H-step action chunks ``[B, H * A]`` with H-step returns
                (windows never reach the write head; steps after an episode end are zero with
                ``action_mask`` 0), and the discount ``gamma``. Default: one-step, gamma 0.99.
        """
        gamma = sampling.gamma
        if sampling.horizon > 1:
            return self._sample_window(batch_size, sampling.horizon, gamma, chunk=True)
        if sampling.n_step > 1:
            return self._sample_window(batch_size, sampling.n_step, gamma, chunk=False)
        flat = self._sample_starts(batch_size)
        nxt = (flat + self.num_envs) % self.index.numel()  # same env column, next row

        def rows(field: torch.Tensor | None, at: torch.Tensor) -> torch.Tensor | None:
            # one gather over the flattened [T * E, ...] storage
            return None if field is None else field.flatten(0, 1).index_select(0, at)

        terminated = rows(self.terminated, flat).float()
        return Batch(
            obs=rows(self.obs, flat),
            action=rows(self.action, flat),
            reward=rows(self.reward, flat),
            next_obs=rows(self.obs, nxt),
            discount=gamma * (1.0 - terminated),
            terminated=terminated,
            state=rows(self.state, flat),
            next_state=rows(self.state, nxt),
            agent_reward=rows(self.agent_reward, flat),
        )

    def _sample_window(self, batch_size: int, n: int, gamma: float, chunk: bool) -> Batch:
        flat = self._sample_starts(batch_size, exclude_newest_rows=n - 1 if chunk else 0)
        row, env = flat // self.num_envs, flat % self.num_envs
        steps = torch.arange(n, device=self.device)
        rows = (row[:, None] + steps) % self.rows  # [B, n]
        envs = env[:, None].expand_as(rows)
        ended = self.ended[rows, envs]
        # Step j is inside the window if no earlier step ended the episode and it precedes the
        # write head (rows ahead of ptr hold stale data from the ring's previous lap).
        ended_before = (ended.long().cumsum(1) - ended.long()) > 0
        to_head = (self.ptr - row) % self.rows  # >= 1 for a valid start
        alive = (~ended_before) & (steps[None, :] < to_head[:, None])
        alive_f = alive.float()
        k = alive.sum(1)  # steps taken, >= 1
        discounts = gamma ** steps.float()
        reward = (self.reward[rows, envs] * alive_f * discounts).sum(1)
        terminated = (self.terminated[rows, envs] & alive).any(1).float()
        end_row = (row + k) % self.rows
        discount = gamma ** k.float() * (1.0 - terminated)
        agent_reward = None
        if self.agent_reward is not None:
            agent_reward = (self.agent_reward[rows, envs] * (alive_f * discounts)[..., None]).sum(1)
        if chunk:
            actions = self.action[rows, envs] * alive_f[..., None]  # [B, H, A]
            action, action_mask = actions.flatten(1), alive_f
        else:
            action, action_mask = self.action[row, env], None
        return Batch(
            obs=self.obs[row, env],
            action=action,
            reward=reward,
            next_obs=self.obs[end_row, env],
            discount=discount,
            terminated=terminated,
            state=None if self.state is None else self.state[row, env],
            next_state=None if self.state is None else self.state[end_row, env],
            agent_reward=agent_reward,
            action_mask=action_mask,
        )

    # ------------------------------------------------------------------ state
    def _row_fields(self) -> dict[str, torch.Tensor]:
        """The storage tensors with a leading row axis ``[T, E, ...]``, by field name."""
        fields = {"obs": self.obs, "action": self.action, "reward": self.reward,
                  "terminated": self.terminated, "ended": self.ended,
                  "state": self.state, "agent_reward": self.agent_reward}
        return {name: t for name, t in fields.items() if t is not None}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically (tensors and plain ints), sized by the
        data, not the capacity: rows ``[0, filled)`` of each ``[T, E, ...]`` field (``filled``
        = rows written, ``T`` once the ring has wrapped; every later row is zero) and the
        FIFO's first ``min(head, T * E)`` slots (the rest were never written). On the CPU the
        tensors share the buffer's memory: save them before the next ``add``."""
        n, slots = self.filled, min(self.head, self.index.numel())
        tensors = {name: leading_rows(t, n) for name, t in self._row_fields().items()}
        tensors["index"] = leading_rows(self.index, slots)
        return {
            "tensors": tensors,
            "filled": n,
            "row_count": torch.from_numpy(self.row_count[:n].copy()),
            "ptr": self.ptr, "head": self.head, "tail": self.tail, "started": self.started,
            "generator": self.generator.get_state(),
        }

    def check_state(self, state: dict[str, Any]) -> None:
        """Refuse a :meth:`state_dict` (read from a file) that this buffer could not have
        written, before anything of it is used (``ValueError`` naming the first broken
        invariant: ``rlzoo.buffers.replay_state.check_replay_state``)."""
        check_replay_state(state, self.rows, self.num_envs, self.generator.get_state().numel(),
                           {**self._row_fields(), "index": self.index})

    def load_state_dict(self, state: dict[str, Any], take: bool = False) -> None:
        """Put back :meth:`state_dict` (checked first: :meth:`check_state`), or a checkpoint
        written before checkpoints were sized by the data (full ``[T, E, ...]`` tensors and no
        ``filled``). The rows after the checkpoint's are zero afterwards, as in the buffer that
        wrote it; on a fresh buffer they are not touched (no memory becomes resident for them).

        ``take=True``: ``state``'s tensors are the buffer's to keep (a checkpoint just loaded
        from disk), so a full ring's become its storage instead of being copied (the data is
        then in memory once). Default: copy, so ``state`` (maybe another buffer's memory, as
        :meth:`state_dict` shares it) is never aliased."""
        self.check_state(state)  # nothing is changed unless every invariant holds
        tensors, index, filled, row_count = saved_rows(self, state)
        ptr, head, tail = int(state["ptr"]), int(state["head"]), int(state["tail"])
        started = bool(state["started"])
        take = take and not self.shared  # a group's views stay the group's storage
        load_leading_rows(self, tensors, "replay buffer", written=self.filled, adopt=take)
        load_leading_rows(self, {"index": index}, "replay buffer",
                          written=min(self.head, self.index.numel()), adopt=take)
        if self._host is not None:
            self._host = self._host_views()
        self.row_count = np.zeros(self.rows, dtype=np.int64)
        self.row_count[:filled] = row_count[:filled]
        self.ptr, self.head, self.tail, self.started = ptr, head, tail, started
        self.filled = filled
        self.generator.set_state(state["generator"].cpu())


def replay_storage(
    rows: int, num_envs: int, obs_shape: tuple[int, ...], action_shape: tuple[int, ...],
    device: torch.device, state_dim: int = 0, agent_rewards: int = 0, seeds: tuple[int, ...] = (),
) -> dict[str, torch.Tensor]:
    """A replay's zeroed storage tensors by field name, ``[*seeds, T, E, ...]`` (``seeds``:
    ``(K,)`` for a group of K, ``()`` for one buffer); ``index`` is ``[*seeds, T * E]``. On the
    CPU, pages become resident as rows are first written (``storage.zeros``)."""
    T, E, f32, lead = rows, num_envs, torch.float32, tuple(seeds)
    fields = {
        "obs": zeros((*lead, T, E, *obs_shape), f32, device),
        "action": zeros((*lead, T, E, *action_shape), f32, device),
        "reward": zeros((*lead, T, E), f32, device),
        "terminated": zeros((*lead, T, E), torch.bool, device),
        "ended": zeros((*lead, T, E), torch.bool, device),
        "index": zeros((*lead, T * E), torch.int64, device),
    }
    if state_dim:
        fields["state"] = zeros((*lead, T, E, state_dim), f32, device)
    if agent_rewards:
        fields["agent_reward"] = zeros((*lead, T, E, agent_rewards), f32, device)
    return fields


def end_flags(terminated: np.ndarray, truncated: np.ndarray,
              reset_step: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(valid, terminated, ended)`` as stored, from a step's flags (any leading shape):
    a reset call is no transition, and ends nothing."""
    valid = ~np.asarray(reset_step, dtype=bool)
    terminated = np.asarray(terminated, dtype=bool) & valid
    ended = (terminated | np.asarray(truncated, dtype=bool)) & valid
    return valid, terminated, ended

