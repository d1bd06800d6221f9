"""Critic kinds: ensemble subset-min, action-sequence shapes, and DSAC-T's distributional loss
against numbers computed by hand (plain Python math) from the formulas of the official code."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from rlzoo.algos import SAC, TD3, EnvSpec
from rlzoo.nets import (
    ActionSequenceCritic,
    DeterministicActor,
    DistributionalCritic,
    EnsembleCritic,
    TanhGaussianActor,
    TwinCritic,
)
from rlzoo.nets.target import make_target, polyak_update
from rlzoo.optim.entropy import AutoAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args

# ----------------------------------------------------------------------------- ensemble


def test_subset_min_uses_the_drawn_members(monkeypatch: pytest.MonkeyPatch) -> None:
    critic = EnsembleCritic(3, 2, **critic_args("ensemble", n=5, subset=3, hidden=[8]))
    q = torch.tensor([[4.0, 0.0], [1.0, 5.0], [3.0, 2.0], [0.5, 9.0], [2.0, 1.0]])
    # the subset is the argsort of uniform keys: these keys order the members 4, 1, 2, 0, 3
    keys = torch.tensor([0.4, 0.2, 0.3, 0.5, 0.1])
    monkeypatch.setattr(torch, "rand", lambda n, device=None: keys)
    explicit = torch.stack([q[4], q[1], q[2]]).min(dim=0).values  # members 4, 1, 2
    torch.testing.assert_close(critic.subset_min(q), explicit)
    assert critic.subset_min(q).tolist() == [1.0, 1.0]


def test_subset_min_draws_m_distinct_members_uniformly() -> None:
    n, draws = 10, 4000
    critic = EnsembleCritic(3, 2, **critic_args("ensemble", n=n, subset=2, hidden=[8]))
    q = torch.arange(n, dtype=torch.float32)[:, None]  # member e has value e
    mins = torch.stack([critic.subset_min(q)[0] for _ in range(draws)]).long()
    # Two distinct members: the min is never the largest member (with replacement it would
    # be 1% of draws), and P(min = j) = (n - 1 - j) / C(n, 2).
    assert mins.max().item() <= n - 2
    freq = torch.bincount(mins, minlength=n).float() / draws
    expected = torch.tensor([(n - 1 - j) / math.comb(n, 2) for j in range(n)])
    torch.testing.assert_close(freq, expected, atol=0.025, rtol=0)


def test_full_subset_is_the_plain_min_and_next_value_shape() -> None:
    critic = TwinCritic(3, 2, **critic_args("twin", hidden=[8]))
    q = torch.randn(2, 5)
    torch.testing.assert_close(critic.subset_min(q), q.min(dim=0).values)
    assert critic.next_value(torch.randn(5, 3), torch.randn(5, 2)).shape == (1, 5)


def test_ensemble_actor_sees_the_mean_of_all_members() -> None:
    critic = EnsembleCritic(3, 1,
                            **critic_args("ensemble", n=10, subset=2,
                                          hidden=[8]))  # actor_reduce defaults to mean
    q = torch.randn(10, 6)
    torch.testing.assert_close(critic.actor_value(q), q.mean(dim=0))
    # ... and through SAC's actor loss: alpha log pi - mean_i Q_i(s, a~).
    spec = EnvSpec(obs_dim=3, act_dim=1)
    sac = SAC(
        spec,
        lambda o, a: TanhGaussianActor(o, a, **actor_args("sac", hidden=[8])),
        lambda o, a: EnsembleCritic(o, a, **critic_args("ensemble", n=10, subset=2, hidden=[8])),
        partial(AutoAlpha, **tuner_args("auto")),
        **algo_args("sac"),
    )
    obs = torch.randn(6, 3)
    torch.manual_seed(3)
    loss, log_prob = sac.actor_loss(obs, torch.tensor(0.5))
    torch.manual_seed(3)
    action, _ = sac.actor.sample(obs)
    expected = (0.5 * log_prob - sac.critic(obs, action).mean(dim=0)).mean()
    torch.testing.assert_close(loss, expected)


def test_ensemble_td_loss_is_the_sum_of_member_mses() -> None:
    critic = EnsembleCritic(3, 2, **critic_args("ensemble", n=4, subset=2, hidden=[8]))
    obs, action, target = torch.randn(7, 3), torch.randn(7, 2), torch.randn(1, 7)
    loss, q = critic.td_loss(obs, action, target)
    assert q.shape == (4, 7)
    torch.testing.assert_close(loss, sum(((q[e] - target[0]) ** 2).mean() for e in range(4)))


# ----------------------------------------------------------------------------- action sequence


def test_action_sequence_critic_scores_a_flat_chunk() -> None:
    critic = ActionSequenceCritic(3, 2, **critic_args("action_sequence", horizon=4, hidden=[8]))
    assert critic.action_horizon == 4 and critic.members == 2 and critic.act_dim == 8
    chunk = torch.randn(5, 8, requires_grad=True)
    q = critic(torch.randn(5, 3), chunk)
    assert q.shape == (2, 5)
    q.sum().backward()
    assert (chunk.grad[:, 6:].abs() > 0).all()  # the last step of the chunk reaches Q
    with pytest.raises(ValueError, match="horizon"):
        ActionSequenceCritic(3, 2, **critic_args("action_sequence", horizon=0))


def test_chunk_actors_and_entropy_target_scale_with_the_horizon() -> None:
    spec = EnvSpec(obs_dim=3, act_dim=2)
    critic = lambda o, a: ActionSequenceCritic(o, a,
                                               **critic_args("action_sequence", horizon=4,
                                                             hidden=[8]))  # noqa: E731
    sac = SAC(spec, lambda o, a: TanhGaussianActor(o, a, **actor_args("sac", hidden=[8])), critic,
              partial(AutoAlpha, **tuner_args("auto")), **algo_args("sac"))
    assert sac.action_horizon == 4 and sac.act(torch.randn(5, 3)).shape == (5, 8)
    assert sac.tuner.target_entropy == -8.0  # -|A| per executed step, summed over the chunk
    td3 = TD3(spec, lambda o, a: DeterministicActor(o, a, **actor_args("td3", hidden=[8])), critic,
              **algo_args("td3"))
    assert td3.action_horizon == 4 and td3.act(torch.randn(5, 3)).shape == (5, 8)


# ----------------------------------------------------------------------------- distributional


def huber(x: float, delta: float = 50.0) -> float:
    return 0.5 * x * x if abs(x) <= delta else delta * (abs(x) - 0.5 * delta)


def dsac_t_member_loss(mu: list[float], sigma: list[float], y: list[float], y_s: list[float],
                       ms: float) -> tuple[float, list[float]]:
    """DSAC-T's loss of one member (official dsac_v2.py) and d loss / d sigma, by hand."""
    loss, dsigma = 0.0, []
    for m, s, t, ts in zip(mu, sigma, y, y_s):
        b = 3.0 * ms
        t_bound = m + min(max(ts - m, -b), b)
        ratio = min(max(ms**2 / (s**2 + 0.1), 0.1), 10.0)
        std_term = (s**2 - huber(m - t_bound)) / (s + 0.1)
        loss += ratio * (huber(m - t) + s * std_term) / len(mu)
        dsigma.append(ratio * std_term / len(mu))
    return loss, dsigma


