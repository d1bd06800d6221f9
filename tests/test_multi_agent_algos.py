"""MADDPG, HASAC and continuous COMA as components (no environments): per-agent actors and
critics, gradient isolation, HASAC's sequential update, COMA's baseline and TD(lambda) targets,
padding of heterogeneous agents, the rollout store, round trips."""

from __future__ import annotations

import copy
import io
from functools import partial

import numpy as np
import pytest
import torch

from rlzoo.algos import COMA, HASAC, MADDPG, EnvSpec
from rlzoo.buffers import Batch
from rlzoo.buffers.rollout import Rollout, RolloutBuffer
from rlzoo.buffers.sampling import Sampling
from rlzoo.nets import (
    ActionSequenceCritic,
    DeterministicActor,
    EnsembleCritic,
    TanhGaussianActor,
    TwinCritic,
)
from rlzoo.nets.centralized import AgentActors, AgentCritics, action_mask, joint_action
from rlzoo.optim.adam import MemberAdam
from rlzoo.optim.entropy import AutoAlpha, FixedAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, critic_of, tuner_args
from tests.one_buffer import OneBuffer as ReplayBuffer

SPEC = EnvSpec(obs_dim=6, act_dim=3, n_agents=3, state_dim=10, act_dims=(3, 3, 3))
# Heterogeneous agents, like simple_speaker_listener: action sizes 3 and 5, padded to 5.
HETERO = EnvSpec(obs_dim=6, act_dim=5, n_agents=2, state_dim=8, act_dims=(3, 5))
HIDDEN = [16, 16]


def make_maddpg(spec: EnvSpec = SPEC, critic=AgentCritics, **kwargs) -> MADDPG:
    """MADDPG with tiny networks; ``critic`` is the per-agent critic class."""
    return MADDPG(
        spec,
        **algo_args(
            "maddpg",
            actor=partial(DeterministicActor, **actor_args("td3", hidden=HIDDEN)),
            critic=critic_of(critic, hidden=HIDDEN),
            **kwargs,
        ),
    )


def make_hasac(spec: EnvSpec = SPEC, actor: dict | None = None, tuner=None, critic=TwinCritic,
               **kwargs) -> HASAC:
    """HASAC with tiny networks; ``critic`` is the centralized critic class."""
    return HASAC(
        spec,
        **algo_args(
            "hasac",
            actor=partial(TanhGaussianActor, **actor_args("sac", hidden=HIDDEN, **(actor or {}))),
            critic=critic_of(critic, hidden=HIDDEN),
            tuner=tuner or partial(AutoAlpha, **tuner_args("auto", lr=1e-3)),
            **kwargs,
        ),
    )


def make_coma(spec: EnvSpec = SPEC, actor: dict | None = None, **kwargs) -> COMA:
    return COMA(
        spec,
        **algo_args(
            "coma",
            actor=partial(TanhGaussianActor, **actor_args("sac", hidden=HIDDEN, **(actor or {}))),
            critic=partial(
                EnsembleCritic,
                **critic_args("ensemble", n=1, subset=1, actor_reduce="first", hidden=HIDDEN),
            ),
            **kwargs,
        ),
    )


def padded_actions(spec: EnvSpec, *lead: int) -> torch.Tensor:
    mask = action_mask(spec.act_dims, spec.act_dim)
    return (torch.rand(*lead, spec.n_agents, spec.act_dim) * 2 - 1) * mask


def make_batch(spec: EnvSpec = SPEC, b: int = 32) -> Batch:
    n, o, s = spec.n_agents, spec.obs_dim, spec.state_dim
    return Batch(
        obs=torch.randn(b, n, o), action=padded_actions(spec, b), reward=torch.randn(b),
        next_obs=torch.randn(b, n, o), discount=torch.full((b,), 0.99),
        terminated=torch.zeros(b), state=torch.randn(b, s), next_state=torch.randn(b, s),
        agent_reward=torch.randn(b, n),
    )


