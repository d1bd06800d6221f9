"""The off-policy algorithms' parts alone (issue 54 item 1): target networks or none, the joint
critic pass, batch statistics in the passes that train a network, Adam's betas; and the configs
built from them (algo=crossq, algo=ddpg, critic=tqc) at their references' values."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rlzoo.algos import SAC, TD3
from rlzoo.buffers.batch import Batch
from rlzoo.errors import UserError
from rlzoo.nets.batch_norm import batch_norm_layers, batch_statistics
from rlzoo.optim.adam import check_betas
from tests.capture import batches, build
from tests.from_yaml import composed


def steps_of(module: torch.nn.Module) -> list[int]:
    return [int(m.steps) for m in batch_norm_layers(module)]


def frozen_next_action(algo: SAC, monkeypatch: pytest.MonkeyPatch) -> torch.Tensor:
    """Make ``a'`` a fixed action with log-prob 0.5 (so the target is computable by hand)."""
    action = torch.full((16, 2), 0.3)
    monkeypatch.setattr(algo, "next_action", lambda obs: (action[: obs.shape[0]],
                                                          torch.full((obs.shape[0],), 0.5)))
    return action


def test_no_target_networks_bootstraps_from_the_critic(monkeypatch: pytest.MonkeyPatch) -> None:
    algo = build("sac", "cpu", 0, "algo.target_networks=none")
    assert algo.target_critic is None and algo.bootstrap_critic is algo.critic
    assert not any(k.startswith("target_") for k in algo.state_dict()["modules"])
    batch = batches("sac", algo, 1)[0]
    next_action = frozen_next_action(algo, monkeypatch)
    alpha = algo.alpha
    with torch.no_grad():
        q_next = algo.critic(batch.next_obs, next_action).min(0).values
        target = batch.reward + batch.discount * (q_next - alpha * algo.tuner.to_units(
            torch.full((16,), 0.5)))
        want = (algo.critic(batch.obs, batch.action) - target).pow(2).mean(1).sum()
    loss, _ = algo.critic_loss(batch, alpha)
    torch.testing.assert_close(loss, want)
    loss.backward()
    assert all(p.grad is not None for p in algo.critic.parameters())
    algo.update(batch)  # no polyak step to take, nothing fails
    with pytest.raises(UserError, match="algo.target_networks must be one of polyak, none"):
        build("sac", "cpu", 0, "algo.target_networks=soft")


def test_td3_without_targets_smooths_the_online_actor() -> None:
    algo = build("td3", "cpu", 0, "algo.target_networks=none", "algo.policy_noise=0")
    assert algo.target_actor is None and algo.target_critic is None
    batch = batches("td3", algo, 1)[0]
    with torch.no_grad():
        q_next = algo.critic(batch.next_obs, algo.actor(batch.next_obs)).min(0).values
        target = batch.reward + batch.discount * q_next
        want = (algo.critic(batch.obs, batch.action) - target).pow(2).mean(1).sum()
    torch.testing.assert_close(algo.critic_loss(batch)[0], want)
    for _ in range(3):
        algo.update(batch)


def test_adam_betas_reach_the_actor_and_critic_only() -> None:
    for name in ("sac", "td3"):
        algo = build(name, "cpu", 0, "algo.adam_betas=[0.5,0.99]")
        assert algo.optimizers["actor"].param_groups[0]["betas"] == (0.5, 0.99)
        assert algo.optimizers["critic"].param_groups[0]["betas"] == (0.5, 0.99)
    assert algo_alpha_betas(build("sac")) == (0.9, 0.999)  # the temperature keeps torch's
    assert build("sac").optimizers["actor"].param_groups[0]["betas"] == (0.9, 0.999)
    for bad in ([0.9], [0.9, 1.0], "0.9", [True, 0.5]):
        with pytest.raises(ValueError, match=r"algo.adam_betas must be two numbers in \[0, 1\)"):
            check_betas(bad)  # type: ignore[arg-type]


def algo_alpha_betas(algo: Any) -> tuple[float, float]:
    return algo.optimizers["alpha"].param_groups[0]["betas"]


