"""SimbaV2's and FlashSAC's settings that depend on the run and the env (issue 42 item 1).

The official code derives them rather than fixing them: SimbaV2's discount from the episode
length (github dojeon-ai/SimbaV2 ``configs/online_rl.yaml``: ``max(min((T/5 - 1) / (T/5),
0.995), 0.95)``, T = ``max_episode_steps / action_repeat``), and both learning-rate horizons from
the run's own budget, ``learning_rate_decay_step = int(1.0 x num_interaction_steps x
updates_per_interaction_step)`` (SimbaV2 ``configs/agent/simbaV2.yaml``; FlashSAC
``configs/agent/flashSAC.yaml``, with ``learning_rate_warmup_step`` the same at rate 1e-6).
Before, rlzoo fixed gamma 0.995 and a 1e6-update horizon; each test here fails on those values.
A run dir written then (numeric values in its config) still builds with them.
"""

from __future__ import annotations

import pytest
from omegaconf import DictConfig, open_dict

from rlzoo.algos import FlashSAC, SimbaV2
from rlzoo.algos.base import EnvSpec
from rlzoo.algos.simbav2 import episode_discount
from rlzoo.config.build import build_algorithm, env_spec, make_env
from rlzoo.config.settings import read_settings
from rlzoo.errors import UserError
from tests.from_yaml import composed

SMALL = ("algo.actor.network.hidden_dim=8", "critic.network.hidden_dim=8")


def build(cfg: DictConfig, spec: EnvSpec) -> SimbaV2 | FlashSAC:
    algo = build_algorithm(cfg, spec, read_settings(cfg).device)
    assert isinstance(algo, (SimbaV2, FlashSAC))
    return algo


def real_spec(cfg: DictConfig) -> EnvSpec:
    """The spec ``rlzoo.train`` gives the algorithm for ``cfg``'s env (its time limit read from
    the env itself)."""
    env = make_env(cfg, 1, 0)
    try:
        return env_spec(env)
    finally:
        env.close()


@pytest.mark.parametrize(("env", "limit", "gamma"), [
    ("Pendulum", 200, 0.975),  # T/5 = 40: 39/40
    ("Hopper", 1000, 0.995),  # 199/200 = 0.995, the cap
])
def test_simbav2s_discount_comes_from_the_episode_limit(env: str, limit: int, gamma: float) -> None:
    cfg = composed("algo=simbav2", f"env={env}", *SMALL)
    spec = real_spec(cfg)
    assert spec.max_episode_steps == limit
    algo = build(cfg, spec)
    assert algo.gamma == pytest.approx(gamma, abs=1e-12)
    assert episode_discount(50) == 0.95 and episode_discount(10**6) == 0.995  # the clips


def test_simbav2_without_an_episode_limit_is_refused_in_one_line() -> None:
    cfg = composed("algo=simbav2", "env=Pendulum", *SMALL)
    with pytest.raises(UserError, match="episode limit.*set algo.gamma") as err:
        build(cfg, EnvSpec(3, 1))
    assert "\n" not in str(err.value)
    # a discount given outright needs no limit
    cfg.algo.gamma = 0.99
    assert build(cfg, EnvSpec(3, 1)).gamma == 0.99


@pytest.mark.parametrize(("steps", "utd"), [(1000, 1), (1000, 2), (3000, 0.5)])
def test_simbav2s_rates_decay_over_the_runs_own_updates(steps: int, utd: float) -> None:
    cfg = composed("algo=simbav2", "env=Pendulum", f"total_steps={steps}", f"algo.utd={utd}",
                   *SMALL)
    algo = build(cfg, EnvSpec(3, 1, max_episode_steps=200))
    horizon = int(steps * utd)
    assert algo.lr_decay_updates == horizon
    # halfway through the run's updates the rates are halfway to their end (1 -> 0.5)
    assert algo.lr_factor("critic", horizon // 2) == pytest.approx(0.75, abs=1e-3)
    assert algo.lr_factor("actor", horizon) == 0.5


def test_flashsacs_warmup_and_decay_scale_with_the_runs_updates() -> None:
    cfg = composed("algo=flashsac", "env=Pendulum", "total_steps=2000000", "algo.utd=1.5", *SMALL)
    algo = build(cfg, EnvSpec(3, 1))
    assert (algo.lr_warmup_updates, algo.lr_decay_updates) == (3, 3_000_000)  # int(1e-6 x 3e6)
    cfg = composed("algo=flashsac", "env=Pendulum", "total_steps=1000", "algo.utd=2", *SMALL)
    algo = build(cfg, EnvSpec(3, 1))
    assert (algo.lr_warmup_updates, algo.lr_decay_updates) == (0, 2000)
    # the critic's cosine is halfway (factor 0.75) at half the run's updates
    assert algo.lr_factor("critic", 1000) == pytest.approx(0.75)


def test_run_dirs_written_with_the_fixed_values_still_build_with_them() -> None:
    """A run dir's config from before holds numbers (and FlashSAC's lr_warmup_updates without
    lr_warmup_rate): resuming it keeps the schedule and discount it was trained with."""
    cfg = composed("algo=simbav2", "env=Pendulum", "algo.gamma=0.995",
                   "algo.lr_decay_updates=1000000", *SMALL)
    algo = build(cfg, EnvSpec(3, 1))  # no episode limit needed
    assert (algo.gamma, algo.lr_decay_updates) == (0.995, 1_000_000)
    cfg = composed("algo=flashsac", "env=Pendulum", "algo.lr_warmup_updates=1",
                   "algo.lr_decay_updates=1000000", *SMALL)
    with open_dict(cfg):
        del cfg.algo["lr_warmup_rate"]
    algo = build(cfg, EnvSpec(3, 1))
    assert (algo.lr_warmup_updates, algo.lr_decay_updates) == (1, 1_000_000)