def make_rollout(spec: EnvSpec = SPEC, steps: int = 6, envs: int = 2) -> Rollout:
    """A random rollout; env 0 truncates at step 2 (reset row 3), env 1 terminates at step 4."""
    n, o, s, a = spec.n_agents, spec.obs_dim, spec.state_dim, spec.act_dim
    ended, terminated, valid = torch.zeros(steps, envs), torch.zeros(steps, envs), \
        torch.ones(steps, envs)
    ended[2, 0] = 1.0
    valid[3, 0] = 0.0
    ended[4, 1] = terminated[4, 1] = 1.0
    valid[5, 1] = 0.0
    mask = action_mask(spec.act_dims, a)
    pre_tanh = torch.randn(steps, envs, n, a) * mask
    reward = torch.randn(steps, envs) * valid
    return Rollout(
        obs=torch.randn(steps + 1, envs, n, o), state=torch.randn(steps + 1, envs, s),
        action=torch.tanh(pre_tanh), pre_tanh=pre_tanh, reward=reward,
        agent_reward=reward[..., None].expand(-1, -1, n).clone(), terminated=terminated,
        ended=ended, valid=valid,
    )


def member_grad_norms(module: torch.nn.Module, members: int) -> torch.Tensor:
    """``[members]``: the gradient norm of each ensemble member's slice of every parameter."""
    total = torch.zeros(members)
    for p in module.parameters():
        if p.grad is not None:
            total += p.grad.reshape(members, -1).pow(2).sum(1)
    return total.sqrt()


def no_grads(module: torch.nn.Module) -> bool:
    return all(p.grad is None or not p.grad.any() for p in module.parameters())


# ------------------------------------------------------------------------------- shared pieces


