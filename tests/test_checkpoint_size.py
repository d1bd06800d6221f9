"""Checkpoints are the size of the data, not of the replay buffer's capacity.

A replay buffer saves the rows it has written (all of them once the ring has wrapped) and the FIFO
slots it has pushed, so a checkpoint grows with the steps collected; loading it gives back the
same buffer bit for bit: every field (the rows never written are zero, as before), the counters,
the samples one-step, n-step and as H-step windows across the wrap, and what later ``add`` calls
store. Checkpoints written before (every row saved, no ``filled``) still load, and the buffer
then saves only the rows that hold data. The CLI cases resume runs whose rings wrapped, of one
seed and of a group of two."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY, run_cli
from one_buffer import OneBuffer as ReplayBuffer
from test_resume_split import assert_identical, final_checkpoint

from rlzoo.buffers.sampling import Sampling

FIXTURES = Path(__file__).parent / "fixtures" / "pre_one_loop"
SAMPLINGS = (Sampling(), Sampling(n_step=3, gamma=0.9), Sampling(horizon=4, gamma=0.9))


def make(capacity: int, num_envs: int, agents: int = 0, seed: int = 0) -> ReplayBuffer:
    """A buffer of ``obs [3]``, ``action [2]`` (or ``[agents, 3]`` / ``[agents, 2]`` with a
    global state of 5 and per-agent rewards)."""
    if agents:
        return ReplayBuffer(capacity, (agents, 3), (agents, 2), num_envs, state_dim=5,
                            agent_rewards=agents, seed=seed)
    return ReplayBuffer(capacity, (3,), (2,), num_envs, seed=seed)


def feed(buffer: ReplayBuffer, steps: int, seed: int) -> None:
    """``steps`` vector steps of random data with next-step autoreset: an episode ends
    (terminated or truncated) with probability 0.15 per step, and the env's next call is a
    reset call."""
    rng = np.random.default_rng(seed)
    E = buffer.num_envs
    obs_shape, act_shape = buffer.obs.shape[2:], buffer.action.shape[2:]
    state_dim = 0 if buffer.state is None else buffer.state.shape[2]
    agents = 0 if buffer.agent_reward is None else buffer.agent_reward.shape[2]
    obs = rng.standard_normal((E, *obs_shape)).astype(np.float32)
    state = rng.standard_normal((E, state_dim)).astype(np.float32) if state_dim else None
    resetting = np.zeros(E, bool)
    for _ in range(steps):
        nxt = rng.standard_normal((E, *obs_shape)).astype(np.float32)
        next_state = rng.standard_normal((E, state_dim)).astype(np.float32) if state_dim else None
        end = rng.random(E) < 0.15
        terminated = end & (rng.random(E) < 0.5) & ~resetting
        truncated = end & ~terminated & ~resetting
        buffer.add(obs, rng.uniform(-1, 1, (E, *act_shape)), rng.standard_normal(E), nxt,
                   terminated, truncated, resetting.copy(), state=state, next_state=next_state,
                   agent_reward=rng.standard_normal((E, agents)) if agents else None)
        resetting = terminated | truncated
        obs, state = nxt, next_state


def through_disk(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` after ``torch.save`` and ``torch.load(weights_only=True)``."""
    f = io.BytesIO()
    torch.save(state, f)
    f.seek(0)
    return torch.load(f, weights_only=True)


def saved_bytes(buffer: ReplayBuffer) -> int:
    f = io.BytesIO()
    torch.save(buffer.state_dict(), f)
    return f.tell()


def fields(buffer: ReplayBuffer) -> dict[str, Any]:
    """Every tensor, array and counter of ``buffer`` (the generator's state included)."""
    names = ("obs", "action", "reward", "terminated", "ended", "state", "agent_reward", "index")
    out: dict[str, Any] = {n: getattr(buffer, n) for n in names if getattr(buffer, n) is not None}
    out.update(row_count=buffer.row_count, generator=buffer.generator.get_state(),
               counters=(buffer.ptr, buffer.head, buffer.tail, buffer.started, buffer.filled))
    return out


