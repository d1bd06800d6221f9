"""One seed's share of a run: its envs, its storage, its warm-up generator, its open episodes and
its outputs (run dir, logger, summary). A single run has one member; ``seeds=K`` has K, all
updated together by one algorithm group (its ``seed_axis``), stored in one storage (``[K, ...]``:
a member's part is its ``index``) and collected together by one ``rlzoo.run.collect.Collector``
(whose stacked arrays a member's loop arrays are views of), while everything here stays
separate per seed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from rlzoo.buffers.replay import ReplayBuffer
from rlzoo.buffers.rollout import RolloutBuffer
from rlzoo.envs.base import VecEnv
from rlzoo.run.logger import Logger
from rlzoo.store.extras import host_array
from rlzoo.store.state_match import StateMismatch, match_state


@dataclass(eq=False)
class Member:
    """Per-seed state of the loop.

    Attributes:
        seed: this member's seed (its envs are seeded ``seed + e``, its evaluations
            ``seed + 10_000 + i``, its replay and warm-up draws from generators of ``seed``).
        cfg: the run config with this member's ``seed``.
        run_dir: where its events, ``summary.json`` and ``policy.pt`` go.
        env: its ``num_envs`` training envs.
        index: its place on the seed axis (k: the algorithm's slice k, the storage's buffer k).
        storage: the storage of every member (its part: buffer ``index``).
        rng: its warm-up action generator.
        step: env steps (transitions) it has collected.
        draws: in a group on the CPU (``seed_kernels=exact``), the generator its policy and
            updates draw from (the algorithm's ``seed_axis.generators[index]``: torch's
            generator carries on this one's stream while the seed computes): its single run's
            process generator, from where that was after building its algorithm; ``None`` for a
            single run (which draws from the process's generator), a batched group and on
            CUDA.
    """

    seed: int
    cfg: DictConfig
    run_dir: Path
    env: VecEnv
    index: int
    storage: ReplayBuffer | RolloutBuffer
    rng: np.random.Generator
    step: int = 0
    draws: torch.Generator | None = None
    episodes: int = 0
    eval_env: VecEnv | None = None
    last_eval: tuple[float, float] | None = None
    last_eval_agents: np.ndarray | None = None
    logger: Logger | None = None
    obs: Any = None  # the observation the next action is taken from
    env_state: Any = None  # the global state beside it (multi-agent), else None
    chunk: np.ndarray = field(default_factory=lambda: np.zeros(0))
    chunk_pos: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    episode_return: np.ndarray = field(default_factory=lambda: np.zeros(0))
    episode_length: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    agent_return: np.ndarray | None = None
    pending: dict[str, np.ndarray] | None = None  # the last step, for the normalizers to merge

    def reset_envs(self, horizon: int) -> None:
        """First reset of the training envs; starts the per-env arrays."""
        n = self.env.num_envs
        self.chunk = np.zeros((n, horizon, *self.env.act_shape), dtype=np.float32)
        self.chunk_pos = np.full(n, horizon)  # horizon = this env needs a fresh chunk
        self.episode_return = np.zeros(n)
        self.episode_length = np.zeros(n, dtype=np.int64)
        self.agent_return = np.zeros((n, self.env.n_agents)) if self.env.multi_agent else None
        self.obs, self.env_state = self.env.reset()

    def log_episodes(self, ended: np.ndarray, n_new: int) -> None:
        """Log the episodes of the training envs where ``ended [E]`` (their returns already
        hold the step's rewards, and the step brings ``n_new`` transitions) and start them
        afresh (``rlzoo.run.collect.Collector.advance``, before it counts the step)."""
        assert self.logger is not None
        for e in np.flatnonzero(ended):
            self.episodes += 1
            step = self.step + n_new
            self.logger.episode(float(self.episode_return[e]), step, int(self.episode_length[e]))
            self.episode_return[e] = 0.0
            self.episode_length[e] = 0
            if self.agent_return is not None:
                self.logger.scalars({f"train/episode_return/agent_{i}": float(r)
                                     for i, r in enumerate(self.agent_return[e])}, step)
                self.agent_return[e] = 0.0

    def loop_state(self) -> dict[str, Any]:
        """The current observation (and global state), the open episodes' returns and the
        action chunks in flight."""
        # envs that keep their worlds as tensors: tensors on the env's device
        # (rlzoo.run.collect), saved as numpy
        loop = {"obs": _numpy(self.obs), "episode_return": self.episode_return,
                "episode_length": self.episode_length,
                "chunk": self.chunk, "chunk_pos": self.chunk_pos}
        if self.env_state is not None:
            loop["env_state"] = _numpy(self.env_state)
        if self.agent_return is not None:
            loop["agent_return"] = self.agent_return
        if self.pending is not None:
            loop["normalize_pending"] = self.pending
        return loop

    def check_loop_state(self, loop: Any, where: str = "loop") -> None:
        """Refuse a checkpoint's :meth:`loop_state` (after the envs' first reset) unless it
        holds exactly the arrays this member holds now, each of their shape and dtype, on any
        device (``rlzoo.store.state_match.match_state``; they are copied to the host), read in the
        current layout: a checkpoint before the one loop kept per-agent returns
        ``[E, N]`` in ``episode_return`` and had no ``episode_length`` or chunks. Episode
        lengths are non-negative. ``StateMismatch`` names the entry."""
        if not isinstance(loop, dict):
            raise StateMismatch(f"{where} is not a mapping")
        live, saved = self.loop_state(), dict(loop)
        ret = saved.get("episode_return")
        if "agent_return" in live and "agent_return" not in saved \
                and torch.is_tensor(ret) and ret.dim() == 2:  # the multi-agent trainer's
            saved["agent_return"], saved["episode_return"] = ret, ret.mean(dim=1)
        for key in ("episode_length", "chunk", "chunk_pos"):  # older checkpoints: as reset
            if key not in saved and (key != "chunk_pos" or "chunk" not in loop):
                saved[key] = torch.from_numpy(np.asarray(live[key])).to(ret.device) \
                    if torch.is_tensor(ret) else np.asarray(live[key])
        pending = saved.pop("normalize_pending", None)
        live.pop("normalize_pending", None)
        match_state(saved, live, where, loaded_on="*")
        if bool((saved["episode_length"] < 0).any()):
            raise StateMismatch(f"{where}.episode_length holds negative lengths")
        if pending is not None:  # rlzoo.config.normalization.pending of the last step
            n = len(live["episode_return"])
            match_state(pending, {"reward": np.zeros(n, np.float32), "ended": np.zeros(n, bool),
                                  "valid": np.zeros(n, bool)}, f"{where}.normalize_pending",
                        loaded_on="*")

    def load_loop_state(self, loop: dict[str, Any]) -> None:
        """Put back :meth:`loop_state`, checked by :meth:`check_loop_state` (also as
        checkpoints before the one loop wrote it: the multi-agent trainer kept per-agent returns
        in ``episode_return`` and had no chunks)."""
        self.check_loop_state(loop)
        self.obs = host_array(loop["obs"])
        self.env_state = host_array(loop["env_state"]) if "env_state" in loop else None
        episode_return = host_array(loop["episode_return"])
        if episode_return.ndim == 2:  # [E, N] per agent, written by the multi-agent trainer
            loop = {**loop, "agent_return": episode_return}
            episode_return = episode_return.mean(axis=1)
        self.episode_return = episode_return
        self.episode_length = host_array(loop["episode_length"]) if "episode_length" in loop \
            else np.zeros(len(episode_return), dtype=np.int64)  # older checkpoints: 0
        if self.agent_return is not None:
            self.agent_return = host_array(loop["agent_return"])
        if "chunk" in loop:
            self.chunk, self.chunk_pos = host_array(loop["chunk"]), host_array(loop["chunk_pos"])
        if "normalize_pending" in loop:
            self.pending = {k: host_array(v) for k, v in loop["normalize_pending"].items()}

    def close(self) -> None:
        self.env.close()
        if self.eval_env is not None:
            self.eval_env.close()


def _numpy(value: Any) -> np.ndarray:
    """A loop array as numpy: a tensor (on any device) copied to the host, an array as it is."""
    return host_array(value) if torch.is_tensor(value) else np.asarray(value)