def test_agent_actors_mask_padding_and_log_prob_only_over_real_entries() -> None:
    actors = AgentActors(partial(TanhGaussianActor, **actor_args("sac", hidden=HIDDEN)), 6, 5,
                         (3, 5), shared=False)
    obs = torch.randn(7, 2, 6)
    action, log_prob, pre_tanh = actors.sample(obs)
    assert action.shape == (7, 2, 5) and log_prob.shape == (7, 2)
    assert (action[:, 0, 3:] == 0).all() and (pre_tanh[:, 0, 3:] == 0).all()
    mean, log_std = actors._run(obs)
    by_hand = []
    for agent, dims in enumerate((3, 5)):
        u = pre_tanh[:, agent, :dims]
        normal = torch.distributions.Normal(mean[:, agent, :dims], log_std[:, agent, :dims].exp())
        by_hand.append((normal.log_prob(u) - torch.log(1 - torch.tanh(u) ** 2)).sum(-1))
    torch.testing.assert_close(log_prob, torch.stack(by_hand, 1), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(actors.log_prob(obs, pre_tanh), log_prob, atol=1e-5, rtol=1e-5)
    # Exact where tanh saturates (atanh of the executed action would be inf in float32).
    saturated = torch.full_like(pre_tanh, 12.0) * actors.act_mask
    assert torch.tanh(saturated)[:, 1].eq(1.0).all()
    assert torch.isfinite(actors.log_prob(obs, saturated)).all()


def test_shared_actor_uses_agent_id_and_refuses_unequal_agents() -> None:
    shared = AgentActors(partial(DeterministicActor, **actor_args("td3", hidden=HIDDEN)), 6, 3,
                         (3, 3, 3), shared=True)
    obs = torch.randn(4, 1, 6).expand(4, 3, 6)  # every agent sees the same observation
    action = shared.mode(obs)
    assert action.shape == (4, 3, 3)
    assert not torch.allclose(action[:, 0], action[:, 1])  # the one-hot id tells them apart
    assert shared.net.members == 1 and shared.net.obs_dim == 6 + 3
    with pytest.raises(ValueError, match="share_actor"):
        AgentActors(partial(DeterministicActor, **actor_args("td3", hidden=HIDDEN)), 6, 5, (3, 5),
                    shared=True)


def test_joint_action_drops_padding() -> None:
    mask = action_mask((3, 5), 5)
    index = mask.flatten().nonzero().squeeze(-1)
    action = padded_actions(HETERO, 4)
    garbage = action + (1 - mask) * torch.randn(4, 2, 5)
    assert joint_action(action, index).shape == (4, 8)
    assert torch.equal(joint_action(garbage, index), joint_action(action, index))


def test_member_adam_is_adam_on_one_member_and_leaves_the_others() -> None:
    weight = torch.nn.Parameter(torch.randn(3, 4, 5))
    reference = torch.nn.Parameter(weight.detach()[1].clone())
    optimizer = MemberAdam([weight], members=3, lr=1e-2)
    adam = torch.optim.Adam([reference], lr=1e-2)
    before = weight.detach().clone()
    for _ in range(5):
        grad = torch.randn(3, 4, 5)
        weight.grad, reference.grad = grad.clone(), grad[1].clone()
        optimizer.step(member=1)
        adam.step()
    torch.testing.assert_close(weight.detach()[1], reference.detach())
    assert torch.equal(weight.detach()[0], before[0]) and torch.equal(weight.detach()[2], before[2])
    assert optimizer.state[weight]["step"].tolist() == [0.0, 5.0, 0.0]


# ------------------------------------------------------------------------------- every algorithm


@pytest.mark.parametrize("make", [make_maddpg, make_hasac, make_coma])
def test_update_returns_finite_scalar_tensors_with_per_agent_losses(make) -> None:
    algo = make()
    metrics: dict[str, torch.Tensor] = {}
    for _ in range(3):
        metrics.update(algo.update(make_rollout() if algo.on_policy else make_batch()))
    assert {"loss/critic", "loss/actor", "loss/actor/agent_0", "loss/actor/agent_2"} <= set(metrics)
    for name, value in metrics.items():
        assert torch.is_tensor(value) and value.dim() == 0, name
        assert torch.isfinite(value), name
        assert not value.requires_grad, name


@pytest.mark.parametrize("make", [make_maddpg, make_hasac, make_coma])
def test_act_shapes_padding_and_determinism(make) -> None:
    algo = make(HETERO)
    obs = torch.randn(5, 2, 6)
    action = algo.act(obs)
    assert action.shape == (5, 2, 5) and action.abs().max() <= 1.0
    assert (action[:, 0, 3:] == 0).all()
    torch.testing.assert_close(algo.act(obs, deterministic=True), algo.act(obs, deterministic=True))


@pytest.mark.parametrize("make", [make_maddpg, make_hasac, make_coma])
def test_state_dict_round_trip_includes_optimizers(make) -> None:
    algo = make()
    for _ in range(2):
        algo.update(make_rollout() if algo.on_policy else make_batch())
    buffer = io.BytesIO()
    torch.save(algo.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    clone = make()
    clone.load_state_dict(state)
    for (name, a), b in zip(algo.state_dict()["modules"].items(),
                            clone.state_dict()["modules"].values()):
        assert torch.equal(a, b), name
    assert clone.updates == algo.updates
    assert set(state["optimizers"]) == set(algo.optimizers)
    torch.manual_seed(3)
    batch = make_rollout() if algo.on_policy else make_batch()
    torch.manual_seed(4)
    m1 = algo.update(batch)
    torch.manual_seed(4)
    m2 = clone.update(batch)
    for name in m1:
        torch.testing.assert_close(m1[name], m2[name], msg=name)


@pytest.mark.parametrize("make", [make_maddpg, make_hasac])
def test_padded_action_entries_do_not_reach_the_critics(make) -> None:
    algo = make(HETERO)
    batch = make_batch(HETERO)
    dirty = copy.copy(batch)
    mask = algo.act_mask
    dirty.action = batch.action + (1 - mask) * 5.0 * torch.randn_like(batch.action)
    values = [algo.critic(batch.state, algo.joint(batch.action)),
              algo.critic(dirty.state, algo.joint(dirty.action))]
    assert torch.equal(values[0], values[1])
    assert algo.critic.act_dim == 3 + 5


def test_wrong_critics_actors_and_specs_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="MADDPG cannot train a TwinCritic") as err:
        MADDPG(
            SPEC,
            actor=partial(DeterministicActor, **actor_args("td3", hidden=HIDDEN)),
            critic=lambda o, a, n_agents: TwinCritic(o, a, **critic_args("twin", hidden=HIDDEN)),
            **algo_args("maddpg"),
        )
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="HASAC cannot train an AgentCritics"):
        HASAC(
            SPEC,
            actor=partial(TanhGaussianActor, **actor_args("sac", hidden=HIDDEN)),
            critic=lambda o, a: AgentCritics(
                o, a, **critic_args("agents", hidden=HIDDEN), n_agents=3
            ),
            tuner=partial(AutoAlpha, **tuner_args("auto")),
            **algo_args("hasac"),
        )
    with pytest.raises(ValueError, match="action-sequence"):
        COMA(SPEC, actor=partial(TanhGaussianActor, **actor_args("sac", hidden=HIDDEN)),
             critic=partial(ActionSequenceCritic,
                            **critic_args("action_sequence", hidden=HIDDEN)), **algo_args("coma"))
    with pytest.raises(ValueError, match="stochastic actor"):
        COMA(SPEC, actor=partial(DeterministicActor, **actor_args("td3", hidden=HIDDEN)),
             critic=partial(EnsembleCritic,
                            **critic_args("ensemble", n=1, subset=1,
                                          hidden=HIDDEN)), **algo_args("coma"))
    with pytest.raises(ValueError, match="global state"):
        make_maddpg(EnvSpec(obs_dim=6, act_dim=3, n_agents=2, state_dim=0))
    with pytest.raises(ValueError, match="share_actor"):
        make_hasac(HETERO, share_actor=True)
    with pytest.raises(ValueError, match="others_actions"):
        make_maddpg(others_actions="target")


