"""SAC and TD3 as components: shapes, finite losses, gradient isolation, targets, round trips."""

from __future__ import annotations

import io
import math
from functools import partial

import pytest
import torch

from rlzoo.algos import SAC, TD3, EnvSpec
from rlzoo.buffers import Batch
from rlzoo.nets import DeterministicActor, EnsembleCritic, TanhGaussianActor, TwinCritic
from rlzoo.optim.entropy import AutoAlpha, FixedAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args

SPEC = EnvSpec(obs_dim=5, act_dim=2)


def make_sac(**kwargs) -> SAC:
    parts = {
        "actor": partial(TanhGaussianActor, **actor_args("sac", hidden=[32, 32])),
        "critic": partial(TwinCritic, **critic_args("twin", hidden=[32, 32])),
        "tuner": partial(AutoAlpha, **tuner_args("auto")),
    }
    return SAC(SPEC, **algo_args("sac", **{**parts, **kwargs}))


def make_td3(**kwargs) -> TD3:
    return TD3(
        SPEC,
        **algo_args(
            "td3",
            actor=partial(DeterministicActor, **actor_args("td3", hidden=[32, 32])),
            critic=partial(
                TwinCritic, **critic_args("twin", hidden=[32, 32], actor_reduce="first")
            ),
            **kwargs,
        ),
    )


def make_batch(b: int = 16, terminated: float = 0.0) -> Batch:
    term = torch.full((b,), terminated)
    return Batch(
        obs=torch.randn(b, 5), action=torch.rand(b, 2) * 2 - 1, reward=torch.randn(b),
        next_obs=torch.randn(b, 5), discount=0.99 * (1 - term), terminated=term,
    )


def grads(module: torch.nn.Module) -> list[torch.Tensor | None]:
    return [p.grad for p in module.parameters()]


@pytest.mark.parametrize("make", [make_sac, make_td3])
def test_update_returns_finite_scalar_tensors(make) -> None:
    algo = make()
    metrics = {}
    for _ in range(4):
        metrics.update(algo.update(make_batch()))
    assert {"loss/critic", "loss/actor", "stats/q_mean"} <= set(metrics)
    for name, value in metrics.items():
        assert torch.is_tensor(value) and value.dim() == 0, name
        assert torch.isfinite(value), name
        assert not value.requires_grad, name


def test_sac_actor_loss_leaves_no_gradient_on_critic() -> None:
    algo = make_sac()
    loss, log_prob = algo.actor_loss(torch.randn(8, 5), algo.alpha)
    loss.backward()
    assert all(g is None for g in grads(algo.critic))
    assert any(g is not None and g.abs().sum() > 0 for g in grads(algo.actor))
    assert log_prob.shape == (8,)


def test_sac_critic_loss_leaves_no_gradient_on_actor_or_targets() -> None:
    algo = make_sac()
    loss, q = algo.critic_loss(make_batch(), algo.alpha)
    assert q.shape == (2, 16)
    loss.backward()
    assert all(g is None for g in grads(algo.actor))
    assert all(g is None for g in grads(algo.target_critic))
    assert all(g is not None for g in grads(algo.critic))


def test_td3_gradient_isolation() -> None:
    algo = make_td3()
    algo.actor_loss(torch.randn(8, 5)).backward()
    assert all(g is None for g in grads(algo.critic))
    assert all(g is not None for g in grads(algo.actor))
    algo.actor.zero_grad(set_to_none=True)
    loss, _ = algo.critic_loss(make_batch())
    loss.backward()
    assert all(g is None for g in grads(algo.actor))
    assert all(g is None for g in grads(algo.target_actor))
    assert all(g is None for g in grads(algo.target_critic))


def test_sac_target_by_hand_with_terminal() -> None:
    """With discount 0 (terminal) the target is the reward: loss = sum_i mean (Q_i - r)^2."""
    algo = make_sac()
    batch = make_batch(terminated=1.0)
    loss, q = algo.critic_loss(batch, algo.alpha)
    expected = ((q - batch.reward) ** 2).mean(1).sum()
    torch.testing.assert_close(loss, expected)


def test_sac_target_uses_min_of_targets_and_entropy() -> None:
    algo = make_sac(tuner=partial(FixedAlpha, **tuner_args("fixed", alpha=0.5)))
    batch = make_batch()
    torch.manual_seed(5)
    loss, q = algo.critic_loss(batch, algo.alpha)
    torch.manual_seed(5)
    next_action, next_log_prob = algo.actor.sample(batch.next_obs)
    q_next = algo.target_critic(batch.next_obs, next_action).min(0).values
    target = batch.reward + batch.discount * (q_next - 0.5 * next_log_prob)
    torch.testing.assert_close(loss, ((q - target) ** 2).mean(1).sum())


