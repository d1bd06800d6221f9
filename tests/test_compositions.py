"""Every algorithm x critic composition through the real CLI, the refusals, and slow learning tests
on Pendulum-v1 for DSAC-T, REDQ and SAC with the action-sequence critic."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from conftest import TINY, assert_user_error, read_summary, run_cli

SMOKE = [*TINY, "env=Pendulum", "total_steps=300", "eval.every=0", "eval.episodes=1",
         "checkpoint.every=0", "log.progress=false", "log.every=100"]

# (overrides, algo name, learning_starts, updates per env step)
COMPOSITIONS = [
    (["algo=sac", "critic=twin"], "sac", 100, 1),
    (["algo=sac", "critic=ensemble"], "sac", 100, 1),
    (["algo=sac", "critic=distributional"], "sac", 100, 1),
    (["algo=sac", "critic=action_sequence"], "sac", 100, 1),
    (["algo=sac", "critic=categorical"], "sac", 100, 1),
    (["algo=td3", "critic=twin"], "td3", 100, 1),
    (["algo=td3", "critic=ensemble"], "td3", 100, 1),
    (["algo=td3", "critic=action_sequence"], "td3", 100, 1),
    (["algo=td3", "critic=categorical"], "td3", 100, 1),
    (["algo=dsac_t"], "dsac_t", 100, 1),
    (["algo=redq"], "redq", 250, 20),  # 50 env steps x G = 20 critic updates
    (["algo=stac"], "stac", 100, 1),
    (["algo=sac", "critic=gaussian"], "sac", 100, 1),
    (["algo=sac", "critic=tqc"], "sac", 100, 1),
    (["algo=ddpg"], "ddpg", 100, 1),
    (["algo=crossq"], "crossq", 100, 1),
    (["algo=crossq", "critic=tqc"], "crossq", 100, 1),  # TQC's critic in the joint pass
    (["algo=td3", "net=batch_norm"], "td3", 100, 1),
]


@pytest.mark.parametrize(
    ("overrides", "name", "learning_starts", "utd"), COMPOSITIONS,
    ids=[" ".join(c[0]) for c in COMPOSITIONS],
)
def test_composition_runs_through_the_cli(
    tmp_path: Path, overrides: list[str], name: str, learning_starts: int, utd: int
) -> None:
    run_dir = tmp_path / "run"
    proc = run_cli([*overrides, *SMOKE, f"algo.learning_starts={learning_starts}"], run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run_dir)
    assert summary["algo"] == name and summary["env"] == "Pendulum"
    assert summary["total_steps"] == 300 and summary["episodes"] == 1
    assert summary["updates"] == (300 - learning_starts) * utd
    assert math.isfinite(summary["final_eval_return"])
    assert -2000.0 < summary["final_eval_return"] <= 0.0  # Pendulum rewards lie in [-16.3, 0]
    state = torch.load(run_dir / "checkpoints" / "step_0000000300.pt", weights_only=True)
    modules = state["algo"]["modules"]
    if "distributional" in overrides or name == "dsac_t":
        assert (modules["critic.running_std"] > 0).all()
    if name == "dsac_t":
        assert any(k.startswith("target_actor.") for k in modules)


def test_presets_configure_their_papers_settings(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_module

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        redq = compose("config", overrides=["algo=redq"])
        dsac_t = compose("config", overrides=["algo=dsac_t"])
        dsac_t_fixed = compose("config", overrides=["algo=dsac_t", "tuner=fixed"])
        chunk = compose("config", overrides=["algo=td3", "critic=action_sequence"])
    assert redq.critic._target_.endswith("EnsembleCritic")
    assert (redq.critic.n, redq.critic.subset, redq.critic.actor_reduce) == (10, 2, "mean")
    assert (redq.algo.utd, redq.algo.policy_delay, redq.algo.target_delay) == (20, 20, 1)
    assert dsac_t.critic._target_.endswith("DistributionalCritic")
    assert list(dsac_t.critic.hidden) == [256, 256, 256] and dsac_t.critic.activation == "gelu"
    assert (dsac_t.algo.actor_lr, dsac_t.algo.critic_lr, dsac_t.tuner.lr) == (1e-4, 1e-4, 3e-4)
    assert dsac_t.tuner.init_alpha == pytest.approx(math.e)
    assert (dsac_t.algo.actor.log_std_min, dsac_t.algo.actor.log_std_max) == (-20.0, 0.5)
    assert dsac_t_fixed.tuner._target_.endswith("FixedAlpha")  # still composes
    assert chunk.critic.horizon == 4 and chunk.critic.actor_reduce == "first"


CRITICS = ["twin", "ensemble", "distributional", "action_sequence", "categorical", "gaussian"]
SUPPORTED = {
    "sac": set(CRITICS), "redq": set(CRITICS), "stac": set(CRITICS), "simbav2": set(CRITICS),
    "td3": {"twin", "ensemble", "action_sequence", "categorical"},
    "dsac_t": {"distributional"}, "flashsac": {"categorical"},
}


@pytest.mark.parametrize("algo", sorted(SUPPORTED))
@pytest.mark.parametrize("critic", CRITICS)
def test_every_algo_critic_pair_builds_or_is_refused(algo: str, critic: str) -> None:
    from hydra import compose, initialize_config_module

    from rlzoo.algos import EnvSpec
    from rlzoo.config.build import build_algorithm
    from rlzoo.errors import UserError

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"algo={algo}", f"critic={critic}", *TINY])
    spec = EnvSpec(obs_dim=3, act_dim=2, max_episode_steps=200)  # SimbaV2 derives gamma from it
    if critic not in SUPPORTED[algo]:
        with pytest.raises(UserError, match=f"cannot build algo={algo}: .* it trains: "):
            build_algorithm(cfg, spec, torch.device("cpu"))
        return
    built = build_algorithm(cfg, spec, torch.device("cpu"))
    horizon = 4 if critic == "action_sequence" else 1
    assert built.action_horizon == horizon
    assert built.act(torch.zeros(5, 3)).shape == (5, 2 * horizon)


@pytest.mark.parametrize("algo", ["simbav2", "flashsac"])
def test_an_algorithms_critic_settings_follow_only_its_own_critic_kind(algo: str) -> None:
    """SimbaV2's and FlashSAC's categorical support (conf/algo_critic/) applies to the
    categorical critic only: with another kind the critic is that kind's own defaults, exactly
    as under algo=sac with the same network; their temperature settings (conf/algo_tuner/)
    apply to tuner=auto only."""
    from hydra import compose, initialize_config_module

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        own = compose("config", overrides=[f"algo={algo}"])
        twin = compose("config", overrides=[f"algo={algo}", "critic=twin"])
        plain = compose("config", overrides=["algo=sac", "critic=twin", f"net={algo}"])
        fixed = compose("config", overrides=[f"algo={algo}", "tuner=fixed"])
        fixed_sac = compose("config", overrides=["algo=sac", "tuner=fixed"])
    assert (own.critic.v_min, own.critic.v_max, own.critic.atoms, own.critic.n) == (-5, 5, 101, 2)
    assert own.tuner.init_alpha == 0.01 and own.tuner.loss_form == "alpha"
    assert twin.critic == plain.critic
    assert set(fixed.tuner) == set(fixed_sac.tuner) and fixed.tuner.alpha == 0.2
    assert fixed.tuner.entropy_units == "normalized"  # the algorithm's units for any tuner


def test_an_algo_file_that_inherits_keeps_its_familys_per_kind_settings(tmp_path: Path) -> None:
    """A user's algo file listing rlzoo's simbav2 first (docs/extending.md's pattern) inherits
    its family, so SimbaV2's categorical support and temperature start still apply; with
    critic=twin they do not."""
    from rlzoo.cli.check import check_overrides

    (tmp_path / "algo").mkdir()
    (tmp_path / "algo" / "simbav2_quick.yaml").write_text(
        "# @package _global_\ndefaults:\n  - simbav2\n  - _self_\n\nalgo:\n"
        "  name: simbav2_quick\n")
    path = f"hydra.searchpath=[file://{tmp_path}]"
    quick = check_overrides([path, "algo=simbav2_quick"])
    assert quick is not None and quick.algo.name == "simbav2_quick"
    assert (quick.critic.v_min, quick.critic.v_max) == (-5.0, 5.0)
    assert (quick.tuner.init_alpha, quick.tuner.loss_form) == (0.01, "alpha")
    twin = check_overrides([path, "algo=simbav2_quick", "critic=twin"])
    assert twin is not None and "v_min" not in twin.critic


@pytest.mark.parametrize("algo", ["sac", "redq", "stac", "simbav2", "flashsac", "dsac_t"])
@pytest.mark.parametrize("tuner", ["auto", "fixed", "none"])
def test_every_entropy_algo_tuner_pair_builds_or_is_refused(algo: str, tuner: str) -> None:
    from hydra import compose, initialize_config_module

    from rlzoo.algos import EnvSpec
    from rlzoo.config.build import build_algorithm
    from rlzoo.errors import UserError
    from rlzoo.optim.entropy import AutoAlpha, FixedAlpha

    with initialize_config_module("rlzoo.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"algo={algo}", f"tuner={tuner}", *TINY])
    spec = EnvSpec(obs_dim=3, act_dim=2, max_episode_steps=200)  # SimbaV2 derives gamma from it
    if tuner == "none":
        with pytest.raises(UserError, match="needs an entropy temperature: leave tuner out \\(the "
                                            "algorithm's own\\) or pass tuner=fixed, not "
                                            "tuner=none"):
            build_algorithm(cfg, spec, torch.device("cpu"))
        return
    built = build_algorithm(cfg, spec, torch.device("cpu"))
    assert isinstance(built.tuner, AutoAlpha if tuner == "auto" else FixedAlpha)
    if tuner == "fixed":
        assert float(built.alpha) == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["algo=td3", "critic=agents"],
         ["TD3 cannot train an AgentCritics", "(choose the critic=<kind>"]),
        (["algo=sac", "critic=categorical", "critic.atoms=11.5"],
         ["critic.atoms must be a whole number >= 2, got 11.5"]),
        (["algo=sac", "critic.dropout=1.0"], ["critic.dropout must be in [0, 1), got 1.0"]),
        (["algo=sac", "algo.actor.dropout=-0.1"],
         ["algo.actor.dropout must be in [0, 1), got -0.1"]),
        (["algo=td3", "critic=distributional"],
         ["TD3 cannot train a DistributionalCritic", "TwinCritic, EnsembleCritic, "
          "ActionSequenceCritic, CategoricalCritic"]),
        (["algo=td3", "critic=gaussian"], ["TD3 cannot train a GaussianCritic"]),
        (["algo=dsac_t", "critic=categorical"],
         ["DSACT cannot train a CategoricalCritic", "trains: DistributionalCritic"]),
        (["algo=sac", "critic=categorical", "critic.v_min=3", "critic.v_max=-3"],
         ["critic.v_min must be below critic.v_max"]),
        (["algo=sac", "critic=categorical", "critic.atoms=1"],
         ["critic.atoms must be a whole number >= 2"]),
        (["algo=dsac_t", "critic=ensemble"],
         ["cannot train an EnsembleCritic", "trains: DistributionalCritic"]),
        (["algo=sac", "critic=action_sequence", "critic.horizon=0"], ["critic.horizon"]),
    ],
)
def test_nonsense_compositions_fail_in_one_line(
    tmp_path: Path, overrides: list[str], fragments: list[str]
) -> None:
    proc = run_cli([*overrides, *SMOKE], tmp_path / "run")
    assert_user_error(proc, *fragments)


# ----------------------------------------------------------------------------- learning
# Pendulum-v1: a random policy scores about -1200 (-1500 to -900 per episode); a policy that
# swings up and balances from every start scores -150 to -250 (SAC reaches about -200 in
# 10-15k steps). A mean over 10 deterministic eval episodes above -400 means the swing-up
# was learned from most starts; no random or merely spinning policy gets there.
LEARNED = -400.0


def learn(tmp_path: Path, overrides: list[str]) -> dict:
    run_dir = tmp_path / "run"
    proc = run_cli(
        [*overrides, "env=Pendulum", "eval.every=0", "eval.episodes=10", "checkpoint.every=0",
         "log.progress=false", "seed=0"],
        run_dir, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return read_summary(run_dir)


@pytest.mark.slow
def test_dsac_t_learns_pendulum(tmp_path: Path) -> None:
    # DSAC-T's mechanics (distributional critic and loss, target policy, delay 2, GELU, log-std
    # clamp) with 2x128 networks, a 1000-step warm-up and SAC's rates (sac.yaml: actor 3e-4,
    # critic 1e-3, alpha from 1 at lr 1e-3). DSAC-T's own lr 1e-4 and alpha = e start are tuned
    # for million-step MuJoCo runs: with its full defaults (3x256, 10k warm-up) Pendulum needs
    # ~20k steps (measured, seed 0: -835 at 15k, -123 at 20k), too long for CPU CI. These
    # settings measured -109.5 at 12k (training episodes above -410 from 5.8k steps on).
    summary = learn(tmp_path, [
        "algo=dsac_t", "total_steps=12000", "algo.learning_starts=1000",
        "algo.actor.hidden=[128,128]", "critic.hidden=[128,128]", "algo.actor_lr=3e-4",
        "algo.critic_lr=1e-3", "tuner.init_alpha=1.0", "tuner.lr=1e-3",
    ])
    assert summary["final_eval_return"] > LEARNED, summary


@pytest.mark.slow
def test_redq_learns_pendulum(tmp_path: Path) -> None:
    # REDQ's ensemble (N = 10, M = 2, actor on the mean, polyak after every critic step) at a
    # reduced update-to-data ratio of 5 instead of 20 (still one actor step per env step:
    # policy_delay = utd) and 2x64 networks to fit the CPU budget (~80 s of CPU). Measured with
    # seed 0: -124 at 3k steps, -109.4 at 4k, -108 at 6k.
    summary = learn(tmp_path, [
        "algo=redq", "total_steps=4000", "algo.learning_starts=1000", "algo.utd=5",
        "algo.policy_delay=5", "algo.actor.hidden=[64,64]", "critic.hidden=[64,64]",
    ])
    assert summary["final_eval_return"] > LEARNED, summary


@pytest.mark.slow
def test_sac_with_action_chunks_learns_pendulum(tmp_path: Path) -> None:
    # SAC with the action-sequence critic (H = 4, chunks executed open-loop, target entropy
    # -4 |A|) and 2x128 networks. Measured with seed 0: -109.6 at 10k steps (with 256x256:
    # -147 at 4k, -108 at 10k).
    summary = learn(tmp_path, [
        "algo=sac", "critic=action_sequence", "total_steps=10000", "algo.learning_starts=1000",
        "algo.actor.hidden=[128,128]", "critic.hidden=[128,128]",
    ])
    assert summary["final_eval_return"] > LEARNED, summary
