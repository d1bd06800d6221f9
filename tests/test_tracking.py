"""``log.wandb=true`` (rlzoo/run/tracking.py): refused in one line naming the extra when wandb is
missing; with it, the run starts a wandb run that syncs TensorBoard, with the config, and
finishes it (a stand-in ``wandb`` module records the calls: no network, no account)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TINY
from omegaconf import OmegaConf

from rlzoo.errors import UserError
from rlzoo.run import tracking

FAKE = '''
import json, os
from pathlib import Path

class _Run:
    def __init__(self, kwargs):
        self.path = Path(kwargs["dir"]) / "wandb_calls.jsonl"
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
    calls = [json.loads(line) for line in (run_dir / "wandb_calls.jsonl").read_text().splitlines()]
    assert [next(iter(c)) for c in calls] == ["init", "finish"]
    init = calls[0]["init"]
    assert init["sync_tensorboard"] is True and init["dir"] == str(run_dir)
    assert init["id"] == "run" and init["resume"] == "allow" and init["project"] == "rlzoo"
    assert init["config"]["algo"]["name"] == "sac" and init["config"]["total_steps"] == 300
    assert init["config"]["log"]["wandb"] is True
    off = cli(ARGS, tmp_path / "off", fake)  # the default: no wandb run
    assert off.returncode == 0 and not (tmp_path / "off" / "wandb_calls.jsonl").exists()


def test_without_the_package_it_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = OmegaConf.create({"log": {"wandb": True}})
    real = tracking.importlib.util.find_spec
    monkeypatch.setattr(tracking.importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real(name, *a))
    extra = r'needs the optional extra wandb: pip install "rlzoo\[wandb\]"'
    with pytest.raises(UserError, match=extra):
        tracking.wanted(cfg)
    assert tracking.wanted(OmegaConf.create({"log": {"wandb": False}})) is False
    assert tracking.wanted(OmegaConf.create({"log": {}})) is False  # an older run's config
    with pytest.raises(UserError, match="log.wandb is a switch"):
        tracking.wanted(OmegaConf.create({"log": {"wandb": "yes"}}))


def test_the_cli_refuses_it_before_anything_is_written(tmp_path: Path) -> None:
    if tracking.importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here: the refusal is tested in-process above")
    run_dir = tmp_path / "run"
    proc = cli([*ARGS, "log.wandb=true"], run_dir, None)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and 'pip install "rlzoo[wandb]"' in proc.stderr, proc.stderr
    assert not run_dir.exists()
