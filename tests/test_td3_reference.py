"""TD3's update against a plain reference written with ``nn.Linear`` and ``torch.optim.Adam``.

The reference follows Fujimoto et al. 2018 (Algorithm 1) as Stable-Baselines3's ``TD3.train``
does (https://github.com/DLR-RM/stable-baselines3/blob/master/stable_baselines3/td3/td3.py):
critic loss ``sum_i mean_B (Q_i(s, a) - y)^2`` with
``y = r + gamma (1 - terminated) min_i Q'_i(s', a')``; every ``policy_delay`` critic steps the
actor ascends ``Q_1(s, mu(s))`` and both targets move by polyak averaging. Target smoothing noise
is off so both sides are deterministic. The env's bounds (here ±3, as InvertedPendulum-v5) must
not enter: actions live in ``[-1, 1]`` on both sides.
"""

from __future__ import annotations

import copy
from functools import partial

import torch
from torch import nn

from rlzoo.algos import TD3, EnvSpec
from rlzoo.buffers import Batch
from rlzoo.nets import DeterministicActor, TwinCritic
from tests.from_yaml import actor_args, algo_args, critic_args

HIDDEN = (16, 16)
GAMMA, TAU, LR, DELAY = 0.99, 0.005, 1e-3, 2


def _mlp(n_in: int, n_out: int, tanh: bool) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(n_in, HIDDEN[0]), nn.ReLU(),
                               nn.Linear(HIDDEN[0], HIDDEN[1]), nn.ReLU(),
                               nn.Linear(HIDDEN[1], n_out)]
    return nn.Sequential(*layers, *([nn.Tanh()] if tanh else []))


def _linears(seq: nn.Module) -> list[nn.Linear]:
    return [m for m in seq.modules() if isinstance(m, nn.Linear)]


def _ensemble_params(ensemble: nn.Module) -> list[torch.Tensor]:
    """``[weight [E, in, out], bias [E, 1, out]]`` per layer of an ``EnsembleMLP``."""
    return [p for m in ensemble.layers if hasattr(m, "weight") for p in (m.weight, m.bias)]


def _as_ensemble(members: list[nn.Sequential]) -> list[torch.Tensor]:
    """The reference networks' parameters laid out as ``EnsembleLinear`` stores them."""
    out: list[torch.Tensor] = []
    for layers in zip(*(_linears(m) for m in members)):
        out.append(torch.stack([lin.weight.T for lin in layers]))
        out.append(torch.stack([lin.bias[None] for lin in layers]))
    return out


@torch.no_grad()
def _load(ensemble: nn.Module, members: list[nn.Sequential]) -> None:
    for p, ref in zip(_ensemble_params(ensemble), _as_ensemble(members), strict=True):
        p.copy_(ref)


def test_td3_update_matches_a_plain_reference() -> None:
    torch.manual_seed(0)
    obs_dim, act_dim, batch_size = 4, 1, 32
    spec = EnvSpec(obs_dim, act_dim, action_low=(-3.0,), action_high=(3.0,))
    algo = TD3(
        spec,
        partial(DeterministicActor, **actor_args("td3", hidden=HIDDEN)),
        partial(TwinCritic, **critic_args("twin", hidden=HIDDEN, actor_reduce="first")),
        **algo_args(
            "td3",
            gamma=GAMMA,
            tau=TAU,
            actor_lr=LR,
            critic_lr=LR,
            policy_delay=DELAY,
            policy_noise=0.0,
        ),
    )
    actor = _mlp(obs_dim, act_dim, tanh=True)
    q1, q2 = _mlp(obs_dim + act_dim, 1, False), _mlp(obs_dim + act_dim, 1, False)
    actor_t, q1_t, q2_t = copy.deepcopy(actor), copy.deepcopy(q1), copy.deepcopy(q2)
    _load(algo.actor.net, [actor])
    _load(algo.target_actor.net, [actor_t])
    _load(algo.critic.net, [q1, q2])
    _load(algo.target_critic.net, [q1_t, q2_t])
    actor_opt = torch.optim.Adam(actor.parameters(), lr=LR)
    critic_opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=LR)

    g = torch.Generator().manual_seed(1)
    obs, next_obs = torch.randn(batch_size, obs_dim, generator=g), torch.randn(
        batch_size, obs_dim, generator=g)
    action = torch.rand(batch_size, act_dim, generator=g) * 2 - 1
    reward = torch.ones(batch_size)
    terminated = (torch.rand(batch_size, generator=g) < 0.3).float()
    batch = Batch(obs=obs, action=action, reward=reward, next_obs=next_obs,
                  discount=GAMMA * (1 - terminated), terminated=terminated)

    for update in range(1, 7):
        algo.update(batch)
        with torch.no_grad():
            a2 = actor_t(next_obs)
            sa2 = torch.cat([next_obs, a2], -1)
            y = reward + GAMMA * (1 - terminated) * torch.min(q1_t(sa2), q2_t(sa2)).squeeze(-1)
        sa = torch.cat([obs, action], -1)
        loss = ((q1(sa).squeeze(-1) - y) ** 2).mean() + ((q2(sa).squeeze(-1) - y) ** 2).mean()
        critic_opt.zero_grad()
        loss.backward()
        critic_opt.step()
        if update % DELAY == 0:
            actor_loss = -q1(torch.cat([obs, actor(obs)], -1)).mean()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
            with torch.no_grad():
                for net, target in ((actor, actor_t), (q1, q1_t), (q2, q2_t)):
                    for p, pt in zip(net.parameters(), target.parameters()):
                        pt.mul_(1 - TAU).add_(TAU * p)

    pairs = [(algo.actor.net, [actor]), (algo.target_actor.net, [actor_t]),
             (algo.critic.net, [q1, q2]), (algo.target_critic.net, [q1_t, q2_t])]
    for ensemble, members in pairs:
        for p, ref in zip(_ensemble_params(ensemble), _as_ensemble(members), strict=True):
            torch.testing.assert_close(p, ref, atol=1e-5, rtol=1e-4)
