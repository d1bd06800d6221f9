"""``log.wandb=true`` (rlzoo/run/tracking.py): refused in one line naming the extra when wandb is
missing; with it, the run starts a wandb run that syncs TensorBoard, with the config, and
finishes it (a stand-in ``wandb`` module records the calls: no network, no account)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TINY
from omegaconf import OmegaConf

from rlzoo.config.added_keys import with_added_settings
from rlzoo.config.settings import switch
from rlzoo.errors import UserError
from rlzoo.run import tracking

FAKE = '''
import json, os
from pathlib import Path

class Settings:  # what rlzoo checks WANDB_MODE and WANDB_PROJECT with
    def __init__(self, **kwargs):
        if kwargs.get("mode", "offline") not in ("online", "offline", "disabled"):
            raise ValueError("Input should be 'online', 'offline' or 'disabled'")

def login(verify=True, prompt=True):
    return True

class _Run:
    def __init__(self, kwargs):
        folder = Path(kwargs["dir"]) / "wandb" / "run-1"  # as wandb: DIR/wandb/<run folder>
        folder.mkdir(parents=True)
        (folder.parent / "latest-run").symlink_to(folder.name)
        self.path = folder / "calls.jsonl"
        self.write({"init": kwargs})

    def write(self, record):
        with open(self.path, "a") as f:
            f.write(json.dumps(record, default=str) + "\\n")

    def finish(self):
        self.write({"finish": True})

def init(**kwargs):
    return _Run(kwargs)
'''

ARGS = ["algo=sac", "env=Pendulum", "total_steps=300", "algo.learning_starts=100",
        "eval.every=0", "eval.episodes=1", "checkpoint.every=0", "torch_threads=1", *TINY]


def cli(args: list[str], run_dir: Path, fake: Path | None) -> subprocess.CompletedProcess[str]:
    path = [str(fake)] if fake else []
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([*path, str(REPO)])}
    return subprocess.run([sys.executable, "-m", "rlzoo.train", *args, f"hydra.run.dir={run_dir}"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)


def test_a_run_with_wandb_starts_syncs_and_finishes_it(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "wandb").mkdir(parents=True)
    (fake / "wandb" / "__init__.py").write_text(FAKE)
    run_dir = tmp_path / "run"
    proc = cli([*ARGS, "log.wandb=true"], run_dir, fake)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # wandb wrote in a private folder of the run dir; its run folder was moved into wandb/,
    # its link dropped
    calls = [json.loads(line) for line in
             (run_dir / "wandb" / "run-1" / "calls.jsonl").read_text().splitlines()]
    assert [next(iter(c)) for c in calls] == ["init", "finish"]
    assert sorted(p.name for p in (run_dir / "wandb").iterdir()) == ["run-1"]
    init = calls[0]["init"]
    assert init["sync_tensorboard"] is True and Path(init["dir"]).parent == run_dir
    assert Path(init["dir"]).name.startswith(".wandb.") and not Path(init["dir"]).exists()
    assert init["id"] == tracking.run_id(run_dir) and init["id"].startswith("run-")
    assert init["resume"] == "allow" and init["project"] == "rlzoo"
    assert init["config"]["algo"]["name"] == "sac" and init["config"]["total_steps"] == 300
    assert init["config"]["log"]["wandb"] is True
    off = cli(ARGS, tmp_path / "off", fake)  # the default: no wandb run
    assert off.returncode == 0 and not (tmp_path / "off" / "wandb").exists()


def test_without_the_package_it_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tracking.importlib.util.find_spec
    monkeypatch.setattr(tracking.importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real(name, *a))
    extra = r'needs the optional extra wandb: pip install "rlzoo\[wandb\]"'
    with pytest.raises(UserError, match=extra):
        tracking.wanted(switch(OmegaConf.create({"log": {"wandb": True}}), "log.wandb"))
    assert tracking.wanted(False) is False
    # an older run's config is read with the switch off (rlzoo.conf.history.SETTINGS_ADDED)
    assert switch(with_added_settings(OmegaConf.create({"log": {}})), "log.wandb") is False
    with pytest.raises(UserError, match="log.wandb is a switch"):
        switch(OmegaConf.create({"log": {"wandb": "yes"}}), "log.wandb")


def test_the_cli_refuses_it_before_anything_is_written(tmp_path: Path) -> None:
    if tracking.importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here: the refusal is tested in-process above")
    run_dir = tmp_path / "run"
    proc = cli([*ARGS, "log.wandb=true"], run_dir, None)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and 'pip install "rlzoo[wandb]"' in proc.stderr, proc.stderr
    assert not run_dir.exists()


def test_a_run_id_is_unique_per_run_dir_and_stable(tmp_path: Path) -> None:
    """Two runs whose dirs share a last name (sweeps: ``.../0-s0``) get two ids; the same dir,
    however it is named (a relative path, a link to it), always the same one."""
    a, b = tmp_path / "a" / "0-s0", tmp_path / "b" / "0-s0"
    for d in (a, b):
        d.mkdir(parents=True)
    assert tracking.run_id(a) != tracking.run_id(b)
    assert tracking.run_id(a).startswith("0-s0-") and len(tracking.run_id(a)) == 17
    (tmp_path / "link").symlink_to(a)
    assert tracking.run_id(tmp_path / "link") == tracking.run_id(a)
    assert tracking.run_id(Path(os.path.relpath(a))) == tracking.run_id(a)
    long = tmp_path / ("x" * 100 + ":/odd")
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,61}", tracking.run_id(long.parent / "y!z"))


class _Wandb:
    """What check_settings uses of wandb: Settings validates, login says whether logged in."""

    def __init__(self, logged_in: bool) -> None:
        self.logged_in = logged_in

    def Settings(self, **kwargs: str) -> None:  # noqa: N802 - wandb's name
        if kwargs.get("mode", "online") not in ("online", "offline", "disabled"):
            raise ValueError("Input should be 'online', 'offline' or 'disabled'")
        if "/" in kwargs.get("project", ""):
            raise ValueError("Invalid project name: cannot contain characters /")

    def login(self, verify: bool = True, prompt: bool = True) -> bool:
        assert not verify and not prompt  # no network, no question
        return self.logged_in


@pytest.mark.parametrize(("env", "logged_in", "fragment"), [
    ({"WANDB_MODE": "bogus"}, True, "WANDB_MODE='bogus' is not a value wandb takes"),
    ({"WANDB_MODE": "offline", "WANDB_PROJECT": "a/b"}, True, "WANDB_PROJECT='a/b'"),
    ({"WANDB_MODE": "online"}, False, "needs a W&B login"),
])
def test_settings_are_checked_in_one_line(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                          logged_in: bool, fragment: str) -> None:
    for key in ("WANDB_MODE", "WANDB_PROJECT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(UserError, match=re.escape(fragment)) as err:
        tracking.check_settings(_Wandb(logged_in))
    assert "\n" not in str(err.value)
    monkeypatch.setenv("WANDB_MODE", "offline")  # offline needs no login
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    tracking.check_settings(_Wandb(False))


@pytest.mark.skipif(tracking.importlib.util.find_spec("wandb") is None,
                    reason="wandb is not installed (pip install wandb)")
@pytest.mark.parametrize(("env", "fragment"), [
    ({}, "needs a W&B login"),
    ({"WANDB_MODE": "bogus"}, "WANDB_MODE='bogus'"),
    ({"WANDB_MODE": "offline", "WANDB_PROJECT": "a/b"}, "WANDB_PROJECT='a/b'"),
])
def test_the_real_wandb_refusals_are_one_line_before_anything_is_written(
        tmp_path: Path, env: dict[str, str], fragment: str) -> None:
    """With wandb installed and no login (an empty HOME): one ``rlzoo: error:`` line, exit 2,
    no traceback, and no run dir left."""
    home = tmp_path / "home"
    home.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "rlzoo.train", *ARGS, "log.wandb=true", f"hydra.run.dir={run_dir}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env={**clean, **env, "HOME": str(home), "OMP_NUM_THREADS": "1",
             "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("rlzoo: error:")]
    assert len(lines) == 1 and fragment in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not run_dir.exists()


def test_wanted_checks_the_settings_before_the_run_is_built(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """log.wandb=true: the run's first check (Trainer's) asks wandb for the settings and the
    login, so an online run without a login stops before any env or file exists."""
    monkeypatch.setattr(tracking, "_CHECKED", [])  # not checked yet in this process
    monkeypatch.setitem(sys.modules, "wandb", _Wandb(logged_in=False))
    real = tracking.importlib.util.find_spec
    monkeypatch.setattr(tracking.importlib.util, "find_spec",
                        lambda name, *a: object() if name == "wandb" else real(name, *a))
    monkeypatch.setenv("WANDB_MODE", "online")
    with pytest.raises(UserError, match="needs a W&B login"):
        tracking.wanted(True)
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert tracking.wanted(True) is True