# ------------------------------------------------------------------------------- MADDPG


def test_maddpg_each_critic_gets_gradient_only_from_its_own_loss_and_targets_none() -> None:
    algo = make_maddpg()
    batch = make_batch()
    for agent in range(3):
        algo.zero_grad(set_to_none=True)
        losses, _ = algo.critic_losses(batch)
        assert losses.shape == (3,)
        losses[agent].backward()
        norms = member_grad_norms(algo.critic, 3)
        assert norms[agent] > 0
        assert (norms[torch.arange(3) != agent] == 0).all(), norms
        assert no_grads(algo.actor)
        assert all(not p.requires_grad for p in algo.target_critic.parameters())
        assert all(p.grad is None for p in algo.target_critic.parameters())
        assert all(p.grad is None for p in algo.target_actor.parameters())


@pytest.mark.parametrize("others", ["buffer", "policy"])
def test_maddpg_actor_loss_reaches_only_its_actor_never_the_critic(others: str) -> None:
    algo = make_maddpg(others_actions=others)
    batch = make_batch()
    for agent in range(3):
        algo.zero_grad(set_to_none=True)
        losses = algo.actor_losses(batch.obs, batch.state, batch.action)
        losses[agent].backward()
        norms = member_grad_norms(algo.actor.net, 3)
        assert norms[agent] > 0
        assert (norms[torch.arange(3) != agent] == 0).all(), norms
        assert no_grads(algo.critic)


