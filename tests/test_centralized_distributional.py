"""The distributional critics as centralized critics: DSAC-T's Gaussian critic
(``DistributionalCritic``, the class single-agent DSAC-T trains) and the categorical critic
(``CategoricalCritic``, SimbaV2's / FlashSAC's) serve HASAC (one critic over the global state and
the joint action) and MADDPG (one critic per agent, ``n_agents = N``): the losses against DSAC-T's
formula and C51's projected cross-entropy computed by hand on the joint input, gradient isolation
between actors and critics, shapes and refusals.

Seed independence is in tests/test_seed_group_marl.py, resume in tests/test_resume_split.py, the
CLI in tests/test_multi_agent_cli.py."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from rlzoo.algos import HASAC, MADDPG
from rlzoo.nets import (
    CategoricalCritic,
    DeterministicActor,
    DistributionalCritic,
    TanhGaussianActor,
)
from rlzoo.optim.entropy import AutoAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, critic_of, tuner_args
from tests.test_critics import dsac_t_member_loss
from tests.test_multi_agent_algos import (
    HETERO,
    HIDDEN,
    SPEC,
    make_batch,
    make_hasac,
    make_maddpg,
    member_grad_norms,
    no_grads,
)

KINDS = [DistributionalCritic, CategoricalCritic]
# HETERO: action sizes 3 and 5, padded to 5; the joint action the critic sees has 3 + 5 = 8
# entries, so garbage in the padding must not reach it.
PAD = 7.0


def hand_joint(action: torch.Tensor) -> list[list[float]]:
    """The joint action of HETERO's agents built by hand: agent 0's 3 entries, agent 1's 5."""
    return [row[0, :3].tolist() + row[1, :5].tolist() for row in action]


def net_distribution(critic: DistributionalCritic, state: torch.Tensor,
                     joint: list[list[float]]) -> tuple[list[list[float]], list[list[float]]]:
    """The critic network's means and softplus stds ``[E][B]`` on ``cat(state, joint)``."""
    with torch.no_grad():
        x = torch.cat([state, torch.tensor(joint)], dim=-1)
        out = critic.net(x)
        return out[..., 0].tolist(), torch.nn.functional.softplus(out[..., 1]).tolist()


def with_padding_garbage(action: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return action * mask + (1 - mask) * PAD


# ------------------------------------------------------------------------------- HASAC


def test_hasac_distributional_loss_is_dsac_t_on_the_joint_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch.manual_seed(3)
    algo = make_hasac(HETERO, critic=DistributionalCritic, n_step=3)
    batch = make_batch(HETERO, b=6)
    b = 6
    batch.discount[:2] = 0.0  # episode ends: no bootstrap
    batch.action = with_padding_garbage(batch.action, algo.act_mask)
    next_action = with_padding_garbage(torch.rand(b, 2, 5) * 2 - 1, algo.act_mask)
    next_log_prob = torch.randn(b, 2)
    monkeypatch.setattr(algo.actor, "sample",
                        lambda obs: (next_action, next_log_prob, torch.zeros_like(next_action)))
    z = torch.tensor([[4.0, -0.5, 1.0, -3.5, 0.2, 2.0], [-1.0, 0.3, -4.0, 0.7, 1.5, -0.1]])
    monkeypatch.setattr(torch, "randn_like", lambda x: z)
    alpha_c = float(algo.critic_tuner.alpha)

    loss, q_mean, stats = algo.critic_terms(batch)

    # targets by hand: min of the target means, the sample of that member
    mean_t, std_t = net_distribution(algo.target_critic, batch.next_state, hand_joint(next_action))
    y, y_s = [], []
    for j in range(b):
        i = 0 if mean_t[0][j] <= mean_t[1][j] else 1
        entropy = alpha_c * (float(next_log_prob[j, 0]) + float(next_log_prob[j, 1]))
        sample = mean_t[i][j] + max(min(float(z[i, j]), 3.0), -3.0) * std_t[i][j]
        r, d = float(batch.reward[j]), float(batch.discount[j])
        y.append(r + d * (mean_t[i][j] - entropy))
        y_s.append(r + d * (sample - entropy))
    # the online critic on (state, joint action): DSAC-T's loss per member, first batch's ms
    mu, sigma = net_distribution(algo.critic, batch.state, hand_joint(batch.action))
    expected = sum(dsac_t_member_loss(mu[i], sigma[i], y, y_s, sum(sigma[i]) / b)[0]
                   for i in range(2))
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert q_mean.item() == pytest.approx(sum(map(sum, mu)) / (2 * b), rel=1e-5)
    assert set(stats) == {"stats/q_std", "stats/running_std"}
    assert algo.critic.act_dim == 8 and algo.critic.groups == 1


@pytest.mark.parametrize("kind", KINDS)
def test_hasac_actor_gets_no_critic_gradient_and_the_critic_no_actor_one(kind: type) -> None:
    algo = make_hasac(critic=kind)
    batch = make_batch()
    algo.zero_grad(set_to_none=True)
    loss, _, _ = algo.critic_terms(batch)
    loss.backward()
    assert no_grads(algo.actor) and no_grads(algo.target_critic)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in algo.critic.parameters())
    for agent in range(3):
        algo.zero_grad(set_to_none=True)
        n, b = algo.n_agents, batch.obs.shape[0]
        joint_sample = algo.old_joint_sample(batch.obs)
        actor_loss, *_ = algo.agent_terms(
            batch.obs, batch.state, joint_sample, torch.tensor(agent), None,
            algo.tuner.alpha.reshape(-1).expand(n), torch.zeros(n), torch.zeros(n, b))
        actor_loss.backward()
        assert no_grads(algo.critic) and no_grads(algo.target_critic)
        norms = member_grad_norms(algo.actor.net, 3)
        assert norms[agent] > 0 and (norms[torch.arange(3) != agent] == 0).all(), norms


