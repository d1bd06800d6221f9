"""env.backend=batched: MPE as batched torch tensors, step for step equal to mpe2.

Each test puts mpe2's own reset worlds into the batched env ("the same initial state"), then steps
both with the same random actions for whole episodes and compares observations, per-agent rewards,
the global state and the episode ends: in float64 to 1e-9 (mpe2 computes in float64) and in
float32 to 1e-5.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from rlzoo.envs.mpe_batched import SCENARIOS, BatchedMPE

KWARGS = {
    "simple_spread_v3": {"max_cycles": 25, "local_ratio": 0.5},
    "simple_speaker_listener_v4": {"max_cycles": 25},
    "simple_reference_v3": {"max_cycles": 25, "local_ratio": 0.5},
}


def mpe2_envs(scenario: str, n: int, seed: int, **kwargs):
    module = importlib.import_module(f"mpe2.{scenario}")
    envs = [module.parallel_env(continuous_actions=True, **kwargs) for _ in range(n)]
    obs = [env.reset(seed=seed + e)[0] for e, env in enumerate(envs)]
    return envs, obs


def copy_worlds(batched: BatchedMPE, envs) -> None:
    """Put each mpe2 env's world (positions, velocities, communication, goals) into env e."""
    for e, env in enumerate(envs):
        world = env.unwrapped.world
        entities = world.agents + world.landmarks
        batched.pos[e] = torch.as_tensor(np.stack([x.state.p_pos for x in entities]))
        batched.vel[e] = torch.as_tensor(np.stack([x.state.p_vel for x in entities]))
        batched.comm[e] = torch.as_tensor(np.stack([a.state.c for a in world.agents]))
        for i, agent in enumerate(world.agents):
            goal = getattr(agent, "_goal_b", None)  # mpe2's property asserts when unset
            if goal is not None:
                batched.goal[e, i] = world.landmarks.index(goal)
    batched.steps.zero_()


def padded(batched: BatchedMPE, per_agent: list[dict]) -> np.ndarray:
    out = np.zeros((len(per_agent), *batched.obs_shape))
    for e, d in enumerate(per_agent):
        for i, name in enumerate(batched.agent_ids):
            out[e, i, : batched.obs_dims[i]] = d[name]
    return out


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-9), (torch.float32, 1e-5)])
def test_batched_mpe_equals_mpe2_over_whole_episodes(scenario, dtype, tol):
    E, seed = 6, 11
    envs, first = mpe2_envs(scenario, E, seed, **KWARGS[scenario])
    batched = BatchedMPE(scenario, E, seed=0, dtype=dtype, **KWARGS[scenario])
    batched.reset()
    copy_worlds(batched, envs)
    obs0 = batched._observe().numpy()
    np.testing.assert_allclose(obs0, padded(batched, first), atol=tol, rtol=0)
    assert batched.agent_ids == list(envs[0].possible_agents)
    assert batched.state_dim == envs[0].state_space.shape[0]
    for e in range(E):
        assert envs[e].action_space(batched.agent_ids[-1]).shape[0] == batched.act_dims[-1]
    rng = np.random.default_rng(3)
    for t in range(25):
        action = rng.uniform(-1.2, 1.2, (E, *batched.act_shape))  # also outside [-1, 1]: clipped
        box = (np.clip(action, -1, 1) + 1) * 0.5
        want_obs, want_rew, want_state, want_trunc = [], [], [], []
        for e, env in enumerate(envs):
            acts = {a: box[e, i, : batched.act_dims[i]] for i, a in enumerate(batched.agent_ids)}
            o, r, term, trunc, _ = env.step(acts)
            assert not any(term.values())
            want_obs.append(o)
            want_rew.append([r[a] for a in batched.agent_ids])
            want_state.append(env.state())
            want_trunc.append(any(trunc.values()))
        # the tensors (rewards at the env's precision; StepResult rounds them to float32)
        got = batched.step_tensors(torch.as_tensor(action))
        np.testing.assert_allclose(got.obs.numpy(), padded(batched, want_obs), atol=tol, rtol=0)
        np.testing.assert_allclose(got.agent_reward.numpy(), np.array(want_rew), atol=tol, rtol=0)
        np.testing.assert_allclose(got.reward.numpy(), np.mean(want_rew, 1), atol=tol, rtol=0)
        np.testing.assert_allclose(got.state.numpy(), np.stack(want_state), atol=tol, rtol=0)
        assert got.truncated.tolist() == want_trunc == [t == 24] * E
        assert not got.terminated.any() and not got.reset_step.any()
    # next-step autoreset: the call after the time limit only resets, as every backend does
    after = batched.step(np.zeros((E, *batched.act_shape)))
    assert after.reset_step.all() and not after.truncated.any() and not after.reward.any()
    assert (np.abs(after.obs[:, :, :2]) <= 1).all()  # velocity reset to 0 or positions drawn
    assert (batched.steps == 0).all()


