"""The categorical critic (``rlzoo/nets/categorical.py``): C51's projection on a hand-computed
case, the target member and its pessimistic shift, the cross-entropy loss, where its gradient
goes inside SAC, and the contract's affine target through ``DiscreteReturn``."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from rlzoo.algos import SAC, TD3, EnvSpec
from rlzoo.buffers import Batch
from rlzoo.nets import CategoricalCritic, DeterministicActor, DiscreteReturn, TanhGaussianActor
from rlzoo.nets.categorical import project_onto_support
from rlzoo.optim.entropy import AutoAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args

SPEC = EnvSpec(obs_dim=3, act_dim=2)


def critic_with_logits(logits: torch.Tensor, v_min: float = 0.0, v_max: float = 2.0,
                       pessimism: float = 0.0) -> CategoricalCritic:
    """A critic whose members output the constant logits ``[E, N]`` for every input."""
    members, atoms = logits.shape
    critic = CategoricalCritic(1, 1,
                               **critic_args("categorical", n=members, v_min=v_min, v_max=v_max,
                                             atoms=atoms, pessimism=pessimism, hidden=[4]))
    with torch.no_grad():
        for p in critic.net.parameters():
            p.zero_()
        critic.net.output_layer.bias.copy_(logits.unsqueeze(1))  # [E, 1, N]
    return critic


def test_projection_matches_a_hand_computed_case() -> None:
    # support z = (0, 1, 2); atoms 0.5, 1.0, 1.5, -1 (clipped to 0) and 3 (clipped to 2)
    values = torch.tensor([[0.5, 1.0, 1.5, -1.0, 3.0]])
    probs = torch.tensor([[0.2, 0.3, 0.3, 0.1, 0.1]])
    projected = project_onto_support(values, probs, 0.0, 2.0, 3)
    # 0.5 splits 0.1 / 0.1 onto z0, z1; 1.0 lands on z1; 1.5 splits 0.15 / 0.15 onto z1, z2
    expected = torch.tensor([[0.1 + 0.1, 0.1 + 0.3 + 0.15, 0.15 + 0.1]])
    torch.testing.assert_close(projected, expected, rtol=0, atol=1e-7)
    assert projected.sum().item() == pytest.approx(1.0)


def test_the_algorithms_target_line_moves_the_atoms_and_keeps_the_probabilities() -> None:
    critic = critic_with_logits(torch.log(torch.tensor([[0.2, 0.3, 0.5]])))
    next_value = critic.next_value(torch.zeros(1, 1), torch.zeros(1, 1))
    assert isinstance(next_value, DiscreteReturn)
    reward, discount, alpha, log_prob = (torch.tensor([0.7]), torch.tensor([0.5]), 0.5,
                                         torch.tensor([0.8]))
    target = reward + discount * (next_value - alpha * log_prob)  # the line SAC writes
    # y_k = 0.7 + 0.5 (z_k - 0.4) = 0.5, 1.0, 1.5
    torch.testing.assert_close(target.atoms, torch.tensor([[0.5], [1.0], [1.5]]))
    torch.testing.assert_close(target.probs, torch.tensor([[0.2], [0.3], [0.5]]))
    torch.testing.assert_close(
        critic.target_probs(target), torch.tensor([[0.1, 0.1 + 0.3 + 0.25, 0.25]])
    )
    # a terminal transition (discount 0) puts everything on the reward
    terminal = reward + torch.tensor([0.0]) * (next_value - alpha * log_prob)
    torch.testing.assert_close(critic.target_probs(terminal), torch.tensor([[0.3, 0.7, 0.0]]))


def test_cross_entropy_loss_is_summed_over_members() -> None:
    logits = torch.log(torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]))
    critic = critic_with_logits(logits)
    target = DiscreteReturn(torch.tensor([[0.5], [1.0], [1.5]]),
                            torch.tensor([[0.2], [0.3], [0.5]]))
    loss, q = critic.td_loss(torch.zeros(1, 1), torch.zeros(1, 1), target)
    m = torch.tensor([0.1, 0.65, 0.25])
    log_p = torch.log_softmax(logits, -1)
    expected = -(m * log_p[0]).sum() - (m * log_p[1]).sum()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(q, torch.tensor([[1.3], [0.6]]))  # E[Z_i] = sum_k p_k z_k


def test_target_member_is_the_smaller_value_and_pessimism_shifts_by_its_std() -> None:
    # member 0: 0.5 / 0.5 on z = 0 and 2 (mean 1, std 1); member 1: 0.1 / 0.9 on z = 0 and 1
    # (mean 0.9, std 0.3). Without pessimism member 1 has the smaller value; with beta = 0.5
    # member 0 does (1 - 0.5 = 0.5 < 0.9 - 0.15), and its atoms move down by 0.5 * 1.
    logits = torch.log(torch.tensor([[0.5, 1e-12, 0.5], [0.1, 0.9, 1e-12]]))
    plain = critic_with_logits(logits).next_value(torch.zeros(1, 1), torch.zeros(1, 1))
    torch.testing.assert_close(plain.probs[:, 0], torch.tensor([0.1, 0.9, 0.0]))
    torch.testing.assert_close(plain.atoms[:, 0], torch.tensor([0.0, 1.0, 2.0]))
    pessimistic = critic_with_logits(logits, pessimism=0.5).next_value(
        torch.zeros(1, 1), torch.zeros(1, 1))
    torch.testing.assert_close(pessimistic.probs[:, 0], torch.tensor([0.5, 0.0, 0.5]))
    torch.testing.assert_close(pessimistic.atoms[:, 0], torch.tensor([-0.5, 0.5, 1.5]))
    # one member (mean 1, std 1) with beta = 0.5: every atom moves down by 0.5
    single = critic_with_logits(logits[:1], pessimism=0.5)
    shifted = single.next_value(torch.zeros(1, 1), torch.zeros(1, 1))
    torch.testing.assert_close(shifted.atoms[:, 0], torch.tensor([-0.5, 0.5, 1.5]))
    # and the actor sees E[Z] - beta std[Z] = 1 - 0.5
    torch.testing.assert_close(single(torch.zeros(1, 1), torch.zeros(1, 1)), torch.tensor([[0.5]]))


def batch(b: int = 8) -> Batch:
    g = torch.Generator().manual_seed(1)
    return Batch(obs=torch.randn(b, 3, generator=g), action=torch.rand(b, 2, generator=g) * 2 - 1,
                 reward=torch.randn(b, generator=g), next_obs=torch.randn(b, 3, generator=g),
                 discount=torch.full((b,), 0.99), terminated=torch.zeros(b))


def sac() -> SAC:
    return SAC(
        SPEC,
        actor=partial(TanhGaussianActor, **actor_args("sac", hidden=[16])),
        critic=partial(
            CategoricalCritic,
            **critic_args("categorical", v_min=-10, v_max=10, atoms=11, hidden=[16]),
        ),
        tuner=partial(AutoAlpha, **tuner_args("auto", lr=1e-3)),
        **algo_args("sac"),
    )


def test_critic_loss_touches_only_the_critic_and_actor_loss_only_the_actor() -> None:
    algo = sac()
    loss, _ = algo.critic_loss(batch(), algo.alpha)
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in algo.critic.parameters())
    assert all(p.grad is None for p in algo.actor.parameters())
    assert all(p.grad is None for p in algo.target_critic.parameters())
    algo.zero_grad(set_to_none=True)
    actor_loss, _ = algo.actor_loss(batch().obs, algo.alpha)
    actor_loss.backward()
    assert all(p.grad is None for p in algo.critic.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in algo.actor.parameters())


def test_sac_and_td3_update_with_it_and_the_support_is_not_saved() -> None:
    algo = sac()
    for _ in range(3):
        metrics = algo.update(batch())
    assert torch.isfinite(metrics["loss/critic"]) and metrics["loss/critic"] > 0
    assert not any("support" in k for k in algo.state_dict()["modules"])
    td3 = TD3(SPEC, actor=partial(DeterministicActor, **actor_args("td3", hidden=[16])),
              critic=partial(CategoricalCritic,
                             **critic_args("categorical", atoms=11, hidden=[16],
                                           actor_reduce="first")), **algo_args("td3"))
    for _ in range(2):
        metrics = td3.update(batch())
    assert torch.isfinite(metrics["loss/actor"])


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"v_min": 1.0, "v_max": 1.0}, "critic.v_min must be below critic.v_max"),
    ({"atoms": 1}, "critic.atoms must be a whole number >= 2"),
    ({"atoms": 11.5}, "critic.atoms must be a whole number >= 2, got 11.5"),
    ({"pessimism": -0.1}, "critic.pessimism must be >= 0"),
    ({"n": 0}, "critic.n must be >= 1"),
])
def test_impossible_supports_are_refused(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        CategoricalCritic(3, 2, **critic_args("categorical", **kwargs))