def test_hasac_distributional_update_logs_the_critic_spread() -> None:
    algo = make_hasac(critic=DistributionalCritic)
    metrics = algo.update(make_batch())
    assert metrics["stats/q_std"].dim() == 0 and metrics["stats/q_std"] > 0
    assert torch.isfinite(torch.stack(list(metrics.values()))).all()
    assert bool(algo.critic.running_std_ready) and (algo.critic.running_std > 0).all()


# ------------------------------------------------------------------------------- MADDPG


def test_maddpg_distributional_agent_losses_are_dsac_t_on_each_agents_own_critic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Agent g's critic is members 2g, 2g+1; its targets use agent g's own reward and the min
    (and argmin) over its own two target members only; its loss is DSAC-T's."""
    torch.manual_seed(4)
    algo = make_maddpg(HETERO, critic=DistributionalCritic)
    assert algo.critic.members == 4 and algo.critic.groups == 2
    b = 5
    batch = make_batch(HETERO, b=b)
    batch.discount[0] = 0.0
    batch.action = with_padding_garbage(batch.action, algo.act_mask)
    next_action = with_padding_garbage(torch.rand(b, 2, 5) * 2 - 1, algo.act_mask)
    monkeypatch.setattr(algo.target_actor, "mode", lambda obs: next_action)
    z = torch.randn(4, b) * 2  # some beyond the clamp at 3
    z[0, 0], z[3, 1] = 5.0, -4.0
    monkeypatch.setattr(torch, "randn_like", lambda x: z)

    losses, q = algo.critic_losses(batch)

    mean_t, std_t = net_distribution(algo.target_critic, batch.next_state,
                                     hand_joint(next_action))
    mu, sigma = net_distribution(algo.critic, batch.state, hand_joint(batch.action))
    assert q.shape == (4, b)
    torch.testing.assert_close(q, torch.tensor(mu))
    for g in range(2):
        y, y_s = [], []
        for j in range(b):
            i = 2 * g + (0 if mean_t[2 * g][j] <= mean_t[2 * g + 1][j] else 1)
            sample = mean_t[i][j] + max(min(float(z[i, j]), 3.0), -3.0) * std_t[i][j]
            r, d = float(batch.agent_reward[j, g]), float(batch.discount[j])
            y.append(r + d * mean_t[i][j])
            y_s.append(r + d * sample)
        expected = sum(dsac_t_member_loss(mu[i], sigma[i], y, y_s, sum(sigma[i]) / b)[0]
                       for i in (2 * g, 2 * g + 1))
        assert losses[g].item() == pytest.approx(expected, rel=1e-5), g


