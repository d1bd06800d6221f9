"""Hydra's own errors (a mistyped group choice, a misspelled key, a malformed override, an
unresolvable interpolation) become one ``rlzoo: error:`` line naming the valid choices or the
nearest key, before any run dir exists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_user_error, run_cli
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, ListConfig, OmegaConf

from rlzoo.cli.check import check_overrides
from rlzoo.errors import UserError

EXAMPLES = "hydra.searchpath=[pkg://examples.conf]"


def error_of(args: list[str]) -> str:
    with pytest.raises(UserError) as info:
        check_overrides(args)
    message = str(info.value)
    assert "\n" not in message, message
    return message


@pytest.mark.parametrize(("args", "suggestion", "listed"), [
    (["algo=sacc"], "did you mean algo=sac?", ["td3", "redq", "coma"]),
    (["env=Humanod"], "did you mean env=Humanoid?", ["Hopper", "mpe/simple_spread", "gym"]),
    (["critic=twinn"], "did you mean critic=twin?", ["ensemble", "distributional"]),
    (["tuner=autoo"], "did you mean tuner=auto?", ["fixed", "none"]),
    (["env=mpe/simple_sprad"], "did you mean env=mpe/simple_spread?", ["mamujoco/Hopper-3x1"]),
    pytest.param(["hydra/launcher=joblbi"], "did you mean hydra/launcher=joblib?", ["basic"],
                 marks=pytest.mark.extra("sweep")),
    (["-m", "algo=sac,tdd3", "seed=0,1"], "did you mean algo=td3?", ["sac"]),
    ([EXAMPLES, "critic=pessimistc"], "did you mean critic=pessimistic?", ["tqc", "twin"]),
    ([EXAMPLES, "algo=sac_quik"], "did you mean algo=sac_quick?", ["crossq", "ppo"]),
    (["algo=crosq"], "did you mean algo=crossq?", ["ddpg", "sac"]),
])
def test_mistyped_group_lists_choices_and_nearest(
    args: list[str], suggestion: str, listed: list[str]
) -> None:
    message = error_of(args)
    assert suggestion in message, message
    assert "choose one of" in message, message
    for choice in listed:
        assert choice in message, (choice, message)


@pytest.mark.parametrize(("args", "fragment"), [
    (["algo.bacth_size=64"], "did you mean algo.batch_size=64?"),
    (["eval.evry=5"], "did you mean eval.every=5?"),
    (["evl.every=3"], "did you mean eval.every=3?"),
    (["algo.actor.hiden=[64,64]"], "did you mean algo.actor.hidden=[64,64]?"),
    (["algoo=td3"], "did you mean algo=td3?"),
    (["algo=td3", "algo.polcy_noise=0.3"], "did you mean algo.policy_noise=0.3?"),
    (["hydra.run.dri=/tmp/x"], "did you mean hydra.run.dir=/tmp/x?"),
    (["~algo.lrr"], "keys at algo: "),
    (["env.kwargs.max_episode_steps=500"], "+env.kwargs.max_episode_steps=500"),
    (["+algo.utd=2"], "drop the '+'"),
])
def test_misspelled_key_names_nearest(args: list[str], fragment: str) -> None:
    message = error_of(args)
    assert fragment in message, message


@pytest.mark.parametrize(("args", "fragments"), [
    (["algo.utd="], ["algo.utd", "no value", "default: 1"]),
    (["algo="], ["algo", "choose one of", "sac"]),
    (["=3"], ["no key"]),
    (["algo.utd==1"], ["algo.utd==1", "key=value"]),
    (["algo=sac,td3"], ["-m"]),
    (["seed=${oc.env:RLZOO_SURELY_UNSET_VARIABLE}"], ["seed", "RLZOO_SURELY_UNSET_VARIABLE"]),
    (["env=gym"], ["env.id has no value", "env.id=<value>"]),
])
def test_malformed_override_one_line(args: list[str], fragments: list[str]) -> None:
    message = error_of(args)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


# A single run returns its composed config (checked key by key, dotted paths); a multirun or
# --help returns None.
SAC_DEFAULT = {"algo.name": "sac", "algo._target_": "rlzoo.algos.SAC", "env.id": "Pendulum-v1",
               "critic._target_": "rlzoo.nets.TwinCritic", "seed": 0, "algo.critic_lr": 1e-3}


@pytest.mark.parametrize(("args", "expected"), [
    ([], SAC_DEFAULT),
    (["algo=td3", "critic=ensemble", "env=Hopper"],
     {"algo.name": "td3", "critic._target_": "rlzoo.nets.EnsembleCritic", "critic.n": 10,
      "critic.actor_reduce": "first", "env.id": "Hopper-v5", "total_steps": 1_000_000,
      "algo.policy_noise": 0.2}),
    (["hydra.run.dir=/tmp/somewhere", "seed=3"],
     {**SAC_DEFAULT, "seed": 3, "hydra.run.dir": "/tmp/somewhere"}),
    (["--cfg", "job", "algo=redq"],  # Hydra prints it, so it is checked like a run
     {"algo.name": "redq", "critic._target_": "rlzoo.nets.EnsembleCritic", "algo.utd": 20}),
    pytest.param(["-m", "hydra/launcher=joblib", "algo=sac,td3", "seed=0,1"], None,
                 marks=pytest.mark.extra("sweep")),
    (["--multirun", "seed=range(40)", "algo=sac,td3"], None),
    (["algo=crossq"],
     {"algo._target_": "rlzoo.algos.SAC", "algo.adam_betas": [0.5, 0.999],
      "algo.target_networks": "none", "critic._target_": "rlzoo.nets.TwinCritic",
      "critic.hidden": [1024, 1024]}),
    ([EXAMPLES, "-m", "critic=pessimistic,tqc"], None),
    (["+env.kwargs.max_episode_steps=500"], {"env.kwargs": {"max_episode_steps": 500}}),
    (["env=gym", "env.id=MountainCarContinuous-v0"],
     {"env.id": "MountainCarContinuous-v0", "env.name": "MountainCarContinuous-v0"}),
    (["env=mpe/simple_spread", "algo=maddpg"],
     {"env.kind": "multi", "env.scenario": "simple_spread_v3", "algo.name": "maddpg",
      "critic._target_": "rlzoo.nets.centralized.AgentCritics", "tuner": {}}),
    # Hydra allows adding keys; the algorithm's constructor judges them
    (["+algo.foo=1"], {**SAC_DEFAULT, "algo.foo": 1}),
    # an explicitly quoted empty string is Hydra's to pass on
    (["algo.utd=''"], {"algo.utd": ""}),
    (["--help"], None),
])
def test_valid_command_lines_pass(args: list[str], expected: dict | None) -> None:
    cfg = check_overrides(args)
    assert not GlobalHydra.instance().is_initialized()  # hydra.main can start afterwards
    if expected is None:
        assert cfg is None
        return
    assert cfg is not None
    for key, value in expected.items():
        got = OmegaConf.select(cfg, key, throw_on_missing=True)
        if isinstance(got, (DictConfig, ListConfig)):
            got = OmegaConf.to_container(got, resolve=True)
        assert got == value, (key, got, value)
    assert cfg.hydra.job.name and "runtime" in cfg.hydra  # the hydra node comes with it


def test_hydra_main_runs_after_a_check(tmp_path: Path) -> None:
    """The check leaves no global Hydra state behind: the real entry point still runs."""
    code = (
        "import sys; from rlzoo.cli.check import check_overrides; from rlzoo import train; "
        "check_overrides(sys.argv[1:]); train.main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--cfg", "job", "algo=td3"], capture_output=True, text=True,
        cwd=tmp_path, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "policy_noise" in proc.stdout


@pytest.mark.parametrize(("args", "fragment"), [
    (["normalize.obs=maybe"], "normalize.obs is a switch, true or false, not 'maybe'; write "
                              "normalize.obs=true or normalize.obs=false"),
    (["critic.layer_norm=off"], "critic.layer_norm is a switch, true or false, not 'off'"),
    (["algo=hasac", "env=mpe/simple_spread", "algo.share_actor=yes"],
     "algo.share_actor is a switch"),
    (["normalize.reward=no"], "normalize.reward is a switch"),  # compile=no: test_accel.py
    (["critic.layer_norm=0.5"], "critic.layer_norm is a switch, true or false, not 0.5"),
    (["-m", "critic.layer_norm=false,off", "seed=0,1"],
     "critic.layer_norm is a switch, true or false, not 'off'"),
])
def test_a_switch_takes_only_true_or_false(args: list[str], fragment: str) -> None:
    """A word for a true/false key would read as on (Python's truth test): refused in one line,
    and a word where the default is a word (log.progress=auto) or a path still passes."""
    assert fragment in error_of(args)
    assert check_overrides(["log.progress=auto", "env=gym", "env.id=Pendulum-v1",
                            "normalize.obs=true", "hydra.run.dir=/tmp/x",
                            "critic._target_=rlzoo.nets.TwinCritic"]) is not None
    assert check_overrides(["-m", "critic.layer_norm=true,false", "seed=0,1"]) is None


@pytest.mark.parametrize(("args", "fragment"), [
    (["algo=sacc"], "did you mean algo=sac?"),
    (["algo.bacth_size=64"], "did you mean algo.batch_size=64?"),
    (["seed=${oc.env:RLZOO_SURELY_UNSET_VARIABLE}"], "RLZOO_SURELY_UNSET_VARIABLE"),
])
def test_cli_one_line_and_no_run_dir(tmp_path: Path, args: list[str], fragment: str) -> None:
    proc = run_cli(args, cwd=tmp_path)  # default run dir: runs/... under the cwd
    assert_user_error(proc, fragment)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / "multirun").exists()


def test_cli_multirun_typo_leaves_no_sweep_dir(tmp_path: Path) -> None:
    proc = run_cli(["-m", "algo=sac,tdd3", "total_steps=10"], cwd=tmp_path)
    assert_user_error(proc, "did you mean algo=td3?")
    assert not (tmp_path / "multirun").exists()


@pytest.mark.parametrize(("entry", "fragment"), [
    ("pkg://no_such_pkg.conf", "cannot import no_such_pkg.conf"),
    ("pkg://examples.no_such_conf", "cannot import examples.no_such_conf"),
    ("file:///no/such/dir", "not a directory"),
])
def test_a_searchpath_hydra_cannot_read_is_one_line(entry: str, fragment: str) -> None:
    """Hydra only warns about such an entry, and the group it should add then looks missing
    ("there is no algo config 'ppo'"); the check names the entry and the fix instead."""
    with pytest.raises(UserError) as info:
        check_overrides([f"hydra.searchpath=[{entry}]", "algo=sac"])
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_the_examples_searchpath_is_accepted() -> None:
    cfg = check_overrides(["hydra.searchpath=[pkg://examples.conf]", "algo=ppo"])
    assert cfg is not None and cfg.algo.name == "ppo"
