"""Entropy units (``tuner.entropy_units``): log-probs of the ``[-1, 1]`` action (normalized, SB3)
or of the env's own action (env, CleanRL and the official DSAC-v2), on envs whose bounds are not
``±1``: the change of variables checked against torch.distributions, the Humanoid example, where
the converted log-probs enter SAC and HASAC, the per-algorithm defaults and the spec builders."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import pytest
import torch
from conftest import TINY, assert_user_error, run_cli
from hydra import compose, initialize_config_module
from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

from rlzoo.algos import HASAC, SAC, EnvSpec
from rlzoo.algos.base import log_action_scale
from rlzoo.buffers import Batch
from rlzoo.nets import TanhGaussianActor, TwinCritic
from rlzoo.optim.entropy import AutoAlpha, FixedAlpha
from tests.from_yaml import actor_args, algo_args, critic_args, tuner_args

PENDULUM = EnvSpec(obs_dim=4, act_dim=1, action_low=(-3.0,), action_high=(3.0,))  # ±3
ASYMMETRIC = EnvSpec(obs_dim=3, act_dim=2, action_low=(-1.0, 0.0), action_high=(3.0, 0.5))


def make_sac(spec: EnvSpec, units: str, tuner: type = AutoAlpha) -> SAC:
    return SAC(
        spec,
        actor=partial(TanhGaussianActor, **actor_args("sac", hidden=[16])),
        critic=partial(TwinCritic, **critic_args("twin", hidden=[16])),
        tuner=partial(tuner, **tuner_args("auto" if tuner is AutoAlpha else "fixed",
                                         entropy_units=units)),
        **algo_args("sac"),
    )


def batch(spec: EnvSpec, b: int = 8) -> Batch:
    return Batch(
        obs=torch.randn(b, spec.obs_dim), action=torch.rand(b, spec.act_dim) * 2 - 1,
        reward=torch.randn(b), next_obs=torch.randn(b, spec.obs_dim),
        discount=torch.full((b,), 0.99), terminated=torch.zeros(b),
    )


@pytest.mark.parametrize("spec", [PENDULUM, ASYMMETRIC], ids=["pm3", "asymmetric"])
def test_env_units_are_the_density_of_the_env_action(spec: EnvSpec) -> None:
    """``to_units(log p(a))`` = log-density of ``a_env = bias + scale * a`` under torch's own
    tanh-then-affine transformed Gaussian; normalized units leave ``log p(a)`` as is."""
    sac = make_sac(spec, "env").double()
    obs = torch.randn(64, spec.obs_dim, dtype=torch.float64)
    with torch.no_grad():
        mean, log_std = sac.actor(obs)
        pre_tanh = mean + 0.5 * torch.randn_like(mean) * log_std.exp()
        log_prob = sac.actor.log_prob(obs, pre_tanh)
        low = torch.tensor(spec.action_low, dtype=torch.float64)
        high = torch.tensor(spec.action_high, dtype=torch.float64)
        env_action = (high + low) / 2 + (high - low) / 2 * torch.tanh(pre_tanh)
        reference = TransformedDistribution(
            Normal(mean, log_std.exp()),
            [TanhTransform(), AffineTransform((high + low) / 2, (high - low) / 2)],
        ).log_prob(env_action).sum(-1)
        assert torch.allclose(sac.tuner.to_units(log_prob), reference, atol=1e-6)
        normalized = make_sac(spec, "normalized").double()
        assert torch.equal(normalized.tuner.to_units(log_prob), log_prob)


def test_humanoid_target_in_normalized_units() -> None:
    """Humanoid: 17 entries of ±0.4. The env-units target -17 is a normalized target of
    -17 - 17 log 0.4 = -1.42; in normalized units it stays -17."""
    humanoid = EnvSpec(obs_dim=1, act_dim=17, action_low=(-0.4,) * 17, action_high=(0.4,) * 17)
    for units, expected in (("env", -17 - 17 * math.log(0.4)), ("normalized", -17.0)):
        tuner = AutoAlpha(17, **tuner_args("auto", entropy_units=units))
        tuner.set_action_scale(log_action_scale(humanoid))
        # The loss reads log p(a) + shift + target: shift + target is the normalized target.
        assert float(tuner.target_entropy + tuner.log_prob_shift) == pytest.approx(expected)
    assert expected == -17.0 and -17 - 17 * math.log(0.4) == pytest.approx(-1.4231, abs=1e-4)


@pytest.mark.parametrize("tuner", [AutoAlpha, FixedAlpha])
def test_sac_critic_target_actor_and_alpha_use_env_units(tuner: type) -> None:
    """Same weights and noise, bounds ±3: in env units the soft target gains
    ``discount * alpha * log 3``, the actor's log-prob and the logged entropy shift by log 3, and
    the temperature loss sees the shifted log-prob."""
    norm, env = make_sac(PENDULUM, "normalized", tuner), make_sac(PENDULUM, "env", tuner)
    env.load_state_dict(norm.state_dict())
    data = batch(PENDULUM)
    targets = {}
    for name, algo in (("normalized", norm), ("env", env)):
        algo.critic.td_loss = lambda o, a, y, name=name: (targets.setdefault(name, y),
                                                          torch.zeros(2, 8))
        torch.manual_seed(1)
        algo.critic_loss(data, algo.alpha)
    shift = (data.discount * norm.alpha * math.log(3.0))
    assert torch.allclose(targets["env"] - targets["normalized"], shift, atol=1e-5)

    logs, metrics = {}, {}
    for name, algo in (("normalized", norm), ("env", env)):
        torch.manual_seed(2)
        logs[name] = algo.actor_loss(data.obs, algo.alpha)[1]
    assert torch.allclose(logs["env"], logs["normalized"] - math.log(3.0), atol=1e-6)

    recorded = {}
    for name, algo in (("normalized", norm), ("env", env)):
        loss = algo.tuner.loss
        algo.tuner.loss = lambda lp, name=name, loss=loss: (
            recorded.setdefault(name, lp.detach().clone()), loss(lp))[1]
        del algo.critic.td_loss  # the real loss again
        torch.manual_seed(3)
        metrics[name] = algo.update(data)
    assert torch.allclose(recorded["env"], recorded["normalized"] - math.log(3.0), atol=1e-6)
    entropy_gap = metrics["env"]["stats/entropy"] - metrics["normalized"]["stats/entropy"]
    assert float(entropy_gap) == pytest.approx(math.log(3.0), abs=1e-5)


def test_action_chunks_repeat_the_scale() -> None:
    """An action chunk of H steps holds H env actions: the shift is H times one step's."""
    from rlzoo.nets import ActionSequenceCritic

    sac = SAC(
        PENDULUM,
        actor=partial(TanhGaussianActor, **actor_args("sac", hidden=[8])),
        critic=partial(
            ActionSequenceCritic, **critic_args("action_sequence", horizon=4, hidden=[8])
        ),
        tuner=partial(AutoAlpha, **tuner_args("auto", entropy_units="env")),
        **algo_args("sac"),
    )
    assert float(sac.tuner.log_prob_shift) == pytest.approx(-4 * math.log(3.0))