def test_td3_delays_actor_and_target_updates() -> None:
    algo = make_td3(policy_delay=2)
    actor_before = [p.clone() for p in algo.actor.parameters()]
    target_before = [p.clone() for p in algo.target_critic.parameters()]
    metrics = algo.update(make_batch())
    assert "loss/actor" not in metrics
    assert all(torch.equal(a, b) for a, b in zip(actor_before, algo.actor.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(target_before, algo.target_critic.parameters()))
    metrics = algo.update(make_batch())
    assert "loss/actor" in metrics
    assert not all(torch.equal(a, b) for a, b in zip(actor_before, algo.actor.parameters()))


def test_sac_default_target_entropy_is_minus_the_action_size() -> None:
    assert make_sac().tuner.target_entropy == -2.0  # -|A|


# -|A| = -2 lies below the entropy of this fresh policy; +2 lies above the largest entropy an
# action in [-1, 1]^2 can have (2 log 2 = 1.39, the uniform's), so no policy reaches it.
@pytest.mark.parametrize(("target_entropy", "direction"), [(-2.0, -1.0), (2.0, 1.0)])
def test_sac_alpha_moves_toward_target_entropy(target_entropy: float, direction: float) -> None:
    """Entropy above the target -> alpha decreases at every step; below -> it increases."""
    algo = make_sac(tuner=partial(AutoAlpha, **tuner_args("auto", target_entropy=target_entropy)))
    alphas = [algo.alpha.item()]
    for _ in range(6):
        metrics = algo.update(make_batch())
        alphas.append(algo.alpha.item())
        above = metrics["stats/entropy"].item() > target_entropy
        assert above == (direction < 0), (metrics["stats/entropy"], target_entropy)
    steps = torch.tensor(alphas).diff()
    assert (steps.sign() == direction).all(), alphas
    # Adam's first steps are about lr each in log alpha (conf/tuner/auto.yaml: lr 1e-3)
    lr = tuner_args("auto")["lr"]
    assert math.log(alphas[-1] / alphas[0]) == pytest.approx(6 * lr * direction, rel=0.2)


@pytest.mark.parametrize("make", [make_sac, make_td3])
def test_state_dict_round_trip_includes_optimizers(make) -> None:
    a = make()
    for _ in range(3):
        a.update(make_batch())
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b = make()
    b.load_state_dict(torch.load(buf, weights_only=True))
    assert b.updates == a.updates
    modules_a, modules_b = a.state_dict()["modules"], b.state_dict()["modules"]
    for (name, pa), pb in zip(modules_a.items(), modules_b.values()):
        assert torch.equal(pa, pb), name
    batch = make_batch()
    torch.manual_seed(1)
    ma = a.update(batch)
    torch.manual_seed(1)
    mb = b.update(batch)
    for key in ma:
        assert torch.equal(ma[key], mb[key]), key


def test_act_shapes_and_determinism() -> None:
    algo = make_sac()
    obs = torch.randn(3, 5)
    a1, a2 = algo.act(obs, deterministic=True), algo.act(obs, deterministic=True)
    assert a1.shape == (3, 2) and torch.equal(a1, a2) and a1.abs().max() < 1
    assert not torch.equal(algo.act(obs), algo.act(obs))
    td3 = make_td3()
    assert td3.act(obs).shape == (3, 2) and td3.act(obs).abs().max() <= 1


def test_unsupported_critic_is_refused_in_one_line() -> None:
    class OtherCritic(EnsembleCritic):
        pass

    class PickySAC(SAC):
        supported_critics = (TwinCritic,)

    with pytest.raises(ValueError, match="cannot train an OtherCritic; it trains: TwinCritic"):
        PickySAC(
            SPEC,
            actor=partial(TanhGaussianActor, **actor_args("sac", hidden=[8])),
            critic=partial(OtherCritic, **critic_args("ensemble", hidden=[8])),
            tuner=partial(FixedAlpha, **tuner_args("fixed")),
            **algo_args("sac"),
        )


def test_bad_hyperparameters_are_refused() -> None:
    with pytest.raises(ValueError, match="tau"):
        make_sac(tau=0.0)
    with pytest.raises(ValueError, match="gamma"):
        make_td3(gamma=1.5)
