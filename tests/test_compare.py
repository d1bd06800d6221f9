"""End-to-end tests of `python -m rlzoo.compare` on a fake-but-real runs tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from rlzoo import compare

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_events(run_dir: Path, eval_points: list[tuple[int, float]], extra: bool = True) -> None:
    """Write one TensorBoard event file the way the trainer does (torch SummaryWriter)."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(run_dir))
    for step, value in eval_points:
        writer.add_scalar("eval/return", value, step)
        if extra:
            writer.add_scalar("train/episode_return", value - 1.0, step)
            writer.add_scalar("perf/sps", 1000.0, step)
            writer.add_scalar("loss/critic", 0.5, step)
            writer.add_scalar("stats/alpha", 0.2, step)
    writer.close()


def write_run(
    run_dir: Path, env: str, algo: str, seed: int, final: float, eval_steps: list[int]
) -> None:
    """A finished run: event files with `eval/return` rising to `final`, and summary.json."""
    run_dir.mkdir(parents=True)
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text(f"algo: {algo}\nseed: {seed}\n")
    values = np.linspace(0.0, final, len(eval_steps))
    write_events(run_dir, list(zip(eval_steps, values.tolist(), strict=True)))
    summary = {
        "algo": algo,
        "env": env,
        "seed": seed,
        "total_steps": eval_steps[-1],
        "final_eval_return": final,
        "final_eval_return_std": 1.0,
        "wall_time_s": 10.0,
        "steps_per_sec": 1000.0,
        "buffer_bytes": 1024,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary))


# Final returns: sac beats td3 everywhere on Pendulum (P = 1); 5 sac seeds there exercise trimming.
FINALS = {
    ("Pendulum-v1", "sac"): [-150.0, -160.0, -140.0, -400.0, -155.0],
    ("Pendulum-v1", "td3"): [-600.0, -700.0, -650.0],
    ("Hopper-v5", "sac"): [3000.0, 3100.0, 2500.0],
    ("Hopper-v5", "td3"): [2900.0, 3200.0, 1000.0],
}


@pytest.fixture(scope="module")
def runs_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    job = 0
    for (env, algo), finals in FINALS.items():
        for seed, final in enumerate(finals):
            if env == "Pendulum-v1":  # runs/<env>/<algo>/<timestamp>-s<seed>/
                run_dir = root / "runs" / env / algo / f"2026-11-30_12-00-0{seed}-s{seed}"
                steps = [0, 1000, 2000, 3000, 4000]
            else:  # a Hydra multirun sweep: multirun/<date>/<time>/<job>/
                run_dir = root / "multirun" / "2026-11-30" / "12-00-00" / str(job)
                job += 1
                # td3 evaluates at different steps for each seed: alignment is exercised
                steps = [0, 1000, 2000, 3000] if algo == "sac" else [0, 700 + seed, 1900, 3000]
            write_run(run_dir, env, algo, seed, final, steps)
    crashed = root / "runs" / "Pendulum-v1" / "sac" / "2026-11-30_13-00-00-s9"
    crashed.mkdir(parents=True)
    write_events(crashed, [(0, 0.0)], extra=False)  # no summary.json: still running or crashed
    return root


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "rlzoo.compare", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


