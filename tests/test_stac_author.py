"""algo=stac as its author ran it (issue 42 item 1): the settings STAC's paper leaves to code,
read from the author's own framework (github ugurcanozalp/rl-warehouse at 75bf5cf,
``rlwarehouse/algos/stac.py`` and ``nets/heads.py``) and the logged runs
(github ugurcanozalp/stochastic-actor-critic at aab3847, ``logs/main-comparison/<task>/STAC``),
and the paper's per-task Table 4 (arXiv:2601.00737v1). Each test fails on rlzoo's earlier value:
Adam on log alpha, std = exp(clamp(log std)), beta 0.25 / dropout 0.01 / LayerNorm everywhere,
evaluation by tanh(mean).
"""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import open_dict
from torch import nn

from rlzoo.algos import SAC, EnvSpec
from rlzoo.config.build import build_algorithm
from rlzoo.config.settings import read_settings
from rlzoo.nets import TanhGaussianActor
from tests.from_yaml import actor_args, composed, tuner

STAC_ACTOR = composed("algo=stac").algo.actor


def stac(env: str, *overrides: str) -> SAC:
    cfg = composed("algo=stac", f"env={env}", "algo.actor.hidden=[8]", "critic.hidden=[8]",
                   *overrides)
    algo = build_algorithm(cfg, EnvSpec(obs_dim=3, act_dim=2), read_settings(cfg).device)
    assert isinstance(algo, SAC)
    return algo


@pytest.mark.parametrize("init_alpha", [0.2, 0.02])
def test_the_temperature_steps_alpha_itself_as_the_authors_code(init_alpha: float) -> None:
    """``alpha <- alpha exp(lr alpha (target - mean entropy))`` after each actor step: the step
    in log alpha is ``lr alpha (target - H)``, so it shrinks with alpha (Adam's first step would be
    ``lr`` whatever alpha is)."""
    temperature = tuner("auto", init_alpha=init_alpha, lr=3e-4, loss_form="alpha",
                        alpha_optimizer="sgd")(2)  # |A| = 2: target -2
    entropy = torch.tensor([-0.5, 0.5, 1.5])  # mean 0.5: H - target = 2.5
    for _ in range(3):
        alpha = float(temperature.alpha)
        temperature.update(-entropy)
        want = alpha * math.exp(3e-4 * alpha * (-2.0 - 0.5))
        assert float(temperature.alpha) == pytest.approx(want, rel=1e-6)
    # the composed algo=stac tuner is that rule
    algo = stac("Hopper")
    assert isinstance(algo.tuner.optimizer, torch.optim.SGD)
    assert (algo.tuner.loss_form, float(algo.alpha)) == ("alpha", pytest.approx(0.2))


def zero_actor(raw_std: float, mean: tuple[float, float] = (0.0, 0.0)) -> TanhGaussianActor:
    """STAC's actor with every weight 0: the mean ``mean`` and the raw std output ``raw_std``
    for any observation."""
    actor = TanhGaussianActor(3, 2, **actor_args("stac", hidden=[8]))
    with torch.no_grad():
        for p in actor.parameters():
            p.zero_()
        actor.net.output_layer.bias.copy_(torch.tensor([*mean, raw_std, raw_std]))
    return actor


@pytest.mark.parametrize(("raw", "std"), [
    (0.0, math.log(2.0)),  # softplus(0) = 0.693 at start; exp(0) = 1 before
    (10.0, 10.0000454),  # unbounded: exp(clamp(10, max=2)) = 7.39 before
    (-9.0, math.log1p(math.exp(-5.0))),  # the raw output is clipped below at -5
])
def test_the_std_is_an_unbounded_softplus(raw: float, std: float) -> None:
    assert STAC_ACTOR.log_std_squash == "softplus"
    _, log_std = zero_actor(raw)(torch.zeros(4, 3))
    torch.testing.assert_close(log_std.exp(), torch.full((4, 2), std), rtol=1e-5, atol=0)