def test_batched_mpe_is_reproducible_and_resumes_mid_episode():
    """Same seed -> same episodes; get_state at step 7 of an episode, then set_state into a
    fresh env, continues bit for bit (the generator included, across an autoreset)."""
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (60, 5, 3, 5)).astype(np.float32)

    def run(env, steps):
        return [env.step(a) for a in steps]

    a, b = BatchedMPE("simple_spread_v3", 5, seed=4), BatchedMPE("simple_spread_v3", 5, seed=4)
    a.reset(), b.reset()
    ra, rb = run(a, actions), run(b, actions)
    for x, y in zip(ra, rb, strict=True):
        assert np.array_equal(x.obs, y.obs) and np.array_equal(x.reward, y.reward)
    c = BatchedMPE("simple_spread_v3", 5, seed=4)
    c.reset()
    run(c, actions[:7])
    saved = c.get_state()
    d = BatchedMPE("simple_spread_v3", 5, seed=99)
    d.reset()
    d.set_state({k: v for k, v in saved.items()})
    for x, y in zip(ra[7:], run(d, actions[7:]), strict=True):
        assert np.array_equal(x.obs, y.obs) and np.array_equal(x.reset_step, y.reset_step)
        assert np.array_equal(x.agent_reward, y.agent_reward)
    other = BatchedMPE("simple_spread_v3", 5, seed=5)
    other.reset()
    assert not np.array_equal(other.step(actions[0]).obs, ra[0].obs)


def test_batched_mpe_active_mask_and_refusals():
    env = BatchedMPE("simple_reference_v3", 4, seed=1)
    obs, state = env.reset()
    assert obs.shape == (4, 2, 21) and state.shape == (4, 42)
    active = np.array([True, False, True, False])
    on = torch.as_tensor(active)
    before = env.vel.clone()  # positions move one step later: pos += vel * dt comes first
    push = np.zeros((4, 2, 15), dtype=np.float32)
    push[..., 2] = 1.0  # move right: u = 5 * (box[2] - box[1]) = 2.5
    res = env.step(push, active=active)
    assert torch.equal(env.vel[~on], before[~on]) and not torch.equal(env.vel[on], before[on])
    assert (res.reward[~active] == 0).all() and env.steps.tolist() == [1, 0, 1, 0]
    with pytest.raises(ValueError, match="no mpe scenario"):
        BatchedMPE("simple_tag_v3")
    with pytest.raises(ValueError, match="no local_ratio"):
        BatchedMPE("simple_speaker_listener_v4", local_ratio=0.5)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((4, 2, 5)))
    with pytest.raises(ValueError, match="backend"):
        env.set_state({**env.get_state(), "backend": "pettingzoo"})


def test_batched_backend_trains_through_the_cli_and_refuses_misuse(tmp_path):
    from conftest import TINY, assert_user_error, read_summary, run_cli

    args = ["algo=maddpg", "env=mpe/simple_spread", "env.backend=batched", "num_envs=8",
            *TINY, "total_steps=400", "algo.learning_starts=200", "algo.batch_size=32",
            "eval.every=200", "eval.episodes=3", "log.progress=false"]
    proc = run_cli(args, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(tmp_path / "run")
    assert summary["total_steps"] == 400 and summary["updates"] > 0
    assert -200 < summary["final_eval_return"] < 0  # 25 steps of a distance penalty
    proc = run_cli([*args[:2], "env.backend=jax", *TINY, "total_steps=10"], tmp_path / "bad")
    assert_user_error(proc, "env.backend must be one of pettingzoo, batched")
    proc = run_cli(["algo=maddpg", "env=mamujoco/HalfCheetah-2x3", "env.backend=batched", *TINY,
                    "total_steps=10"], tmp_path / "bad2")
    assert_user_error(proc, "simulates MPE and VMAS only")


def test_num_envs_goes_to_65536_batched_and_1024_per_env() -> None:
    """docs/multi_agent.md's counts: the batched backend (and warp) trains 8,192 envs and more,
    up to MAX_BATCHED_ENVS; a backend with an env object each stops at MAX_NUM_ENVS, in one line
    naming the batched backend."""
    from omegaconf import OmegaConf

    from rlzoo.config.settings import MAX_BATCHED_ENVS, MAX_NUM_ENVS, num_envs_key
    from rlzoo.errors import UserError

    def cfg(backend: str | None, n: int) -> object:
        env = {"name": "mpe/simple_spread"} | ({"backend": backend} if backend else {})
        return OmegaConf.create({"env": env, "num_envs": n})

    assert (MAX_NUM_ENVS, MAX_BATCHED_ENVS) == (1024, 65536)
    for backend in ("batched", "warp"):
        assert num_envs_key(cfg(backend, 8192)) == 8192
        assert num_envs_key(cfg(backend, MAX_BATCHED_ENVS)) == MAX_BATCHED_ENVS
        with pytest.raises(UserError, match="<= 65536"):
            num_envs_key(cfg(backend, MAX_BATCHED_ENVS + 1))
    for backend in (None, "pettingzoo", "gymnasium"):
        assert num_envs_key(cfg(backend, MAX_NUM_ENVS)) == MAX_NUM_ENVS
        with pytest.raises(UserError, match="env.backend=batched"):
            num_envs_key(cfg(backend, 8192))