def test_hasac_per_agent_and_critic_shifts() -> None:
    """MPE-like [0, 1] bounds (scale 1/2) on heterogeneous agents (3 and 5 entries, padded to 5):
    agent i's shift is |A_i| log 2, the critic temperature's the sum; padding counts for nothing."""
    low = (0.0, 0.0, 0.0, 0.0, 0.0) * 2
    high = (1.0, 1.0, 1.0, 0.0, 0.0) + (1.0,) * 5  # agent 0's padding maps to 0, as the adapter
    spec = EnvSpec(obs_dim=4, act_dim=5, n_agents=2, state_dim=6, act_dims=(3, 5),
                   action_low=low, action_high=high)
    for units, scale in (("env", math.log(2.0)), ("normalized", 0.0)):
        algo = HASAC(
            spec,
            actor=partial(TanhGaussianActor, **actor_args("sac", hidden=[8])),
            critic=partial(TwinCritic, **critic_args("twin", hidden=[8])),
            tuner=partial(AutoAlpha, **tuner_args("auto", entropy_units=units)),
            **algo_args("hasac"),
        )
        assert algo.tuner.log_prob_shift.flatten().tolist() == pytest.approx([3 * scale, 5 * scale])
        assert float(algo.critic_tuner.log_prob_shift) == pytest.approx(8 * scale)


