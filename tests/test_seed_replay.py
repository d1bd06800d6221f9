"""The seed axis through the replay: one storage ``[K, T, E, ...]``, one add and one sample call
for every seed, each seed's slice bit for bit what a buffer of its own (a single run's, K = 1)
stores and samples, checkpoints included."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from one_buffer import OneBuffer

from rlzoo.buffers.replay import ReplayBuffer
from rlzoo.buffers.rollout import RolloutBuffer
from rlzoo.buffers.sampling import Sampling

K, E, STEPS = 3, 2, 40


def stream(seed: int, steps: int = STEPS, agents: int = 0) -> list[dict[str, np.ndarray]]:
    """One seed's vector steps with episode ends and reset calls where they fall."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(E, 4)).astype(np.float32)
    out, pending = [], np.zeros(E, dtype=bool)
    for _ in range(steps):
        nxt = rng.normal(size=(E, 4)).astype(np.float32)
        term = (rng.random(E) < 0.1) & ~pending
        trunc = (rng.random(E) < 0.1) & ~pending & ~term
        step = {"obs": obs, "action": rng.uniform(-1, 1, (E, 2)).astype(np.float32),
                "reward": rng.normal(size=E).astype(np.float32), "next_obs": nxt,
                "terminated": term, "truncated": trunc, "reset_step": pending.copy()}
        if agents:
            step["state"] = obs[:, :3].copy()
            step["next_state"] = nxt[:, :3].copy()
            step["agent_reward"] = rng.normal(size=(E, agents)).astype(np.float32)
        out.append(step)
        pending = term | trunc
        obs = nxt
    return out


def stacked(steps: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.stack([s[key] for s in steps]) for key in steps[0]}


@pytest.mark.parametrize("sampling", [Sampling(), Sampling(n_step=3, gamma=0.9),
                                      Sampling(horizon=4, gamma=0.8)], ids=["1", "n3", "h4"])
@pytest.mark.parametrize("agents", [0, 2])
@pytest.mark.parametrize("host", [True, False], ids=["numpy-writes", "device-writes"])
def test_each_seeds_slice_is_its_own_buffers(sampling: Sampling, agents: int,
                                             host: bool) -> None:
    """A group of K seeds fed K streams (capacity small enough that the ring wraps) stores and
    samples, seed by seed, exactly what K separate buffers do; one sample call, ``[K, B, ...]``.
    Also through the write path a CUDA replay takes (tensor copies, not numpy views)."""
    seeds = [4, 5, 6]
    extra = {"state_dim": 3, "agent_rewards": agents} if agents else {}
    group = ReplayBuffer(30, (4,), (2,), E, generator_seeds=seeds, **extra)
    if not host:
        group._host = None
    alone = [OneBuffer(30, (4,), (2,), E, seed=s, **extra) for s in seeds]
    streams = [stream(s, agents=agents) for s in seeds]
    for t in range(STEPS):
        group.add(**stacked([streams[k][t] for k in range(K)]))
        for buf, steps in zip(alone, streams):
            buf.add(**steps[t])
    for _ in range(3):
        batch = group.sample(64, sampling)
        for k, buf in enumerate(alone):
            want = buf.sample(64, sampling)
            for name, value in want.tensors().items():
                got = getattr(batch, name)
                assert got.shape == (K, *value.shape), name
                assert torch.equal(got[k], value), (k, name)
    for k, buf in enumerate(alone):  # the checkpoint of a seed is its single buffer's
        mine, theirs = group.state_dict(k), buf.state_dict()
        assert mine.keys() == theirs.keys()
        for key in ("ptr", "head", "tail", "started", "filled"):
            assert mine[key] == theirs[key], key
        for name, value in theirs["tensors"].items():
            assert torch.equal(mine["tensors"][name], value), name


def test_seeds_at_other_rows_are_stored_one_by_one() -> None:
    """A seed that stopped (it reached total_steps) and seeds added alone still give each seed
    its own buffer's contents; a checkpoint of one buffer loads into its slice of the storage
    and leaves the others alone."""
    seeds = [0, 1]
    group = ReplayBuffer(30, (4,), (2,), E, generator_seeds=seeds)
    alone = [OneBuffer(30, (4,), (2,), E, seed=s) for s in seeds]
    streams = [stream(s) for s in seeds]
    for t in range(STEPS):
        live = np.array([0, 1]) if t < 10 or t >= 20 else np.array([1])
        group.add(**stacked([streams[k][t] for k in live]), which=live)
        for k in live:
            alone[k].add(**streams[k][t])
    assert group.ptr[0] != group.ptr[1]
    batch = group.sample(32)
    for k in range(2):
        assert torch.equal(batch.obs[k], alone[k].sample(32).obs)
    # load seed 1's state into seed 0: copied into the storage, seed 1's slice untouched
    storage, before = group.obs, group.obs[1].clone()
    group.load_state_dict(alone[1].state_dict(), 0)
    assert group.obs is storage and torch.equal(group.obs[0], group.obs[1])
    assert torch.equal(group.obs[1], before) and group.ptr[0] == group.ptr[1]
    batch = group.sample(32)  # the same contents and sampling generator: the same draws
    assert torch.equal(batch.obs[0], batch.obs[1])


def test_every_seeds_part_is_checked_against_one_buffer_before_any_is_loaded() -> None:
    """A resume checks all K parts of the storage before it loads one (``check_states``): a part
    of another dtype or shape than one buffer's, parts for another K, or (rollouts, which fill
    together) a part at another row than the first's is refused in one line, naming it."""
    group = ReplayBuffer(30, (4,), (2,), E, generator_seeds=[0, 1])
    for t, steps in enumerate(zip(stream(0), stream(1))):
        if t == 12:
            break
        group.add(**stacked(list(steps)))
    parts = [group.state_dict(k) for k in range(2)]
    group.check_states(parts)  # its own parts fit
    cast = {**parts[1], "tensors": {**parts[1]["tensors"],
                                    "obs": parts[1]["tensors"]["obs"].double()}}
    with pytest.raises(ValueError, match="tensors.obs is a float64 tensor"):
        group.check_states([parts[0], cast])
    with pytest.raises(ValueError, match="1 replay buffer states for 2 buffers"):
        group.check_states(parts[:1])
    with pytest.raises(ValueError, match=r"tensors.obs has shape \[2, 12, 2, 4\]"):  # K kept
        group.check_states([{**parts[0], "tensors": {
            **parts[0]["tensors"], "obs": group.obs[:, :12].clone()}}, parts[1]])

    rollouts = RolloutBuffer(3, num_envs=E, obs_shape=(4,), action_shape=(2,), num_buffers=2)
    steps = stream(2, steps=2)
    for step in steps:
        rollouts.add(**stacked([step, step]), pre_tanh=np.zeros((2, E, 2), np.float32))
    saved = [rollouts.state_dict(k) for k in range(2)]
    rollouts.check_states(saved)
    with pytest.raises(ValueError, match="rollout 1 is at ptr=1 .* they fill together"):
        rollouts.check_states([saved[0], {**saved[1], "ptr": 1}])
    with pytest.raises(ValueError, match="rollout tensors.reward is a float64 tensor"):
        rollouts.check_states([saved[0], {**saved[1], "tensors": {
            **saved[1]["tensors"], "reward": saved[1]["tensors"]["reward"].double()}}])