@pytest.mark.parametrize("kind", KINDS)
def test_maddpg_gradients_stay_with_their_agent_and_network(kind: type) -> None:
    algo = make_maddpg(critic=kind)
    batch = make_batch()
    for agent in range(3):
        algo.zero_grad(set_to_none=True)
        losses, _ = algo.critic_losses(batch)
        losses[agent].backward()
        norms = member_grad_norms(algo.critic, 6).reshape(3, 2)  # [agent, member]
        assert (norms[agent] > 0).all()
        assert (norms[torch.arange(3) != agent] == 0).all(), norms
        assert no_grads(algo.actor) and no_grads(algo.target_critic)
        algo.zero_grad(set_to_none=True)
        actor_losses = algo.actor_losses(batch.obs, batch.state, batch.action)
        assert actor_losses.shape == (3,)
        actor_losses[agent].backward()
        assert no_grads(algo.critic) and no_grads(algo.target_critic)
        norms = member_grad_norms(algo.actor.net, 3)
        assert norms[agent] > 0 and (norms[torch.arange(3) != agent] == 0).all(), norms


@pytest.mark.parametrize("kind", KINDS)
def test_maddpg_actor_ascends_the_min_of_its_own_critics_values(kind: type) -> None:
    algo = make_maddpg(critic=kind)
    batch = make_batch()
    losses = algo.actor_losses(batch.obs, batch.state, batch.action)
    with torch.no_grad():
        mu = algo.actor.mode(batch.obs)
        for agent in range(3):
            joint = batch.action.clone()
            joint[:, agent] = mu[:, agent]
            means = algo.critic(batch.state, algo.joint(joint))  # [6, B]: 2 per agent
            own = means[2 * agent: 2 * agent + 2].min(dim=0).values
            torch.testing.assert_close(losses[agent], -own.mean())


@pytest.mark.parametrize("kind", KINDS)
def test_per_agent_critics_take_per_agent_inputs_member_by_member(kind: type) -> None:
    critic = critic_of(kind, n=2, hidden=[8])(4, 3, n_agents=3)
    x, a = torch.randn(3, 5, 4), torch.randn(3, 5, 3)
    values = critic(x, a)
    assert values.shape == (6, 5)
    for g in range(3):  # agent g's members see agent g's input only
        alone = critic(x[g], a[g])  # every member on agent g's input
        # (the shared-input and the per-member kernels round differently: not bit-equal)
        torch.testing.assert_close(values[2 * g: 2 * g + 2], alone[2 * g: 2 * g + 2],
                                   rtol=1e-4, atol=1e-4)
    assert critic.agent_values(values).shape == (3, 5)
    torch.testing.assert_close(critic.agent_values(values), values.reshape(3, 2, 5).min(1).values)
    single = critic_of(kind, hidden=[8])(4, 3)
    assert single.groups == 1 and single.members == 2
    if kind is DistributionalCritic:
        assert critic.next_value(x[0], a[0]).shape == (2, 3, 5)
        assert single.next_value(x[0], a[0]).shape == (2, 5)
    else:
        per_agent = critic.next_value(x[0], a[0])
        assert per_agent.atoms.shape == per_agent.probs.shape == (critic.atoms, 3, 5)
        assert single.next_value(x[0], a[0]).probs.shape == (single.atoms, 5)


def test_unsupported_pairs_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="MADDPG needs one critic per agent") as err:
        MADDPG(
            SPEC,
            actor=partial(DeterministicActor, **actor_args("td3", hidden=HIDDEN)),
            critic=lambda o, a, n_agents: DistributionalCritic(
                o, a, **critic_args("distributional", hidden=HIDDEN)
            ),
            **algo_args("maddpg"),
        )
    assert "\n" not in str(err.value)
    for kind in KINDS:
        with pytest.raises(ValueError, match="n_agents >= 1"):
            critic_of(kind)(4, 3, n_agents=0)
    # HASAC builds its critic without n_agents: one centralized critic, never per agent
    algo = HASAC(
        SPEC,
        actor=partial(TanhGaussianActor, **actor_args("sac", hidden=HIDDEN)),
        critic=partial(DistributionalCritic, **critic_args("distributional", hidden=HIDDEN)),
        tuner=partial(AutoAlpha, **tuner_args("auto")),
        **algo_args("hasac"),
    )
    assert algo.critic.groups == 1 and algo.critic.members == 2


# ------------------------------------------------------------------------------- categorical


def hand_projection(values: list[float], probs: list[float], v_min: float, v_max: float,
                    atoms: int) -> list[float]:
    """C51's projection in plain Python: clip, split each atom's mass between its neighbours."""
    width = (v_max - v_min) / (atoms - 1)
    out = [0.0] * atoms
    for v, p in zip(values, probs):
        b = (min(max(v, v_min), v_max) - v_min) / width
        low = min(int(b), atoms - 2)
        out[low] += p * (1 - (b - low))
        out[low + 1] += p * (b - low)
    return out