def fixed_distribution(critic: DistributionalCritic, mean: list, std: list):
    """Make ``critic.distribution`` return these leaf tensors (for exact numbers and grads)."""
    mean_t = torch.tensor(mean, dtype=torch.float64, requires_grad=True)
    std_t = torch.tensor(std, dtype=torch.float64, requires_grad=True)
    critic.distribution = lambda obs, action: (mean_t, std_t)  # type: ignore[method-assign]
    return mean_t, std_t


def test_dsac_t_loss_matches_a_hand_computed_case() -> None:
    critic = DistributionalCritic(3, 1, **critic_args("distributional", hidden=[8])).double()
    obs, action = torch.zeros(2, 3), torch.zeros(2, 1)
    mu = [[1.0, 2.0], [0.5, -1.0]]
    sigma = [[0.5, 2.0], [1.0, 0.2]]
    y, y_s = [1.5, 100.0], [3.0, -60.0]  # 98 beyond the Huber delta; -60 beyond the boundary
    mean_t, std_t = fixed_distribution(critic, mu, sigma)
    target = torch.tensor([y, y_s], dtype=torch.float64)
    loss, q = critic.td_loss(obs, action, target)
    # First batch: ms_i is the batch mean of sigma_i.
    ms = [(0.5 + 2.0) / 2, (1.0 + 0.2) / 2]
    assert critic.running_std.squeeze(1).tolist() == pytest.approx(ms)
    expected = [dsac_t_member_loss(mu[i], sigma[i], y, y_s, ms[i]) for i in range(2)]
    assert loss.item() == pytest.approx(expected[0][0] + expected[1][0], rel=1e-12)
    assert q is mean_t
    # Bound check by hand for member 1, sample 0: y_s - mu = 2.5 is clipped to 3 * 0.6 = 1.8.
    assert 0.5 + min(max(3.0 - 0.5, -1.8), 1.8) == pytest.approx(2.3)
    loss.backward()
    # d/dsigma is the std term alone (sd, huber of the clipped target are detached) ...
    dsigma = [expected[0][1], expected[1][1]]
    torch.testing.assert_close(std_t.grad, torch.tensor(dsigma, dtype=torch.float64))
    # ... and d/dmu is ratio * huber'(mu - y) / B: (mu - y) inside delta, +-delta beyond it.
    ratio = [[min(max(ms[i] ** 2 / (s**2 + 0.1), 0.1), 10.0) for s in sigma[i]] for i in range(2)]
    dmu = [[ratio[i][j] * max(min(mu[i][j] - y[j], 50.0), -50.0) / 2 for j in range(2)]
           for i in range(2)]
    torch.testing.assert_close(mean_t.grad, torch.tensor(dmu, dtype=torch.float64))


