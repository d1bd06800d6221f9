"""Tests for rlzoo.envs.pettingzoo (PettingZoo parallel envs -> arrays [E, N, ...])."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from rlzoo.envs.base import StepResult
from rlzoo.envs.gym import SingleAgentVecEnv
from rlzoo.envs.pettingzoo import MultiAgentVecEnv, make_multi_agent_env
from rlzoo.envs.snapshot import plain_scalar, restore_arrays
from rlzoo.store.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint

mpe2 = pytest.importorskip("mpe2")
mamujoco_v1 = pytest.importorskip("gymnasium_robotics").mamujoco_v1


# ------------------------------------------------------------------------------------ helpers


def _to_space(a: np.ndarray, space) -> np.ndarray:
    """The documented mapping, written independently: [-1, 1] -> [low, high] in the space dtype."""
    low = np.asarray(space.low, dtype=np.float64)
    high = np.asarray(space.high, dtype=np.float64)
    a = np.clip(np.asarray(a, dtype=np.float64), -1.0, 1.0)
    return (low + (a + 1.0) * 0.5 * (high - low)).astype(space.dtype)


def _raw_step(raw, agents: list[str], act_row: np.ndarray, act_dims: list[int]):
    """Step a raw parallel env with one padded action row [N, act_dim]; return arrays."""
    actions = {
        agent: _to_space(act_row[i, : act_dims[i]], raw.action_space(agent))
        for i, agent in enumerate(agents)
    }
    obs, rew, term, trunc, _ = raw.step(actions)
    return (
        [np.asarray(obs[a], dtype=np.float32) for a in agents],
        np.asarray(raw.state(), dtype=np.float32),
        np.array([rew[a] for a in agents], dtype=np.float32),
        any(term.values()),
        any(trunc.values()),
    )


def _run(env: MultiAgentVecEnv, actions: np.ndarray) -> list[StepResult]:
    return [env.step(a) for a in actions]


def _assert_same_results(r1: list[StepResult], r2: list[StepResult]) -> None:
    assert len(r1) == len(r2)
    for t, (a, b) in enumerate(zip(r1, r2, strict=True)):
        for field in ("obs", "state", "reward", "agent_reward", "terminated", "truncated",
                      "reset_step"):
            x, y = getattr(a, field), getattr(b, field)
            assert x.dtype == y.dtype, (t, field)
            assert np.array_equal(x, y), f"step {t}: {field} differs"


def _assert_same_plain(a, b, path: str = "state") -> None:
    """Equal plain data, type for type: numpy arrays of the same dtype, never tensors."""
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _assert_same_plain(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same_plain(x, y, f"{path}[{i}]")
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and a.shape == b.shape, (path, a.dtype, b.dtype)
        assert np.array_equal(a, b), path
    else:
        assert a == b, path


def _checkpoint_round_trip(state: dict, directory) -> dict:
    """What resume does to env state: to_plain (arrays -> tensors), torch.save, torch.load."""
    path = checkpoint_path(directory, 1)
    save_checkpoint(path, {"format": 1, "env": state})
    return load_checkpoint(path)["env"]


def _random_actions(env: MultiAgentVecEnv, steps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (steps, env.num_envs, env.n_agents, env.act_dim)).astype(np.float32)


def _is_plain(x) -> bool:
    if isinstance(x, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return all(_is_plain(v) for v in x)
    return x is None or isinstance(x, (bool, int, float, str, np.ndarray, np.generic))


# ------------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize(
    "family, scenario, kwargs, raw_fn, steps",
    [
        (
            "mpe",
            "simple_spread_v3",
            {"max_cycles": 30},
            lambda: mpe2.simple_spread_v3.parallel_env(continuous_actions=True, max_cycles=30),
            30,
        ),
        (
            "mamujoco",
            "HalfCheetah",
            {"agent_conf": "2x3"},
            lambda: mamujoco_v1.parallel_env("HalfCheetah", "2x3"),
            40,
        ),
    ],
    ids=["mpe-simple_spread", "mamujoco-HalfCheetah-2x3"],
)
def test_round_trip_matches_raw_pettingzoo(family, scenario, kwargs, raw_fn, steps):
    seed = 7
    env = make_multi_agent_env(family, scenario, num_envs=2, seed=seed, **kwargs)
    raws = [raw_fn(), raw_fn()]
    agents = list(raws[0].possible_agents)
    assert env.agent_ids == agents
    assert env.act_dims == [raws[0].action_space(a).shape[0] for a in agents]
    assert env.obs_dims == [raws[0].observation_space(a).shape[0] for a in agents]

    obs, state = env.reset()  # no seed: uses the constructor's seed, env e gets seed + e
    assert obs.shape == (2, env.n_agents, env.obs_dim) and obs.dtype == np.float32
    assert state.shape == (2, env.state_dim) and state.dtype == np.float32
    for e, raw in enumerate(raws):
        raw_obs, _ = raw.reset(seed=seed + e)
        for i, a in enumerate(agents):
            np.testing.assert_array_equal(obs[e, i], np.asarray(raw_obs[a], dtype=np.float32))
        np.testing.assert_array_equal(state[e], np.asarray(raw.state(), dtype=np.float32))
    assert not np.array_equal(obs[0], obs[1])  # the two columns are seeded differently

    actions = _random_actions(env, steps, seed=1)
    for t in range(steps):
        res = env.step(actions[t])
        assert not res.reset_step.any()
        for e, raw in enumerate(raws):
            r_obs, r_state, r_rew, r_term, r_trunc = _raw_step(
                raw, agents, actions[t, e], env.act_dims
            )
            for i in range(env.n_agents):
                np.testing.assert_array_equal(res.obs[e, i], r_obs[i], err_msg=f"t={t} e={e}")
            np.testing.assert_array_equal(res.state[e], r_state)
            np.testing.assert_array_equal(res.agent_reward[e], r_rew)
            assert res.terminated[e] == r_term
            assert res.truncated[e] == (r_trunc and not r_term)
        # the team reward is the env's own output: the mean over agents, per env
        np.testing.assert_array_equal(res.reward, res.agent_reward.mean(axis=1))
        assert res.reward.shape == (env.num_envs,) and res.reward.dtype == np.float32
    if family == "mpe":  # max_cycles reached on the last step
        assert res.truncated.all() and not res.terminated.any()


def test_global_state_sizes():
    env = make_multi_agent_env("mpe", "simple_spread_v3")
    assert (env.n_agents, env.obs_dim, env.act_dim, env.state_dim) == (3, 18, 5, 54)
    assert env.max_episode_steps == 25
    env = make_multi_agent_env("mamujoco", "HalfCheetah", agent_conf="2x3")
    assert (env.n_agents, env.obs_dim, env.act_dim, env.state_dim) == (2, 12, 3, 17)
    assert env.max_episode_steps == 1000
    _, state = env.reset()
    assert state.shape == (1, 17)


# ------------------------------------------------------------------------------------ padding


def test_padding_and_masks_hopper_3x1():
    env = make_multi_agent_env("mamujoco", "Hopper", num_envs=2, seed=3, agent_conf="3x1")
    assert env.obs_dims == [8, 9, 8] and env.act_dims == [1, 1, 1]
    assert env.obs_dim == 9 and env.act_dim == 1
    assert env.obs_mask.shape == (3, 9) and env.obs_mask.dtype == bool
    assert env.obs_mask.sum(axis=1).tolist() == env.obs_dims
    for i, d in enumerate(env.obs_dims):
        assert env.obs_mask[i, :d].all() and not env.obs_mask[i, d:].any()
    assert env.act_mask.shape == (3, 1) and env.act_mask.all()

    obs, _ = env.reset()
    assert np.all(obs[:, ~env.obs_mask] == 0)
    assert np.all(obs[:, env.obs_mask] != 0)  # real entries of a fresh Hopper are non-zero
    for a in _random_actions(env, 15, seed=2):
        res = env.step(a)
        assert np.all(res.obs[:, ~env.obs_mask] == 0)
        assert np.any(res.obs[:, 1, 8] != 0)  # agent_1's 9th entry is real


@pytest.mark.parametrize(
    "family, scenario, kwargs, act_dims",
    [
        ("mpe", "simple_speaker_listener_v4", {}, [3, 5]),
        ("mamujoco", "Humanoid", {"agent_conf": "9|8"}, [9, 8]),
    ],
    ids=["mpe-speaker_listener", "mamujoco-Humanoid-9|8"],
)
def test_action_padding_is_ignored(family, scenario, kwargs, act_dims):
    envs = [make_multi_agent_env(family, scenario, num_envs=2, seed=5, **kwargs) for _ in range(2)]
    env = envs[0]
    assert env.act_dims == act_dims and env.act_dim == max(act_dims)
    assert env.act_mask.sum(axis=1).tolist() == act_dims
    assert np.all(env.obs_mask.sum(axis=1) == np.array(env.obs_dims))
    for e in envs:
        e.reset()
    actions = _random_actions(env, 6, seed=4)
    garbage = actions.copy()
    garbage[:, :, ~env.act_mask] = np.float32(0.77)
    garbage[0, 0, ~env.act_mask] = np.nan
    zeros = actions.copy()
    zeros[:, :, ~env.act_mask] = 0.0
    assert not np.array_equal(garbage, zeros)
    r_garbage, r_zeros = _run(envs[0], garbage), _run(envs[1], zeros)
    _assert_same_results(r_garbage, r_zeros)
    for r in r_garbage:
        assert np.all(r.obs[:, ~env.obs_mask] == 0)


# ------------------------------------------------------------------------------------ actions


def _spy_actions(env: MultiAgentVecEnv) -> list[dict]:
    """Record the action dicts the adapter hands to its first raw env."""
    raw = env._envs[0]
    calls: list[dict] = []
    original = raw.step

    def step(actions):
        calls.append({k: np.array(v, copy=True) for k, v in actions.items()})
        return original(actions)

    raw.step = step
    return calls


def test_action_mapping_mpe_box01():
    env = make_multi_agent_env("mpe", "simple_spread_v3", seed=0)
    calls = _spy_actions(env)
    env.reset()
    a = np.zeros((1, 3, 5), dtype=np.float32)
    a[0, 0] = -1.0
    a[0, 1] = 1.0
    a[0, 2] = [-7.0, 5.0, 0.0, -0.5, 0.5]  # out of range is clipped to [-1, 1] first
    env.step(a)
    got = calls[-1]
    for agent in env.agent_ids:
        assert got[agent].dtype == np.float32 and got[agent].shape == (5,)
    np.testing.assert_array_equal(got["agent_0"], np.zeros(5, np.float32))
    np.testing.assert_array_equal(got["agent_1"], np.ones(5, np.float32))
    np.testing.assert_array_equal(got["agent_2"], np.array([0, 1, 0.5, 0.25, 0.75], np.float32))


def test_action_mapping_mamujoco_joint_range():
    env = make_multi_agent_env("mamujoco", "HalfCheetah", seed=0, agent_conf="2x3")
    calls = _spy_actions(env)
    env.reset()
    a = np.array([[[-1.0, 0.0, 1.0], [0.25, -3.0, 3.0]]], dtype=np.float32)
    env.step(a)
    np.testing.assert_array_equal(calls[-1]["agent_0"], np.array([-1, 0, 1], np.float32))
    np.testing.assert_array_equal(calls[-1]["agent_1"], np.array([0.25, -1, 1], np.float32))


def test_bad_actions_rejected():
    env = make_multi_agent_env("mpe", "simple_spread_v3")
    env.reset()
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((1, 3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.full((1, 3, 5), np.nan))


# ------------------------------------------------------------------------------------ autoreset


def test_truncation_and_next_step_autoreset_mpe():
    seed, max_cycles = 11, 5
    env = make_multi_agent_env("mpe", "simple_spread_v3", num_envs=2, seed=seed, max_cycles=5)
    raws = [
        mpe2.simple_spread_v3.parallel_env(continuous_actions=True, max_cycles=max_cycles)
        for _ in range(2)
    ]
    agents = env.agent_ids
    obs0, _ = env.reset()
    for e, raw in enumerate(raws):
        raw.reset(seed=seed + e)
    actions = _random_actions(env, 2 * (max_cycles + 1), seed=0)
    for t in range(2 * (max_cycles + 1)):
        res = env.step(actions[t])
        phase = t % (max_cycles + 1)  # 0..4: transitions, 5: reset step
        if phase < max_cycles:
            assert not res.reset_step.any()
            assert res.truncated.tolist() == [phase == max_cycles - 1] * 2
            assert not res.terminated.any()
            for e, raw in enumerate(raws):
                r_obs, r_state, r_rew, _, r_trunc = _raw_step(
                    raw, agents, actions[t, e], env.act_dims
                )
                np.testing.assert_array_equal(res.obs[e], np.stack(r_obs))
                np.testing.assert_array_equal(res.agent_reward[e], r_rew)
                assert r_trunc == (phase == max_cycles - 1)
        else:  # the call after the end: action ignored, fresh obs from each env's own RNG stream
            assert res.reset_step.all()
            assert not res.terminated.any() and not res.truncated.any()
            assert np.all(res.agent_reward == 0)
            assert not np.array_equal(res.obs, obs0)
            for e, raw in enumerate(raws):
                r_obs, _ = raw.reset()  # unseeded: continues the stream seeded at the first reset
                np.testing.assert_array_equal(res.obs[e], np.stack([r_obs[a] for a in agents]))
                np.testing.assert_array_equal(res.state[e], np.asarray(raw.state(), np.float32))


def test_columns_independent_termination_hopper():
    """Column 0 falls (terminated) while column 1 keeps going; column 1 is unaffected."""
    seed = 0
    env = make_multi_agent_env("mamujoco", "Hopper", num_envs=2, seed=seed, agent_conf="3x1")
    solo = make_multi_agent_env("mamujoco", "Hopper", num_envs=1, seed=seed + 1, agent_conf="3x1")
    env.reset()
    solo.reset()
    a = np.zeros((2, 3, 1), dtype=np.float32)
    a[0] = 1.0  # full torque: column 0 falls over within a few dozen steps
    ended_at = None
    for t in range(60):
        res = env.step(a)
        ref = solo.step(a[1:])
        np.testing.assert_array_equal(res.obs[1], ref.obs[0])
        np.testing.assert_array_equal(res.agent_reward[1], ref.agent_reward[0])
        assert not (res.terminated[1] or res.truncated[1] or res.reset_step[1])
        if ended_at is None and res.terminated[0]:
            ended_at = t
            assert not res.truncated[0] and not res.reset_step[0]
            assert np.all(res.agent_reward[0] != 0)
        elif ended_at is not None and t == ended_at + 1:
            assert res.reset_step.tolist() == [True, False]
            assert np.all(res.agent_reward[0] == 0)
            assert not res.terminated[0] and not res.truncated[0]
            break
    assert ended_at is not None and 5 < ended_at < 59


# ------------------------------------------------------------------------------------ get/set state


@pytest.mark.parametrize(
    "family, scenario, kwargs",
    [
        ("mpe", "simple_spread_v3", {"max_cycles": 6}),
        ("mpe", "simple_reference_v3", {"max_cycles": 6}),  # goals are entity references
        ("mamujoco", "HalfCheetah", {"agent_conf": "2x3", "max_episode_steps": 6}),
        ("mamujoco", "Ant", {"agent_conf": "2x4", "max_episode_steps": 6}),  # reads stale xpos
    ],
    ids=["mpe-simple_spread", "mpe-simple_reference", "mamujoco-HalfCheetah", "mamujoco-Ant"],
)
@pytest.mark.parametrize("save_after", [3, 6], ids=["mid-episode", "pending-reset"])
def test_get_set_state_bit_identical(family, scenario, kwargs, save_after, tmp_path):
    env = make_multi_agent_env(family, scenario, num_envs=2, seed=21, **kwargs)
    env.reset()
    warmup = _random_actions(env, save_after, seed=8)
    _run(env, warmup)
    original = env.get_state()
    assert _is_plain(original)
    assert original["needs_reset"] == [save_after == 6] * 2
    saved = _checkpoint_round_trip(original, tmp_path)  # arrays come back as tensors
    k = 10  # crosses an autoreset, so the restored RNG streams are exercised
    actions = _random_actions(env, k, seed=9)
    first = _run(env, actions)
    assert any(r.reset_step.any() for r in first)

    # restore into the same env ...
    env.set_state(saved)
    _assert_same_results(first, _run(env, actions))
    # ... and into a fresh, never-reset one (resume from a checkpoint)
    fresh = make_multi_agent_env(family, scenario, num_envs=2, seed=999, **kwargs)
    fresh.set_state(saved)
    # every restored value is numpy of its saved dtype again (MPE's physics calls
    # np.sum(tensor, axis=...) otherwise), so the restored env saves exactly what was saved
    _assert_same_plain(original, fresh.get_state())
    _assert_same_results(first, _run(fresh, actions))


def test_get_state_is_a_snapshot():
    """Stepping after get_state must not change the saved arrays."""
    env = make_multi_agent_env("mpe", "simple_spread_v3", seed=0)
    env.reset()
    env.step(np.ones((1, 3, 5)))
    saved = env.get_state()
    before = pickle.dumps(saved)
    env.step(np.ones((1, 3, 5)))
    assert pickle.dumps(saved) == before


def test_set_state_rejects_other_env():
    a = make_multi_agent_env("mpe", "simple_spread_v3")
    b = make_multi_agent_env("mpe", "simple_reference_v3")
    a.reset()
    with pytest.raises(ValueError, match="scenario"):
        b.set_state(a.get_state())


# ------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "family, scenario, kwargs, names",
    [
        ("mpe", "simple_sprad_v3", {}, "simple_spread_v3"),
        ("mamujoco", "Cheetah", {"agent_conf": "2x3"}, "HalfCheetah"),
        ("nope", "simple_spread_v3", {}, "mamujoco"),
        ("mamujoco", "HalfCheetah", {"agent_conf": "7x7"}, "7x7"),
        ("mamujoco", "HalfCheetah", {}, "agent_conf"),
    ],
)
def test_unknown_env_raises_one_line_value_error(family, scenario, kwargs, names):
    with pytest.raises(ValueError) as info:
        make_multi_agent_env(family, scenario, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    assert names in message


def test_step_before_reset_raises():
    env = make_multi_agent_env("mpe", "simple_spread_v3")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros((1, 3, 5)))


# ------------------------------------------------------------------------------------ checkpoints


def test_restore_arrays_undoes_a_checkpoint(tmp_path):
    """Arrays come back from a checkpoint as tensors and numpy scalars as Python numbers;
    restore_arrays gives back numpy arrays and scalars of the saved dtypes."""
    dtypes = (np.float16, np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, bool)
    arrays = {np.dtype(d).name: np.arange(6).reshape(2, 3).astype(d) for d in dtypes}
    original = {
        "arrays": arrays,
        "zero_d": np.asarray(2.5, dtype=np.float32),
        "scalars": [plain_scalar(np.float32(0.1)), plain_scalar(np.int64(3)),
                    plain_scalar(np.bool_(True))],
        "nested": ({"x": np.ones(2, np.float32)}, [None, "s", 1, 2.0]),
    }
    loaded = _checkpoint_round_trip(original, tmp_path)
    assert not isinstance(loaded["arrays"]["float64"], np.ndarray)  # what the bug was about
    restored = restore_arrays(loaded)
    expected = {**original, "scalars": [np.float32(0.1), np.int64(3), np.bool_(True)]}
    _assert_same_plain(expected, restored)
    _assert_same_plain(restored, restore_arrays(restored))  # idempotent


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "MountainCarContinuous-v0", "HalfCheetah-v5"])
def test_single_agent_state_survives_a_checkpoint(env_id, tmp_path):
    """gymnasium envs mid-episode: restored from a checkpoint, a fresh env holds the saved state
    type for type (Pendulum's last_u is an np.float32) and continues bit-identically."""
    env = SingleAgentVecEnv(env_id, num_envs=2, seed=4)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(7):
        env.step(rng.uniform(-1, 1, (2, env.act_dim)))
    original = env.get_state()
    saved = _checkpoint_round_trip(original, tmp_path)
    fresh = SingleAgentVecEnv(env_id, num_envs=2, seed=99)
    fresh.reset()
    fresh.set_state(saved)
    _assert_same_plain(original, fresh.get_state())
    actions = rng.uniform(-1, 1, (5, 2, env.act_dim))
    for a in actions:
        want, got = env.step(a), fresh.step(a)
        for field in ("obs", "reward", "terminated", "truncated", "reset_step"):
            x, y = getattr(want, field), getattr(got, field)
            assert x.dtype == y.dtype and np.array_equal(x, y), field
