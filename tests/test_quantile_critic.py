"""TQC's truncated quantile critic (rlzoo/nets/quantile.py, critic=tqc): the quantile Huber loss by
hand and against sb3-contrib's, its minimiser, the truncated pooled target, and its gradient."""

from __future__ import annotations

import pytest
import torch

from rlzoo.nets import TruncatedQuantileCritic
from tests.from_yaml import critic_args


def constant_quantile_critic(values: list[float], drop: int = 0) -> TruncatedQuantileCritic:
    """One network whose M quantiles are ``values`` whatever the input."""
    critic = TruncatedQuantileCritic(1, 1, **critic_args("tqc", n=1, quantiles=len(values),
                                                         drop_per_member=drop, hidden=[4]))
    with torch.no_grad():
        out = critic.net.output_layer
        out.weight.zero_()
        out.bias.copy_(torch.tensor(values).view(1, 1, -1))
    return critic


def test_quantile_huber_loss_by_hand() -> None:
    critic = constant_quantile_critic([0.0, 1.0])  # tau = (0.25, 0.75)
    obs, action = torch.zeros(3, 1), torch.zeros(3, 1)
    loss, q = critic.td_loss(obs, action, torch.full((2, 3), 0.5))
    # delta = 0.5 - 0 = 0.5 (weight |0.25 - 0| = 0.25) and 0.5 - 1 = -0.5 (weight |0.75 - 1|):
    # each term 0.25 * 0.5 * 0.5^2 = 0.03125
    assert loss.item() == pytest.approx(0.03125)
    assert q.shape == (1, 3) and torch.allclose(q, torch.full((1, 3), 0.5))
    # beyond |delta| = 1 the Huber loss is linear: target 3 -> deltas 3 and 2, weights .25 and .75
    loss, _ = critic.td_loss(obs, action, torch.full((1, 3), 3.0))
    assert loss.item() == pytest.approx((0.25 * 2.5 + 0.75 * 1.5) / 2)


def test_the_loss_is_sb3_contribs() -> None:
    """The loss and its gradient equal sb3-contrib's quantile_huber_loss with TQC's reduction
    (sum_over_quantiles=False: the mean over all of [B, N, M, K]), when it is installed."""
    utils = pytest.importorskip("sb3_contrib.common.utils")
    critic = TruncatedQuantileCritic(3, 2, **critic_args("tqc", hidden=[8]))
    obs, action = torch.randn(6, 3), torch.rand(6, 2)
    target = critic.next_value(torch.randn(6, 3), torch.rand(6, 2)).detach() * 3 + 1  # [K, B]
    z = critic.outputs(obs, action)  # [N, B, M]
    ours, _ = critic.td_loss_from(z, target)
    theirs = utils.quantile_huber_loss(z.transpose(0, 1), target.T[:, None, :],
                                       sum_over_quantiles=False)
    torch.testing.assert_close(ours, theirs)
    g_ours = torch.autograd.grad(ours, z, retain_graph=True)[0]
    g_theirs = torch.autograd.grad(theirs, z)[0]
    torch.testing.assert_close(g_ours, g_theirs)


def test_quantile_loss_pulls_each_quantile_to_its_fraction() -> None:
    critic = constant_quantile_critic([50.0, 50.0, 50.0, 50.0])
    # a uniform target distribution on [0, 100], [K, 1]: wide against the Huber threshold 1, so
    # the minimiser is (nearly) the quantile at tau_m = 1/8, 3/8, 5/8, 7/8
    atoms = torch.linspace(0.0, 100.0, 401).view(-1, 1)
    obs = torch.zeros(1, 1)
    z = critic.net.output_layer.bias
    optimizer = torch.optim.SGD([z], lr=20.0)
    for _ in range(400):
        loss, _ = critic.td_loss(obs, obs, atoms)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert z.view(-1).tolist() == pytest.approx([12.5, 37.5, 62.5, 87.5], abs=1.0)


def test_truncated_next_value() -> None:
    critic = TruncatedQuantileCritic(
        3, 2, **critic_args("tqc", n=2, quantiles=4, drop_per_member=1, hidden=[8]))
    next_obs, next_action = torch.randn(5, 3), torch.randn(5, 2)
    atoms = critic.next_value(next_obs, next_action)
    assert atoms.shape == (6, 5)  # K = N (M - d) = 2 * 3
    pooled = critic.outputs(next_obs, next_action).transpose(0, 1).reshape(5, 8)
    assert torch.equal(atoms, pooled.sort(dim=1).values[:, :6].T)  # the 6 smallest, ascending
    q = critic(next_obs, next_action)
    assert q.shape == (2, 5) and torch.allclose(critic.actor_value(q),
                                                pooled.mean(1))  # all atoms, none dropped
    with pytest.raises(ValueError, match="drop_per_member"):
        TruncatedQuantileCritic(3, 2, **critic_args("tqc", quantiles=4, drop_per_member=4))