@pytest.mark.parametrize("others", ["buffer", "policy"])
def test_maddpg_actor_loss_by_hand(others: str) -> None:
    algo = make_maddpg(others_actions=others)
    batch = make_batch()
    losses = algo.actor_losses(batch.obs, batch.state, batch.action)
    with torch.no_grad():
        mu = algo.actor.mode(batch.obs)
        for agent in range(3):
            joint = (batch.action if others == "buffer" else mu).clone()
            joint[:, agent] = mu[:, agent]
            q = algo.critic(batch.state, algo.joint(joint))[agent]
            torch.testing.assert_close(losses[agent], -q.mean())


def test_maddpg_critic_target_uses_own_reward_and_target_networks() -> None:
    algo = make_maddpg()
    batch = make_batch()
    batch.discount[:5] = 0.0  # terminated: no bootstrap
    losses, q = algo.critic_losses(batch)
    with torch.no_grad():
        next_joint = algo.joint(algo.target_actor.mode(batch.next_obs))
        target = batch.agent_reward.T + batch.discount * algo.target_critic(batch.next_state,
                                                                           next_joint)
        torch.testing.assert_close(losses, (q - target).pow(2).mean(1))
        torch.testing.assert_close(target[:, :5], batch.agent_reward[:5].T)


# ------------------------------------------------------------------------------- HASAC


def test_hasac_permutation_is_fresh_each_update() -> None:
    algo = make_hasac()
    orders = []
    for _ in range(12):
        algo.update(make_batch(b=8))
        orders.append(tuple(algo.update_order))
    assert all(sorted(order) == [0, 1, 2] for order in orders)
    assert len(set(orders)) > 1, orders


def test_hasac_agent_sees_new_samples_before_it_and_old_samples_after_it() -> None:
    """By construction: policies with std ~1e-9 make every sample equal ``tanh(mean)``, so the
    joint action in agent i_m's loss can be rebuilt from the policies before and after the update.
    """
    algo = make_hasac(actor={"log_std_min": -21.0, "log_std_max": -20.0},
                      tuner=partial(FixedAlpha, **tuner_args("fixed", alpha=0.0)), actor_lr=0.05)
    batch = make_batch(b=16)
    old_actor = copy.deepcopy(algo.actor)
    seen: list[torch.Tensor] = []
    hook = algo.critic.register_forward_hook(lambda m, inputs, out: seen.append(inputs[1].detach()))
    algo.update(batch)
    hook.remove()
    order = algo.update_order
    assert len(seen) == 1 + 3  # the critic's TD loss, then one actor loss per agent
    with torch.no_grad():
        old, new = old_actor.mode(batch.obs), algo.actor.mode(batch.obs)
    assert ((new - old).abs().amax(dim=(0, 2)) > 1e-3).all()  # every agent's policy moved
    for position in range(len(order)):
        expected = old.clone()  # agents after i_m (and i_m itself): old-policy samples
        for earlier in order[:position]:
            expected[:, earlier] = new[:, earlier]  # agents before i_m: updated policies
        torch.testing.assert_close(seen[1 + position], algo.joint(expected), atol=1e-5, rtol=0)


def test_hasac_critic_target_by_hand() -> None:
    algo = make_hasac(tuner=partial(FixedAlpha, **tuner_args("fixed", alpha=0.3)))
    batch = make_batch()
    torch.manual_seed(11)
    target = algo.critic_target(batch)
    torch.manual_seed(11)
    with torch.no_grad():
        action, log_prob, _ = algo.actor.sample(batch.next_obs)
        q1, q2 = algo.target_critic(batch.next_state, algo.joint(action))
        expected = batch.reward + batch.discount * (torch.min(q1, q2) - 0.3 * log_prob.sum(-1))
    torch.testing.assert_close(target, expected[None])


def test_hasac_per_agent_and_critic_temperatures_target_their_own_entropy() -> None:
    algo = make_hasac(HETERO)
    assert algo.tuner.target_entropy.flatten().tolist() == [-3.0, -5.0]
    assert algo.critic_tuner.target_entropy == -8.0
    assert algo.tuner.alpha.shape == (2, 1) and algo.critic_tuner.alpha.shape == ()
    metrics = algo.update(make_batch(HETERO))
    assert {"stats/alpha/agent_0", "stats/alpha/agent_1", "loss/critic_alpha"} <= set(metrics)


