"""TD3's target policy smoothing, numerically: the next action in the critic target is
``a' = clip(mu'(s') + clip(sigma * eps, -c, c), -1, 1)``, ``eps ~ N(0, 1)`` (Fujimoto et al. 2018,
eq. 14; in the normalized action space, as CleanRL's td3_continuous_action.py up to its
action_scale), and the target is ``r + discount * min_i Q'_i(s', a')``."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch import nn

from rlzoo.algos import TD3, EnvSpec
from rlzoo.buffers import Batch
from rlzoo.nets import DeterministicActor, TwinCritic
from tests.from_yaml import actor_args, algo_args, critic_args

SPEC = EnvSpec(obs_dim=3, act_dim=4)


class FixedActor(nn.Module):
    """A target actor whose output ``[B, A]`` is a given tensor."""

    def __init__(self, output: torch.Tensor) -> None:
        super().__init__()
        self.output = output

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.output


def make_td3(**kwargs) -> TD3:
    return TD3(
        SPEC,
        **algo_args(
            "td3",
            actor=partial(DeterministicActor, **actor_args("td3", hidden=[16])),
            critic=partial(TwinCritic, **critic_args("twin", hidden=[16], actor_reduce="first")),
            **kwargs,
        ),
    )


def make_batch(b: int) -> Batch:
    return Batch(
        obs=torch.randn(b, 3), action=torch.rand(b, 4) * 2 - 1, reward=torch.randn(b),
        next_obs=torch.randn(b, 3), discount=torch.full((b,), 0.99), terminated=torch.zeros(b),
    )


def record_next_action(algo: TD3) -> dict[str, torch.Tensor]:
    """Replace the target critic's ``next_value`` by one that records its action."""
    seen: dict[str, torch.Tensor] = {}
    next_value = algo.target_critic.next_value

    def record(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        seen["action"] = action.clone()
        seen["value"] = next_value(obs, action)
        return seen["value"]

    algo.target_critic.next_value = record
    return seen


def test_controlled_noise_hits_both_clips(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chosen noise and target-actor outputs: each clip acts where, and only where, it should."""
    algo = make_td3(policy_noise=0.2, noise_clip=0.5)
    mu = torch.tensor([[0.0, 0.9, -0.9, 0.3],
                       [0.95, -0.95, 0.0, -0.2]])
    eps = torch.tensor([[1.0, 1.0, -1.0, -4.0],     # 0.2, 0.2, -0.2, -0.8 -> clip to -0.5
                        [4.0, -4.0, 10.0, 0.5]])    # 0.8 -> 0.5, -0.8 -> -0.5, 2 -> 0.5, 0.1
    expected = torch.tensor([[0.2, 1.0, -1.0, -0.2],   # 0.9 + 0.2 and -0.9 - 0.2 hit the +-1 clip
                             [1.0, -1.0, 0.5, -0.1]])  # 0.95 + 0.5, -0.95 - 0.5 clip too
    algo.target_actor = FixedActor(mu)
    monkeypatch.setattr(torch, "randn_like", lambda x: eps.clone())
    seen = record_next_action(algo)
    algo.critic_loss(make_batch(2))
    torch.testing.assert_close(seen["action"], expected, atol=1e-6, rtol=0)


def test_seeded_noise_matches_the_formula() -> None:
    """Real target actor, real N(0, 1) draws under a fixed seed: the recorded next action equals
    the formula computed from the same draws, and the target is r + discount * min_i Q'_i."""
    algo = make_td3(policy_noise=0.6, noise_clip=0.5)  # wide noise: the clip is often active
    with torch.no_grad():  # larger weights: many target actions near the bounds
        for param in algo.target_actor.parameters():
            param.mul_(4.0)
    batch = make_batch(512)
    seen = record_next_action(algo)
    targets: dict[str, torch.Tensor] = {}
    td_loss = algo.critic.td_loss
    algo.critic.td_loss = lambda o, a, y: (targets.setdefault("y", y.clone()), td_loss(o, a, y))[1]
    torch.manual_seed(123)
    algo.critic_loss(batch)
    torch.manual_seed(123)
    eps = torch.randn_like(batch.action)
    with torch.no_grad():
        mu = algo.target_actor(batch.next_obs)
        noise = (0.6 * eps).clamp(-0.5, 0.5)
        expected = (mu + noise).clamp(-1.0, 1.0)
        q1, q2 = algo.target_critic(batch.next_obs, expected)
    torch.testing.assert_close(seen["action"], expected, atol=1e-6, rtol=0)
    assert ((0.6 * eps).abs() > 0.5).float().mean() > 0.3  # the noise clip was exercised
    assert (seen["action"] - mu).abs().max() <= 0.5 + 1e-6
    assert (seen["action"].abs() == 1.0).float().mean() > 0.05  # the action clip was exercised
    torch.testing.assert_close(
        targets["y"].reshape(-1), batch.reward + batch.discount * torch.min(q1, q2), atol=1e-5,
        rtol=0,
    )
