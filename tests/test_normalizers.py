"""The input normalizers (``normalize.*``: ``rlzoo/nets/normalizers.py``,
``config/normalization.py``).

* the running statistics equal SimbaV2's numpy rules, by hand on small numbers and, after a real
  run, recomputed from the replay buffer in SimbaV2's order (first observation and episodes'
  final observations left out, the last step still pending), so evaluation episodes (which ran)
  never fed them;
* ``act`` / ``explore`` / ``update`` take raw inputs and normalize them exactly once;
* a seed group keeps every seed's statistics apart (perturb seed 1's data: seed 0's unchanged),
  and each member's statistics are those of its single run;
* a resumed seed group split mid-episode ends bit-identical to the straight run;
* ``Policy`` and the exported program (run where rlzoo cannot be imported) take raw observations;
* off by default: no normalizer state anywhere; bad values and non-Box observations: one line.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import TINY, assert_user_error, run_cli
from hydra import compose, initialize
from test_resume_split import (
    COMMON,
    PENDULUM,
    REPLAY,
    STATE_KEYS,
    assert_identical,
    final_checkpoint,
)

from rlzoo.algos import SAC, EnvSpec
from rlzoo.algos.base import Algorithm
from rlzoo.algos.seed_axis import stack_seeds
from rlzoo.buffers import Batch
from rlzoo.config.added_keys import with_added_settings
from rlzoo.config.normalization import check_observations, fold_seeds
from rlzoo.config.settings import Normalize, read_normalize
from rlzoo.errors import UserError
from rlzoo.nets import TanhGaussianActor, TwinCritic
from rlzoo.nets.normalizers import PRIOR_COUNT, ObservationNormalizer, RewardScaler, RunningMeanStd
from rlzoo.optim.entropy import AutoAlpha
from rlzoo.policy.policy import load_policy
from rlzoo.store.checkpoint import load_checkpoint
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args

ON = ["normalize.obs=true", "normalize.reward=true"]


# --------------------------------------------------------------------------- SimbaV2's rules


def simba_update(mean: np.ndarray, var: np.ndarray, count: float, x: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, float]:
    """SimbaV2's ``update_mean_var_count_from_moments`` on a batch ``x [n, ...]`` (numpy)."""
    batch_mean, batch_var, n = x.mean(axis=0), x.var(axis=0), x.shape[0]
    delta = batch_mean - mean
    total = count + n
    new_mean = mean + delta * n / total
    m2 = var * count + batch_var * n + np.square(delta) * count * n / total
    return new_mean, m2 / total, total


def test_running_mean_std_by_hand() -> None:
    rms = RunningMeanStd((2,))
    rms.update(torch.tensor([[1.0, 2.0], [3.0, 6.0]]))
    c = PRIOR_COUNT
    total = c + 2  # batch mean (2, 4), batch variance (1, 4)
    want_mean = np.array([2.0, 4.0]) * 2 / total
    want_var = (np.array([1.0, 1.0]) * c + np.array([1.0, 4.0]) * 2
                + np.array([4.0, 16.0]) * c * 2 / total) / total
    np.testing.assert_allclose(rms.mean.numpy(), want_mean, rtol=1e-12)
    np.testing.assert_allclose(rms.var.numpy(), want_var, rtol=1e-12)
    assert rms.count.item() == total
    rms.update(torch.tensor([[5.0, -2.0]]))
    mean, var, count = simba_update(want_mean, want_var, total, np.array([[5.0, -2.0]]))
    np.testing.assert_allclose(rms.mean.numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(rms.var.numpy(), var, rtol=1e-12)
    # three samples and a 1e-4 prior: the sample mean (3, 2) and population variance (8/3, 32/3)
    np.testing.assert_allclose(rms.mean.numpy(), [3.0, 2.0], atol=1e-3)
    np.testing.assert_allclose(rms.var.numpy(), [8 / 3, 32 / 3], atol=2e-3)
    assert rms.count.item() == pytest.approx(3 + c, abs=1e-12)


def test_observation_normalizer_applies_frozen_statistics_and_keeps_padding_zero() -> None:
    norm = ObservationNormalizer((2, 3), epsilon=1e-8)  # 2 agents, obs padded to 3
    data = torch.randn(50, 2, 3) * 4 + 2
    data[:, 1, 2] = 0.0  # agent 1's padding
    norm.update(data)
    before = {k: v.clone() for k, v in norm.state_dict().items()}
    x = torch.randn(7, 2, 3)
    x[:, 1, 2] = 0.0
    out = norm(x)
    want = (x.double() - norm.mean) / torch.sqrt(norm.var + 1e-8)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, want.float(), rtol=0, atol=0)
    assert torch.all(out[:, 1, 2] == 0.0)  # padding stays exactly 0
    for k, v in norm.state_dict().items():  # applying never changes the statistics
        assert torch.equal(v, before[k]), k


