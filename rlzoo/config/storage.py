"""Where the loop stores what it collects, built from the run's settings: a replay buffer or an
on-policy rollout, as the algorithm declares, its size checked against the device's memory
before anything is allocated."""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch

from rlzoo.algos.base import Algorithm, EnvSpec
from rlzoo.buffers.replay import ReplayBuffer
from rlzoo.buffers.rollout import RolloutBuffer
from rlzoo.config.settings import Settings
from rlzoo.errors import UserError


def make_storage(s: Settings, spec: EnvSpec, algo: Algorithm,
                 seeds: list[int]) -> ReplayBuffer | RolloutBuffer:
    """Where the loop stores what the seeds ``seeds`` collect, as the algorithm's contract says,
    one buffer per seed on a leading axis (``[K, ...]``): a rollout of ``algo.rollout_steps``
    vector steps for an on-policy algorithm (used once per update), a replay of
    ``algo.buffer_size`` steps otherwise (seed k's sampling generator seeded with
    ``seeds[k]``); shaped for ``spec`` (per agent when multi-agent), on the training device."""
    multi = spec.multi_agent
    obs_shape = (spec.n_agents, spec.obs_dim) if multi else (spec.obs_dim,)
    action_shape = (spec.n_agents, spec.act_dim) if multi else (spec.act_dim,)
    agents = spec.n_agents if multi else 0
    if s.on_policy:
        if not callable(getattr(algo, "explore", None)):
            raise UserError(f"{type(algo).__name__} is on-policy but has no explore(obs) -> "
                            "(action, pre_tanh); add one (see docs/extending.md)")
        return RolloutBuffer(s.rollout_steps, s.num_envs, obs_shape, action_shape,
                             spec.state_dim, s.device, agent_rewards=agents,
                             num_buffers=len(seeds))
    check_buffer_memory(s, obs_shape, action_shape, spec.state_dim, agents)
    return ReplayBuffer(s.buffer_size, obs_shape, action_shape, s.num_envs, s.device,
                        state_dim=spec.state_dim, agent_rewards=agents, generator_seeds=seeds)


def available_memory(device: torch.device) -> int:
    """Bytes that can still be allocated on ``device`` (MemAvailable for the CPU)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def replay_bytes(
    capacity: int, obs_shape: tuple[int, ...], action_shape: tuple[int, ...], num_envs: int,
    state_dim: int = 0, agent_rewards: int = 0,
) -> int:
    """Bytes a ``ReplayBuffer`` of these sizes allocates (float32 fields, bool flags, int64
    index), computed before allocating anything."""
    rows = math.ceil(capacity / num_envs) * num_envs
    per_row = 4 * (math.prod(obs_shape) + math.prod(action_shape) + 1 + state_dim + agent_rewards)
    return rows * (per_row + 2 + 8)


def check_buffer_memory(
    s: Settings, obs_shape: tuple[int, ...], action_shape: tuple[int, ...], state_dim: int = 0,
    agent_rewards: int = 0,
) -> None:
    """One line, before allocating, when the replay buffer cannot fit in the device's memory
    (it may take at most 90% of what is available now)."""
    need = replay_bytes(s.buffer_size, obs_shape, action_shape, s.num_envs, state_dim,
                        agent_rewards)
    have = available_memory(s.device)
    if need > 0.9 * have:
        raise UserError(
            f"algo.buffer_size={s.buffer_size} needs {need / 2**30:.2f} GiB on {s.device} but "
            f"only {have / 2**30:.2f} GiB are available; lower algo.buffer_size"
        )