def assert_same_buffer(a: ReplayBuffer, b: ReplayBuffer) -> None:
    """Bit for bit the same contents, counters and generator, and the same next samples."""
    assert_identical(fields(a), fields(b), "buffer")
    for sampling in SAMPLINGS if a.agent_reward is None else SAMPLINGS[:2]:  # chunks: 1 agent
        x, y = a.sample(64, sampling), b.sample(64, sampling)
        for name in ("obs", "action", "reward", "next_obs", "discount", "state", "agent_reward",
                     "action_mask"):
            assert_identical(getattr(x, name), getattr(y, name), f"{sampling}.{name}")


def old_format(buffer: ReplayBuffer) -> dict[str, Any]:
    """What ``ReplayBuffer.state_dict`` returned before checkpoints were sized by the data
    (commit 1ed7481): every row of every field, the whole FIFO, no ``filled``."""
    tensors = {n: getattr(buffer, n).clone() for n in
               ("obs", "action", "reward", "terminated", "ended", "index")}
    for n in ("state", "agent_reward"):
        if getattr(buffer, n) is not None:
            tensors[n] = getattr(buffer, n).clone()
    return {"tensors": tensors, "row_count": torch.as_tensor(buffer.row_count.copy()),
            "ptr": buffer.ptr, "head": buffer.head, "tail": buffer.tail,
            "started": buffer.started, "generator": buffer.generator.get_state()}


# ----------------------------------------------------------------------------- size


def tensor_bytes(state: dict[str, Any]) -> int:
    """Bytes of the tensors of a buffer's ``state_dict`` (what ``torch.save`` must write)."""
    tensors = [*state["tensors"].values(), state["row_count"], state["generator"]]
    return sum(t.untyped_storage().nbytes() for t in tensors)


def test_saved_rows_and_bytes_follow_the_steps_not_the_capacity() -> None:
    capacity, E = 100_000, 2
    row_bytes = E * (3 * 4 + 2 * 4 + 4 + 1 + 1) + 8  # obs, action, reward, 2 flags; row count
    sizes = {}
    for steps in (10, 110):
        buffer = make(capacity, E)
        feed(buffer, steps, seed=1)
        state = buffer.state_dict()
        assert state["filled"] == steps + 1  # rows 0..steps: the last holds the newest obs
        assert state["tensors"]["obs"].shape == (steps + 1, E, 3)
        assert state["tensors"]["index"].shape == (len(buffer),)  # no start was evicted yet
        assert state["row_count"].shape == (steps + 1,)
        data = (steps + 1) * row_bytes + 8 * len(buffer)  # and 8 bytes per FIFO slot
        assert tensor_bytes(state) - state["generator"].numel() == data
        sizes[steps] = saved_bytes(buffer)
        assert data <= sizes[steps] < data + 10_000
    assert sizes[110] < capacity // E * row_bytes / 100  # the capacity is 450x these rows


def test_a_wrapped_ring_saves_every_row_once() -> None:
    buffer = make(100, 2)
    feed(buffer, 173, seed=2)  # 50 rows: wrapped three times, write head at row 23
    state = buffer.state_dict()
    assert buffer.ptr == 23 and state["filled"] == 50
    assert state["tensors"]["obs"].shape == (50, 2, 3)
    assert state["tensors"]["index"].shape == (100,)
    assert tensor_bytes(state) <= saved_bytes(buffer) < tensor_bytes(state) + 10_000


# ----------------------------------------------------------------------------- exact resume