def net_categorical(critic: CategoricalCritic, state: torch.Tensor, joint: list[list[float]]
                    ) -> list[list[list[float]]]:
    """The critic network's probabilities ``[E][B][N]`` on ``cat(state, joint)``."""
    with torch.no_grad():
        x = torch.cat([state, torch.tensor(joint)], dim=-1)
        return torch.softmax(critic.net(x), dim=-1).tolist()


SUPPORT = {"v_min": -3.0, "v_max": 3.0, "atoms": 7}


def categorical_loss(probs: list[list[float]], target: list[list[float]]) -> float:
    """``mean_B(-sum_k m_k log p_k)`` of one member (probs and targets ``[B][N]``)."""
    return sum(-sum(m * math.log(p) for m, p in zip(mb, pb))
               for mb, pb in zip(target, probs)) / len(probs)


def test_hasac_categorical_loss_is_the_projected_cross_entropy_on_the_joint_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch.manual_seed(5)
    algo = make_hasac(HETERO, critic=partial(CategoricalCritic, **SUPPORT), n_step=3)
    b = 5
    batch = make_batch(HETERO, b=b)
    batch.discount[:1] = 0.0
    batch.action = with_padding_garbage(batch.action, algo.act_mask)
    next_action = with_padding_garbage(torch.rand(b, 2, 5) * 2 - 1, algo.act_mask)
    next_log_prob = torch.randn(b, 2)
    monkeypatch.setattr(algo.actor, "sample",
                        lambda obs: (next_action, next_log_prob, torch.zeros_like(next_action)))
    alpha_c = float(algo.critic_tuner.alpha)
    z = [-3.0 + k for k in range(7)]

    loss, q_mean, _ = algo.critic_terms(batch)

    p_next = net_categorical(algo.target_critic, batch.next_state, hand_joint(next_action))
    targets = []
    for j in range(b):
        values = [sum(p * zk for p, zk in zip(p_next[i][j], z)) for i in range(2)]
        i = 0 if values[0] <= values[1] else 1
        entropy = alpha_c * (float(next_log_prob[j, 0]) + float(next_log_prob[j, 1]))
        r, d = float(batch.reward[j]), float(batch.discount[j])
        atoms = [r + d * (zk - entropy) for zk in z]
        targets.append(hand_projection(atoms, p_next[i][j], -3.0, 3.0, 7))
    p = net_categorical(algo.critic, batch.state, hand_joint(batch.action))
    expected = sum(categorical_loss(p[i], targets) for i in range(2))
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    q = [[sum(pk * zk for pk, zk in zip(p[i][j], z)) for j in range(b)] for i in range(2)]
    assert q_mean.item() == pytest.approx(sum(map(sum, q)) / (2 * b), rel=1e-5, abs=1e-6)


def test_maddpg_categorical_agent_losses_use_each_agents_own_critic_and_reward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch.manual_seed(6)
    algo = make_maddpg(HETERO, critic=partial(CategoricalCritic, **SUPPORT))
    assert algo.critic.members == 4 and algo.critic.groups == 2
    b = 4
    batch = make_batch(HETERO, b=b)
    batch.discount[0] = 0.0
    batch.action = with_padding_garbage(batch.action, algo.act_mask)
    next_action = with_padding_garbage(torch.rand(b, 2, 5) * 2 - 1, algo.act_mask)
    monkeypatch.setattr(algo.target_actor, "mode", lambda obs: next_action)
    z = [-3.0 + k for k in range(7)]

    losses, _ = algo.critic_losses(batch)

    p_next = net_categorical(algo.target_critic, batch.next_state, hand_joint(next_action))
    p = net_categorical(algo.critic, batch.state, hand_joint(batch.action))
    for g in range(2):
        targets = []
        for j in range(b):
            own = (2 * g, 2 * g + 1)
            values = [sum(pk * zk for pk, zk in zip(p_next[i][j], z)) for i in own]
            i = own[0] if values[0] <= values[1] else own[1]
            r, d = float(batch.agent_reward[j, g]), float(batch.discount[j])
            targets.append(hand_projection([r + d * zk for zk in z], p_next[i][j], -3.0, 3.0, 7))
        expected = sum(categorical_loss(p[i], targets) for i in (2 * g, 2 * g + 1))
        assert losses[g].item() == pytest.approx(expected, rel=1e-5), g
