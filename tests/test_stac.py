"""STAC (arXiv:2601.00737v1) term by term: the beta-pessimistic TD target (Eq. 13), the log loss
(Eq. 14) and the pessimistic policy-improvement objective (Algorithm 1, Sec. 4.2) as
``algo=stac`` computes them through SAC with ``GaussianCritic``, against the equations written
out by hand; plus where the gradients go, and a slow learning test on Pendulum."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import pytest
import torch
from conftest import TINY, read_summary, run_cli

from rlzoo.algos import SAC, EnvSpec
from rlzoo.buffers import Batch
from rlzoo.nets import GaussianCritic, TanhGaussianActor
from rlzoo.optim.entropy import AutoAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args

SPEC = EnvSpec(obs_dim=3, act_dim=2)


def constant(critic: GaussianCritic, mean: float, raw_std: float) -> GaussianCritic:
    """Make every member output ``mu = mean``, ``sigma = softplus(raw_std)`` for any input."""
    with torch.no_grad():
        for p in critic.net.parameters():
            p.zero_()
        critic.net.output_layer.bias.copy_(torch.tensor([mean, raw_std]))
    return critic


def stac(beta: float, init_alpha: float = 0.3) -> SAC:
    return SAC(
        SPEC,
        actor=partial(TanhGaussianActor, **actor_args("sac", hidden=[8])),
        critic=partial(GaussianCritic, **critic_args("gaussian", pessimism=beta, hidden=[8])),
        tuner=partial(AutoAlpha, **tuner_args("auto", init_alpha=init_alpha)),
        **algo_args("sac", critic_lr=3e-4, actor_lr=3e-4, target_delay=1),
    )


def batch() -> Batch:
    return Batch(obs=torch.zeros(2, 3), action=torch.zeros(2, 2),
                 reward=torch.tensor([1.0, -2.0]), next_obs=torch.zeros(2, 3),
                 discount=torch.tensor([0.99, 0.0]),  # gamma (not done); the second is terminal
                 terminated=torch.tensor([0.0, 1.0]))


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))


def test_eq13_target_and_eq14_log_loss_term_by_term(monkeypatch: pytest.MonkeyPatch) -> None:
    beta, alpha, gamma = 0.5, 0.3, 0.99
    algo = stac(beta, init_alpha=alpha)
    constant(algo.critic, mean=2.0, raw_std=0.4)  # mu_theta, sigma_theta
    constant(algo.target_critic, mean=1.5, raw_std=-0.7)  # mu_theta-bar, sigma_theta-bar
    log_pi = torch.tensor([-1.2, 0.6])  # log pi_phi(a~'|s') of the sampled next actions
    monkeypatch.setattr(algo, "next_action", lambda next_obs: (torch.zeros(2, 2), log_pi))

    loss, mu = algo.critic_loss(batch(), algo.alpha)

    # Eq. (13): Q_i^TD = r_i + gamma (mu'(s', a~') - beta sigma'(s', a~') - alpha log pi) (not done)
    mu_t, sigma_t = 1.5, softplus(-0.7)
    q_td = [1.0 + gamma * (mu_t - beta * sigma_t - alpha * log_pi[0].item()) * 1.0,
            -2.0 + gamma * (mu_t - beta * sigma_t - alpha * log_pi[1].item()) * 0.0]
    # Eq. (14): 1/2 log 2 pi + 1/(2 N_b) sum_i (log sigma^2 + (Q_i^TD - mu)^2 / sigma^2)
    mu_o, sigma_o = 2.0, softplus(0.4)
    n_b = 2
    eq14 = 0.5 * math.log(2 * math.pi) + sum(
        math.log(sigma_o**2) + (q - mu_o) ** 2 / sigma_o**2 for q in q_td
    ) / (2 * n_b)
    assert loss.item() == pytest.approx(eq14, rel=1e-6)
    torch.testing.assert_close(mu, torch.full((1, 2), mu_o))
    # and the target itself, as the critic receives it
    seen: dict[str, torch.Tensor] = {}

    def record(obs: torch.Tensor, action: torch.Tensor, target: torch.Tensor) -> tuple:
        seen["y"] = target
        return loss, mu

    monkeypatch.setattr(algo.critic, "td_loss", record)
    algo.critic_loss(batch(), algo.alpha)
    torch.testing.assert_close(seen["y"], torch.tensor([q_td]), rtol=1e-6, atol=1e-6)


def test_policy_improvement_ascends_mu_minus_beta_sigma(monkeypatch: pytest.MonkeyPatch) -> None:
    beta, alpha = 0.25, 0.3
    algo = stac(beta, init_alpha=alpha)
    constant(algo.critic, mean=-1.0, raw_std=1.1)
    log_pi = torch.tensor([0.2, -0.4])
    monkeypatch.setattr(algo.actor, "sample", lambda obs: (torch.zeros(2, 2), log_pi))
    actor_loss, _ = algo.actor_loss(torch.zeros(2, 3), algo.alpha)
    # Algorithm 1: phi <- phi - eta grad (1/N_b) sum_i E[mu - beta sigma - alpha log pi] (ascent);
    # as a loss to minimise: mean(alpha log pi - (mu - beta sigma))
    value = -1.0 - beta * softplus(1.1)
    expected = sum(alpha * lp - value for lp in log_pi.tolist()) / 2
    assert actor_loss.item() == pytest.approx(expected, rel=1e-6)


def test_beta_zero_is_the_plain_gaussian_backup_and_two_members_take_the_min() -> None:
    critic = constant(GaussianCritic(3, 2,
                                     **critic_args("gaussian", n=2, pessimism=0.0,
                                                   hidden=[8])), 0.0, 0.0)
    with torch.no_grad():
        critic.net.output_layer.bias.copy_(torch.tensor([[[3.0, 0.0]], [[1.0, 2.0]]]))
    # beta = 0: min of the means (ESTAC's min-clipping); beta = 1: min of mu - sigma
    assert critic.next_value(torch.zeros(1, 3), torch.zeros(1, 2)).tolist() == [[1.0]]
    critic.pessimism = 1.0
    want = min(3.0 - softplus(0.0), 1.0 - softplus(2.0))
    assert critic.next_value(torch.zeros(1, 3), torch.zeros(1, 2)).item() == pytest.approx(want)


def test_sigma_is_softplus_of_the_clamped_logit_and_its_bias_starts_at_zero() -> None:
    critic = GaussianCritic(3, 2, **critic_args("gaussian", hidden=[8]))
    assert torch.equal(critic.net.output_layer.bias[..., 1], torch.zeros(1, 1))
    constant(critic, 0.0, -9.0)
    _, sigma = critic.distribution(torch.zeros(1, 3), torch.zeros(1, 2))
    assert sigma.item() == pytest.approx(softplus(-5.0))


def test_critic_loss_touches_only_the_critic() -> None:
    algo = stac(0.5)
    algo.critic_loss(batch(), algo.alpha)[0].backward()
    assert all(p.grad is not None for p in algo.critic.parameters())
    assert all(p.grad is None for p in algo.actor.parameters())
    assert all(p.grad is None for p in algo.target_critic.parameters())
    assert algo.tuner.log_alpha.grad is None


@pytest.mark.parametrize(("override", "fragment"), [
    ("critic.pessimism=-0.5", "critic.pessimism must be >= 0"),
    ("critic.n=0", "critic.n must be an integer"),
])
def test_impossible_stac_settings_fail_in_one_line(
    tmp_path: Path, override: str, fragment: str
) -> None:
    from conftest import assert_user_error

    proc = run_cli(["algo=stac", override, *TINY, "total_steps=10"], tmp_path / "run")
    assert_user_error(proc, fragment)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_stac_learns_pendulum(tmp_path: Path) -> None:
    # Pendulum-v1: random about -1200; swing-up and balance from every start -150 to -250. The
    # mean of 10 deterministic episodes above -400 means the swing-up was learned from most
    # starts (the threshold of tests/test_compositions.py's learning tests).
    run_dir = tmp_path / "run"
    proc = run_cli(
        ["algo=stac", "env=Pendulum", "total_steps=6000", "algo.learning_starts=1000",
         "eval.every=0", "eval.episodes=10", "checkpoint.every=0", "log.progress=false",
         "seed=0"],
        run_dir, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_summary(run_dir)["final_eval_return"] > -400.0


def test_algo_stac_carries_the_papers_defaults() -> None:
    from hydra import compose, initialize_config_module

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=["algo=stac"])
    assert cfg.critic._target_.endswith("GaussianCritic")
    assert (cfg.critic.n, cfg.critic.pessimism, cfg.critic.layer_norm) == (1, 0.25, True)
    assert (cfg.algo.actor_lr, cfg.algo.critic_lr, cfg.algo.gamma, cfg.algo.tau) == (
        3e-4, 3e-4, 0.99, 0.005)
    assert (cfg.algo.batch_size, cfg.algo.learning_starts, cfg.algo.utd) == (256, 10000, 1)
    assert (cfg.algo.policy_delay, cfg.algo.target_delay) == (1, 1)
    assert (cfg.tuner.init_alpha, cfg.tuner.target_entropy) == (0.2, None)  # -|A|
    assert (cfg.critic.dropout, cfg.algo.actor.dropout, cfg.algo.actor.layer_norm) == (
        0.01, 0.01, True)