def test_reward_scaler_by_hand() -> None:
    scaler = RewardScaler(num_envs=2, gamma=0.5, g_max=0.5, epsilon=1e-8)
    both = torch.tensor([0, 1])
    scaler.update(torch.tensor([1.0, 2.0]), torch.tensor([False, False]), both)  # G = (1, 2)
    # env 1's step ends its episode: its old G is dropped before the reward is added (SimbaV2)
    scaler.update(torch.tensor([1.0, -4.0]), torch.tensor([False, True]), both)  # G = (1.5, -4)
    # env 1's next call only resets it: not a transition, its G stays
    scaler.update(torch.tensor([2.0, 0.0]), torch.tensor([False, False]), torch.tensor([0]))
    np.testing.assert_allclose(scaler.ret.numpy(), [2.75, -4.0])
    assert scaler.ret_max.item() == 4.0
    mean, var, count = np.zeros(()), np.ones(()), PRIOR_COUNT
    for seen in ([1.0, 2.0], [1.5, -4.0], [2.75]):
        mean, var, count = simba_update(mean, var, count, np.array(seen))
    np.testing.assert_allclose(scaler.ret_stats.mean.numpy(), mean, rtol=1e-12)
    np.testing.assert_allclose(scaler.ret_stats.var.numpy(), var, rtol=1e-12)
    # the scale is the larger of sqrt(var + eps) and max|G| / G_max = 8
    assert np.sqrt(var + 1e-8) < 8.0
    torch.testing.assert_close(scaler(torch.tensor([4.0, -2.0])), torch.tensor([0.5, -0.25]))
    wide = RewardScaler(num_envs=2, gamma=0.5, g_max=100.0, epsilon=1e-8)
    wide.load_state_dict(scaler.state_dict())
    torch.testing.assert_close(wide(torch.tensor([3.0])),
                               torch.tensor([3.0 / np.sqrt(var + 1e-8)], dtype=torch.float32))


# --------------------------------------------------------------------------- raw in, once


