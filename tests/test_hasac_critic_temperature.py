"""HASAC's critic temperature learns from the same log-probs as the per-agent temperatures: each
agent's sample drawn for its own actor step, before that step, as HARL's off_policy_ha_runner.py
(its ``logp_actions[agent_id]`` is never refreshed after the step; only the action is)."""

from __future__ import annotations

from functools import partial

import torch

from rlzoo.algos import HASAC, EnvSpec
from rlzoo.buffers import Batch
from rlzoo.nets import TanhGaussianActor, TwinCritic
from rlzoo.optim.entropy import AutoAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args

SPEC = EnvSpec(obs_dim=6, act_dim=3, n_agents=3, state_dim=10, act_dims=(3, 3, 3))


def test_critic_temperature_uses_pre_update_log_probs() -> None:
    torch.manual_seed(0)
    algo = HASAC(
        SPEC,
        actor=partial(TanhGaussianActor, **actor_args("sac", hidden=[16])),
        critic=partial(TwinCritic, **critic_args("twin", hidden=[16])),
        tuner=partial(AutoAlpha, **tuner_args("auto")),
        **algo_args("hasac", actor_lr=0.05),
    )  # large steps: post-update log-probs differ clearly
    b, n = 32, SPEC.n_agents
    batch = Batch(
        obs=torch.randn(b, n, 6), action=torch.rand(b, n, 3) * 2 - 1, reward=torch.randn(b),
        next_obs=torch.randn(b, n, 6), discount=torch.full((b,), 0.99),
        terminated=torch.zeros(b), state=torch.randn(b, 10), next_state=torch.randn(b, 10),
        agent_reward=torch.randn(b, n),
    )
    samples: list[torch.Tensor] = []  # log_prob [B, N] of every actor.sample call
    sample = algo.actor.sample

    def record(obs: torch.Tensor):  # noqa: ANN202
        out = sample(obs)
        samples.append(out[1].detach().clone())
        return out

    seen: dict[str, torch.Tensor] = {}
    for name, tuner in (("agents", algo.tuner), ("critic", algo.critic_tuner)):
        loss = tuner.loss  # the temperature loss HASAC steps on
        tuner.loss = lambda lp, name=name, loss=loss: (
            seen.setdefault(name, lp.detach().clone()), loss(lp))[1]
    algo.actor.sample = record
    algo.update(batch)
    order = algo.update_order
    # Calls: the critic target (s'), the old joint sample, then one pass per agent in `order`,
    # where agent order[m]'s entry is its sample before its own step.
    pre = torch.stack([samples[2 + m][:, agent] for m, agent in enumerate(order)])  # [N, B]
    pre = pre[torch.argsort(torch.tensor(order))]  # rows by agent id
    torch.testing.assert_close(seen["agents"], pre)
    torch.testing.assert_close(seen["critic"], pre.sum(0))
    # The updated policies' samples (the next pass) differ: the test tells the two apart.
    later = [samples[3 + m][:, agent] for m, agent in enumerate(order[:-1])]
    assert not torch.allclose(torch.stack(later), pre[torch.tensor(order[:-1])])