def test_bad_units_and_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="entropy_units must be one of normalized, env"):
        AutoAlpha(2, **tuner_args("auto", entropy_units="nats"))
    flat = EnvSpec(obs_dim=2, act_dim=1, action_low=(1.0,), action_high=(1.0,))
    with pytest.raises(ValueError, match="finite action bounds"):
        make_sac(flat, "env")
    make_sac(flat, "normalized")  # normalized units never read the bounds
    with pytest.raises(ValueError, match="action_low has 1 entries, expected 2"):
        EnvSpec(obs_dim=2, act_dim=2, action_low=(0.0,), action_high=(1.0, 1.0))


# ---------------------------------------------------------------- configs and spec builders


def config(*overrides: str):
    with initialize_config_module("rlzoo.conf", version_base=None):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize(("algo", "units"), [
    ("sac", "env"), ("dsac_t", "env"), ("redq", "normalized"), ("hasac", "normalized"),
])
def test_each_algorithm_defaults_to_its_reference(algo: str, units: str) -> None:
    """SAC follows CleanRL and DSAC-T the official code (env units); REDQ's and HARL's code use
    the [-1, 1] action (normalized). A tuner override keeps the algorithm's units."""
    assert config(f"algo={algo}").tuner.entropy_units == units
    assert config(f"algo={algo}", "tuner=fixed").tuner.entropy_units == units
    assert config(f"algo={algo}", "tuner.entropy_units=normalized").tuner.entropy_units == \
        "normalized"


def test_spec_builders_carry_the_env_bounds() -> None:
    """The builder's env_spec (what the loop and the evaluator use) hands the algorithm the
    env's own bounds; algo=sac on InvertedPendulum (±3) shifts by -log 3."""
    from rlzoo.config.build import build_algorithm, env_spec, make_env, probe_spec

    cfg = config("algo=sac", "env=InvertedPendulum", *TINY)
    env = make_env(cfg, 1, 0)
    spec = env_spec(env)
    env.close()
    assert (spec.action_low, spec.action_high) == ((-3.0,), (3.0,))
    assert probe_spec(cfg) == spec
    algo = build_algorithm(cfg, spec, torch.device("cpu"))
    assert float(algo.tuner.log_prob_shift) == pytest.approx(-math.log(3.0))
    redq = build_algorithm(config("algo=redq", "env=InvertedPendulum", *TINY), spec,
                           torch.device("cpu"))
    assert float(redq.tuner.log_prob_shift) == 0.0

    mpe = probe_spec(config("algo=hasac", "env=mpe/simple_spread", *TINY))
    assert set(mpe.action_low) == {0.0} and set(mpe.action_high) == {1.0}  # Box(0, 1, (5,))
    assert len(mpe.action_low) == mpe.n_agents * mpe.act_dim


def test_cli_refuses_unknown_units(tmp_path: Path) -> None:
    proc = run_cli(["algo=sac", "tuner.entropy_units=nats", "total_steps=10", "torch_threads=1",
                    *TINY], tmp_path / "run")
    assert_user_error(proc, "tuner.entropy_units must be one of normalized, env")
