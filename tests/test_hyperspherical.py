"""The network options: SimbaV2's hyperspherical MLP (shapes, unit-norm weights after every step,
per seed and per member, in checkpoints), dropout and LayerNorm in actors and critics, and the
one-override composition ``net=simbav2``."""

from __future__ import annotations

import copy
from functools import partial
from pathlib import Path

import pytest
import torch
from conftest import TINY, assert_user_error, run_cli
from hydra import compose, initialize_config_module

from rlzoo.algos import SAC
from rlzoo.algos.base import EnvSpec
from rlzoo.algos.seed_axis import stack_seeds
from rlzoo.buffers.batch import Batch
from rlzoo.nets import DeterministicActor, HypersphericalMLP, TanhGaussianActor, TwinCritic
from rlzoo.nets.ensemble import EnsembleMLP
from rlzoo.nets.hyperspherical import HyperLinear, l2_normalize
from rlzoo.optim.entropy import AutoAlpha
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint
from tests.from_yaml import actor_args, algo_args, critic_args, network_args, tuner_args

SMALL = partial(HypersphericalMLP, **network_args("critic", hidden_dim=8, num_blocks=1))


def column_norms(module: torch.nn.Module) -> list[torch.Tensor]:
    """The l2 norms of every HyperLinear weight's columns (over the input axis)."""
    return [m.weight.norm(dim=-2) for m in module.modules() if isinstance(m, HyperLinear)]


def test_shapes_heads_and_unit_columns_at_init() -> None:
    net = HypersphericalMLP(3, 5, 6, heads=2, **network_args("critic", hidden_dim=8, num_blocks=2))
    x = torch.randn(4, 5)
    assert net(x).shape == (3, 4, 6)
    # a shared input equals the same input given to every member
    assert torch.allclose(net(x), net(x.expand(3, 4, 5)), atol=1e-6)
    assert len(net.heads) == 2 and len(net.blocks) == 2
    for norms in column_norms(net):
        assert torch.allclose(norms, torch.ones_like(norms), atol=1e-6)
    with pytest.raises(ValueError, match="heads"):
        HypersphericalMLP(1, 5, 5, heads=2, **network_args("critic"))


def test_forward_matches_the_equations_on_one_member() -> None:
    """Hand-written SimbaV2 forward pass (embedder, one LERP block, one head) for member 1."""
    torch.manual_seed(3)
    net = HypersphericalMLP(2, 3, 4, **network_args("critic", hidden_dim=6, num_blocks=1))
    with torch.no_grad():  # move the scalers and bias off their initial values
        for p in net.parameters():
            if p.dim() == 3 and p.shape[1] == 1:
                p.add_(torch.rand_like(p))
    x = torch.randn(5, 3)
    e, blk, head = net.embedder, net.blocks[0], net.heads[0]
    m = 1

    def n(v: torch.Tensor) -> torch.Tensor:
        return v / v.norm(dim=-1, keepdim=True)

    h = n(torch.cat([x, torch.full((5, 1), 3.0)], -1))
    h = n(h @ e.linear.weight[m] * e.scaler.scaler[m] * e.scaler.forward_scale)
    wide = h @ blk.up.weight[m] * blk.up_scaler.scaler[m] * blk.up_scaler.forward_scale
    mlp = n((torch.relu(wide) + 1e-8) @ blk.down.weight[m])
    h = n(h + blk.alpha.scaler[m] * blk.alpha.forward_scale * (mlp - h))
    y = (h @ head.inner.weight[m] * head.scaler.scaler[m]) @ head.outer.weight[m] + head.bias[m]
    assert torch.allclose(net(x)[m], y, atol=1e-5)
    assert blk.alpha.forward_scale == pytest.approx((1 / 2) / (1 / 6**0.5))


def tiny_sac(seed: int) -> SAC:
    torch.manual_seed(seed)
    spec = EnvSpec(obs_dim=3, act_dim=2)
    return SAC(
        spec,
        actor=partial(TanhGaussianActor, **actor_args("sac", network=SMALL, log_std_squash="tanh")),
        critic=partial(TwinCritic, **critic_args("twin", network=SMALL)),
        tuner=partial(AutoAlpha, **tuner_args("auto", lr=1e-3)),
        **algo_args("sac", actor_lr=1e-2, critic_lr=1e-2),
    )


def batch(k: int | None, b: int = 16, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    lead = () if k is None else (k,)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*lead, *shape, generator=g)

    return Batch(obs=r(b, 3), action=r(b, 2).tanh(), reward=r(b), next_obs=r(b, 3),
                 discount=torch.full((*lead, b), 0.99), terminated=torch.zeros(*lead, b))


def test_projection_after_every_step_holds_for_every_seed_and_member() -> None:
    group = stack_seeds([tiny_sac(0), tiny_sac(1)])
    for i in range(3):
        group.update(batch(2, seed=i))
    for net in (group.actor, group.critic):
        norms = column_norms(net)
        assert norms and all(n.shape[0] == 2 for n in norms)  # [K, E, out]
        for n in norms:
            assert torch.allclose(n, torch.ones_like(n), atol=1e-6)
    # the targets are polyak averages of projected weights, not projected themselves
    target = torch.cat([n.flatten() for n in column_norms(group.target_critic)])
    assert (target - 1).abs().max() > 1e-5  # float rounding of a unit norm is ~1e-7


def test_without_the_projection_the_weights_leave_the_sphere() -> None:
    """The check above can fail: with apply_constraints disabled the columns drift."""
    algo = tiny_sac(0)
    algo.apply_constraints = lambda optimizer: None  # type: ignore[method-assign]
    algo.update(batch(None))
    drift = torch.cat([(n - 1).abs().flatten() for n in column_norms(algo.critic)])
    assert drift.max() > 1e-3