def test_hasac_actor_step_touches_only_the_agent_being_updated() -> None:
    algo = make_hasac()
    batch = make_batch()
    before = [p.detach().clone() for p in algo.actor.parameters()]
    algo.update_actors(batch.obs, batch.state)
    changed = torch.zeros(3, dtype=torch.bool)
    for p, b in zip(algo.actor.parameters(), before):
        changed |= (p.detach() != b).reshape(3, -1).any(1)
    assert changed.all()  # every agent was updated once ...
    # ... and the per-agent optimizer counted exactly one step for each member
    steps = [s["step"].tolist() for s in algo.actor_optimizer.state.values()]
    assert all(step == [1.0, 1.0, 1.0] for step in steps)


# ------------------------------------------------------------------------------- COMA


def test_coma_baseline_makes_the_advantage_zero_mean_under_the_policy() -> None:
    """E_{a_i ~ pi_i}[Q(s, a_i, a_-i, i) - b_i] = 0: checked on 20000 draws (fixed seed), and
    shown to fail for actions that do not come from the policy."""
    torch.manual_seed(0)
    algo = make_coma(baseline_samples=8)
    states, draws = 4, 5000
    obs = torch.randn(states, 3, 6).expand(draws, -1, -1, -1)
    state = torch.randn(states, 10).expand(draws, -1, -1)
    with torch.no_grad():
        on_policy = algo.actor.sample(obs)[0]
        taken = algo.same_joint(on_policy)
        advantage = algo.agent_values(algo.critic, state, taken) \
            - algo.counterfactual_baseline(obs, state, on_policy)  # [draws, states, N]
        off_policy = torch.full_like(on_policy, 0.9)
        off_advantage = algo.agent_values(algo.critic, state, algo.same_joint(off_policy)) \
            - algo.counterfactual_baseline(obs, state, off_policy)
    flat = advantage.reshape(-1, 3)
    mean, stderr = flat.mean(0), flat.std(0) / flat.shape[0] ** 0.5
    assert (mean.abs() < 4 * stderr).all(), (mean, stderr)
    assert (flat.std(0) > 0).all()
    off = off_advantage.reshape(-1, 3)
    off_mean, off_stderr = off.mean(0), off.std(0) / off.shape[0] ** 0.5
    assert (off_mean.abs() > 10 * off_stderr).any(), (off_mean, off_stderr)


def test_coma_counterfactual_keeps_the_other_agents_actions() -> None:
    algo = make_coma(baseline_samples=4)
    seen: list[torch.Tensor] = []
    hook = algo.critic.register_forward_hook(lambda m, inputs, out: seen.append(inputs))
    obs, state = torch.randn(5, 3, 6), torch.randn(5, 10)
    taken = padded_actions(SPEC, 5)
    algo.counterfactual_baseline(obs, state, taken)
    hook.remove()
    (inputs, joint), = seen  # one critic call for all K samples and agents
    inputs, joint = inputs.reshape(4, 5, 3, -1), joint.reshape(4, 5, 3, 3, 3)
    assert torch.equal(inputs[..., 10:], torch.eye(3).expand(4, 5, 3, 3))  # agent id
    for agent in range(3):
        others = [j for j in range(3) if j != agent]
        assert torch.equal(joint[:, :, agent, others], taken[None, :, others].expand(4, -1, -1, -1))
        assert not torch.equal(joint[:, :, agent, agent], taken[None, :, agent].expand(4, -1, -1))