def test_a_step_with_betas_is_torchs_adam_with_them() -> None:
    """One update's actor and critic steps equal torch.optim.Adam's with the configured betas
    (the fused step, after gradients from the same loss)."""
    algo = build("sac", "cpu", 0, "algo.adam_betas=[0.5,0.999]")
    params = list(algo.critic.parameters())
    ref = [p.detach().clone().requires_grad_() for p in params]
    opt = torch.optim.Adam(ref, lr=algo.critic_optimizer.param_groups[0]["lr"],
                           betas=(0.5, 0.999))
    for item in batches("sac", algo, 3):
        algo.critic_optimizer.zero_grad()
        algo.critic_loss(item, algo.alpha)[0].backward()  # gradients laid out as the weights
        for r, p in zip(ref, params):
            r.grad = p.grad.clone()
        opt.step()
        algo.critic_optimizer.step()
    for p, r in zip(params, ref):
        torch.testing.assert_close(p, r)


def test_joint_pass_needs_a_split_critic() -> None:
    with pytest.raises(UserError, match="critic_pass=joint needs a critic that splits"):
        build("sac", "cpu", 0, "algo.critic_pass=joint", "critic=distributional")
    with pytest.raises(UserError, match="algo.critic_pass must be one of separate, joint"):
        build("sac", "cpu", 0, "algo.critic_pass=both")


def test_sac_trains_batch_norms_with_batch_statistics() -> None:
    """net=batch_norm under plain SAC: the TD loss and the actor's sample move the running
    statistics (critic every update, actor every policy_delay); the target critic, a', acting
    and the critic read by the actor loss do not (the target averages them with the weights)."""
    algo = build("sac", "cpu", 0, "net=batch_renorm", "algo.policy_delay=2")
    items = batches("sac", algo, 4)
    before = [m.running_mean.clone() for m in batch_norm_layers(algo.actor)]
    with torch.no_grad():
        algo.act(items[0].obs)
    assert all(torch.equal(b, m.running_mean) for b, m in
               zip(before, batch_norm_layers(algo.actor)))
    for item in items:
        algo.update(item)
    assert steps_of(algo.critic) == [4] * 3 and steps_of(algo.actor) == [2] * 3
    assert steps_of(algo.target_critic) == [0] * 3  # never in a batch-statistics pass
    critic_stats = [m.running_mean.clone() for m in batch_norm_layers(algo.critic)]
    loss, _ = algo.actor_loss(items[0].obs, algo.alpha)
    assert all(torch.equal(b, m.running_mean) for b, m in
               zip(critic_stats, batch_norm_layers(algo.critic)))


# ----------------------------------------------------------------------------- CrossQ


def test_crossq_is_sac_with_its_parts() -> None:
    cfg = composed("algo=crossq", "env=Hopper")
    assert cfg.algo._target_ == "rlzoo.algos.SAC"
    assert (cfg.algo.target_networks, cfg.algo.critic_pass) == ("none", "joint")
    assert list(cfg.algo.adam_betas) == [0.5, 0.999] and cfg.algo.policy_delay == 3
    assert (cfg.algo.actor_lr, cfg.algo.critic_lr, cfg.tuner.lr) == (1e-3, 1e-3, 1e-3)
    assert cfg.algo.learning_starts == 100 and cfg.algo.batch_size == 256
    assert list(cfg.critic.hidden) == [1024, 1024] and list(cfg.algo.actor.hidden) == [256, 256]
    assert cfg.algo.actor.log_std_min == -20 and cfg.tuner.entropy_units == "normalized"
    for node in (cfg.critic.network, cfg.algo.actor.network):
        assert node.norm._target_ == "rlzoo.nets.EnsembleBatchRenorm"
        assert (node.norm.momentum, node.norm.eps, node.norm.rmax, node.norm.dmax,
                node.norm.warmup_steps) == (0.01, 0.001, 3.0, 5.0, 100_000)