def test_dsac_t_running_std_update_and_clipping_boundary() -> None:
    critic = DistributionalCritic(3, 1,
                                  **critic_args("distributional", hidden=[8],
                                                std_tau=0.005)).double()
    obs, action = torch.zeros(2, 3), torch.zeros(2, 1)
    fixed_distribution(critic, [[0.0, 0.0], [0.0, 0.0]], [[1.0, 3.0], [0.4, 0.4]])
    critic.td_loss(obs, action, torch.zeros(2, 2, dtype=torch.float64))
    assert critic.running_std.squeeze(1).tolist() == pytest.approx([2.0, 0.4])
    assert bool(critic.running_std_ready)
    # Second batch: ms <- 0.995 ms + 0.005 mean(sigma), then the boundary is 3 * the new ms.
    mu, sigma = [[1.0, 1.0], [1.0, 1.0]], [[5.0, 7.0], [0.4, 2.4]]
    y, y_s = [1.0, 1.0], [1.0 + 100.0, 1.0 - 100.0]
    fixed_distribution(critic, mu, sigma)
    loss, _ = critic.td_loss(obs, action, torch.tensor([y, y_s], dtype=torch.float64))
    ms = [0.995 * 2.0 + 0.005 * 6.0, 0.995 * 0.4 + 0.005 * 1.4]
    assert critic.running_std.squeeze(1).tolist() == pytest.approx(ms, rel=1e-12)
    expected = sum(dsac_t_member_loss(mu[i], sigma[i], y, y_s, ms[i])[0] for i in range(2))
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    # The clipped target sits exactly on mu +- 3 ms: with the std term's huber(3 ms) it changes
    # the loss compared with an unclipped target (a boundary of 100 would not clip).
    wide = DistributionalCritic(3, 1,
                                **critic_args("distributional", hidden=[8],
                                              boundary=100.0)).double()
    wide.running_std.copy_(critic.running_std)
    wide.running_std_ready.fill_(True)
    wide.std_tau = 1e-300  # keep ms fixed
    fixed_distribution(wide, mu, sigma)
    unclipped, _ = wide.td_loss(obs, action, torch.tensor([y, y_s], dtype=torch.float64))
    assert abs(unclipped.item() - loss.item()) > 1.0


def test_distributional_next_value_is_min_mean_and_sample_of_that_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    critic = DistributionalCritic(3, 1, **critic_args("distributional", hidden=[8]))
    fixed_distribution(critic, [[1.0, 3.0, 0.0], [2.0, -1.0, 0.0]], [[0.5, 0.1, 1.0],
                                                                     [2.0, 0.3, 2.0]])
    z = torch.tensor([[4.0, -0.5, -1.0], [-5.0, 1.0, 2.0]], dtype=torch.float64)
    monkeypatch.setattr(torch, "randn_like", lambda x: z)
    value = critic.next_value(torch.zeros(3, 3), torch.zeros(3, 1))
    assert value.shape == (2, 3)
    # column 0: member 0 (1 < 2), z clamped to 3; column 1: member 1 (-1 < 3);
    # column 2: a tie, either member's mean (0) with its own sample.
    assert value[0].tolist() == [1.0, -1.0, 0.0]
    assert value[1, :2].tolist() == pytest.approx([1.0 + 3 * 0.5, -1.0 + 1.0 * 0.3])
    assert value[1, 2].item() in (pytest.approx(-1.0), pytest.approx(4.0))


