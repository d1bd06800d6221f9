"""Networks: MLP, batched ensemble, actors, twin critic, target utilities."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from rlzoo.nets import (
    DeterministicActor,
    EnsembleCritic,
    EnsembleLinear,
    EnsembleMLP,
    TanhGaussianActor,
    TwinCritic,
)
from rlzoo.nets.ensemble import activation
from rlzoo.nets.target import frozen, make_target, polyak_update
from tests.from_yaml import actor_args, critic_args


def test_activations_by_name() -> None:
    assert isinstance(activation("gelu"), nn.GELU) and isinstance(activation("relu"), nn.ReLU)
    with pytest.raises(ValueError, match="unknown activation"):
        activation("swish9")


@pytest.mark.parametrize("out_features", [5, 1])  # 1: the value-head path (multiply + sum)
def test_ensemble_linear_matches_independent_linears(out_features: int) -> None:
    layer = EnsembleLinear(3, 4, out_features)
    assert layer.weight.shape == (3, 4, out_features)
    assert layer.bias.shape == (3, 1, out_features)
    x = torch.randn(3, 6, 4, requires_grad=True)
    out = layer(x)
    assert out.shape == (3, 6, out_features)
    for e in range(3):
        expected = x[e] @ layer.weight[e] + layer.bias[e]
        torch.testing.assert_close(out[e], expected)
    # gradients equal those of the plain matmul formulation
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, (x, layer.weight, layer.bias), grad_out)
    reference = torch.baddbmm(layer.bias, x, layer.weight)
    expected_grads = torch.autograd.grad(reference, (x, layer.weight, layer.bias), grad_out)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want)
    shared = torch.randn(6, 4)  # one input for every member
    out_shared = layer(shared)
    assert out_shared.shape == (3, 6, out_features)
    for e in range(3):
        torch.testing.assert_close(out_shared[e], shared @ layer.weight[e] + layer.bias[e])


def test_ensemble_members_are_independent() -> None:
    net = EnsembleMLP(4, 3, [8], 2, act="relu", layer_norm=False, dropout=0.0)
    x = torch.randn(4, 5, 3, requires_grad=True)
    net(x)[2].sum().backward()
    for layer in (net.layers[0], net.layers[-1]):
        grad = layer.weight.grad
        assert grad[2].abs().sum() > 0
        assert grad[[0, 1, 3]].abs().sum() == 0
    # different members start from different weights
    assert not torch.allclose(net.layers[0].weight[0], net.layers[0].weight[1])


def test_tanh_gaussian_log_prob_matches_hand_computation() -> None:
    actor = TanhGaussianActor(3, 2, **actor_args("sac", hidden=[16]))
    obs = torch.randn(5, 3)
    torch.manual_seed(1)
    action, log_prob = actor.sample(obs)
    torch.manual_seed(1)
    mean, log_std = actor(obs)
    noise = torch.randn_like(mean)
    u = mean + noise * log_std.exp()
    # change of variables by hand: log N(u) - sum log(1 - tanh(u)^2)
    normal = torch.distributions.Normal(mean, log_std.exp())
    expected = (normal.log_prob(u) - torch.log(1 - torch.tanh(u) ** 2)).sum(-1)
    torch.testing.assert_close(action, torch.tanh(u))
    torch.testing.assert_close(log_prob, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(actor.log_prob(obs, u), log_prob, rtol=1e-5, atol=1e-5)
    assert action.shape == (5, 2) and log_prob.shape == (5,)
    assert action.abs().max() < 1


def test_tanh_gaussian_scalar_case_by_hand() -> None:
    """One action dimension, mean 0, std 1, u = 0.5: log p = log N(0.5) - log(1 - tanh(0.5)^2)."""
    u = torch.tensor([[0.5]])
    actor = TanhGaussianActor(1, 1, **actor_args("sac", hidden=[]))
    with torch.no_grad():
        actor.net.layers[-1].weight.zero_()
        actor.net.layers[-1].bias.zero_()  # mean 0, log_std 0
    value = actor.log_prob(torch.zeros(1, 1), u).item()
    expected = -0.5 * 0.25 - 0.5 * math.log(2 * math.pi) - math.log(1 - math.tanh(0.5) ** 2)
    assert value == pytest.approx(expected, abs=1e-6)
    assert actor.mode(torch.zeros(1, 1)).item() == 0.0


def test_log_std_is_clamped_and_members() -> None:
    actor = TanhGaussianActor(3, 2, members=4,
                              **actor_args("sac", hidden=[8], log_std_min=-1.0, log_std_max=0.5))
    with torch.no_grad():
        actor.net.layers[-1].bias.fill_(100.0)
    mean, log_std = actor(torch.randn(4, 6, 3))
    assert mean.shape == (4, 6, 2) and torch.all(log_std == 0.5)
    with pytest.raises(ValueError):
        TanhGaussianActor(3, 2, **actor_args("sac", log_std_min=1.0, log_std_max=0.0))


def test_deterministic_actor_bounds_and_shapes() -> None:
    actor = DeterministicActor(4, 3, **actor_args("td3", hidden=[16]))
    out = actor(torch.randn(10, 4) * 100)
    assert out.shape == (10, 3) and out.abs().max() <= 1
    torch.testing.assert_close(actor.mode(torch.ones(2, 4)), actor(torch.ones(2, 4)))
    multi = DeterministicActor(4, 3, members=3, **actor_args("td3", hidden=[16]))
    assert multi(torch.randn(3, 5, 4)).shape == (3, 5, 3)


def test_twin_critic_is_ensemble_of_two() -> None:
    critic = TwinCritic(3, 2, **critic_args("twin", hidden=[16]))
    assert critic.members == 2
    obs, act = torch.randn(8, 3), torch.randn(8, 2)
    q = critic(obs, act)
    assert q.shape == (2, 8)
    torch.testing.assert_close(critic.next_value(obs, act), q.min(0).values[None])
    torch.testing.assert_close(critic.actor_value(q), q.min(0).values)
    target = torch.randn(1, 8)
    loss, q2 = critic.td_loss(obs, act, target)
    expected = ((q - target) ** 2).mean(1).sum()
    torch.testing.assert_close(loss, expected)
    assert torch.isfinite(loss)


def test_ensemble_critic_validates() -> None:
    with pytest.raises(ValueError, match="subset"):
        EnsembleCritic(3, 2, **critic_args("ensemble", n=3, subset=4))
    with pytest.raises(ValueError, match="actor_reduce"):
        EnsembleCritic(3, 2, **critic_args("ensemble", n=3, subset=2, actor_reduce="max"))


def test_polyak_update_and_target_has_no_grad() -> None:
    online = TwinCritic(3, 2, **critic_args("twin", hidden=[8]))
    target = make_target(online)
    assert all(not p.requires_grad for p in target.parameters())
    with torch.no_grad():
        for p in online.parameters():
            p.add_(1.0)
    before = [p.clone() for p in target.parameters()]
    polyak_update(target, online, 0.1)
    for b, t, o in zip(before, target.parameters(), online.parameters()):
        torch.testing.assert_close(t, 0.9 * b + 0.1 * o)


def test_frozen_blocks_parameter_gradients_only() -> None:
    critic = TwinCritic(3, 2, **critic_args("twin", hidden=[8]))
    action = torch.randn(4, 2, requires_grad=True)
    with frozen(critic):
        critic(torch.randn(4, 3), action).sum().backward()
    assert action.grad is not None and action.grad.abs().sum() > 0
    assert all(p.grad is None for p in critic.parameters())
    assert all(p.requires_grad for p in critic.parameters())
