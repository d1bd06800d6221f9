"""algo=simbav2 against the official code (github dojeon-ai/SimbaV2 at 14fafb2), and its config.

tests/fixtures/simbav2_reference.npz holds what the official JAX code did (scripts/
simbav2_reference.py ran its ``_init_simbav2_networks`` and ``_update_simbav2_networks``
unchanged): initial weights, a batch, the noise of each policy sample, and every weight and loss
after each of two updates. Here ``rlzoo.algos.SimbaV2`` starts from those weights and makes the
same two updates with the same noise; every weight (actor, twin categorical critic, target,
temperature) and loss must match. CI needs neither JAX nor the reference, only the file.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module

from rlzoo.algos import SimbaV2
from rlzoo.algos.base import EnvSpec
from rlzoo.buffers.batch import Batch
from rlzoo.nets import CategoricalCritic, HypersphericalMLP, TanhGaussianActor
from rlzoo.optim.entropy import AutoAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, network_args, tuner_args

FIXTURE = Path(__file__).parent / "fixtures" / "simbav2_reference.npz"


def reference() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as f:
        return dict(f)


def rlzoo_simbav2(ref: dict[str, np.ndarray]) -> SimbaV2:
    """The fixture's settings (scripts/simbav2_reference.py SETTINGS) in rlzoo's components."""
    algo = SimbaV2(
        EnvSpec(obs_dim=3, act_dim=2),
        actor=partial(
            TanhGaussianActor,
            **actor_args(
                "sac",
                network=partial(
                    HypersphericalMLP, **network_args("critic", hidden_dim=8, num_blocks=1)
                ),
                log_std_min=-10.0,
                log_std_max=2.0,
                log_std_squash="tanh",
            ),
        ),
        critic=partial(
            CategoricalCritic,
            **critic_args(
                "categorical",
                n=2,
                v_min=-5.0,
                v_max=5.0,
                atoms=21,
                network=partial(
                    HypersphericalMLP, **network_args("critic", hidden_dim=16, num_blocks=2)
                ),
            ),
        ),
        tuner=partial(
            AutoAlpha,
            **tuner_args(
                "auto", init_alpha=0.01, lr=1e-4, target_entropy_scale=0.5, loss_form="alpha"
            ),
        ),
        **algo_args(
            "simbav2",
            gamma=0.99,
            tau=0.005,
            actor_lr=1e-4,
            critic_lr=1e-4,
            lr_decay_to=0.5,
            lr_decay_updates=2,
        ),
    )
    # contiguous: a loaded state holds rlzoo's layout (rlzoo.store.state_match), whatever the npz's
    state = {k[len("init/"):]: torch.from_numpy(v).contiguous() for k, v in ref.items()
             if k.startswith("init/")}
    modules = algo.state_dict()["modules"]
    assert set(state) == {k for k in modules if k != "tuner.log_prob_shift"
                          and not k.endswith("running_std")}
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
    algo: SimbaV2, ref: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> list[dict[str, torch.Tensor]]:
    """Two updates, each policy sample drawing the reference's noise (actor step, then the
    critic target's next action)."""
    noise = [torch.from_numpy(ref[f"noise{u}/{part}"]) for u in range(2)
             for part in ("actor", "critic")]
    monkeypatch.setattr(torch, "randn_like", lambda like: noise.pop(0).to(like.dtype))
    batch = reference_batch(ref)
    metrics = [algo.update(batch) for _ in range(2)]
    assert not noise
    return metrics


def mismatches(
    algo: SimbaV2, ref: dict[str, np.ndarray], metrics: list[dict[str, torch.Tensor]]
) -> list[str]:
    """What differs from the reference after the two updates: losses (relative 1e-5), weights
    (absolute 2e-6: a first Adam step moves each by ~lr = 1e-4) and Adam first moments, i.e. the
    running means of the gradients (relative 1e-4 of each tensor's largest entry)."""
    bad = []
    for u in range(2):
        for mine, theirs in (("loss/actor", "actor/loss"), ("loss/critic", "critic/loss"),
                             ("loss/alpha", "temperature/loss"), ("stats/entropy",
                                                                  "actor/entropy")):
            want = float(ref[f"info{u}/{theirs}"])
            if abs(metrics[u][mine].item() - want) > 1e-5 * abs(want) + 1e-7:
                bad.append(f"{mine}@{u}")
    modules = algo.state_dict()["modules"]
    names = [k[len("after1/"):] for k in ref if k.startswith("after1/")]
    assert len(names) == len([k for k in ref if k.startswith("init/")])
    for name in names:
        want = torch.from_numpy(ref[f"after1/{name}"])
        assert modules[name].shape == want.shape, name
        if not torch.allclose(modules[name], want, atol=2e-6, rtol=0):
            bad.append(name)
    params = dict(algo.named_parameters())
    for name in (k[len("mu1/"):] for k in ref if k.startswith("mu1/")):
        optimizer = next(opt for opt in algo.optimizers.values()
                         if any(p is params[name] for g in opt.param_groups for p in g["params"]))
        got = optimizer.state[params[name]]["exp_avg"]
        want = torch.from_numpy(ref[f"mu1/{name}"]).reshape(got.shape)
        if not torch.allclose(got, want, atol=1e-4 * float(want.abs().max()), rtol=0):
            bad.append(f"mu:{name}")
    return bad