def test_distributional_std_is_softplus_and_forward_gives_means() -> None:
    critic = DistributionalCritic(3, 2, **critic_args("distributional", n=2, hidden=[8]))
    obs, action = torch.randn(5, 3), torch.randn(5, 2)
    mean, std = critic.distribution(obs, action)
    raw = critic.net(torch.cat([obs, action], -1))
    torch.testing.assert_close(mean, raw[..., 0])
    torch.testing.assert_close(std, torch.nn.functional.softplus(raw[..., 1]))
    torch.testing.assert_close(critic(obs, action), mean)
    assert (std > 0).all()
    q = torch.randn(2, 5)
    torch.testing.assert_close(critic.actor_value(q), q.min(dim=0).values)


def test_distributional_loss_trains_every_member_on_real_networks() -> None:
    critic = DistributionalCritic(3, 2, **critic_args("distributional", hidden=[16]))
    obs, action = torch.randn(32, 3), torch.randn(32, 2)
    target = torch.randn(2, 32)
    loss, q = critic.td_loss(obs, action, target)
    assert q.shape == (2, 32) and loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    for p in critic.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()
        assert (p.grad.flatten(1).abs().sum(1) > 0).all()  # each member gets a gradient
    assert set(critic.stats()) == {"stats/q_std", "stats/running_std"}


def test_running_std_survives_state_dict_and_polyak_leaves_the_online_copy() -> None:
    critic = DistributionalCritic(3, 2, **critic_args("distributional", hidden=[8]))
    target = make_target(critic)
    critic.td_loss(torch.randn(8, 3), torch.randn(8, 2), torch.randn(2, 8))
    online_std = critic.running_std.clone()
    assert (online_std > 0).all()
    polyak_update(target, critic, 0.005)
    torch.testing.assert_close(critic.running_std, online_std)  # polyak writes the target only
    assert not bool(target.running_std_ready)  # the target's copy is never used by a loss
    state = critic.state_dict()
    assert {"running_std", "running_std_ready"} <= set(state)
    restored = DistributionalCritic(3, 2, **critic_args("distributional", hidden=[8]))
    restored.load_state_dict(state)
    torch.testing.assert_close(restored.running_std, online_std)
    assert bool(restored.running_std_ready)
    # A restored critic continues the running mean instead of re-initialising it.
    obs, action, y = torch.randn(8, 3), torch.randn(8, 2), torch.randn(2, 8)
    critic.td_loss(obs, action, y)
    restored.td_loss(obs, action, y)
    torch.testing.assert_close(restored.running_std, critic.running_std)


# ----------------------------------------------------------------------------- schedules, refusals


def test_redq_schedule_actor_once_per_policy_delay_targets_every_update() -> None:
    from rlzoo.buffers import Batch

    spec = EnvSpec(obs_dim=3, act_dim=1)
    sac = SAC(
        spec,
        lambda o, a: TanhGaussianActor(o, a, **actor_args("sac", hidden=[8])),
        lambda o, a: EnsembleCritic(o, a, **critic_args("ensemble", n=4, subset=2, hidden=[8])),
        partial(AutoAlpha, **tuner_args("auto")),
        **algo_args("sac", policy_delay=3, target_delay=1),
    )
    batch = Batch(obs=torch.randn(8, 3), action=torch.rand(8, 1), reward=torch.randn(8),
                  next_obs=torch.randn(8, 3), discount=torch.full((8,), 0.99),
                  terminated=torch.zeros(8))
    actor_steps = 0
    for _ in range(6):
        target_before = sac.target_critic.net.output_layer.weight.clone()
        actor_before = sac.actor.net.output_layer.weight.clone()
        metrics = sac.update(batch)
        assert not torch.equal(sac.target_critic.net.output_layer.weight, target_before)
        stepped = not torch.equal(sac.actor.net.output_layer.weight, actor_before)
        assert stepped == ("loss/actor" in metrics) == (sac.updates % 3 == 0)
        actor_steps += stepped
    assert actor_steps == 2


def test_td3_refuses_the_distributional_critic_naming_what_it_supports() -> None:
    spec = EnvSpec(obs_dim=3, act_dim=1)
    with pytest.raises(ValueError, match="it trains: TwinCritic, EnsembleCritic, "
                                         "ActionSequenceCritic, CategoricalCritic \\(choose"):
        TD3(spec, lambda o, a: DeterministicActor(o, a, **actor_args("td3", hidden=[8])), lambda o,
            a: DistributionalCritic(o, a,
                                    **critic_args("distributional",
                                                  hidden=[8])), **algo_args("td3"))
