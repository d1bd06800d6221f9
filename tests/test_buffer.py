"""Replay buffer: each observation stored once, episode ends, ring eviction, exact resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlzoo.buffers import Batch, ReplayBuffer


def feed(buffer: ReplayBuffer, steps: list[tuple[float, bool, bool, bool]]) -> None:
    """Feed a one-env stream. Each step: (next observation value, terminated, truncated,
    reset_step). Observation values double as ids; rewards equal the next observation's id."""
    obs = np.array([[0.0]], dtype=np.float32)
    for value, term, trunc, reset in steps:
        nxt = np.array([[value]], dtype=np.float32)
        buffer.add(obs, np.array([[value * 10]]), np.array([value]), nxt, np.array([term]),
                   np.array([trunc]), np.array([reset]))
        obs = nxt


def all_transitions(buffer: ReplayBuffer) -> set[tuple[float, float, float]]:
    batch = buffer.sample(4000)
    return set(zip(batch.obs[:, 0].tolist(), batch.next_obs[:, 0].tolist(),
                   batch.discount.tolist()))


def test_episode_ends_and_reset_step_never_sampled() -> None:
    buffer = ReplayBuffer(100, (1,), (1,), 1)
    # episode 1: 0 -> 1 -> 2 (terminated at 2); reset step -> 5; 5 -> 6 (truncated at 6); reset -> 9
    feed(buffer, [(1, False, False, False), (2, True, False, False), (5, False, False, True),
                  (6, False, True, False), (9, False, False, True), (10, False, False, False)])
    assert len(buffer) == 4
    found = all_transitions(buffer)
    discounts = {(o, n): d for o, n, d in found}
    assert set(discounts) == {(0.0, 1.0), (1.0, 2.0), (5.0, 6.0), (9.0, 10.0)}
    assert discounts[(0.0, 1.0)] == pytest.approx(0.99)
    assert discounts[(1.0, 2.0)] == 0.0  # terminated: no bootstrap
    assert discounts[(5.0, 6.0)] == pytest.approx(0.99)  # truncated: bootstrap from final obs
    assert (2.0, 5.0) not in discounts and (6.0, 9.0) not in discounts


def test_observations_are_stored_once() -> None:
    buffer = ReplayBuffer(1000, (7,), (2,), 1)
    assert buffer.obs.shape == (1000, 1, 7)  # not 2x for next_obs
    expected = 1000 * 7 * 4 + 1000 * 2 * 4 + 1000 * 4 + 2 * 1000 + 1000 * 8
    assert buffer.nbytes == expected


def test_used_bytes_count_the_rows_written_until_the_ring_wraps() -> None:
    """summary.json's ``buffer_bytes.used``: the rows that hold data (one per step and the
    first observation's), all of them once the ring has wrapped; a checkpoint round-trip keeps
    the count."""
    buffer = ReplayBuffer(10, (3,), (2,), 1)
    row = buffer.nbytes // 10
    assert buffer.used_nbytes == 0
    obs = np.zeros((1, 3), np.float32)
    for value in range(1, 5):
        buffer.add(obs, np.zeros((1, 2)), np.array([value]), obs + value, np.array([False]),
                   np.array([False]), np.array([False]))
    assert buffer.used_nbytes == 5 * row  # 4 steps: rows 0-4
    loaded = ReplayBuffer(10, (3,), (2,), 1)
    loaded.load_state_dict(buffer.state_dict())
    assert loaded.used_nbytes == 5 * row
    for _ in range(20):
        buffer.add(obs, np.zeros((1, 2)), np.array([0.0]), obs, np.array([False]),
                   np.array([False]), np.array([False]))
    assert buffer.used_nbytes == buffer.nbytes


def test_ring_evicts_oldest_and_stays_uniform() -> None:
    buffer = ReplayBuffer(8, (1,), (1,), 1)
    feed(buffer, [(float(i), False, False, False) for i in range(1, 21)])
    # 8 rows: the newest observation (20) has no action yet, so 7 transitions: 13->14 .. 19->20
    assert len(buffer) == 7
    batch = buffer.sample(7000)
    starts, counts = np.unique(batch.obs[:, 0].numpy(), return_counts=True)
    assert starts.tolist() == [13, 14, 15, 16, 17, 18, 19]
    torch.testing.assert_close(batch.next_obs, batch.obs + 1)
    torch.testing.assert_close(batch.reward, batch.obs[:, 0] + 1)
    assert counts.min() > 850 and counts.max() < 1150  # ~1000 each