def test_crossq_bootstraps_from_its_joint_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The critic loss equals one batch-statistics pass over [s; s'] by hand, its target built
    from the s' half's min; the running statistics move once; gradient reaches the critic."""
    algo, twin = build("crossq"), build("crossq")
    batch = batches("crossq", algo, 1)[0]
    next_action = frozen_next_action(algo, monkeypatch)
    alpha = algo.alpha
    with batch_statistics(twin.critic):
        both = twin.critic(torch.cat([batch.obs, batch.next_obs]),
                           torch.cat([batch.action, next_action]))
    q, q_next = both[:, :16], both[:, 16:].detach()
    target = batch.reward + batch.discount * (q_next.min(0).values - alpha * 0.5)
    want = (q - target).pow(2).mean(1).sum()
    loss, got_q = algo.critic_loss(batch, alpha)
    torch.testing.assert_close(loss, want)
    torch.testing.assert_close(got_q, q)
    assert steps_of(algo.critic) == [1, 1, 1]
    for a, b in zip(batch_norm_layers(algo.critic), batch_norm_layers(twin.critic)):
        torch.testing.assert_close(a.running_var, b.running_var)


def test_crossqs_counters_follow_its_references() -> None:
    """Critic renorm counts critic updates, the actor's counts actor updates (every 3rd: its
    warm-up lasts 3x as many updates, as in sb3-contrib); acting moves nothing."""
    algo = build("crossq")
    items = batches("crossq", algo, 7)
    for item in items:
        algo.update(item)
    assert steps_of(algo.critic) == [7] * 3 and steps_of(algo.actor) == [2] * 3
    state = {k: v.clone() for k, v in algo.state_dict()["modules"].items()}
    algo.act(items[0].obs)
    algo.act(items[0].obs, deterministic=True)
    assert all(torch.equal(v, algo.state_dict()["modules"][k]) for k, v in state.items())
    assert "actor.net.layers.0.running_var" in state and "critic.net.layers.0.steps" in state


def test_joint_pass_with_targets_keeps_the_targets_own_statistics() -> None:
    """critic_pass=joint with target networks (FlashSAC's way): the target critic makes its own
    batch-statistics pass, and polyak averages its parameters, not its statistics."""
    algo = build("crossq", "cpu", 0, "algo.target_networks=polyak")
    assert algo.target_critic is not None
    for item in batches("crossq", algo, 3):
        algo.update(item)
    assert steps_of(algo.target_critic) == [3] * 3
    online = batch_norm_layers(algo.critic)[1].running_mean  # after a layer the weights differ
    target = batch_norm_layers(algo.target_critic)[1].running_mean
    assert not torch.equal(online, target)


# ----------------------------------------------------------------------------- DDPG and TQC


def test_ddpg_is_sb3s() -> None:
    cfg = composed("algo=ddpg")
    assert cfg.algo._target_ == "rlzoo.algos.TD3" and cfg.algo.name == "ddpg"
    assert (cfg.algo.policy_delay, cfg.algo.policy_noise, cfg.algo.noise_clip) == (1, 0.0, 0.0)
    assert (cfg.algo.actor_lr, cfg.algo.critic_lr, cfg.algo.tau, cfg.algo.gamma) == (
        1e-3, 1e-3, 0.005, 0.99)
    assert cfg.algo.batch_size == 256 and cfg.algo.exploration_noise == 0.1
    assert cfg.critic._target_ == "rlzoo.nets.EnsembleCritic" and cfg.critic.n == 1
    assert list(cfg.critic.hidden) == list(cfg.algo.actor.hidden) == [400, 300]
    algo = build("ddpg")
    assert algo.critic.members == 1 and algo.target_actor is not None
    item = batches("ddpg", algo, 1)[0]
    actor_before = [p.clone() for p in algo.actor.parameters()]
    algo.update(item)  # the actor steps at the first update (no delay)
    assert any(not torch.equal(a, b) for a, b in zip(actor_before, algo.actor.parameters()))


def test_tqc_critic_is_sb3_contribs() -> None:
    cfg = composed("algo=sac", "critic=tqc")
    assert cfg.critic._target_ == "rlzoo.nets.TruncatedQuantileCritic"
    assert (cfg.critic.n, cfg.critic.quantiles, cfg.critic.drop_per_member) == (2, 25, 2)
    assert list(cfg.critic.hidden) == [256, 256] and cfg.critic.actor_reduce == "mean"


@pytest.mark.parametrize("name", ["crossq", "ddpg", "sac-tqc"])
def test_the_configs_update_with_finite_metrics(name: str) -> None:
    algo = build(name)
    for item in batches(name, algo, 4):
        metrics = algo.update(item)
    assert metrics and all(torch.isfinite(v).all() for v in metrics.values())
    assert isinstance(algo, (SAC, TD3))


def test_a_batch_is_what_the_helpers_draw() -> None:
    assert isinstance(batches("crossq", build("crossq"), 1)[0], Batch)
