"""Sweeps through Hydra launchers, then `rlzoo.compare` on the sweep dir; HPARAMS in TensorBoard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.extra("sweep")  # the launchers: pip install -e '.[sweep]'
REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Tiny networks and 600 env steps: each job takes seconds; eval at 300 and 600 gives curves.
JOB = [
    "env=Pendulum", "total_steps=600", "algo.learning_starts=300", "eval.every=300",
    "eval.episodes=2", "algo.actor.hidden=[32,32]", "critic.hidden=[32,32]", "log.progress=false",
]


def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=timeout,
    )


def summaries(sweep_dir: Path) -> dict[Path, dict]:
    return {p.parent: json.loads(p.read_text()) for p in sweep_dir.rglob("summary.json")}


@pytest.fixture(scope="module")
def joblib_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``-m algo=sac,td3 seed=0,1 hydra/launcher=joblib``: 4 jobs, 2 at a time."""
    sweep_dir = tmp_path_factory.mktemp("sweep") / "multirun"
    proc = run(
        "rlzoo.train", "-m", "algo=sac,td3", "seed=0,1", "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2", *JOB, f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return sweep_dir


def test_sweep_layout(joblib_sweep: Path) -> None:
    found = summaries(joblib_sweep)
    assert sorted((s["algo"], s["seed"]) for s in found.values()) == [
        ("sac", 0), ("sac", 1), ("td3", 0), ("td3", 1)
    ]
    for run_dir, summary in found.items():
        # hydra.sweep.subdir: <env>/<algo>/<job number>-s<seed>
        assert run_dir.parent.parent.name == "Pendulum" and run_dir.parent.name == summary["algo"]
        assert run_dir.name.endswith(f"-s{summary['seed']}")
        assert summary["total_steps"] == 600 and np.isfinite(summary["final_eval_return"])
        assert (run_dir / ".hydra" / "config.yaml").is_file()


def test_compare_reads_the_sweep_dir(joblib_sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = run("rlzoo.compare", str(joblib_sweep), "--out", str(out), "--poi", "sac", "td3")
    assert proc.returncode == 0, proc.stderr
    table = (out / "comparison.md").read_text()
    assert (out / "Pendulum.png").read_bytes()[:8] == PNG_MAGIC
    report = json.loads((out / "comparison.json").read_text())
    finals: dict[str, list[float]] = {}
    for summary in summaries(joblib_sweep).values():
        finals.setdefault(summary["algo"], []).append(summary["final_eval_return"])
    assert set(report["results"]) == {"Pendulum"}
    for algo, values in finals.items():
        row = report["results"]["Pendulum"][algo]
        assert row["n_runs"] == 2 and sorted(row["seeds"]) == [0, 1]
        assert sorted(row["final_eval_returns"]) == pytest.approx(sorted(values))
        assert row["iqm"] == pytest.approx(np.mean(values))  # 2 seeds: IQM trims nothing
        assert row["mean"] == pytest.approx(np.mean(values))
        low, high = row["iqm_ci"]
        assert min(values) - 1e-9 <= low <= row["iqm"] <= high <= max(values) + 1e-9
        assert f"| {algo} | 2 (0, 1) | {row['iqm']:.2f} [{low:.2f}, {high:.2f}]" in table
    # the learning curves are the runs' eval/return points at 300 and 600 steps
    assert report["curves"]["Pendulum"]["sac"]["steps"] == [300, 600]


def hparams_records(run_dir: Path) -> tuple[dict[str, object], set[str], dict[str, float]]:
    """(session hyperparameters, hparams plugin tags, hparam/* scalars) in a run's event files."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    from tensorboard.plugins.hparams import metadata
    from tensorboard.util import tensor_util

    hparams: dict[str, object] = {}
    tags: set[str] = set()
    scalars: dict[str, float] = {}
    for path in run_dir.glob("events.out.tfevents.*"):
        for event in LegacyEventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == metadata.PLUGIN_NAME:
                    tags.add(value.tag)
                    if value.tag == metadata.SESSION_START_INFO_TAG:
                        info = metadata.parse_session_start_info_plugin_data(
                            value.metadata.plugin_data.content
                        )
                        for name, v in info.hparams.items():
                            hparams[name] = getattr(v, v.WhichOneof("kind"))
                elif value.tag.startswith("hparam/"):
                    scalars[value.tag] = float(tensor_util.make_ndarray(value.tensor)) \
                        if value.HasField("tensor") else value.simple_value
    return hparams, tags, scalars


def test_hparams_recorded_for_tensorboard(joblib_sweep: Path) -> None:
    from tensorboard.plugins.hparams import metadata

    for run_dir, summary in summaries(joblib_sweep).items():
        hparams, tags, scalars = hparams_records(run_dir)
        assert hparams["algo.name"] == summary["algo"] and hparams["seed"] == summary["seed"]
        assert hparams["critic.hidden"] == "[32, 32]" and hparams["total_steps"] == 600
        if summary["algo"] == "td3":
            assert hparams["algo.policy_noise"] == pytest.approx(0.2)
        # session summaries only: an experiment summary per run would make TensorBoard show the
        # first run's hyperparameters and metrics as the columns of every run
        assert metadata.SESSION_START_INFO_TAG in tags and metadata.EXPERIMENT_TAG not in tags
        assert scalars["hparam/final_eval_return"] == pytest.approx(summary["final_eval_return"])
        assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1  # all in the run's own file


@pytest.mark.slow  # starts a local Ray instance: ~30 s on 2 cores
def test_ray_sweep(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "multirun"
    proc = run(
        "rlzoo.train", "-m", "seed=0,1", "hydra/launcher=ray",
        "+hydra.launcher.ray.init.num_cpus=2", "+hydra.launcher.ray.init.include_dashboard=false",
        *JOB, f"hydra.sweep.dir={sweep_dir}", timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = summaries(sweep_dir)
    assert sorted(s["seed"] for s in found.values()) == [0, 1]
    assert all(s["algo"] == "sac" and s["total_steps"] == 600 for s in found.values())
    out = tmp_path / "report"
    assert run("rlzoo.compare", str(sweep_dir), "--out", str(out)).returncode == 0
    report = json.loads((out / "comparison.json").read_text())
    assert report["results"]["Pendulum"]["sac"]["n_runs"] == 2
