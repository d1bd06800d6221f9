"""MASAC (``algo=masac``): HASAC's parts with every agent's actor updated at once
(``algo.actor_update=simultaneous``) against the same centralized twin critic."""

from __future__ import annotations

import copy
from functools import partial

import torch
from conftest import TINY, read_summary, run_cli

from rlzoo.optim.entropy import FixedAlpha
from tests.from_yaml import tuner_args
from tests.test_multi_agent_algos import make_batch, make_hasac

NEAR_ZERO_STD = {"log_std_min": -21.0, "log_std_max": -20.0}  # every sample = tanh(mean)


def seen_joint_actions(update: str) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor,
                                             list[int]]:
    """One update of a 3-agent HASAC (``update``: sequential or simultaneous) from the same
    weights and batch: the joint actions the critic saw (TD loss first), the policies' modes
    before and after ``[B, N, A]``, and the agent order."""
    torch.manual_seed(0)
    algo = make_hasac(actor=NEAR_ZERO_STD, actor_update=update, actor_lr=0.05,
                      tuner=partial(FixedAlpha, **tuner_args("fixed", alpha=0.0)))
    batch = make_batch(b=16)
    old_actor = copy.deepcopy(algo.actor)
    seen: list[torch.Tensor] = []
    hook = algo.critic.register_forward_hook(lambda m, i, o: seen.append(i[1].detach()))
    algo.update(batch)
    hook.remove()
    with torch.no_grad():
        old, new = old_actor.mode(batch.obs), algo.actor.mode(batch.obs)
    return seen, old, new, list(algo.update_order)


def test_masac_moves_every_agent_from_the_same_joint_action_where_hasac_chains_them() -> None:
    seen, old, new, _ = seen_joint_actions("simultaneous")
    assert len(seen) == 2  # the TD loss, then one actor loss for every agent
    assert ((new - old).abs().amax(dim=(0, 2)) > 1e-3).all()  # every agent's policy moved
    joint = make_hasac().joint
    torch.testing.assert_close(seen[1], joint(old), atol=1e-5, rtol=0)  # nobody's new action
    # HASAC from the same weights: the second agent in its order sees the first one's new action
    seen, old, new, order = seen_joint_actions("sequential")
    assert len(seen) == 4
    first = order[0]
    second_view = seen[2].reshape(16, 3, -1)[:, first]
    torch.testing.assert_close(second_view, new[:, first], atol=1e-5, rtol=0)
    assert (second_view - old[:, first]).abs().max() > 1e-3


def test_masac_gives_each_agent_the_gradient_of_its_own_objective() -> None:
    """One joint loss with Q counted once: agent i's member gets exactly the gradient of
    ``J_i = E[alpha_i log pi_i(a~_i) - min Q(s, a~)]`` with the other agents' samples fixed."""
    algo = make_hasac(actor_update="simultaneous",
                      tuner=partial(FixedAlpha, **tuner_args("fixed", alpha=0.3)))
    batch = make_batch(b=8)
    alpha = algo.agent_alphas()

    def grads(loss: torch.Tensor) -> list[torch.Tensor]:
        algo.actor.zero_grad(set_to_none=True)
        loss.backward()
        return [p.grad.clone() for p in algo.actor.parameters()]

    torch.manual_seed(5)
    joint = grads(algo.joint_terms(batch.obs, batch.state, alpha)[0])
    shift = algo.tuner.log_prob_shift.reshape(-1).expand(3)
    for i in range(3):
        torch.manual_seed(5)
        action, log_prob, _ = algo.actor.sample(batch.obs)
        own = (torch.arange(3) == i)[:, None]
        mixed = torch.where(own, action, action.detach())
        q = algo.critic.actor_value(algo.critic(batch.state, algo.joint(mixed)))
        alone = grads((alpha[i] * (log_prob[:, i] + shift[i])).mean() - q.mean())
        for g_joint, g_alone in zip(joint, alone, strict=True):
            torch.testing.assert_close(g_joint[i], g_alone[i], atol=1e-6, rtol=1e-5)


def test_masac_steps_every_actor_member_once_per_update() -> None:
    algo = make_hasac(actor_update="simultaneous")
    algo.update(make_batch())
    steps = [s["step"].tolist() for s in algo.actor_optimizer.state.values()]
    assert steps and all(step == [1.0, 1.0, 1.0] for step in steps)


def test_an_unknown_actor_update_is_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="actor_update must be one of sequential, "
                                         "simultaneous, got 'random'"):
        make_hasac(actor_update="random")


def test_masac_runs_on_simple_spread(tmp_path) -> None:
    run = tmp_path / "masac"
    proc = run_cli(["algo=masac", "env=mpe/simple_spread", "total_steps=400",
                    "algo.learning_starts=200", "algo.batch_size=32", "eval.every=200",
                    "eval.episodes=2", "log.progress=false", *TINY], run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = read_summary(run)
    assert s["algo"] == "masac" and s["updates"] > 0 and s["episodes"] > 0
    cfg = (run / ".hydra" / "config.yaml").read_text()
    assert "actor_update: simultaneous" in cfg and "n_step: 1" in cfg
