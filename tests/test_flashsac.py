"""algo=flashsac against the official code (github Holiday-Robot/FlashSAC at 87edc90), and its
config, seed groups, resume and export.

tests/fixtures/flashsac_reference.npz holds what the official PyTorch code did (scripts/
flashsac_reference.py ran its ``_init_flashsac_networks`` and ``_update_networks`` unchanged):
initial weights, a batch, the noise of each policy sample, and every weight, batch-norm running
statistic, Adam first moment and loss after three updates (actor and critic, critic only, actor
and critic). Here ``rlzoo.algos.FlashSAC`` starts from those weights and makes the same updates
with the same noise; everything must match.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import read_summary, run_cli
from hydra import compose, initialize_config_module
from omegaconf import DictConfig, OmegaConf

from rlzoo.algos import FlashSAC
from rlzoo.algos.base import EnvSpec
from rlzoo.algos.seed_axis import stack_seeds
from rlzoo.buffers.batch import Batch
from rlzoo.config.settings import LOOP_KEYS
from rlzoo.nets import CategoricalCritic, TanhGaussianActor, UnitNormMLP
from rlzoo.nets.unit_norm import UnitBatchNorm
from rlzoo.optim.entropy import AutoAlpha
from tests.from_yaml import composed

FIXTURE = Path(__file__).parent / "fixtures" / "flashsac_reference.npz"
UPDATES = 3


def reference() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as f:
        return dict(f)


FLASH = composed("algo=flashsac")  # conf/algo/flashsac.yaml's nodes: the YAML's keys


def keys(node: DictConfig, **changes: Any) -> dict[str, Any]:
    """A composed node's plain keys (no ``_target_``/``_partial_``, no nested builder), with
    ``changes``."""
    plain = {str(k): (OmegaConf.to_container(v) if OmegaConf.is_list(v) else v)
             for k, v in node.items() if not str(k).startswith("_")
             and not (isinstance(v, DictConfig) and "_target_" in v)}
    return {**plain, **changes}


def build(envs: int = 1) -> FlashSAC:
    """The fixture's settings (scripts/flashsac_reference.py SETTINGS) in rlzoo's components."""
    # the fixture's schedule pinned (learning_rate_warmup_step=1, learning_rate_decay_step=4)
    algo = keys(FLASH.algo, noise_envs=envs, lr_init_fraction=2 / 3, lr_warmup_updates=1,
                lr_decay_updates=4)
    for key in ("name", "actor", *LOOP_KEYS):
        algo.pop(key, None)
    return FlashSAC(
        EnvSpec(obs_dim=3, act_dim=2),
        actor=partial(TanhGaussianActor, **keys(FLASH.algo.actor, network=partial(
            UnitNormMLP, **keys(FLASH.algo.actor.network, hidden_dim=8)))),
        critic=partial(CategoricalCritic, **keys(FLASH.critic, atoms=21, network=partial(
            UnitNormMLP, **keys(FLASH.critic.network, hidden_dim=16)))),
        tuner=partial(AutoAlpha, **keys(FLASH.tuner)),
        **algo,
    )


def rlzoo_flashsac(ref: dict[str, np.ndarray]) -> FlashSAC:
    algo = build()
    # contiguous: a loaded state holds rlzoo's layout (rlzoo.store.state_match), whatever the npz's
    state = {k[len("init/"):]: torch.from_numpy(v).contiguous() for k, v in ref.items()
             if k.startswith("init/")}
    modules = algo.state_dict()["modules"]
    assert set(state) == {k for k in modules if k != "tuner.log_prob_shift"
                          and not k.startswith("exploration.")}
    modules.update(state)
    algo.load_state_dict({"modules": modules, "optimizers": algo.state_dict()["optimizers"],
                          "updates": 0})
    return algo


def reference_batch(ref: dict[str, np.ndarray]) -> Batch:
    t = {k[len("batch/"):]: torch.from_numpy(v) for k, v in ref.items() if k.startswith("batch/")}
    return Batch(obs=t["observation"], action=t["action"], reward=t["reward"],
                 next_obs=t["next_observation"], discount=0.99 * (1.0 - t["terminated"]),
                 terminated=t["terminated"])


def run_updates(
    algo: FlashSAC, ref: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch,
    strict: bool = True,
) -> list[dict[str, torch.Tensor]]:
    """The fixture's updates, each policy sample drawing the reference's noise in the
    reference's order (joint actor sample [2B, A], then the critic target's next action).
    ``strict=False`` (a broken variant that samples other shapes): each draw takes the next
    noise, cut or doubled to the shape asked for."""
    noise = [torch.from_numpy(ref[f"noise/{i}"]) for i in range(5)]

    def draw(like: torch.Tensor) -> torch.Tensor:
        sample = noise.pop(0) if noise else torch.zeros_like(like)
        if sample.shape != like.shape:
            assert not strict, (sample.shape, like.shape)
            sample = torch.cat([sample, sample])[:like.shape[0]]
        return sample.to(like.dtype)

    monkeypatch.setattr(torch, "randn_like", draw)
    batch = reference_batch(ref)
    metrics = [algo.update(batch) for _ in range(UPDATES)]
    assert not noise or not strict
    return metrics


def mismatches(
    algo: FlashSAC, ref: dict[str, np.ndarray], metrics: list[dict[str, torch.Tensor]],
    strict: bool = True,
) -> list[str]:
    """What differs from the reference: losses (relative 1e-5), every weight and running
    statistic (absolute 2e-6; an Adam step moves a weight by ~lr = 3e-4) and the Adam first
    moments, the running means of the gradients (relative 5e-4 of each tensor's largest entry:
    the actor's log std starts near -4, std 0.018, whose 1/std terms in the log-density's
    gradient leave the float32 gradients of the reference and of rlzoo up to 1.3e-4 apart; the
    critic's agree to 1e-6)."""
    bad = []
    for u in range(UPDATES):
        pairs = [("loss/critic", "critic/loss")]
        if u % 2 == 0:
            pairs += [("loss/actor", "actor/loss"), ("loss/alpha", "temperature/loss"),
                      ("stats/entropy", "actor/entropy")]
        if strict:
            assert ("loss/actor" in metrics[u]) == (u % 2 == 0)
        for mine, theirs in pairs:
            want = float(ref[f"info{u}/{theirs}"].reshape(()))
            if mine not in metrics[u] or abs(metrics[u][mine].item() - want) > (
                    1e-5 * abs(want) + 1e-7):
                bad.append(f"{mine}@{u}")
    modules = algo.state_dict()["modules"]
    names = [k[len("after/"):] for k in ref if k.startswith("after/")]
    assert len(names) == len([k for k in ref if k.startswith("init/")])
    for name in names:
        want = torch.from_numpy(ref[f"after/{name}"])
        assert modules[name].shape == want.shape, name
        if not torch.allclose(modules[name], want, atol=2e-6, rtol=0):
            bad.append(name)
    params = dict(algo.named_parameters())
    for name in (k[len("mu/"):] for k in ref if k.startswith("mu/")):
        optimizer = next(opt for opt in algo.optimizers.values()
                         if any(p is params[name] for g in opt.param_groups for p in g["params"]))
        got = optimizer.state[params[name]]["exp_avg"]
        want = torch.from_numpy(ref[f"mu/{name}"]).reshape(got.shape)
        if not torch.allclose(got, want, atol=5e-4 * float(want.abs().max()), rtol=0):
            bad.append(f"mu:{name}")
    return bad


def test_three_updates_equal_the_official_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = reference()
    algo = rlzoo_flashsac(ref)
    metrics = run_updates(algo, ref, monkeypatch)
    assert mismatches(algo, ref, metrics) == []


def separate_batches(self: FlashSAC, batch: Batch, alpha: torch.Tensor):  # type: ignore[no-untyped-def]
    """The actor's step without the joint (s, s') pass: batch statistics of s alone."""
    from rlzoo.nets.target import frozen
    from rlzoo.nets.unit_norm import batch_statistics

    with batch_statistics(self.actor):
        action, log_prob = self.actor.sample(batch.obs)
    with frozen(self.critic):
        q = self.critic.actor_value(self.critic(batch.obs, action))
    return (alpha * log_prob - q).mean(), log_prob


@pytest.mark.parametrize("broken", ["sum over members", "no projection", "actor from update 2",
                                    "constant learning rate", "polyak buffers too",
                                    "separate actor batch", "target entropy"])
def test_the_comparison_can_fail(monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    """Each of FlashSAC's own choices, undone, breaks the equality above."""
    ref = reference()
    algo = rlzoo_flashsac(ref)
    if broken == "sum over members":
        original = FlashSAC.joint_critic_terms

        def summed(self: FlashSAC, batch: Batch, alpha: torch.Tensor):  # type: ignore[no-untyped-def]
            loss, q, stats = original(self, batch, alpha)
            return 2 * loss, q, stats

        monkeypatch.setattr(FlashSAC, "joint_critic_terms", summed)
    elif broken == "no projection":
        monkeypatch.setattr(FlashSAC, "apply_constraints", lambda self, optimizer: None)
    elif broken == "actor from update 2":
        monkeypatch.setattr(FlashSAC, "update_phase", lambda self: self.updates % 2 == 1)
    elif broken == "constant learning rate":
        algo.lr_init_fraction = algo.lr_end_fraction = 1.0
    elif broken == "polyak buffers too":
        from rlzoo.nets.target import polyak_update
        monkeypatch.setattr(FlashSAC, "update_targets", lambda self: polyak_update(
            self.target_critic, self.critic, self.tau))
    elif broken == "separate actor batch":
        monkeypatch.setattr(FlashSAC, "joint_actor_loss", separate_batches)
    else:
        algo.tuner.target_entropy = -0.5 * 2
    metrics = run_updates(algo, ref, monkeypatch, strict=False)
    assert mismatches(algo, ref, metrics, strict=False)


def test_the_config_composes_the_references_defaults() -> None:
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=["algo=flashsac", "env=Hopper"])
        swapped = compose("config", overrides=["algo=flashsac", "env=Hopper", "net=mlp"])
    assert cfg.algo._target_ == "rlzoo.algos.FlashSAC"
    assert cfg.critic._target_ == "rlzoo.nets.CategoricalCritic"
    assert (cfg.critic.v_min, cfg.critic.v_max, cfg.critic.atoms, cfg.critic.n) == (-5, 5, 101, 2)
    assert cfg.critic.network._target_ == "rlzoo.nets.UnitNormMLP"
    assert (cfg.critic.network.hidden_dim, cfg.critic.network.num_blocks) == (256, 2)
    assert (cfg.algo.actor.network.hidden_dim, cfg.algo.actor.network.num_blocks) == (128, 2)
    assert cfg.algo.batch_size == 512 and cfg.algo.learning_starts == 10000
    assert cfg.algo.policy_delay == 2 and cfg.algo.tau == 0.01 and cfg.algo.gamma == 0.99
    assert cfg.tuner.init_alpha == 0.01 and cfg.tuner.target_std == 0.15
    assert cfg.tuner.loss_form == "alpha"
    assert cfg.normalize.reward and not cfg.normalize.obs
    assert swapped.critic.network is None and "network" not in swapped.algo.actor


def test_the_target_entropy_is_a_gaussians() -> None:
    tuner = AutoAlpha(6, **keys(FLASH.tuner))
    assert tuner.target_entropy == pytest.approx(0.5 * 6 * np.log(2 * np.pi * np.e * 0.0225))


def test_projection_bounds_every_norm() -> None:
    net = UnitNormMLP(2, 5, 7, **keys(FLASH.critic.network, hidden_dim=8, num_blocks=1))
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(3.0).add_(0.5)
    net.project_parameters()
    for m in net.modules():
        if isinstance(m, UnitBatchNorm):
            norm = (m.weight.pow(2) + m.bias.pow(2)).sum(-1).sqrt()
            assert torch.allclose(norm, torch.full_like(norm, 8 ** 0.5 if m.weight.shape[-1] == 8
                                                        else m.weight.shape[-1] ** 0.5))
    assert torch.allclose(net.embedder.weight.norm(dim=-2), torch.ones(2, 8), atol=1e-6)
    assert torch.allclose(net.post_norm.weight.norm(dim=-1), torch.full((2, 1), 8 ** 0.5))


def test_a_seed_group_matches_its_seeds_alone() -> None:
    """Seed k of a group updates as seed k alone (batch norms, projection, noise state): the
    group's slice equals the separate run's after three updates, and perturbing seed 1's batch
    leaves seed 0 bit for bit."""
    def seeded(seed: int) -> FlashSAC:
        torch.manual_seed(seed)
        return build(envs=3)

    data = torch.Generator().manual_seed(0)

    def batch(k: int) -> Batch:
        obs = torch.randn(k, 16, 3, generator=data)
        return Batch(obs=obs, action=torch.rand(k, 16, 2, generator=data) * 2 - 1,
                     reward=torch.randn(k, 16, generator=data), next_obs=obs + 0.1,
                     discount=torch.full((k, 16), 0.99), terminated=torch.zeros(k, 16))

    group = stack_seeds([seeded(0), seeded(1)])
    b = batch(2)
    torch.manual_seed(5)
    for _ in range(3):
        group.update(b)
    acts = group.compute(group.act, torch.randn(2, 3, 3, generator=data))
    assert acts.shape == (2, 3, 2)
    other = stack_seeds([seeded(0), seeded(1)])
    changed = Batch(**{**b.__dict__, "reward": torch.stack([b.reward[0], b.reward[1] + 1.0])})
    torch.manual_seed(5)
    for _ in range(3):
        other.update(changed)
    for (name, x), y in zip(group.state_dict()["modules"].items(),
                            other.state_dict()["modules"].values()):
        if x.dim() and x.shape[0] == 2 and not name.startswith("exploration"):
            assert torch.equal(x[0], y[0]), name
            if x.is_floating_point() and name.startswith("critic.") and "running" not in name:
                assert not torch.equal(x[1], y[1]), name
    # the running statistics moved, per member and per seed
    stats = group.critic.net.input_norm.running_mean
    assert stats.shape == (2, 2, 1, 5) and not torch.equal(stats[0], stats[1])


def test_the_noise_is_held_for_a_zeta_number_of_steps() -> None:
    torch.manual_seed(0)
    algo = build(envs=2)
    obs = torch.randn(2, 3)
    mean, log_std = algo.actor(obs)
    noises = []
    for _ in range(40):
        action = algo.act(obs)
        noises.append(torch.atanh(action.clamp(-0.999999, 0.999999)))
    changes = sum(not torch.allclose(a, b) for a, b in zip(noises, noises[1:]))
    assert 1 <= changes < 39  # held for some steps, renewed at others
    assert int(algo.exploration.count) >= 1 and 1 <= int(algo.exploration.repeat) <= 16
    fresh = algo.act(torch.randn(5, 3))  # another batch size: fresh noise, state untouched
    assert fresh.shape == (5, 2)


def test_a_categorical_critic_is_required(tmp_path: Path) -> None:
    proc = run_cli(["algo=flashsac", "critic=twin", "total_steps=50"], tmp_path / "run")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "FlashSAC cannot train a TwinCritic" in lines[0], proc.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_short_run_trains_and_exports(tmp_path: Path) -> None:
    """The composed algorithm through the CLI: reward scaler fed, weights projected, batch-norm
    statistics moved, and the exported program equals the policy on raw observations (split
    resume, single and seeds=2: tests/test_resume_split.py)."""
    import rlzoo
    from rlzoo.nets.hyperspherical import HyperLinear

    run = tmp_path / "run"
    proc = run_cli(["algo=flashsac", "env=Pendulum", "total_steps=230",
                    "algo.learning_starts=100", "algo.batch_size=16", "eval.every=0",
                    "eval.episodes=1", "log.progress=false", "algo.actor.network.hidden_dim=8",
                    "critic.network.hidden_dim=8", "critic.network.num_blocks=1",
                    "algo.actor.network.num_blocks=1"], run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_summary(run)["updates"] == 130
    policy = rlzoo.load_policy(run)
    algo = policy.algo
    assert isinstance(algo, FlashSAC) and algo.reward_scaler is not None
    assert algo.obs_normalizer is None
    assert float(algo.reward_scaler.ret_stats.count) > 100
    for m in algo.modules():
        if isinstance(m, HyperLinear) and not any(m is t for t in algo.target_critic.modules()):
            assert torch.allclose(m.weight.norm(dim=-2), torch.ones(()), atol=1e-6)
    assert float(algo.actor.net.input_norm.running_var.sub(1).abs().max()) > 1e-3
    obs = torch.randn(7, 3) * 4
    program = torch.export.load(str(policy.export(tmp_path / "policy.pt2"))).module()
    assert torch.equal(program(obs), policy(obs))