def test_coma_actor_gradient_reaches_only_the_right_actor_and_never_the_critic() -> None:
    algo = make_coma()
    rollout = make_rollout()
    obs = rollout.obs[:-1]
    weight = rollout.valid[..., None] / rollout.valid.sum()
    advantage = torch.randn(6, 2, 3)
    for agent in range(3):
        algo.zero_grad(set_to_none=True)
        losses, _ = algo.actor_losses(obs, rollout.pre_tanh, advantage, weight)
        losses[agent].backward()
        norms = member_grad_norms(algo.actor.net, 3)
        assert norms[agent] > 0
        assert (norms[torch.arange(3) != agent] == 0).all(), norms
        assert all(p.grad is None for p in algo.critic.parameters())


def test_coma_update_leaves_target_critic_without_gradient_and_copies_it_on_schedule() -> None:
    algo = make_coma(critic_steps=3, target_update_every=4)
    algo.update(make_rollout())  # 3 critic steps: no copy yet
    assert all(p.grad is None for p in algo.target_critic.parameters())
    differs = any(not torch.equal(a, b) for a, b in
                  zip(algo.critic.parameters(), algo.target_critic.parameters()))
    assert differs
    algo.update(make_rollout())  # steps 4..6: copied at step 4, then 2 more critic steps
    assert algo.critic_updates == 6


def test_coma_td_lambda_targets_match_the_forward_view() -> None:
    """The backward recursion equals the lambda-weighted average of n-step returns, cut at
    episode ends (bootstrap after truncation, none after termination) and the rollout's end."""
    algo = make_coma(actor={"log_std_min": -21.0, "log_std_max": -20.0}, td_lambda=0.7,
                     gamma=0.9)  # std ~1e-9: the sampled bootstrap actions are the modes
    rollout = make_rollout(steps=6, envs=2)
    targets = algo.td_lambda_targets(rollout)
    T, E = 6, 2
    gamma, lam = 0.9, 0.7
    with torch.no_grad():
        sampled = algo.actor.mode(rollout.obs)
        taken_q = algo.agent_values(algo.target_critic, rollout.state[:-1],
                                    algo.same_joint(rollout.action))  # Q'(s_t, a_t)
        sampled_q = algo.agent_values(algo.target_critic, rollout.state,
                                      algo.same_joint(sampled))  # Q'(s_t, a~_t)
    for e in range(E):
        for t in range(T):
            if not rollout.valid[t, e]:
                continue
            horizon = 1  # steps until the episode or the rollout ends
            while t + horizon - 1 < T - 1 and not rollout.ended[t + horizon - 1, e]:
                horizon += 1
            returns = [n_step_return(rollout, taken_q, sampled_q, gamma, t, e, n, horizon)
                       for n in range(1, horizon + 1)]
            expected = sum((1 - lam) * lam ** (n - 1) * returns[n - 1] for n in range(1, horizon))
            expected = expected + lam ** (horizon - 1) * returns[-1]
            torch.testing.assert_close(targets[t, e], expected, atol=1e-5, rtol=1e-5)


def n_step_return(rollout: Rollout, taken_q: torch.Tensor, sampled_q: torch.Tensor, gamma: float,
                  t: int, e: int, n: int, horizon: int) -> torch.Tensor:
    """``G_t^(n)``: n rewards, then ``Q'`` at the taken action inside the episode, or at a sampled
    action where the window ends (no bootstrap after a termination)."""
    ret = sum(gamma**j * rollout.reward[t + j, e] for j in range(n))
    end = t + n
    value = taken_q[end, e] if n < horizon else sampled_q[end, e]
    alive = 1.0 - float(rollout.terminated[end - 1, e]) if n == horizon else 1.0
    return ret + gamma**n * alive * value


# ------------------------------------------------------------------------------- storage