class Probe(Algorithm):
    """Records what its methods receive. ``act`` calls ``explore`` (a nested call), ``update``
    calls ``act`` (one more)."""

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        return self.explore(obs)[0]

    def explore(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return obs.clone(), obs

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        self.seen = batch
        self.acted = self.act(batch.obs)
        return {}


class ProbeChild(Probe):
    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        return super().update(batch)


def fitted(algo: Algorithm, seed: int | None = None) -> Algorithm:
    obs, reward = ObservationNormalizer((3,), 1e-8), RewardScaler(1, 0.9, 5.0, 1e-8)
    algo.attach_normalizers(obs=obs, reward=reward)
    g = torch.Generator().manual_seed(0 if seed is None else seed)
    obs.update(torch.randn(20, 3, generator=g) * 3 + 1)
    for r in torch.randn(30, generator=g) * 10:
        reward.update(r.reshape(1), torch.tensor([False]), torch.tensor([0]))
    return algo


def batch_of(b: int = 4, seed: int = 1) -> Batch:
    g = torch.Generator().manual_seed(seed)
    return Batch(obs=torch.randn(b, 3, generator=g), action=torch.rand(b, 2, generator=g) * 2 - 1,
                 reward=torch.randn(b, generator=g), next_obs=torch.randn(b, 3, generator=g),
                 discount=torch.full((b,), 0.99), terminated=torch.zeros(b))


@pytest.mark.parametrize("cls", [Probe, ProbeChild])
def test_methods_take_raw_inputs_and_normalize_them_once(cls: type[Probe]) -> None:
    algo = fitted(cls(EnvSpec(obs_dim=3, act_dim=2), 0.99, 1))
    norm, scaler = algo.obs_normalizer, algo.reward_scaler
    assert norm is not None and scaler is not None
    raw = batch_of()
    torch.testing.assert_close(algo.act(raw.obs), norm(raw.obs), rtol=0, atol=0)
    assert not torch.allclose(norm(raw.obs), raw.obs)
    metrics = algo.update(raw)
    assert metrics == {"stats/reward_scale": scaler.scale().float()}
    assert metrics["stats/reward_scale"].item() > 1.0  # rewards of size ~10 were seen
    torch.testing.assert_close(algo.seen.obs, norm(raw.obs), rtol=0, atol=0)
    torch.testing.assert_close(algo.seen.next_obs, norm(raw.next_obs), rtol=0, atol=0)
    torch.testing.assert_close(algo.seen.reward, scaler(raw.reward), rtol=0, atol=0)
    assert torch.equal(algo.seen.action, raw.action)
    torch.testing.assert_close(algo.acted, norm(raw.obs), rtol=0, atol=0)  # not twice
    plain = cls(EnvSpec(obs_dim=3, act_dim=2), 0.99, 1)  # no normalizers: inputs pass untouched
    assert torch.equal(plain.act(raw.obs), raw.obs)


# --------------------------------------------------------------------------- seeds


def tiny_sac() -> SAC:
    return SAC(
        EnvSpec(obs_dim=3, act_dim=2),
        actor=partial(TanhGaussianActor, **actor_args("sac", hidden=[16])),
        critic=partial(TwinCritic, **critic_args("twin", hidden=[16])),
        tuner=partial(AutoAlpha, **tuner_args("auto", lr=1e-3)),
        **algo_args("sac"),
    )


def group_of_two() -> SAC:
    members = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        algo = tiny_sac()
        algo.attach_normalizers(obs=ObservationNormalizer((3,), 1e-8),
                               reward=RewardScaler(2, 0.99, 5.0, 1e-8))
        members.append(algo)
    return stack_seeds(members)


def feed(group: SAC, k: int, scale: float) -> None:
    """Two collected steps of member k (two envs; the first step ends env 1's episode)."""
    last = {"reward": np.array([1.0, -2.0], np.float32) * scale,
            "ended": np.array([False, True]), "valid": np.array([True, True])}
    obs = np.arange(6, dtype=np.float32).reshape(2, 3) * scale
    everyone = np.stack([obs, obs])  # [K, E, O]: the loop's arrays; only seed k folds
    fold_seeds(group, np.array([k]), everyone, None, [last, last], torch.device("cpu"))
    last = {**last, "ended": np.array([False, False]), "valid": np.array([True, False])}
    fold_seeds(group, np.array([k]), everyone + 1, None, [last, last], torch.device("cpu"))


def test_each_seed_has_its_own_statistics() -> None:
    def run(scale_1: float) -> tuple[SAC, dict[str, torch.Tensor]]:
        torch.manual_seed(3)
        group = group_of_two()
        feed(group, 0, 1.0)
        feed(group, 1, scale_1)
        batch = batch_of(8, seed=2)
        stacked = Batch(**{k: torch.stack([v, v]) for k, v in batch.tensors().items()})
        torch.manual_seed(4)
        for _ in range(3):
            group.update(stacked)
        return group, {k: v.clone() for k, v in group.state_dict()["modules"].items()}

    group, want = run(1.0)
    _, got = run(-7.0)  # seed 1 collected other data
    stats = [k for k in want if "normalizer" in k or "scaler" in k]
    assert stats and all(want[k].shape[0] == 2 for k in want)
    for name in want:
        assert torch.equal(want[name][0], got[name][0]), name  # seed 0: bit for bit
    assert all(not torch.equal(want[k][1], got[k][1]) for k in ("obs_normalizer.mean",
                                                                  "reward_scaler.ret_max"))
    layer = "actor.net.layers.0.weight"
    assert not torch.equal(want[layer][1], got[layer][1])
    # seed 0 merged env 0's obs at both steps and env 1's at the second (its first was final)
    assert group.obs_normalizer.count[0].item() == pytest.approx(3 + PRIOR_COUNT, abs=1e-12)
    assert group.reward_scaler.ret_stats.count[0].item() == pytest.approx(3 + PRIOR_COUNT)


# --------------------------------------------------------------------------- through the loop


def replay_rows(state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """A single-env run's replay rows in order: obs, reward, ended, and the number of calls."""
    buffer = state["members"][0]["buffer"]
    calls = int(buffer["ptr"])  # rows 0 .. calls: the first observation, then one per call
    t = buffer["tensors"]
    return (t["obs"][: calls + 1, 0].double().numpy(), t["reward"][:calls, 0].double().numpy(),
            t["ended"][:calls, 0].numpy().astype(bool), calls)


def test_statistics_are_those_of_the_training_steps(tmp_path: Path) -> None:
    """Recompute the statistics from the replay buffer in SimbaV2's order. Evaluations ran
    (every 150 steps, 2 episodes of 200 steps each): they must not have fed them."""
    run_dir = tmp_path / "run"
    proc = run_cli(["algo=sac", *PENDULUM, "total_steps=450", "eval.every=150",
                    "eval.episodes=2", *ON], run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = final_checkpoint(run_dir)
    modules = {k: v[0] for k, v in state["algo"]["modules"].items()}  # a group of one's [1, ...]
    obs, reward, ended, calls = replay_rows(state)
    assert calls == 452  # 450 steps and 2 reset calls
    # before call t (t >= 1) the observation of row t is merged unless the call before ended
    # an episode (row t then holds a final observation)
    mean, var, count = np.zeros(3), np.ones(3), PRIOR_COUNT
    for t in range(1, calls):
        if not ended[t - 1]:
            mean, var, count = simba_update(mean, var, count, obs[t][None])
    assert modules["obs_normalizer.count"].item() == pytest.approx(count, abs=1e-9)
    assert count == pytest.approx(449 + PRIOR_COUNT)  # first and two final observations out
    np.testing.assert_allclose(modules["obs_normalizer.mean"].numpy(), mean, rtol=1e-10)
    np.testing.assert_allclose(modules["obs_normalizer.var"].numpy(), var, rtol=1e-10)
    # before call t + 1 the reward of call t is merged if call t was a transition
    g, ret_max = 0.0, 0.0
    rmean, rvar, rcount = np.zeros(()), np.ones(()), PRIOR_COUNT
    for t in range(calls - 1):
        if t and ended[t - 1]:
            continue  # a reset call
        g = 0.99 * (1.0 - ended[t]) * g + reward[t]
        rmean, rvar, rcount = simba_update(rmean, rvar, rcount, np.array([g]))
        ret_max = max(ret_max, abs(g))
    np.testing.assert_allclose(modules["reward_scaler.ret"].numpy(), [g], rtol=1e-10)
    assert modules["reward_scaler.ret_max"].item() == pytest.approx(ret_max, rel=1e-12)
    np.testing.assert_allclose(modules["reward_scaler.ret_stats.mean"].numpy(), rmean, rtol=1e-10)
    np.testing.assert_allclose(modules["reward_scaler.ret_stats.var"].numpy(), rvar, rtol=1e-10)
    # the last step is pending, to be merged before the next action of a resumed run
    pending = state["members"][0]["loop"]["normalize_pending"]
    assert float(pending["reward"][0]) == pytest.approx(float(reward[calls - 1]))
    # policy.pt carries the same statistics; acting with them leaves them as they are
    policy = load_policy(run_dir)
    norm = policy.algo.obs_normalizer
    assert norm is not None and torch.equal(norm.mean, modules["obs_normalizer.mean"])
    policy.act(np.zeros((5, 3)))
    assert torch.equal(norm.mean, modules["obs_normalizer.mean"])
    assert norm.count.item() == modules["obs_normalizer.count"].item()


def test_group_members_have_their_single_runs_statistics(tmp_path: Path) -> None:
    """Warm-up only (random actions, drawn per seed): seed 6 of a group sees the data of the
    single run seed=6, so its statistics are bit for bit that run's."""
    args = ["algo=sac", "env=Pendulum", "total_steps=230", "algo.learning_starts=1000",
            "algo.buffer_size=1000", "eval.every=0", "eval.episodes=1", "log.progress=false",
            *TINY, *ON]
    proc = run_cli([*args, "seeds=2", "seed=5"], tmp_path / "group-s5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli([*args, "seed=6"], tmp_path / "single")
    assert proc.returncode == 0, proc.stderr[-3000:]
    group = load_checkpoint(tmp_path / "group-s6" / "policy.pt")["weights"]
    single = load_checkpoint(tmp_path / "single" / "policy.pt")["weights"]
    first = load_checkpoint(tmp_path / "group-s5" / "policy.pt")["weights"]
    names = [k for k in single if "normalizer" in k or "scaler" in k]
    assert len(names) == 8
    for name in names:
        assert torch.equal(group[name], single[name]), name
    assert not torch.equal(first["obs_normalizer.mean"], single["obs_normalizer.mean"])


@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_split_resume_of_a_normalized_seed_group_is_bit_identical(tmp_path: Path) -> None:
    """seeds=2, stopped at step 137 (mid-episode, during learning), resumed to 260."""
    args = ["algo=sac", "seeds=2", *PENDULUM, *ON]
    straight, split = tmp_path / "straight-s5", tmp_path / "split-s5"
    proc = run_cli([*args, "total_steps=260"], straight)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli([*args, "total_steps=137"], split)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli([f"resume={split}", "total_steps=260"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    want, got = final_checkpoint(straight), final_checkpoint(split)
    assert want["algo"]["updates"] > 0
    assert want["algo"]["modules"]["obs_normalizer.mean"].shape == (2, 3)
    assert "normalize_pending" in want["members"][1]["loop"]
    for key in ("algo", "members", "counters", "rng"):
        assert_identical(want[key], got[key], key)


@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_split_resume_of_a_normalized_multi_agent_run_is_bit_identical(tmp_path: Path) -> None:
    """HASAC on simple_speaker_listener (speaker obs 3, listener 11: padded), 2 envs, split at
    vector step 87 (12 steps into an episode), resumed to 300; per-agent statistics leave the
    speaker's 8 padding entries at mean 0."""
    args = ["algo=hasac", "env=mpe/simple_speaker_listener", "num_envs=2", *COMMON, *REPLAY, *ON]
    straight, split = tmp_path / "straight", tmp_path / "split"
    proc = run_cli([*args, "total_steps=300"], straight)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli([*args, "total_steps=174"], split)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run_cli([f"resume={split}", "total_steps=300"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    want, got = final_checkpoint(straight), final_checkpoint(split)
    assert want["algo"]["updates"] > 0
    for key in STATE_KEYS:
        assert_identical(want[key], got[key], key)
    modules = {k: v[0] for k, v in want["algo"]["modules"].items()}  # a group of one's [1, ...]
    mean, var = modules["obs_normalizer.mean"], modules["obs_normalizer.var"]
    assert mean.shape == (2, 11)
    padding = mean == 0.0
    assert int(padding.sum()) == 8 and bool((var[padding] < 1e-5).all())
    assert modules["state_normalizer.mean"].dim() == 1


# --------------------------------------------------------------------------- policy and export

CHILD = """
import sys
sys.modules["rlzoo"] = None  # any import of rlzoo now fails
import torch
for name in sys.argv[1:]:
    program = torch.export.load(name + ".pt2")
    assert any("obs_normalizer.mean" in k for k in program.state_dict), list(program.state_dict)
    obs = torch.load(name + ".obs.pt", weights_only=True)
    torch.save(program.module()(obs), name + ".out.pt")
try:
    import rlzoo  # noqa: F401
except ImportError:
    print("rlzoo is not importable here")
"""


def test_export_takes_raw_observations_without_rlzoo(tmp_path: Path) -> None:
    runs = {
        "sac": ["algo=sac", "env=Pendulum", "total_steps=260", "algo.learning_starts=100"],
        "maddpg": ["algo=maddpg", "env=mpe/simple_spread", "total_steps=137",
                   "algo.learning_starts=50", "algo.batch_size=32"],
    }
    expected = {}
    for name, args in runs.items():
        run_dir = tmp_path / name
        proc = run_cli([*args, *TINY, "algo.buffer_size=1000", "eval.episodes=1",
                        "log.progress=false", "normalize.obs=true"], run_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
        policy = load_policy(run_dir)
        norm = policy.algo.obs_normalizer
        assert norm is not None and norm.count.item() > 100
        assert norm.mean.shape == policy.obs_shape  # [O], or [N, O]: per agent
        state = policy.algo.state_normalizer  # the centralized critic's global state
        assert (state is None) == (name == "sac")
        if state is not None:
            assert state.mean.shape == (policy.spec.state_dim,)
            assert state.count.item() == norm.count.item()
        obs = torch.randn(6, *policy.obs_shape) * 2 + norm.mean.float()  # raw observations
        torch.save(obs, tmp_path / f"{name}.obs.pt")
        expected[name] = policy(obs)
        # the statistics matter: the same weights fed the raw observations act otherwise
        policy.algo.obs_normalizer = None
        assert not torch.allclose(policy(obs), expected[name], atol=1e-3)
        policy.algo.obs_normalizer = norm
        policy.export(tmp_path / f"{name}.pt2")
    (tmp_path / "child.py").write_text(textwrap.dedent(CHILD))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "child.py", *runs], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rlzoo is not importable here" in proc.stdout
    for name, want in expected.items():
        got = torch.load(tmp_path / f"{name}.out.pt", weights_only=True)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- defaults, errors


ALGOS = ("sac", "td3", "dsac_t", "redq", "maddpg", "hasac", "coma")


@pytest.mark.parametrize("algo", ALGOS)
def test_off_by_default(algo: str) -> None:
    with initialize(version_base="1.3", config_path="../rlzoo/conf"):
        cfg = compose("config", overrides=[f"algo={algo}"])
    assert dict(cfg.normalize) == {"obs": False, "reward": False, "reward_g_max": 5.0,
                                   "epsilon": 1e-8}


def test_off_leaves_no_trace(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_cli(["algo=sac", *PENDULUM, "total_steps=60"], run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = final_checkpoint(run_dir)
    names = " ".join(state["algo"]["modules"])
    assert "normalizer" not in names and "scaler" not in names
    assert "normalize_pending" not in state["members"][0]["loop"]


@pytest.mark.parametrize(("override", "fragment"), [
    ("normalize.epsilon=0", "normalize.epsilon must be a number > 0"),
    ("normalize.reward_g_max=-1", "normalize.reward_g_max must be a number > 0"),
])
def test_bad_values_are_one_line(tmp_path: Path, override: str, fragment: str) -> None:
    proc = run_cli(["algo=sac", *PENDULUM, "total_steps=60", *ON, override], tmp_path / "run")
    assert_user_error(proc, fragment)


def test_observations_that_are_not_a_box_are_refused() -> None:
    on = Normalize(obs=True, reward=False, epsilon=1e-8, reward_g_max=5.0, envs=1)
    env = SimpleNamespace(obs_spaces={"agent a": gym.spaces.Box(-1, 1, (3,)),
                                      "agent b": gym.spaces.Discrete(4)})
    with pytest.raises(UserError) as info:
        check_observations(env, on, "mpe/odd")  # type: ignore[arg-type]
    assert "agent b has a Discrete observation space" in str(info.value)
    assert "normalize.obs=false" in str(info.value)
    check_observations(env, dataclasses.replace(on, obs=False), "mpe/odd")  # type: ignore[arg-type]
    env.obs_spaces.pop("agent b")
    check_observations(env, on, "mpe/odd")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["off", "maybe", 1, None])
def test_a_normalizer_switch_that_is_not_true_or_false_is_refused(value: object) -> None:
    """A config handed to the loop directly (the Python API) gets the CLI's check too: "off"
    would otherwise read as on."""
    from omegaconf import OmegaConf

    numbers = {"epsilon": 1e-8, "reward_g_max": 5.0}
    cfg = OmegaConf.create({"num_envs": 1,
                            "normalize": {"obs": value, "reward": False, **numbers}})
    with pytest.raises(UserError, match="normalize.obs is a switch, true or false"):
        read_normalize(cfg)
    assert read_normalize(OmegaConf.create({"num_envs": 1, "normalize": {
        "obs": True, "reward": False, **numbers}})).obs is True
    # a config from before the section is read with it off (rlzoo.conf.history.SETTINGS_ADDED)
    assert read_normalize(with_added_settings(OmegaConf.create({"num_envs": 3}))) == Normalize(
        False, False, 1e-8, 5.0, 3)


@pytest.mark.parametrize("value", [0, -1.0, "nan", "inf", "x", None])
def test_a_normalizer_number_that_is_not_positive_is_refused(value: object) -> None:
    """epsilon and reward_g_max are read once, with no default of their own in the code: a
    section without them (or with a non-positive one) is refused in one line."""
    from omegaconf import OmegaConf

    for key, other in (("epsilon", "reward_g_max"), ("reward_g_max", "epsilon")):
        section = {"obs": True, "reward": True, other: 1.0}
        if value is not None:
            section[key] = value
        with pytest.raises(UserError, match=f"normalize.{key} must be a number > 0"):
            read_normalize(OmegaConf.create({"num_envs": 1, "normalize": section}))