def test_vector_envs_columns_are_independent() -> None:
    buffer = ReplayBuffer(64, (1,), (1,), num_envs=2)
    obs = np.array([[0.0], [100.0]], dtype=np.float32)
    for t in range(1, 6):
        nxt = obs + 1
        term = np.array([t == 3, False])
        reset = np.array([t == 4, False])
        buffer.add(obs, np.zeros((2, 1)), nxt[:, 0], nxt, term, np.array([False, False]), reset)
        obs = nxt
    assert len(buffer) == 9  # 5 + 5 minus the reset step of env 0
    batch = buffer.sample(3000)
    pairs = set(zip(batch.obs[:, 0].tolist(), batch.next_obs[:, 0].tolist()))
    assert (3.0, 4.0) not in pairs  # env 0's reset step
    assert (2.0, 3.0) in pairs and (104.0, 105.0) in pairs
    assert all(n == o + 1 for o, n in pairs)


def test_batch_is_a_dataclass_on_device() -> None:
    buffer = ReplayBuffer(16, (3,), (2,), 1)
    feed_obs = np.zeros((1, 3), dtype=np.float32)
    for _ in range(3):
        buffer.add(feed_obs, np.ones((1, 2)), np.ones(1), feed_obs, np.zeros(1, bool),
                   np.zeros(1, bool), np.zeros(1, bool))
    batch = buffer.sample(5)
    assert isinstance(batch, Batch)
    assert batch.obs.shape == (5, 3) and batch.action.shape == (5, 2)
    assert batch.reward.shape == batch.discount.shape == batch.terminated.shape == (5,)
    assert batch.obs.device == torch.device("cpu") and batch.obs.dtype == torch.float32


def test_state_dict_round_trip_continues_identically() -> None:
    a = ReplayBuffer(32, (1,), (1,), 1, seed=3)
    feed(a, [(float(i), i % 7 == 0, False, i % 7 == 1 and i > 1) for i in range(1, 40)])
    b = ReplayBuffer(32, (1,), (1,), 1, seed=99)
    b.load_state_dict(a.state_dict())
    assert len(a) == len(b)
    for _ in range(3):
        ba, bb = a.sample(16), b.sample(16)
        torch.testing.assert_close(ba.obs, bb.obs)
        torch.testing.assert_close(ba.discount, bb.discount)
    with pytest.raises(ValueError, match="shape"):
        ReplayBuffer(32, (2,), (1,), 1).load_state_dict(a.state_dict())


def test_empty_buffer_refuses_to_sample() -> None:
    with pytest.raises(RuntimeError):
        ReplayBuffer(16, (1,), (1,), 1).sample(4)


def test_device_write_path_stores_what_the_cpu_path_stores() -> None:
    # On CPU, add() writes through numpy views; on CUDA (or for tensor inputs) it copies tensors
    # to the device. Both paths must store the same transitions.
    rng = np.random.default_rng(0)
    steps = [(rng.standard_normal((2, 3)), rng.uniform(-1, 1, (2, 2)), rng.standard_normal(2),
              rng.standard_normal((2, 3)), rng.random(2) < 0.3, np.zeros(2, bool),
              np.zeros(2, bool)) for _ in range(6)]
    numpy_path, device_path, tensor_inputs = (ReplayBuffer(20, (3,), (2,), 2) for _ in range(3))
    device_path._host = None  # the write path a CUDA buffer takes
    for obs, action, reward, next_obs, term, trunc, reset in steps:
        numpy_path.add(obs, action, reward, next_obs, term, trunc, reset)
        device_path.add(obs, action, reward, next_obs, term, trunc, reset)
        tensor_inputs.add(torch.as_tensor(obs), torch.as_tensor(action), torch.as_tensor(reward),
                          torch.as_tensor(next_obs), term, trunc, reset)
    for other in (device_path, tensor_inputs):
        for name in ("obs", "action", "reward", "terminated", "ended", "index"):
            assert torch.equal(getattr(numpy_path, name), getattr(other, name)), name
        assert len(other) == len(numpy_path) == 12
