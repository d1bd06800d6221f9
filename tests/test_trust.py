"""A run dir's config builds only rlzoo's components and classes of modules the user trusts.

Each payload below is the issue's nested ``torch.load`` of attacker bytes, made detectable: the
pickled bytes call ``pathlib.Path.touch`` on a marker file, so "nothing executed" is "the marker
does not exist". On the code before ``rlzoo.config.trust`` the payloads in algo, critic, tuner and
algo.actor created the marker, and those in non-component keys were silently accepted.
"""

from __future__ import annotations

import pathlib
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import TINY, assert_user_error, read_summary, run_cli
from omegaconf import OmegaConf

from rlzoo.config.build import read_run_config
from rlzoo.config.trust import check_targets
from rlzoo.errors import UserError
from rlzoo.evaluate import main

SMOKE = [*TINY, "env=Pendulum", "total_steps=200", "algo.learning_starts=100",
         "algo.batch_size=32", "algo.buffer_size=1000", "eval.every=0", "eval.episodes=1",
         "log.progress=false", "torch_threads=1"]


class _Touch:
    """Unpickling this calls ``pathlib.Path.touch(marker)``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return pathlib.Path.touch, (pathlib.Path(self.marker),)


def payload(marker: Path) -> dict[str, Any]:
    """``torch.load(io.BytesIO(<pickle that touches marker>), weights_only=False)``."""
    data = pickle.dumps(_Touch(marker), protocol=4).hex()
    return {
        "_target_": "torch.load", "weights_only": False,
        "f": {"_target_": "io.BytesIO",
              "_args_": [{"_target_": "builtins.bytes.fromhex", "_args_": [data]}]},
    }


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("sac") / "run"
    proc = run_cli(SMOKE, run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def forged(run_dir: Path, dest: Path, edit: Any) -> Path:
    """A copy of ``run_dir`` whose config was changed by ``edit(cfg)``."""
    shutil.copytree(run_dir, dest, ignore=shutil.ignore_patterns("eval_*.json"))
    cfg = OmegaConf.load(dest / ".hydra" / "config.yaml")
    edit(cfg)
    OmegaConf.save(cfg, dest / ".hydra" / "config.yaml")
    return dest


def put(key: str, value: Any) -> Any:
    return lambda cfg: OmegaConf.update(cfg, key, value, force_add=True)


# Where a payload can hide: every config group, the actor inside algo, non-component keys, the
# top level, list items (also a list inside a list), and the component's own _target_.
PLACES = {
    "algo": lambda p: put("algo.evil", p),
    "algo.actor": lambda p: put("algo.actor.evil", p),
    "critic": lambda p: put("critic.evil", p),
    "tuner": lambda p: put("tuner.evil", p),
    "env": lambda p: put("env.evil", p),
    "env.kwargs": lambda p: put("env.kwargs.evil", p),
    "eval": lambda p: put("eval.foo", p),
    "checkpoint": lambda p: put("checkpoint.evil", p),
    "top level": lambda p: put("evil", p),
    "critic.hidden list": lambda p: put("critic.hidden", [32, p]),
    "list in a list": lambda p: put("algo.actor.extra", [[1, p]]),
    "algo._target_": lambda p: put("algo", {**p, "name": "sac"}),
    "algo.actor._args_": lambda p: put("algo.actor._args_", [p]),
}


def in_process_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``rlzoo.evaluate.main(args)`` exits 2 with one ``rlzoo: error:`` line; returns it."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    assert info.value.code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("rlzoo: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_fresh_run_evaluates_without_flag(sac_run: Path) -> None:
    proc = run_cli([str(sac_run), "--episodes", "1"], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr
    assert "over 1 episodes" in proc.stdout


@pytest.mark.parametrize("place", ["algo.actor", "eval"])
def test_cli_refuses_payload(sac_run: Path, tmp_path: Path, place: str) -> None:
    marker = tmp_path / "PWNED"
    run_dir = forged(sac_run, tmp_path / "run", PLACES[place](payload(marker)))
    proc = run_cli([str(run_dir), "--episodes", "1"], module="rlzoo.evaluate")
    assert_user_error(proc, "'torch.load'", "--trust torch", "trust=[torch]")
    assert not marker.exists()
    assert not list(run_dir.glob("eval_*.json"))


@pytest.mark.parametrize("place", list(PLACES))
def test_payload_refused_everywhere(
    sac_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], place: str
) -> None:
    marker = tmp_path / "PWNED"
    run_dir = forged(sac_run, tmp_path / "run", PLACES[place](payload(marker)))
    line = in_process_error(capsys, str(run_dir), "--episodes", "1")
    assert "'torch.load'" in line and "_target_" in line
    with pytest.raises(UserError, match="torch.load"):  # resume= reads the run the same way
        read_run_config(run_dir)
    assert not marker.exists()


def test_resume_refuses_payload(sac_run: Path, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    run_dir = forged(sac_run, tmp_path / "run", put("algo.actor.evil", payload(marker)))
    proc = run_cli([f"resume={run_dir}", "total_steps=400"])
    assert_user_error(proc, "algo.actor.evil._target_", "'torch.load'")
    assert not marker.exists()


@pytest.mark.parametrize(("target", "fragment"), [
    # via rlzoo's globals
    ("rlzoo.store.checkpoint.torch.load", "resolves to torch.serialization.load"),
    ("rlzoo.store.checkpoint.save_checkpoint", "not an rlzoo component"),  # not a component
    ("rlzoo.nets.TwinCritic.__init__", "dunder"),
    ("rlzooevil.Critic", "outside rlzoo"),  # a prefix of the name, not a package of rlzoo
    ("examples.custom_critic.PessimisticCritic", "--trust examples"),  # not named
])
def test_targets_that_only_look_like_rlzoo(target: str, fragment: str) -> None:
    cfg = OmegaConf.create({"algo": {"name": "sac"}, "env": {}, "critic": {"_target_": target}})
    with pytest.raises(UserError, match="critic._target_") as info:
        check_targets(cfg)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_interpolated_target_and_env_module(tmp_path: Path) -> None:
    cfg = OmegaConf.create({
        "algo": {"name": "sac", "actor": {"_target_": "${eval.t}"}}, "env": {},
        "eval": {"t": "os.system"},
    })
    with pytest.raises(UserError, match="'os.system' at algo.actor._target_"):
        check_targets(cfg)
    env_module = OmegaConf.create({"algo": {}, "env": {"id": "evilmod:Thing-v0"}})
    with pytest.raises(UserError, match="imports module 'evilmod'"):
        check_targets(env_module)
    check_targets(env_module, ["evilmod"])  # named by the user: accepted (not imported here)


def test_trust_matches_whole_module_components() -> None:
    cfg = OmegaConf.create({
        "algo": {"name": "sac"}, "env": {},
        "critic": {"_target_": "examples.custom_critic.PessimisticCritic"},
    })
    check_targets(cfg, ["examples"])
    check_targets(cfg, ["examples.custom_critic"])
    check_targets(cfg, "examples")  # a single name, not its letters
    for wrong in (["exam"], ["examples.ppo"], ["examplesx"]):
        with pytest.raises(UserError, match="outside rlzoo"):
            check_targets(cfg, wrong)
    with pytest.raises(UserError, match="not a module name"):
        check_targets(cfg, ["my pkg"])


def test_examples_critic_works_when_trusted(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            ) -> None:
    run_dir = tmp_path / "pessimistic"
    proc = run_cli([*SMOKE, "hydra.searchpath=[pkg://examples.conf]", "critic=pessimistic"],
                   run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = in_process_error(capsys, str(run_dir), "--episodes", "1")
    assert "examples.custom_critic.PessimisticCritic" in line and "--trust examples" in line
    proc = run_cli([str(run_dir), "--episodes", "1", "--trust", "examples"],
                   module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr
    assert "over 1 episodes" in proc.stdout
    assert read_run_config(run_dir, trust=["examples"]).critic.n == 2
    # resume= reads the run the same way: refused unless the module is trusted, never saved
    config = (run_dir / ".hydra" / "config.yaml").read_bytes()
    assert_user_error(run_cli([f"resume={run_dir}", "total_steps=250"]), "trust=[examples]")
    assert (run_dir / ".hydra" / "config.yaml").read_bytes() == config
    proc = run_cli([f"resume={run_dir}", "total_steps=250", "trust=[examples]"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trust" not in (run_dir / ".hydra" / "config.yaml").read_text()
    assert read_summary(run_dir)["total_steps"] == 250