def test_two_updates_equal_the_official_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = reference()
    algo = rlzoo_simbav2(ref)
    metrics = run_updates(algo, ref, monkeypatch)
    assert mismatches(algo, ref, metrics) == []


def sac_order(self: SimbaV2, batch: Batch) -> dict[str, torch.Tensor]:
    """SAC's order: the critic first (its target from the old actor), then actor, temperature."""
    self.set_learning_rates()
    return super(SimbaV2, self).update(batch)


@pytest.mark.parametrize("broken", ["update order", "temperature loss", "no projection",
                                    "log std clamp", "constant learning rate"])
def test_the_comparison_can_fail(monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    """Each of SimbaV2's own choices, undone, breaks the equality above."""
    ref = reference()
    algo = rlzoo_simbav2(ref)
    if broken == "update order":
        monkeypatch.setattr(SimbaV2, "update", sac_order)
    elif broken == "temperature loss":
        algo.tuner.loss_form = "log_alpha"
    elif broken == "no projection":
        monkeypatch.setattr(SimbaV2, "apply_constraints", lambda self, optimizer: None)
    elif broken == "log std clamp":
        algo.actor.log_std_squash = "clamp"
    else:
        algo.lr_decay_to = 1.0
    metrics = run_updates(algo, ref, monkeypatch)
    assert mismatches(algo, ref, metrics)


def test_the_config_composes_the_references_defaults() -> None:
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=["algo=simbav2", "env=Hopper"])
        swapped = compose("config", overrides=["algo=simbav2", "env=Hopper", "critic=twin",
                                               "net=mlp"])
    assert cfg.critic._target_ == "rlzoo.nets.CategoricalCritic"
    assert (cfg.critic.v_min, cfg.critic.v_max, cfg.critic.atoms, cfg.critic.n) == (-5, 5, 101, 2)
    assert cfg.critic.network.hidden_dim == 512 and cfg.critic.network.num_blocks == 2
    assert cfg.algo.actor.network.hidden_dim == 128 and cfg.algo.actor.network.num_blocks == 1
    assert cfg.algo.actor.log_std_squash == "tanh" and cfg.algo.actor.log_std_min == -10
    assert cfg.tuner.init_alpha == 0.01 and cfg.tuner.target_entropy_scale == 0.5
    # the discount and the decay horizon come from the env and the run (tests below)
    assert cfg.tuner.loss_form == "alpha" and cfg.algo.gamma is None
    assert cfg.algo.lr_decay_updates is None
    assert cfg.normalize.obs and cfg.normalize.reward and cfg.normalize.reward_g_max == 5.0
    # one override swaps one part
    assert swapped.critic._target_ == "rlzoo.nets.TwinCritic" and swapped.critic.network is None
    assert "network" not in swapped.algo.actor and swapped.algo._target_ == "rlzoo.algos.SimbaV2"


def test_a_short_run_trains_normalizes_and_exports(tmp_path: Path) -> None:
    """The composed algorithm through the CLI: normalizers attached and fed, weights projected,
    and the exported program equals the policy on raw observations."""
    from conftest import read_summary, run_cli

    import rlzoo
    from rlzoo.nets.hyperspherical import HyperLinear

    run = tmp_path / "run"
    proc = run_cli(["algo=simbav2", "env=Pendulum", "total_steps=160", "algo.learning_starts=100",
                    "algo.batch_size=16", "eval.every=0", "eval.episodes=1", "log.progress=false",
                    "algo.actor.network.hidden_dim=8", "critic.network.hidden_dim=8"], run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    policy = rlzoo.load_policy(run)
    algo = policy.algo
    assert isinstance(algo, SimbaV2) and read_summary(run)["updates"] >= 60
    assert algo.obs_normalizer is not None and algo.reward_scaler is not None
    # Pendulum's 200-step limit: gamma 39/40 for the critic and the reward scaler's return
    assert algo.gamma == pytest.approx(0.975) and algo.reward_scaler.gamma == pytest.approx(0.975)
    assert float(algo.obs_normalizer.count) > 100  # fed from the collected observations
    for m in algo.modules():
        if isinstance(m, HyperLinear) and not any(m is t for t in algo.target_critic.modules()):
            assert torch.allclose(m.weight.norm(dim=-2), torch.ones(()), atol=1e-6)
    obs = torch.randn(7, 3) * 4
    program = torch.export.load(str(policy.export(tmp_path / "policy.pt2"))).module()
    assert torch.equal(program(obs), policy(obs))