@pytest.mark.parametrize(("capacity", "num_envs", "agents", "steps"), [
    (64, 1, 0, 20),  # not wrapped
    (64, 1, 0, 211),  # wrapped three times, head mid-ring
    (60, 3, 0, 97),  # 20 rows x 3 envs, wrapped
    (40, 2, 3, 131),  # multi-agent: per-agent obs, global state, agent rewards; wrapped
])
def test_round_trip_is_bit_exact_and_continues_identically(
    capacity: int, num_envs: int, agents: int, steps: int
) -> None:
    a = make(capacity, num_envs, agents, seed=3)
    feed(a, steps, seed=4)
    b = make(capacity, num_envs, agents, seed=99)
    b.load_state_dict(through_disk(a.state_dict()))
    assert_same_buffer(a, b)
    feed(a, 37, seed=5)  # both continue the same way (37 steps: the ring wraps again)
    feed(b, 37, seed=5)
    assert_same_buffer(a, b)


def test_loading_into_a_used_buffer_clears_the_rows_it_wrote_beyond_the_checkpoint() -> None:
    a = make(200, 1, seed=3)
    feed(a, 30, seed=4)
    b = make(200, 1, seed=3)
    feed(b, 150, seed=6)
    b.load_state_dict(through_disk(a.state_dict()))
    assert_same_buffer(a, b)


def test_loading_another_buffers_state_copies_it() -> None:
    a = make(40, 2, seed=3)
    feed(a, 47, seed=4)  # full: its state_dict shares its memory, whole fields included
    b = make(40, 2, seed=3)
    b.load_state_dict(a.state_dict())
    before = fields(b)
    before = {k: v.clone() if torch.is_tensor(v) else np.copy(v) if isinstance(v, np.ndarray)
              else v for k, v in before.items()}
    feed(a, 9, seed=5)
    assert_identical(fields(b), before, "buffer")  # untouched by a's writes


def test_a_checkpoint_of_another_shape_is_refused() -> None:
    a = make(64, 1)
    feed(a, 20, seed=1)
    with pytest.raises(ValueError, match="shape"):
        ReplayBuffer(64, (4,), (2,), 1).load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="rows"):  # a checkpoint of a larger ring
        big = make(400, 1)
        feed(big, 150, seed=1)
        a.load_state_dict(big.state_dict())


# ----------------------------------------------------------------------------- old checkpoints


@pytest.mark.parametrize(("capacity", "steps"), [(300, 40), (300, 40 + 300 * 2), (50, 31)])
def test_old_full_size_checkpoints_load_exactly_and_shrink(capacity: int, steps: int) -> None:
    a = make(capacity, 1, seed=3)
    feed(a, steps, seed=4)
    b = make(capacity, 1, seed=7)
    b.load_state_dict(through_disk(old_format(a)))
    assert b.filled == a.filled == min(steps + 1, capacity)
    assert_same_buffer(a, b)
    assert b.state_dict()["tensors"]["obs"].shape[0] == a.filled


@pytest.mark.parametrize(("name", "step"), [("sac", 250), ("sac_chunk", 252), ("maddpg", 137)])
def test_fixture_buffers_load_every_row_and_resave_only_the_written_ones(
    name: str, step: int
) -> None:
    path = FIXTURES / name / "checkpoints" / f"step_{step:010d}.pt"
    saved = torch.load(path, weights_only=True)["buffer"]
    full = saved["tensors"]
    T, E = full["obs"].shape[:2]
    multi = "state" in full
    buffer = ReplayBuffer(T * E, tuple(full["obs"].shape[2:]), tuple(full["action"].shape[2:]),
                          E, state_dim=full["state"].shape[2] if multi else 0,
                          agent_rewards=full["agent_reward"].shape[2] if multi else 0)
    buffer.load_state_dict(saved)
    assert buffer.filled == saved["ptr"] + 1  # none of these rings had wrapped
    for key, tensor in full.items():
        assert torch.equal(getattr(buffer, key), tensor), key
    assert np.array_equal(buffer.row_count, saved["row_count"].numpy())
    resaved = buffer.state_dict()
    assert resaved["tensors"]["obs"].shape[0] == saved["ptr"] + 1
    assert resaved["tensors"]["index"].shape[0] == saved["head"]


# ----------------------------------------------------------------------------- the CLI