def test_rollout_buffer_rows_validity_and_carry_over() -> None:
    """Two rollouts filled together (``[K, ...]``), the second with data of its own: rows,
    validity, the carried-over last observation, and each rollout's checkpoint part."""
    store = RolloutBuffer(3, num_envs=2, obs_shape=(2, 4), action_shape=(2, 3), state_dim=5,
                          num_buffers=2)
    obs = np.zeros((2, 2, 2, 4), dtype=np.float32)
    for t in range(3):
        nxt = np.stack([np.full((2, 2, 4), t + 1), np.full((2, 2, 4), -t - 1)]).astype(np.float32)
        flags = np.array([[t == 1, False], [False, False]])
        store.add(obs, np.full((2, 2, 2, 3), 0.5), np.array([[1.0, 2.0], [3.0, 4.0]]), nxt,
                  terminated=flags, truncated=np.array([[False, t == 0]] * 2),
                  reset_step=np.array([[t == 2, t == 1]] * 2),
                  state=obs[:, :, 0, :1].repeat(5, 2), next_state=nxt[:, :, 0, :1].repeat(5, 2),
                  agent_reward=np.ones((2, 2, 2)), pre_tanh=np.ones((2, 2, 2, 3)))
        if t == 1:
            half = store.state_dict(1)  # rollout 1 mid-way, its own tensors
        obs = nxt
    assert store.full and len(store) == 3
    rollout = store.rollout()
    assert rollout.obs.shape == (2, 4, 2, 2, 4) and rollout.action.shape == (2, 3, 2, 2, 3)
    assert rollout.valid[0].tolist() == [[1, 1], [1, 0], [0, 1]]
    assert rollout.terminated[0].tolist() == [[0, 0], [1, 0], [0, 0]]
    assert rollout.terminated[1].eq(0).all() and rollout.reward[1].tolist() == [[3, 4]] * 3
    assert rollout.ended[0].tolist() == [[0, 1], [1, 0], [0, 0]]
    assert rollout.obs[0, 3].eq(3).all() and rollout.obs[1, 3].eq(-3).all()
    store.clear()
    assert not store.full and store.obs[0, 0].eq(3).all() and store.state[0, 0].eq(3).all()
    assert store.obs[1, 0].eq(-3).all()
    again = RolloutBuffer(3, num_envs=2, obs_shape=(2, 4), action_shape=(2, 3), state_dim=5,
                          num_buffers=2)
    again.load_state_dict(half, 0)
    assert again.ptr == 2 and again.obs[0, 2].eq(-2).all() and again.obs[1].eq(0).all()
    with pytest.raises(ValueError, match="fill together"):
        again.load_state_dict({**half, "ptr": 1}, 1)


def test_multi_agent_replay_keeps_agents_state_and_per_agent_n_step_rewards() -> None:
    buffer = ReplayBuffer(100, (3, 4), (3, 2), num_envs=1, state_dim=5, agent_rewards=3)
    obs = np.zeros((1, 3, 4), dtype=np.float32)
    for t in range(4):
        nxt = np.full((1, 3, 4), t + 1, dtype=np.float32)
        buffer.add(obs, np.zeros((1, 3, 2)), np.array([t + 1.0]), nxt, np.array([t == 2]),
                   np.array([False]), np.array([t == 3]), state=obs[:, 0, :1].repeat(5, 1),
                   next_state=nxt[:, 0, :1].repeat(5, 1),
                   agent_reward=np.array([[1.0, 2.0, 3.0]]) * (t + 1))
        obs = nxt
    batch = buffer.sample(64, Sampling(n_step=3, gamma=0.5))
    assert batch.obs.shape == (64, 3, 4) and batch.state.shape == (64, 5)
    assert batch.agent_reward.shape == (64, 3)
    first = batch.obs[:, 0, 0] == 0  # windows starting at t = 0: steps 0, 1, 2 (terminated)
    assert first.any()
    torch.testing.assert_close(batch.reward[first], torch.full_like(batch.reward[first],
                                                                    1 + 0.5 * 2 + 0.25 * 3))
    torch.testing.assert_close(batch.agent_reward[first][0], torch.tensor([2.75, 5.5, 8.25]))
    assert batch.discount[first].eq(0).all()