def test_evaluation_averages_ten_sampled_actions() -> None:
    actor = zero_actor(1.0, mean=(0.3, -1.2))
    actor.train()
    obs = torch.zeros(5, 3)
    mean, log_std = actor(obs)
    torch.manual_seed(7)
    got = actor.mode(obs)
    torch.manual_seed(7)
    noise = torch.randn(10, 5, 2)
    want = torch.tanh(mean + noise * log_std.exp()).mean(0)
    torch.testing.assert_close(got, want)
    assert not torch.allclose(got, torch.tanh(mean), atol=1e-2)  # not the old tanh(mean)
    assert actor.training  # dropout back on after
    assert stac("Hopper").actor.eval_samples == 10


@pytest.mark.parametrize(("env", "beta", "actor_dropout", "critic_dropout", "layer_norm"), [
    ("Hopper", 0.5, 0.01, 0.01, True),
    ("Walker2d", 0.125, 0.01, 0.0, True),
    ("HalfCheetah", 0.0, 0.0, 0.0, False),
    ("Ant", 0.25, 0.01, 0.01, True),
    ("Humanoid", 0.25, 0.01, 0.0, True),
    ("Swimmer", 0.0, 0.01, 0.0, True),
    ("Pendulum", 0.25, 0.01, 0.01, True),  # not in the table: Ant's row
])
def test_beta_dropout_and_layer_norm_are_the_tasks(
    env: str, beta: float, actor_dropout: float, critic_dropout: float, layer_norm: bool
) -> None:
    algo = stac(env)
    assert algo.critic.pessimism == beta and algo.target_critic.pessimism == beta

    def trunk(net: nn.Module) -> tuple[list[float], bool]:
        drops = [m.p for m in net.modules() if isinstance(m, nn.Dropout)]
        norms = any("LayerNorm" in type(m).__name__ or "layer_norm" in type(m).__name__.lower()
                    for m in net.modules())
        return drops, norms

    for net, p in ((algo.actor, actor_dropout), (algo.critic, critic_dropout)):
        drops, norms = trunk(net)
        assert all(d == p for d in drops) and (bool(drops) or p == 0.0), (net, drops)
        assert norms == layer_norm, net
    # the logged target entropy: -|A| (|A| = 2 here), Swimmer's -1
    assert algo.tuner.target_entropy == (-1.0 if env == "Swimmer" else -2.0)
    # one key overrides the row
    assert stac("Hopper", "critic.pessimism=0.3").critic.pessimism == 0.3
    assert stac("Hopper", "stac.tasks.Hopper.beta=0.2").critic.pessimism == 0.2


def test_a_stac_run_dir_written_before_builds_as_it_was_trained() -> None:
    """A config from before these keys: Adam on log alpha, exp of the clamped log std,
    tanh(mean) in evaluation, numeric beta/dropout/LayerNorm, no ``stac`` node."""
    cfg = composed("algo=stac", "env=Hopper", "algo.actor.hidden=[8]", "critic.hidden=[8]",
                   "algo.actor.log_std_squash=clamp", "tuner.loss_form=log_alpha",
                   "critic.pessimism=0.25", "critic.dropout=0.01", "critic.layer_norm=true",
                   "algo.actor.dropout=0.01", "algo.actor.layer_norm=true",
                   "tuner.target_entropy=null")
    with open_dict(cfg):
        del cfg.algo.actor["eval_samples"], cfg.tuner["alpha_optimizer"], cfg["stac"]
    algo = build_algorithm(cfg, EnvSpec(obs_dim=3, act_dim=2), read_settings(cfg).device)
    assert isinstance(algo, SAC) and algo.actor.eval_samples == 0
    assert isinstance(algo.tuner.optimizer, torch.optim.Adam)
    assert (algo.actor.log_std_squash, algo.critic.pessimism) == ("clamp", 0.25)
