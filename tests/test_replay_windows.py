"""n-step and H-step window sampling of ReplayBuffer on hand-built episodes.

Observations carry their own id (a scalar), so every sampled row says which start it came from
and the expected reward sum, discount, next observation, actions and mask are written out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from one_buffer import OneBuffer as ReplayBuffer

from rlzoo.buffers.sampling import Sampling

GAMMA = 0.5
RESET_ACTION = 99.0  # the action passed on a reset call; never part of a transition


def add(buf: ReplayBuffer, obs: float, action: float, reward: float, next_obs: float,
        terminated: bool = False, truncated: bool = False, reset: bool = False) -> None:
    buf.add(
        np.array([[obs]], np.float32), np.array([[action]], np.float32),
        np.array([reward], np.float32), np.array([[next_obs]], np.float32),
        np.array([terminated]), np.array([truncated]), np.array([reset]),
    )


def three_episodes(capacity: int = 32) -> ReplayBuffer:
    """Episode 1 (obs 0, 1, 2) terminates; episode 2 (obs 100, 101) is truncated; episode 3
    (obs 200, 201) is still running at the write head (obs 202). Rows 3 and 6 are reset calls."""
    buf = ReplayBuffer(capacity, (1,), (1,), num_envs=1, seed=0)
    add(buf, 0, 10, 1, 1)
    add(buf, 1, 11, 2, 2)
    add(buf, 2, 12, 3, 3, terminated=True)
    add(buf, 3, RESET_ACTION, 0, 100, reset=True)
    add(buf, 100, 20, 4, 101)
    add(buf, 101, 21, 5, 102, truncated=True)
    add(buf, 102, RESET_ACTION, 0, 200, reset=True)
    add(buf, 200, 30, 6, 201)
    add(buf, 201, 31, 7, 202)
    return buf


def by_start(batch, fields: tuple[str, ...]) -> dict[float, tuple]:
    """Map each sampled start observation to the tuple of its fields (checking consistency)."""
    seen: dict[float, tuple] = {}
    for i, start in enumerate(batch.obs[:, 0].tolist()):
        row = tuple(
            tuple(getattr(batch, f)[i].reshape(-1).tolist()) for f in fields
        )
        assert seen.setdefault(start, row) == row, (start, seen[start], row)
    return seen


# start obs -> (reward sum, discount, next obs, terminated) for n = 3, gamma = 0.5
EXPECTED_3_STEP = {
    0.0: (1 + 0.5 * 2 + 0.25 * 3, 0.0, 3.0, 1.0),    # runs into the termination: no bootstrap
    1.0: (2 + 0.5 * 3, 0.0, 3.0, 1.0),
    2.0: (3.0, 0.0, 3.0, 1.0),
    100.0: (4 + 0.5 * 5, 0.25, 102.0, 0.0),          # truncated after 2 steps: bootstrap gamma^2
    101.0: (5.0, 0.5, 102.0, 0.0),
    200.0: (6 + 0.5 * 7, 0.25, 202.0, 0.0),          # cut at the write head after 2 steps
    201.0: (7.0, 0.5, 202.0, 0.0),
}


def test_n_step_windows_stop_at_episode_ends_and_the_write_head() -> None:
    buf = three_episodes()
    assert len(buf) == 7
    batch = buf.sample(2048, Sampling(n_step=3, gamma=GAMMA))
    assert batch.action_mask is None and batch.action.shape == (2048, 1)
    seen = by_start(batch, ("reward", "discount", "next_obs", "terminated", "action"))
    assert set(seen) == set(EXPECTED_3_STEP)  # reset rows (obs 3, 102) are never starts
    for start, (reward, discount, next_obs, terminated) in EXPECTED_3_STEP.items():
        got = seen[start]
        assert got[0][0] == pytest.approx(reward), start
        assert got[1][0] == pytest.approx(discount), start
        assert got[2][0] == next_obs, start
        assert got[3][0] == terminated, start
        assert got[4][0] != RESET_ACTION


def test_one_step_sampling_is_the_transition_itself() -> None:
    buf = three_episodes()
    seen = by_start(buf.sample(2048, Sampling(gamma=GAMMA)), ("reward", "discount", "next_obs"))
    assert seen[2.0] == ((3.0,), (0.0,), (3.0,))      # terminated: discount 0
    assert seen[101.0] == ((5.0,), (0.5,), (102.0,))  # truncated: bootstrap from final obs
    assert seen[201.0] == ((7.0,), (0.5,), (202.0,))


def test_action_chunks_are_masked_after_episode_ends_and_never_reach_the_head() -> None:
    buf = three_episodes()
    batch = buf.sample(2048, Sampling(gamma=GAMMA, horizon=3))
    assert batch.action.shape == (2048, 3) and batch.action_mask.shape == (2048, 3)
    seen = by_start(batch, ("action", "action_mask", "reward", "discount", "next_obs"))
    # obs 200 and 201 would need rows past the write head: never sampled as chunk starts.
    assert set(seen) == {0.0, 1.0, 2.0, 100.0, 101.0}
    expected_chunks = {
        0.0: ((10.0, 11.0, 12.0), (1.0, 1.0, 1.0)),
        1.0: ((11.0, 12.0, 0.0), (1.0, 1.0, 0.0)),   # zeroed after the termination
        2.0: ((12.0, 0.0, 0.0), (1.0, 0.0, 0.0)),
        100.0: ((20.0, 21.0, 0.0), (1.0, 1.0, 0.0)),  # zeroed after the truncation
        101.0: ((21.0, 0.0, 0.0), (1.0, 0.0, 0.0)),
    }
    for start, (actions, mask) in expected_chunks.items():
        reward, discount, next_obs, _ = EXPECTED_3_STEP[start]
        assert seen[start][0] == actions and seen[start][1] == mask, start
        assert seen[start][2][0] == pytest.approx(reward)
        assert seen[start][3][0] == pytest.approx(discount)
        assert seen[start][4][0] == next_obs


def test_windows_never_cross_the_write_head_of_a_wrapped_ring() -> None:
    # 6 rows. A first short episode, then one long episode (obs t, action t, reward t) whose
    # 10 steps wrap the ring: the row at the write head still holds step 4's reward.
    buf = ReplayBuffer(6, (1,), (1,), num_envs=1, seed=0)
    add(buf, -2, 0, 1000, -1, terminated=True)
    add(buf, -1, RESET_ACTION, 0, 0, reset=True)
    for t in range(10):
        add(buf, t, t, t, t + 1)
    # Newest observation is 10 at row ptr; the other rows hold obs 5..9 as transition starts.
    assert buf.obs[buf.ptr, 0, 0].item() == 10.0
    assert len(buf) == 5
    seen = by_start(buf.sample(2048, Sampling(n_step=4, gamma=GAMMA)),
                    ("reward", "discount", "next_obs", "terminated"))
    assert set(seen) == {5.0, 6.0, 7.0, 8.0, 9.0}
    for start, got in seen.items():
        k = min(4, int(10 - start))  # steps before the head
        reward = sum(GAMMA**j * (start + j) for j in range(k))
        assert got[0][0] == pytest.approx(reward), start
        assert got[1][0] == pytest.approx(GAMMA**k), start
        assert got[2][0] == start + k and got[3][0] == 0.0, start
    chunks = by_start(buf.sample(2048, Sampling(gamma=GAMMA, horizon=4)), ("action", "action_mask"))
    assert set(chunks) == {5.0, 6.0}  # starts 7, 8, 9 would reach the head
    assert chunks[5.0] == ((5.0, 6.0, 7.0, 8.0), (1.0,) * 4)
    assert chunks[6.0] == ((6.0, 7.0, 8.0, 9.0), (1.0,) * 4)


def test_windows_follow_each_env_column() -> None:
    # Two envs: env 0 terminates after its 2nd step, env 1 runs on; obs = 10 * env + t.
    buf = ReplayBuffer(16, (1,), (1,), num_envs=2, seed=0)
    steps = [  # (obs, reward, next_obs, terminated, reset) per env
        ((0, 1, 1, False, False), (10, 1, 11, False, False)),
        ((1, 2, 2, True, False), (11, 2, 12, False, False)),
        ((2, 0, 5, False, True), (12, 3, 13, False, False)),
        ((5, 4, 6, False, False), (13, 4, 14, False, False)),
        ((6, 5, 7, False, False), (14, 5, 15, False, False)),
    ]
    for step in steps:
        obs, reward, nxt, term, reset = (np.array(v) for v in zip(*step))
        buf.add(obs[:, None].astype(np.float32), obs[:, None].astype(np.float32),
                reward.astype(np.float32), nxt[:, None].astype(np.float32), term,
                np.zeros(2, bool), reset)
    seen = by_start(buf.sample(4096, Sampling(gamma=GAMMA, horizon=3)),
                    ("action", "action_mask", "reward", "discount", "next_obs"))
    assert set(seen) == {0.0, 1.0, 10.0, 11.0, 12.0}
    assert seen[0.0] == ((0.0, 1.0, 0.0), (1.0, 1.0, 0.0), (1 + 0.5 * 2,), (0.0,), (2.0,))
    assert seen[1.0] == ((1.0, 0.0, 0.0), (1.0, 0.0, 0.0), (2.0,), (0.0,), (2.0,))
    assert seen[11.0] == ((11.0, 12.0, 13.0), (1.0,) * 3, (2 + 0.5 * 3 + 0.25 * 4,),
                          (0.125,), (14.0,))


def test_sampling_is_uniform_over_valid_starts() -> None:
    buf = three_episodes()
    starts = buf.sample(70_000, Sampling(n_step=3, gamma=GAMMA)).obs[:, 0]
    counts = torch.stack([(starts == s).sum() for s in EXPECTED_3_STEP]).float()
    assert torch.allclose(counts / counts.sum(), torch.full((7,), 1 / 7), atol=0.01)
