"""examples/ppo.py, the on-policy example: GAE, the clipped objective, update on synthetic rollouts,
its YAML, and (once the one loop collects rollouts for any on-policy algorithm) the CLI."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import pytest
import torch
from conftest import read_summary, run_cli
from hydra import compose, initialize_config_module
from hydra.utils import instantiate
from omegaconf import OmegaConf

from examples.ppo import PPO, clipped_surrogate, gae, log_prob
from rlzoo.algos.base import EnvSpec
from rlzoo.buffers.rollout import Rollout
from rlzoo.nets import DistributionalCritic, EnsembleCritic, TanhGaussianActor
from tests.from_yaml import actor_args, algo_args, critic_args

SEARCHPATH = "hydra.searchpath=[pkg://examples.conf]"
SPEC = EnvSpec(obs_dim=3, act_dim=2)
T, E = 8, 2


def make_ppo(seed: int = 0, **kwargs: float) -> PPO:
    torch.manual_seed(seed)
    defaults = dict(epochs=2, num_minibatches=2)
    return PPO(
        SPEC, actor=partial(TanhGaussianActor,
                            **actor_args("sac", hidden=[16, 16], activation="tanh")),
        critic=partial(EnsembleCritic,
                       **critic_args("ensemble", n=1, subset=1, actor_reduce="first",
                                     hidden=[16, 16], activation="tanh")),
        **algo_args("ppo", **{**defaults, **kwargs}),
    )


def synthetic_rollout(seed: int = 1) -> Rollout:
    """T = 8 steps of E = 2 envs. Env 0: terminated at t = 2 (t = 3 resets), truncated at t = 5
    (t = 6 resets); env 1: one episode running through the whole rollout."""
    g = torch.Generator().manual_seed(seed)
    pre_tanh = torch.randn(T, E, SPEC.act_dim, generator=g)
    terminated, ended, valid = torch.zeros(T, E), torch.zeros(T, E), torch.ones(T, E)
    terminated[2, 0] = ended[2, 0] = ended[5, 0] = 1.0
    valid[3, 0] = valid[6, 0] = 0.0
    reward = torch.randn(T, E, generator=g) * valid
    return Rollout(obs=torch.randn(T + 1, E, SPEC.obs_dim, generator=g), state=None,
                   action=torch.tanh(pre_tanh), pre_tanh=pre_tanh, reward=reward,
                   agent_reward=None, terminated=terminated, ended=ended, valid=valid)


def update_once(rollout: Rollout) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
    algo = make_ppo()
    torch.manual_seed(123)  # the minibatch shuffle
    metrics = algo.update(rollout)
    return metrics, [p.detach().clone() for p in algo.parameters()]


# ---------------------------------------------------------------------------- GAE


def test_gae_hand_computed_termination_truncation_and_rollout_end() -> None:
    """gamma = lambda = 0.5 (gamma lambda = 0.25). Column 0: t1 terminates, t2 resets, t3 is
    truncated (bootstraps V(obs[4]) = 5), t4 resets, t5 ends the rollout (bootstraps V(obs[6]));
    column 1: V = 0, r = 1, no ends."""
    value = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0], [5.0, 0.0],
                          [6.0, 0.0], [7.0, 0.0]])  # [T + 1, E]
    reward = torch.tensor([[1.0, 1], [1, 1], [100, 1], [1, 1], [100, 1], [1, 1]])
    terminated, ended, valid = torch.zeros(6, 2), torch.zeros(6, 2), torch.ones(6, 2)
    terminated[1, 0] = ended[1, 0] = ended[3, 0] = 1.0
    valid[2, 0] = valid[4, 0] = 0.0
    advantage, returns = gae(reward, value, terminated, ended, valid, gamma=0.5, lam=0.5)
    # t5: 1 + 0.5 * 7 - 6 = -1.5; t3: 1 + 0.5 * 5 - 4 = -0.5 (no carry across the end);
    # t1: 1 - 2 = -1 (no bootstrap); t0: (1 + 0.5 * 2 - 1) + 0.25 * (-1) = 0.75
    expected_0 = [0.75, -1.0, 0.0, -0.5, 0.0, -1.5]
    # column 1: A5 = 1, A_t = 1 + 0.25 A_{t+1}
    expected_1 = [1.3330078125, 1.33203125, 1.328125, 1.3125, 1.25, 1.0]
    assert advantage[:, 0].tolist() == expected_0
    assert advantage[:, 1].tolist() == expected_1
    assert returns[:, 0].tolist() == [1.75, 1.0, 0.0, 3.5, 0.0, 4.5]  # A + V, 0 on resets
    assert returns[:, 1].tolist() == expected_1


def test_gae_cuts_at_an_end_without_a_reset_row() -> None:
    """With next-step autoreset a reset row (valid 0) follows every end, which alone stops the
    carry; ``ended`` stops it too (as for an env with same-step autoreset, whose next row is
    already the new episode's first step)."""
    value, reward = torch.zeros(4, 1), torch.ones(3, 1)
    terminated, ended, valid = torch.zeros(3, 1), torch.zeros(3, 1), torch.ones(3, 1)
    terminated[0] = ended[0] = 1.0
    advantage, _ = gae(reward, value, terminated, ended, valid, gamma=0.5, lam=0.5)
    assert advantage[:, 0].tolist() == [1.0, 1.25, 1.0]


# ---------------------------------------------------------------------------- clipped objective


@pytest.mark.parametrize(
    ("ratio", "advantage", "grad"),
    [
        (1.5, 2.0, 0.0),   # above 1 + eps with A > 0: clipped, no gradient
        (0.5, -2.0, 0.0),  # below 1 - eps with A < 0: clipped, no gradient
        (0.5, 2.0, -2.0),  # below 1 - eps with A > 0: the unclipped term is the min, -A
        (1.5, -2.0, 2.0),  # above 1 + eps with A < 0: likewise, -A
        (1.1, 2.0, -2.0),  # inside the range: -A
        (0.9, -2.0, 2.0),
    ],
)
def test_clipped_surrogate_gradient(ratio: float, advantage: float, grad: float) -> None:
    rho = torch.tensor([ratio], requires_grad=True)
    loss = clipped_surrogate(rho, torch.tensor([advantage]), clip=0.2)
    loss.sum().backward()
    assert rho.grad is not None and rho.grad.item() == grad
    clipped = min(max(ratio, 0.8), 1.2)
    assert loss.item() == pytest.approx(-min(ratio * advantage, clipped * advantage))


# ---------------------------------------------------------------------------- acting


def test_explore_and_act_shapes_and_bounds() -> None:
    algo = make_ppo()
    obs = torch.randn(5, SPEC.obs_dim) * 10
    action, pre_tanh = algo.explore(obs)
    assert action.shape == pre_tanh.shape == (5, SPEC.act_dim)
    assert not action.requires_grad and torch.equal(action, torch.tanh(pre_tanh))
    assert action.abs().max() <= 1.0
    mode = algo.act(obs, deterministic=True)
    assert mode.shape == (5, SPEC.act_dim) and mode.abs().max() <= 1.0
    assert torch.equal(mode, algo.act(obs, deterministic=True))  # tanh of the mean
    assert algo.act(obs).shape == (5, SPEC.act_dim)
    # the initial policy: means ~ 0 and std ~ 1 (policy_init_scale = 0.01)
    mean, log_std = algo.actor(obs)
    assert mean.abs().max() < 0.2 and log_std.abs().max() < 0.2


def test_value_is_a_critic_of_an_empty_action() -> None:
    algo = make_ppo()
    assert algo.critic.act_dim == 0
    assert algo.value(torch.randn(T + 1, E, SPEC.obs_dim)).shape == (T + 1, E)


# ---------------------------------------------------------------------------- update


def test_update_returns_finite_scalars_and_changes_parameters() -> None:
    algo = make_ppo()
    before = [p.detach().clone() for p in algo.parameters()]
    metrics = algo.update(synthetic_rollout())
    assert {"loss/actor", "loss/critic", "stats/entropy", "stats/approx_kl",
            "stats/clip_fraction"} <= set(metrics)
    for name, value in metrics.items():
        assert isinstance(value, torch.Tensor) and value.dim() == 0, name
        assert torch.isfinite(value), name
    assert metrics["loss/critic"] > 0
    assert 0.0 <= metrics["stats/clip_fraction"] <= 1.0
    assert algo.updates == 1
    for old, new in zip(before, algo.parameters()):
        assert not torch.equal(old, new)  # every tensor, actor and critic, moved
    obs = synthetic_rollout().obs[:-1].reshape(T * E, -1)
    pre_tanh = synthetic_rollout().pre_tanh.reshape(T * E, -1)
    assert torch.allclose(log_prob(*algo.actor(obs), pre_tanh), algo.actor.log_prob(obs, pre_tanh))
    state = algo.state_dict()
    assert set(state["optimizers"]) == {"actor_critic"}
    copy = make_ppo(seed=7)
    copy.load_state_dict(state)
    obs = torch.randn(4, SPEC.obs_dim)
    assert torch.equal(copy.act(obs, True), algo.act(obs, True))


def test_first_epoch_starts_at_ratio_one() -> None:
    """The behaviour log-probs are the current policy's: one step of one minibatch sees rho = 1."""
    algo = make_ppo(epochs=1, num_minibatches=1)
    metrics = algo.update(synthetic_rollout())
    assert metrics["stats/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert metrics["stats/clip_fraction"] == 0.0
    assert metrics["stats/approx_kl"] == pytest.approx(0.0, abs=1e-6)


def test_update_ignores_invalid_rows() -> None:
    rollout = synthetic_rollout()
    metrics, params = update_once(rollout)
    # t = 3 of env 0 follows a termination: everything about it is unused, its obs (the final
    # observation of the ended episode) included
    poked = synthetic_rollout()
    poked.reward[3, 0] = 1e3
    poked.pre_tanh[3, 0] = torch.tensor([4.0, -4.0])
    poked.action[3, 0] = torch.tanh(poked.pre_tanh[3, 0])
    poked.obs[3, 0] = torch.tensor([50.0, -50.0, 50.0])
    poked.reward[6, 0] = -1e3  # t = 6 follows the truncation
    poked.pre_tanh[6, 0] = torch.tensor([-3.0, 3.0])
    poked_metrics, poked_params = update_once(poked)
    assert metrics.keys() == poked_metrics.keys()
    for name in metrics:
        assert torch.equal(metrics[name], poked_metrics[name]), name
    for p, q in zip(params, poked_params):
        assert torch.equal(p, q)
    # ... but the obs of t = 6 is the truncated episode's final observation, which t = 5
    # bootstraps from: changing it changes the update
    bootstrap = synthetic_rollout()
    bootstrap.obs[6, 0] = torch.tensor([50.0, -50.0, 50.0])
    _, bootstrap_params = update_once(bootstrap)
    assert not all(torch.equal(p, q) for p, q in zip(params, bootstrap_params))


def test_invalid_values_and_critic_kind_are_refused() -> None:
    with pytest.raises(ValueError, match="clip"):
        make_ppo(clip=0.0)
    with pytest.raises(ValueError, match="num_minibatches"):
        make_ppo(num_minibatches=0)
    with pytest.raises(ValueError, match="exceeds the rollout's 16 rows"):
        make_ppo(num_minibatches=17).update(synthetic_rollout())
    with pytest.raises(ValueError, match="trains: EnsembleCritic"):
        PPO(SPEC, actor=partial(TanhGaussianActor, **actor_args("sac", hidden=[8])),
            critic=partial(DistributionalCritic, **critic_args("distributional", hidden=[8])),
            **algo_args("ppo"))


# ---------------------------------------------------------------------------- config and CLI


def test_yaml_composes_and_builds() -> None:
    """Every key of examples/conf/algo/ppo.yaml but the trainer's (name, rollout_steps) is a
    constructor argument; the algo file picks the single V-critic and no tuner."""
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=[SEARCHPATH, "algo=ppo", "env=InvertedPendulum"])
    assert cfg.algo.rollout_steps == 2048 and cfg.algo.name == "ppo"
    assert cfg.critic._target_ == "rlzoo.nets.EnsembleCritic" and cfg.critic.n == 1
    assert list(cfg.critic.hidden) == [64, 64] and cfg.critic.activation == "tanh"
    assert not cfg.get("tuner")
    algo_cfg = OmegaConf.masked_copy(
        cfg.algo, [k for k in cfg.algo if k not in ("name", "rollout_steps")])
    algo = instantiate(algo_cfg, spec=EnvSpec(4, 1), critic=cfg.critic)
    assert isinstance(algo, PPO) and PPO.on_policy and not PPO.multi_agent
    assert algo.num_minibatches == 32 and algo.epochs == 10 and algo.clip == 0.2
    assert algo.optimizer.param_groups[0]["eps"] == 1e-5
    assert math.isclose(algo.optimizer.param_groups[0]["lr"], 3e-4)


CLI = ["algo=ppo", SEARCHPATH, "log.progress=false", "eval.episodes=2"]


def test_cli_smoke_pendulum(tmp_path: Path) -> None:
    """Needs the one loop (rollout storage for any on-policy algorithm)."""
    run_dir = tmp_path / "run"
    proc = run_cli([*CLI, "env=Pendulum", "total_steps=600", "algo.rollout_steps=200",
                    "algo.num_minibatches=4", "algo.epochs=2"], run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run_dir)
    assert summary["total_steps"] == 600 and summary["algo"] == "ppo"
    assert summary["updates"] >= 2 and math.isfinite(summary["final_eval_return"])


@pytest.mark.slow
def test_ppo_solves_inverted_pendulum(tmp_path: Path) -> None:
    """Measured through the CLI with these defaults: eval return 1000 at 40960 and 49152 env
    steps on seeds 0-7 (between 162 and 1000 at 30720); 49152 = 24 rollouts of 2048."""
    run_dir = tmp_path / "run"
    proc = run_cli([*CLI, "env=InvertedPendulum", "total_steps=49152", "eval.every=0",
                    "eval.episodes=10"], run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run_dir)
    assert summary["final_eval_return"] >= 900, summary
