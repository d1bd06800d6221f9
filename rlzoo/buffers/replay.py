"""Replay storage with each observation stored once, sampled uniformly, n-step or as H-step windows.

Layout: ``K`` independent buffers (one for a single run) on a leading axis, each a ring of
``T = ceil(capacity / num_envs)`` rows by ``num_envs`` columns: one tensor ``[K, T, E, ...]`` per
field. Row ``t`` of column ``e`` of buffer ``k`` holds the observation env ``e`` returned at vector
step ``t`` and the action, reward and end flags of the step taken from it; the next observation is
row ``t + 1``. This works because the envs follow gymnasium 1.x "next-step" autoreset: the step
that ends an episode returns the *final* observation (stored like any other), and the next call
resets the env, ignores its action and returns the reset observation. That reset step is stored
with ``valid = False`` and never sampled, so a truncated episode keeps its final observation to
bootstrap from, and observations cost ``T * E * O`` floats instead of twice that.

Each buffer keeps its valid transition starts, oldest first, in a FIFO of flat indices
(``row * E + env``; ``[K, T * E]``); a row the ring overwrites holds the oldest, which leave the
FIFO. Sampling is exactly uniform over stored transitions with host-side integer bookkeeping only
(no device-to-host synchronisation). Each buffer has its own counters and sampling generator, so
its contents and samples are those of a buffer of its own fed the same steps, bit for bit; one
``add`` writes a vector step of every buffer, one ``sample`` gathers every batch, ``[K, B, ...]``.

Multi-step modes share that storage: a window starting at row ``t`` walks forward up to ``n``
steps and stops after a step that ended the episode (terminated or truncated) or before the write
head; the target bootstraps from where it stopped with ``gamma^k``, not after a termination.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from rlzoo.buffers.batch import Batch
from rlzoo.buffers.replay_state import check_replay_state, saved_rows
from rlzoo.buffers.sampling import Sampling
from rlzoo.buffers.storage import leading_rows, load_leading_rows, to_storage, zeros

ONE_STEP = Sampling()
ROW_FIELDS = ("obs", "action", "reward", "terminated", "ended", "state", "agent_reward")


class ReplayBuffer:
    """Preallocated replay storage of ``K`` independent buffers on ``device``.

    Args:
        capacity: env steps kept per buffer (rounded up to a multiple of ``num_envs``).
        obs_shape: shape of one observation, e.g. ``(O,)`` or ``(N, O)`` for N agents.
        action_shape: shape of one action, e.g. ``(A,)`` or ``(N, A)``.
        num_envs: E, the number of parallel env columns of each buffer.
        device: where the storage and sampled batches live.
        state_dim: size of a global state stored like observations (0 = none).
        agent_rewards: N, per-agent rewards stored beside the team reward (0 = none).
        generator_seeds: the seed of each buffer's own sampling generator; ``K`` is their
            number (default: one buffer, seed 0).

    Attributes:
        obs, action, reward, terminated, ended, state, agent_reward: the storage, ``[K, T, E,
            ...]`` (``state`` and ``agent_reward`` None when not stored).
        index: ``[K, T * E]`` each buffer's FIFO of valid transition starts.
        ptr, head, tail, filled, started: each buffer's counters (lists of K): the row of its
            newest observation, its FIFO's push and pop counts, the rows written so far (every
            later row is zero) and whether it holds anything.
        row_count: ``[K, T]`` valid starts pushed per row.
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], action_shape: tuple[int, ...],
                 num_envs: int = 1, device: torch.device | str = "cpu", state_dim: int = 0,
                 agent_rewards: int = 0, generator_seeds: Sequence[int] = (0,)) -> None:
        if capacity < 2 * num_envs:
            raise ValueError(f"buffer_size must be at least {2 * num_envs}, got {capacity}")
        self.device = torch.device(device)
        self.num_buffers, self.num_envs = len(generator_seeds), num_envs
        self.rows = T = math.ceil(capacity / num_envs)
        given = replay_storage(T, num_envs, obs_shape, action_shape, self.device, state_dim,
                               agent_rewards, self.num_buffers)
        self.obs, self.action, self.reward = given["obs"], given["action"], given["reward"]
        self.terminated, self.ended = given["terminated"], given["ended"]
        self.state, self.agent_reward = given.get("state"), given.get("agent_reward")
        self.index = given["index"]
        self.generators = [torch.Generator(device=self.device).manual_seed(seed)
                           for seed in generator_seeds]
        # On CPU, numpy views of the storage: writes cost no tensor construction per field.
        self._host: dict[str, np.ndarray] | None = (
            {name: t.numpy() for name, t in given.items()} if self.device.type == "cpu" else None)
        K = self.num_buffers
        self.row_count = np.zeros((K, T), dtype=np.int64)
        self.ptr, self.head, self.tail, self.filled = [0] * K, [0] * K, [0] * K, [0] * K
        self.started, self._everyone = [False] * K, list(range(K))

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
        state: np.ndarray | torch.Tensor | None = None,
        next_state: np.ndarray | torch.Tensor | None = None,
        agent_reward: np.ndarray | torch.Tensor | None = None,
        which: np.ndarray | None = None,
    ) -> None:
        """Store one vector step of the buffers ``which`` (``[n]`` indices, in order; default:
        all K), row i of every argument being buffer ``which[i]``'s.

        ``obs [n, E, ...]`` is the observation acted on, ``next_obs [n, E, ...]`` what the env
        returned; ``terminated``, ``truncated``, ``reset_step`` are ``[n, E]`` bools
        (``reset_step``: this call only reset the env, so no transition happened); ``reward
        [n, E]``; ``state``/``next_state [n, E, S]`` and ``agent_reward [n, E, N]`` for a
        multi-agent env. Each of ``obs``, ``next_obs``, ``state``, ``next_state`` (and the rest)
        may be a numpy array or a tensor on any device (envs that keep their worlds as tensors:
        ``rlzoo.envs.base.tensor_device``); a tensor is copied into the storage on its device,
        with no host round trip, the same numbers either way. When every buffer is at the same
        ring row (the usual case: they step together) each field is written once, else buffer by
        buffer.
        """
        valid, terminated, ended = end_flags(terminated, truncated, reset_step)
        values = (obs, action, reward, next_obs, terminated, ended, state, next_state,
                  agent_reward)
        ks = self._everyone if which is None else [int(k) for k in which]
        p, started, n = self.ptr[ks[0]], self.started[ks[0]], len(ks)
        if ks == self._everyone and self.ptr.count(p) == n and self.started.count(started) == n:
            self._write(slice(None), p, started, *values)
        else:
            for i, k in enumerate(ks):
                self._write(k, self.ptr[k], self.started[k],
                            *(None if v is None else v[i] for v in values))
        self._push([self._advance(k, valid[i]) for i, k in enumerate(ks)])

    def _write(self, at: int | slice, p: int, started: bool, obs: Any, action: Any, reward: Any,
               next_obs: Any, terminated: Any, ended: Any, state: Any, next_state: Any,
               agent_reward: Any) -> None:
        """Row ``p`` (its observation too before the first step) and row ``p + 1``'s
        observation of buffer ``at`` (an index, or every buffer)."""
        put, nxt = self._put, (p + 1) % self.rows
        if not started:
            put("obs", at, p, obs)
            put("state", at, p, state)
        put("action", at, p, action)
        put("reward", at, p, reward)
        put("terminated", at, p, terminated)
        put("ended", at, p, ended)
        put("agent_reward", at, p, agent_reward)
        put("obs", at, nxt, next_obs)
        put("state", at, nxt, next_state)

    def _put(self, field: str, at: int | slice, row: int, value: Any) -> None:
        """``self.<field>[at, row] = value`` (if this replay stores ``field``): through a numpy
        view of the storage on CPU (no tensor is created per write; a CPU tensor is read through
        a view too), as a copy to the device otherwise."""
        if self._host is not None and (not torch.is_tensor(value) or value.device.type == "cpu"):
            view = self._host.get(field)
            if view is not None:
                view[at, row] = value.detach().numpy() if torch.is_tensor(value) else value
            return
        tensor = getattr(self, field)
        if tensor is not None:
            tensor[at, row] = to_storage(value, self.device)

    def _advance(self, k: int, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Buffer k's bookkeeping of one stored vector step, once its rows ``ptr`` and ``ptr +
        1`` are written: the transitions of the row about to be overwritten leave the FIFO (they
        are the oldest), the envs where ``valid [E]`` push their start, and ``ptr`` moves on.
        Returns the flat ``index`` slots (of every buffer's FIFO) and the starts to push."""
        T, E, p = self.rows, self.num_envs, self.ptr[k]
        self.started[k] = True
        nxt = (p + 1) % T
        self.tail[k] += int(self.row_count[k, nxt])
        self.row_count[k, nxt] = 0
        starts = np.flatnonzero(valid) + p * E
        n = len(starts)
        slots = np.arange(self.head[k], self.head[k] + n) % (T * E) + k * T * E
        self.head[k] += n
        self.row_count[k, p] = n
        self.ptr[k] = nxt
        self.filled[k] = max(self.filled[k], min(p + 2, T))  # rows p, p + 1 (T once it wraps)
        return slots, starts

    def _push(self, pushed: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Write the FIFO entries :meth:`_advance` returned, every buffer's in one write."""
        at, starts = pushed[0] if len(pushed) == 1 else (
            np.concatenate([slots for slots, _ in pushed]),
            np.concatenate([starts for _, starts in pushed]))
        if not at.size:
            return
        if self._host is not None:
            self._host["index"].reshape(-1)[at] = starts
        else:
            self.index.view(-1)[torch.as_tensor(at)] = torch.as_tensor(starts).to(self.device)

    # ------------------------------------------------------------------ reading
    def lengths(self) -> np.ndarray:
        """``[K]`` the number of stored (valid) transitions of each buffer."""
        return np.subtract(self.head, self.tail)

    @property
    def nbytes(self) -> int:
        """Bytes allocated by the storage tensors (all K buffers)."""
        tensors = [*self._row_fields().values(), self.index]
        return sum(t.numel() * t.element_size() for t in tensors)

    def used_nbytes(self, k: int) -> int:
        """Bytes of buffer k's rows that hold data, ``[0, filled[k])`` of each field (its share
        of :attr:`nbytes` once its ring has wrapped; what a checkpoint stores of it)."""
        return self.nbytes // self.num_buffers * self.filled[k] // self.rows

    def _slots(self, k: int, batch_size: int, exclude_newest_rows: int = 0) -> torch.Tensor:
        """``[batch_size]`` FIFO slots of buffer k drawn uniformly (from its generator) among
        its valid starts, leaving out those in its newest ``exclude_newest_rows`` rows."""
        available = self.head[k] - self.tail[k]
        if exclude_newest_rows:
            newest = [(self.ptr[k] - 1 - i) % self.rows for i in range(exclude_newest_rows)]
            available -= int(self.row_count[k, newest].sum())
        if available <= 0:
            raise RuntimeError("cannot sample from a replay buffer without complete transitions")
        offsets = torch.randint(available, (batch_size,), device=self.device,
                                generator=self.generators[k])
        return (offsets + self.tail[k]) % self.index.shape[1]

    def sample(self, batch_size: int, sampling: Sampling = ONE_STEP) -> Batch:
        """Sample ``batch_size`` transitions of every buffer uniformly, as ``sampling`` says;
        every tensor of the batch is ``[K, B, ...]``.

        Args:
            batch_size: B.
            sampling: ``n_step`` rewards summed before bootstrapping (cut at episode ends),
                ``horizon`` H > 1 for H-step action chunks ``[K, B, H * A]`` with H-step returns
                (windows never reach the write head; steps after an episode end are zero with
                ``action_mask`` 0), and the discount ``gamma``. Default: one-step, gamma 0.99.
        """
        chunk = sampling.horizon > 1
        n = sampling.horizon if chunk else sampling.n_step
        exclude = n - 1 if chunk else 0
        slots = torch.stack([self._slots(k, batch_size, exclude)
                             for k in range(self.num_buffers)])  # [K, B]
        flat = self.index.gather(1, slots)  # [K, B], row * E + env in each buffer
        if n > 1:
            return self._sample_window(flat, n, sampling.gamma, chunk)
        K, TE = self.num_buffers, self.rows * self.num_envs
        base = torch.arange(K, device=self.device)[:, None] * TE
        at, nxt = flat + base, (flat + self.num_envs) % TE + base

        def rows(t: torch.Tensor | None, where: torch.Tensor) -> torch.Tensor | None:
            if t is None:
                return None
            # one gather over the flattened [K * T * E, ...] storage
            picked = t.reshape(K * TE, *t.shape[3:]).index_select(0, where.reshape(-1))
            return picked.reshape(K, batch_size, *t.shape[3:])

        terminated = rows(self.terminated, at).float()  # type: ignore[union-attr]
        return Batch(
            obs=rows(self.obs, at), action=rows(self.action, at),  # type: ignore[arg-type]
            reward=rows(self.reward, at), next_obs=rows(self.obs, nxt),  # type: ignore[arg-type]
            discount=sampling.gamma * (1.0 - terminated), terminated=terminated,
            state=rows(self.state, at), next_state=rows(self.state, nxt),
            agent_reward=rows(self.agent_reward, at),
        )

    def _sample_window(self, flat: torch.Tensor, n: int, gamma: float, chunk: bool) -> Batch:
        """n-step returns or H-step chunks (``chunk``) from the starts ``flat [K, B]``."""
        E, T, K = self.num_envs, self.rows, self.num_buffers
        buffer = torch.arange(K, device=self.device)[:, None]  # [K, 1]
        row, env = flat // E, flat % E  # [K, B]
        steps = torch.arange(n, device=self.device)
        rows = (row[..., None] + steps) % T  # [K, B, n]
        envs = env[..., None].expand_as(rows)
        k3 = buffer[..., None]
        ended = self.ended[k3, rows, envs]
        # Step j is inside the window if no earlier step ended the episode and it precedes the
        # write head (rows ahead of ptr hold stale data from the ring's previous lap).
        ended_before = (ended.long().cumsum(-1) - ended.long()) > 0
        ptr = torch.tensor(self.ptr).to(self.device, non_blocking=True)
        to_head = (ptr[:, None] - row) % T  # >= 1 for a valid start
        alive = (~ended_before) & (steps < to_head[..., None])
        alive_f = alive.float()
        k = alive.sum(-1)  # steps taken, >= 1
        discounts = gamma ** steps.float()
        reward = (self.reward[k3, rows, envs] * alive_f * discounts).sum(-1)
        terminated = (self.terminated[k3, rows, envs] & alive).any(-1).float()
        end_row = (row + k) % T
        discount = gamma ** k.float() * (1.0 - terminated)
        agent_reward = None
        if self.agent_reward is not None:
            agent_reward = (self.agent_reward[k3, rows, envs]
                            * (alive_f * discounts)[..., None]).sum(-2)
        if chunk:
            actions = self.action[k3, rows, envs] * alive_f[..., None]  # [K, B, H, A]
            action, action_mask = actions.flatten(2), alive_f
        else:
            action, action_mask = self.action[buffer, row, env], None
        state = self.state
        return Batch(
            obs=self.obs[buffer, row, env], action=action, reward=reward,
            next_obs=self.obs[buffer, end_row, env], discount=discount, terminated=terminated,
            state=None if state is None else state[buffer, row, env],
            next_state=None if state is None else state[buffer, end_row, env],
            agent_reward=agent_reward, action_mask=action_mask,
        )

    # ------------------------------------------------------------------ state
    def _row_fields(self) -> dict[str, torch.Tensor]:
        """The storage tensors with a row axis ``[K, T, E, ...]``, by field name."""
        return {name: getattr(self, name) for name in ROW_FIELDS
                if getattr(self, name) is not None}

    def _part(self, k: int) -> SimpleNamespace:
        """Buffer k's storage (views ``[T, E, ...]``, FIFO ``[T * E]``) by field name, for
        checking and loading a checkpoint of one buffer."""
        return SimpleNamespace(rows=self.rows, index=self.index[k],
                               **{name: t[k] for name, t in self._row_fields().items()})

    def state_dict(self, k: int = 0) -> dict[str, Any]:
        """Everything needed to continue buffer k bit-identically (tensors and plain ints),
        sized by the data, not the capacity: rows ``[0, filled)`` of each ``[T, E, ...]`` field
        (``filled`` = rows written, ``T`` once the ring has wrapped; every later row is zero)
        and the FIFO's first ``min(head, T * E)`` slots (the rest were never written). On the
        CPU the tensors share the buffer's memory: save them before the next ``add``."""
        n, slots = self.filled[k], min(self.head[k], self.index.shape[1])
        tensors = {name: leading_rows(t[k], n) for name, t in self._row_fields().items()}
        tensors["index"] = leading_rows(self.index[k], slots)
        return {
            "tensors": tensors,
            "filled": n,
            "row_count": torch.from_numpy(self.row_count[k, :n].copy()),
            "ptr": self.ptr[k], "head": self.head[k], "tail": self.tail[k],
            "started": self.started[k],
            "generator": self.generators[k].get_state(),
        }

    def check_state(self, state: dict[str, Any]) -> None:
        """Refuse a :meth:`state_dict` (read from a file) that one buffer of this one's could
        not have written, before anything of it is used (``ValueError`` naming the first broken
        invariant: ``rlzoo.buffers.replay_state.check_replay_state``)."""
        one = {name: t[0] for name, t in self._row_fields().items()}
        check_replay_state(state, self.rows, self.num_envs,
                           self.generators[0].get_state().numel(), {**one, "index": self.index[0]})

    def check_states(self, states: list[Any]) -> None:
        """:meth:`check_state` of every buffer's saved state (``states[k]``: buffer k's)."""
        if len(states) != self.num_buffers:
            raise ValueError(f"{len(states)} replay buffer states for {self.num_buffers} buffers")
        for state in states:
            self.check_state(state)

    def load_state_dict(self, state: dict[str, Any], k: int = 0) -> None:
        """Put back :meth:`state_dict` as buffer k (checked first: :meth:`check_state`), or a
        checkpoint written before checkpoints were sized by the data (full ``[T, E, ...]``
        tensors and no ``filled``). It is copied into the storage; the rows after the
        checkpoint's are zero afterwards, as in the buffer that wrote it; on a fresh buffer
        they are not touched (no memory becomes resident for them)."""
        self.check_state(state)  # nothing is changed unless every invariant holds
        part = self._part(k)
        tensors, index, filled, row_count = saved_rows(part, state)
        load_leading_rows(part, tensors, "replay buffer", written=self.filled[k])
        load_leading_rows(part, {"index": index}, "replay buffer",
                          written=min(self.head[k], self.index.shape[1]))
        self.row_count[k] = 0
        self.row_count[k, :filled] = row_count[:filled]
        self.ptr[k], self.head[k], self.tail[k] = (int(state[key]) for key in
                                                   ("ptr", "head", "tail"))
        self.started[k], self.filled[k] = bool(state["started"]), filled
        self.generators[k].set_state(state["generator"].cpu())


def replay_storage(
    rows: int, num_envs: int, obs_shape: tuple[int, ...], action_shape: tuple[int, ...],
    device: torch.device, state_dim: int = 0, agent_rewards: int = 0, buffers: int = 1,
) -> dict[str, torch.Tensor]:
    """The zeroed storage tensors of ``buffers`` (K) replays by field name, ``[K, T, E,
    ...]``; ``index`` is ``[K, T * E]``. On the CPU, pages become resident as rows are first
    written (``storage.zeros``)."""
    K, T, E, f32 = buffers, rows, num_envs, torch.float32
    fields = {
        "obs": zeros((K, T, E, *obs_shape), f32, device),
        "action": zeros((K, T, E, *action_shape), f32, device),
        "reward": zeros((K, T, E), f32, device),
        "terminated": zeros((K, T, E), torch.bool, device),
        "ended": zeros((K, T, E), torch.bool, device),
        "index": zeros((K, T * E), torch.int64, device),
    }
    if state_dim:
        fields["state"] = zeros((K, T, E, state_dim), f32, device)
    if agent_rewards:
        fields["agent_reward"] = zeros((K, T, E, agent_rewards), f32, device)
    return fields


def end_flags(terminated: np.ndarray, truncated: np.ndarray,
              reset_step: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(valid, terminated, ended)`` as stored, from a step's flags (any leading shape):
    a reset call is no transition, and ends nothing."""
    valid = ~np.asarray(reset_step, dtype=bool)
    terminated = np.asarray(terminated, dtype=bool) & valid
    ended = (terminated | np.asarray(truncated, dtype=bool)) & valid
    return valid, terminated, ended