COMMON = ["algo.learning_starts=40", "algo.batch_size=16", "algo.buffer_size=120",
          "eval.every=0", "eval.episodes=1", "checkpoint.every=0", "log.every=50",
          "log.progress=false", "seed=5", *TINY]
WRAPPED = ["env=Pendulum", "algo=sac", *COMMON]  # 200-step episodes, a ring of 120 rows


def test_cli_checkpoint_grows_with_the_steps(tmp_path: Path) -> None:
    sizes, rows, starts = {}, {}, {}
    for steps in (150, 450):
        run_dir = tmp_path / f"s{steps}"
        proc = run_cli(["env=Pendulum", "algo=sac", f"total_steps={steps}", "eval.every=0",
                        "eval.episodes=1", "checkpoint.every=0", "log.progress=false", *TINY],
                       run_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (path,) = (run_dir / "checkpoints").glob("step_*.pt")
        sizes[steps] = path.stat().st_size
        buffer = final_checkpoint(run_dir)["members"][0]["buffer"]
        rows[steps], starts[steps] = buffer["filled"], buffer["head"]
        assert starts[steps] == steps  # every step a transition start, none evicted
        assert rows[steps] == steps + 1 + steps // 200  # + 1 reset call per 200-step episode
        assert buffer["tensors"]["obs"].shape == (rows[steps], 1, 3)
    # Pendulum: obs 3, action 1, reward and 2 flags are 22 bytes a row, its row count 8 and a
    # FIFO slot 8 a transition; the default buffer_size (1M steps) would be 38 MB
    grown = 30 * (rows[450] - rows[150]) + 8 * (starts[450] - starts[150])
    assert grown <= sizes[450] - sizes[150] < grown + 1_000
    assert sizes[450] < 500_000


@pytest.mark.parametrize(("args", "k", "n"), [
    # 4-step action chunks (windows across the wrap), 60 rows x 2 envs; vector step 141 is
    # mid-episode and mid-chunk
    ([*WRAPPED, "critic=action_sequence", "num_envs=2"], 282, 460),
    # per-agent obs, global state, agent rewards; MPE episodes are 25 steps
    (["env=mpe/simple_spread", "algo=maddpg", *COMMON], 137, 260),
], ids=["sac-action_sequence-2envs", "maddpg-mpe"])
@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_resume_after_the_ring_wrapped_is_bit_identical(
    tmp_path: Path, args: list[str], k: int, n: int
) -> None:
    straight, split = tmp_path / "straight", tmp_path / "split"
    for run_dir, steps in ((straight, n), (split, k)):
        proc = run_cli([*args, f"total_steps={steps}"], run_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
    stopped = final_checkpoint(split)["members"][0]["buffer"]
    assert stopped["head"] > 120 and stopped["filled"] == stopped["tensors"]["obs"].shape[0]
    proc = run_cli([f"resume={split}", f"total_steps={n}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    want, got = final_checkpoint(straight), final_checkpoint(split)
    assert want["algo"]["updates"] > 0
    for key in ("algo", "members", "counters", "rng"):  # one layout: buffer, env, loop per seed
        assert_identical(want[key], got[key], key)


@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_resume_of_a_wrapped_seed_group_is_bit_identical(tmp_path: Path) -> None:
    args = [*WRAPPED, "seeds=2", "algo.n_step=3"]  # 3-step windows across the wrap
    straight, split = tmp_path / "straight-s5", tmp_path / "split-s5"
    for run_dir, steps in ((straight, 330), (split, 187)):
        proc = run_cli([*args, f"total_steps={steps}"], run_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
    for member in final_checkpoint(split)["members"]:  # each seed's own ring, wrapped
        buffer = member["buffer"]
        assert buffer["filled"] == 120 and buffer["tensors"]["obs"].shape == (120, 1, 3)
    proc = run_cli([f"resume={split}", "total_steps=330"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    want, got = final_checkpoint(straight), final_checkpoint(split)
    for key in ("algo", "members", "counters", "rng"):
        assert_identical(want[key], got[key], key)