@pytest.fixture(scope="module")
def report(runs_tree: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = runs_tree / "report"
    dirs = [str(runs_tree / "runs"), str(runs_tree / "multirun")]
    proc = run_cli(*dirs, "--out", str(out), "--poi", "sac", "td3")
    return out, proc


def test_cli_writes_report(report: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = report
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (out / "comparison.md").is_file() and (out / "comparison.json").is_file()
    # the crashed run is skipped with a one-line note
    notes = [line for line in proc.stderr.splitlines() if "s9" in line]
    assert (
        len(notes) == 1
        and notes[0].startswith("rlzoo: note: skipping")
        and "summary.json" in notes[0]
    )


def test_numbers_match_summaries(
    runs_tree: Path, report: tuple[Path, subprocess.CompletedProcess[str]]
) -> None:
    out, _ = report
    data = json.loads((out / "comparison.json").read_text())
    from_disk: dict[tuple[str, str], list[float]] = {}
    for path in runs_tree.rglob("summary.json"):
        s = json.loads(path.read_text())
        from_disk.setdefault((s["env"], s["algo"]), []).append(s["final_eval_return"])
    assert set(data["results"]) == {"Pendulum-v1", "Hopper-v5"}
    for (env, algo), finals in from_disk.items():
        r = data["results"][env][algo]
        assert r["n_runs"] == len(finals) == len(FINALS[env, algo])
        assert sorted(r["seeds"]) == list(range(len(finals)))
        assert r["iqm"] == pytest.approx(scipy.stats.trim_mean(finals, 0.25))
        assert r["mean"] == pytest.approx(np.mean(finals))
        assert r["std"] == pytest.approx(np.std(finals, ddof=1))
        low, high = r["iqm_ci"]
        assert min(finals) <= low <= r["iqm"] <= high <= max(finals)
    # the 5-seed group really is trimmed: the -400 outlier is cut
    assert data["results"]["Pendulum-v1"]["sac"]["iqm"] == pytest.approx(-155.0)
    assert data["method"]["bootstrap_reps"] == 2000
    poi = data["probability_of_improvement"]
    assert poi["per_env"]["Pendulum-v1"]["p"] == 1.0
    assert poi["per_env"]["Pendulum-v1"]["ci"] == [1.0, 1.0]
    assert poi["per_env"]["Hopper-v5"]["p"] == pytest.approx(5.0 / 9.0)


def test_markdown_table(report: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = report
    md = (out / "comparison.md").read_text()
    assert "## Pendulum-v1" in md and "## Hopper-v5" in md
    assert "| sac | 5 (0, 1, 2, 3, 4) | -155.00 [" in md
    assert "2000 bootstrap resamples" in md and "default_rng(0)" in md
    assert "P(sac > td3)" in md
    assert "last value at or before" in md
    assert "![Pendulum-v1 learning curves](Pendulum-v1.png)" in md


def test_curves_are_valid_pngs(report: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image

    out, _ = report
    for env in ("Pendulum-v1", "Hopper-v5"):
        png = out / f"{env}.png"
        assert png.read_bytes()[:8] == PNG_MAGIC
        image = matplotlib.image.imread(png)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    curves = json.loads((out / "comparison.json").read_text())["curves"]
    # td3 on Hopper evaluated at 700/701/702: aligned on the union of steps, last value at or before
    assert curves["Hopper-v5"]["td3"]["steps"] == [0, 700, 701, 702, 1900, 3000]
    assert curves["Pendulum-v1"]["sac"]["n_runs"] == 5


def test_reader_keeps_all_points_beyond_tensorboard_reservoir(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp_path), max_queue=1000)
    for step in range(10_050):
        writer.add_scalar("eval/return", float(step) * 0.5, step)
    writer.close()
    steps, values = compare.load_scalars(tmp_path, ["eval/return"])["eval/return"]
    assert len(steps) == 10_050
    np.testing.assert_array_equal(steps, np.arange(10_050))
    np.testing.assert_allclose(values, np.arange(10_050) * 0.5)


def test_reader_merges_resumed_run_later_file_wins(tmp_path: Path) -> None:
    write_events(tmp_path, [(0, 1.0), (100, 2.0), (200, 3.0)])
    time.sleep(0.01)
    write_events(tmp_path, [(200, 30.0), (300, 40.0)])  # resumed from step 200
    assert len(compare.event_files(tmp_path)) == 2
    steps, values = compare.load_scalars(tmp_path)["eval/return"]
    assert steps.tolist() == [0, 100, 200, 300]
    assert values.tolist() == [1.0, 2.0, 30.0, 40.0]


def test_align_curves_union_of_steps() -> None:
    a = (np.array([0, 10, 20, 30]), np.array([0.0, 1.0, 2.0, 3.0]))
    b = (np.array([0, 15, 30, 40]), np.array([0.0, 1.5, 3.0, 4.0]))
    grid, values = compare.align_curves([a, b])
    assert grid.tolist() == [0, 10, 15, 20, 30]  # ends at the shorter run's last step
    assert values.tolist() == [[0.0, 1.0, 1.0, 2.0, 3.0], [0.0, 0.0, 1.5, 1.5, 3.0]]
    grid, _ = compare.align_curves([a, b], max_points=3)
    assert grid.tolist() == [0, 15, 30]


def _assert_one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlzoo: error: ") and ";" in lines[0]
    for fragment in fragments:
        assert fragment in lines[0]


def test_missing_dir_is_an_error(tmp_path: Path) -> None:
    proc = run_cli(str(tmp_path / "nope"), "--out", str(tmp_path / "out"))
    _assert_one_line_error(proc, "nope")


def test_no_runs_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    proc = run_cli(str(tmp_path / "empty"), "--out", str(tmp_path / "out"))
    _assert_one_line_error(proc, "no runs found")


def test_unknown_poi_algo_is_an_error(runs_tree: Path, tmp_path: Path) -> None:
    proc = run_cli(str(runs_tree / "runs"), "--out", str(tmp_path / "out"), "--poi", "sac", "ppo")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("rlzoo: error: --poi algo 'ppo'")


def test_usage_error_is_one_line(tmp_path: Path) -> None:
    proc = run_cli(str(tmp_path))  # --out missing
    _assert_one_line_error(proc, "--out")
