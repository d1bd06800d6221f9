"""DSAC-T as a component: target policy, delayed actor/alpha/targets, the target fed to the
distributional loss, gradient isolation, refusal of other critics, and exact round trips."""

from __future__ import annotations

import io
from functools import partial

import pytest
import torch

from rlzoo.algos import DSACT, EnvSpec
from rlzoo.buffers import Batch
from rlzoo.nets import DistributionalCritic, EnsembleCritic, TanhGaussianActor
from rlzoo.optim.entropy import AutoAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args

SPEC = EnvSpec(obs_dim=4, act_dim=2)
TAU = 0.005


def make_dsac_t(**kwargs) -> DSACT:
    parts = {
        "actor": partial(TanhGaussianActor,
                         **actor_args("sac", hidden=[16, 16], activation="gelu", log_std_min=-20.0,
                                      log_std_max=0.5)),
        "critic": partial(DistributionalCritic,
                          **critic_args("distributional", hidden=[16, 16], activation="gelu")),
        "tuner": partial(AutoAlpha, **tuner_args("auto", init_alpha=2.718281828459045, lr=3e-4)),
    }
    return DSACT(SPEC, **algo_args("dsac_t", **{**parts, **kwargs}, tau=TAU))


def make_batch(b: int = 32) -> Batch:
    terminated = (torch.arange(b) % 4 == 0).float()
    return Batch(
        obs=torch.randn(b, 4), action=torch.rand(b, 2) * 2 - 1, reward=torch.randn(b),
        next_obs=torch.randn(b, 4), discount=0.99 * (1 - terminated), terminated=terminated,
    )


def flat(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def test_defaults_are_dsac_t() -> None:
    algo = make_dsac_t()
    assert algo.policy_delay == 2 and algo.target_delay == 2
    assert algo.actor_optimizer.param_groups[0]["lr"] == 1e-4
    assert algo.critic_optimizer.param_groups[0]["lr"] == 1e-4
    assert algo.alpha.item() == pytest.approx(2.718281828459045)
    assert not any(p.requires_grad for p in algo.target_actor.parameters())
    assert not any(p.requires_grad for p in algo.target_critic.parameters())
    torch.testing.assert_close(flat(algo.target_actor), flat(algo.actor))


def test_policy_alpha_and_targets_step_every_second_critic_step() -> None:
    algo = make_dsac_t()
    actor0, critic0 = flat(algo.actor), flat(algo.critic)
    target_actor0, target_critic0 = flat(algo.target_actor), flat(algo.target_critic)
    log_alpha0 = algo.tuner.log_alpha.detach().clone()
    first = algo.update(make_batch())
    assert "loss/actor" not in first and "stats/running_std" in first
    assert not torch.equal(flat(algo.critic), critic0)  # the critic steps every time
    assert torch.equal(flat(algo.actor), actor0)
    assert torch.equal(algo.tuner.log_alpha.detach(), log_alpha0)
    assert torch.equal(flat(algo.target_actor), target_actor0)
    assert torch.equal(flat(algo.target_critic), target_critic0)
    second = algo.update(make_batch())
    assert {"loss/actor", "loss/alpha", "stats/alpha"} <= set(second)
    actor2 = flat(algo.actor)
    assert not torch.equal(actor2, actor0)
    assert not torch.equal(algo.tuner.log_alpha.detach(), log_alpha0)
    # Polyak of the target policy after its step: (1 - tau) theta' + tau theta.
    torch.testing.assert_close(flat(algo.target_actor), (1 - TAU) * target_actor0 + TAU * actor2)
    torch.testing.assert_close(
        flat(algo.target_critic), (1 - TAU) * target_critic0 + TAU * flat(algo.critic)
    )


def test_target_uses_the_target_policy_and_both_values(monkeypatch: pytest.MonkeyPatch) -> None:
    algo = make_dsac_t()
    batch = make_batch(8)
    next_action, next_log_prob = torch.rand(8, 2), torch.randn(8)
    seen: dict[str, torch.Tensor] = {}

    def target_sample(obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seen["obs"] = obs
        return next_action, next_log_prob

    def online_sample(obs: torch.Tensor):
        raise AssertionError("a' must come from the target policy")

    def next_value(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        assert torch.equal(action, next_action)
        return torch.stack([torch.full((8,), 2.0), torch.full((8,), 5.0)])

    def td_loss(obs, action, target):
        seen["target"] = target
        return (algo.critic(obs, action) ** 2).mean(), algo.critic(obs, action)

    monkeypatch.setattr(algo.target_actor, "sample", target_sample)
    monkeypatch.setattr(algo.actor, "sample", online_sample)
    monkeypatch.setattr(algo.target_critic, "next_value", next_value)
    monkeypatch.setattr(algo.critic, "td_loss", td_loss)
    algo.update(batch)  # first update: no actor step, so the online actor is never sampled
    assert torch.equal(seen["obs"], batch.next_obs)
    alpha = 2.718281828459045
    for row, value in enumerate((2.0, 5.0)):  # y (mean) and y_s (sample)
        expected = batch.reward + batch.discount * (value - alpha * next_log_prob)
        torch.testing.assert_close(seen["target"][row], expected)


def test_gradient_isolation() -> None:
    algo = make_dsac_t()
    critic_loss, _ = algo.critic_loss(make_batch(), algo.alpha)
    critic_loss.backward()
    assert all(p.grad is None for p in algo.actor.parameters())
    assert all(p.grad is None for p in algo.target_actor.parameters())
    assert all(p.grad is None for p in algo.target_critic.parameters())
    assert all(p.grad is not None for p in algo.critic.parameters())
    algo.critic.zero_grad(set_to_none=True)
    actor_loss, _ = algo.actor_loss(make_batch().obs, algo.alpha)
    actor_loss.backward()
    assert all(p.grad is None for p in algo.critic.parameters())
    assert all(p.grad is not None for p in algo.actor.parameters())


def test_other_critic_kinds_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="cannot train an EnsembleCritic; it trains: "
                                         "DistributionalCritic \\(choose"):
        make_dsac_t(critic=partial(EnsembleCritic, **critic_args("ensemble", hidden=[8])))


def test_state_dict_round_trip_continues_identically() -> None:
    algo = make_dsac_t()
    for _ in range(3):
        algo.update(make_batch())
    buffer = io.BytesIO()
    torch.save(algo.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert "critic.running_std" in state["modules"] and "target_actor.net.layers.0.weight" in \
        state["modules"]
    assert set(state["optimizers"]) == {"actor", "critic", "alpha"}
    restored = make_dsac_t()
    restored.load_state_dict(state)
    assert restored.updates == 3
    torch.testing.assert_close(restored.critic.running_std, algo.critic.running_std)
    batch = make_batch()
    torch.manual_seed(7)
    expected = algo.update(batch)
    torch.manual_seed(7)
    got = restored.update(batch)
    assert set(got) == set(expected)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name])
    torch.testing.assert_close(flat(restored.actor), flat(algo.actor))
    torch.testing.assert_close(flat(restored.target_actor), flat(algo.target_actor))