def test_a_seeds_update_is_untouched_by_another_seeds_data() -> None:
    a, b = stack_seeds([tiny_sac(0), tiny_sac(1)]), stack_seeds([tiny_sac(0), tiny_sac(1)])
    batch_a = batch(2, seed=0)
    batch_b = copy.deepcopy(batch_a)
    batch_b.obs[1] += 1.0  # perturb seed 1 only
    torch.manual_seed(7)
    a.update(batch_a)
    torch.manual_seed(7)
    b.update(batch_b)
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa[0], pb[0]), name
    assert any(not torch.equal(pa[1], pb[1]) for pa, pb in zip(a.parameters(), b.parameters()))


def test_a_group_member_equals_the_same_seed_alone() -> None:
    group, alone = stack_seeds([tiny_sac(0), tiny_sac(1)]), tiny_sac(1)
    both = batch(2, seed=4)
    one = Batch(**{f: getattr(both, f)[1] for f in ("obs", "action", "reward", "next_obs",
                                                     "discount", "terminated")})
    # one draw of randomness per seed differs between a group and a single run, so compare
    # the deterministic part: critic forward from equal weights, and the projection itself
    with torch.no_grad():
        q_group = group.compute(group.critic, both.obs, both.action)
        q_alone = alone.critic(one.obs, one.action)
    assert torch.allclose(q_group[1], q_alone, atol=1e-6)


def test_dropout_and_layer_norm_options() -> None:
    actor = TanhGaussianActor(4, 2,
                              **actor_args("sac", hidden=(16, 16), dropout=0.5, layer_norm=True))
    kinds = [type(m).__name__ for m in actor.net.layers]
    assert kinds == ["EnsembleLinear", "LayerNorm", "ReLU", "Dropout"] * 2 + ["EnsembleLinear"]
    obs = torch.randn(32, 4)
    # mode has no dropout: deterministic, and equal to the eval-mode network's output
    assert torch.equal(actor.mode(obs), actor.mode(obs))
    torch.manual_seed(0)
    train_mean = actor(obs)[0]
    with torch.no_grad():
        eval_mean = torch.tanh(copy.deepcopy(actor).eval()(obs)[0])
    assert torch.allclose(actor.mode(obs), eval_mean)
    assert not torch.allclose(torch.tanh(train_mean), eval_mean)
    assert actor.net.layers[3].training  # mode restored the training flag
    critic = TwinCritic(4, 2, **critic_args("twin", hidden=(16,), dropout=0.1, layer_norm=True))
    assert [type(m).__name__ for m in critic.net.layers] == [
        "EnsembleLinear", "LayerNorm", "ReLU", "Dropout", "EnsembleLinear"]
    assert isinstance(DeterministicActor(4, 2, **actor_args("td3", dropout=0.2)).net, EnsembleMLP)
    for bad in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
            TwinCritic(4, 2, **critic_args("twin", dropout=bad))


@pytest.mark.parametrize("key", ["critic.dropout=1.0", "algo.actor.dropout=-0.5"])
def test_dropout_outside_the_unit_interval_is_one_line(tmp_path: Path, key: str) -> None:
    proc = run_cli(["algo=sac", "total_steps=10", key, *TINY], tmp_path / "run")
    assert_user_error(proc, "dropout must be in [0, 1)")
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("algo", ["sac", "td3", "redq", "dsac_t", "maddpg", "hasac"])
def test_one_override_puts_the_normalized_networks_in_any_algorithm(algo: str) -> None:
    env = "mpe/simple_spread" if algo in ("maddpg", "hasac") else "Pendulum"
    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"algo={algo}", f"env={env}", "net=simbav2"])
        plain = compose("config", overrides=[f"algo={algo}", f"env={env}"])
    assert cfg.algo.actor.network.hidden_dim == 128 and cfg.critic.network.hidden_dim == 512
    assert cfg.critic.network.num_blocks == 2 and cfg.algo.actor.network.num_blocks == 1
    assert plain.critic.network is None and "network" not in plain.algo.actor
    # the algorithm's own choices survive (TD3's deterministic actor, its critic's reduction)
    assert cfg.algo.actor._target_ == plain.algo.actor._target_
    assert cfg.critic._target_ == plain.critic._target_


@pytest.mark.parametrize(("algo", "env"), [("td3", "Pendulum"), ("hasac", "mpe/simple_spread")])
def test_an_algorithm_with_the_normalized_networks_trains(
    tmp_path: Path, algo: str, env: str
) -> None:
    run = tmp_path / "run"
    proc = run_cli([f"algo={algo}", "net=simbav2", f"env={env}", "total_steps=80",
                    "algo.learning_starts=40", "algo.batch_size=8", "eval.every=0",
                    "eval.episodes=1", "log.progress=false", "algo.actor.network.hidden_dim=8",
                    "critic.network.hidden_dim=8"], run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = load_checkpoint(list_checkpoints(run / "checkpoints")[-1])["algo"]
    assert state["updates"] > 0
    weights = {k: v for k, v in state["modules"].items()
               if k.endswith("weight") and not k.startswith("target")}
    hyper = [k for k in weights if ".linear." in k or ".up." in k or ".down." in k
             or ".inner." in k or ".outer." in k]
    assert {k.split(".")[0] for k in hyper} == {"actor", "critic"}
    for k in hyper:  # the checkpoint holds projected weights
        norms = l2_normalize(weights[k], dim=-2).norm(dim=-2)
        assert torch.allclose(weights[k].norm(dim=-2), norms, atol=1e-6), k
