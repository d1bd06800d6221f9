"""Issue 57, item 1: one ``rlzoo.compare`` command makes the figure a paper needs, from two
algorithms x two seeds x two envs (committed runs of results/mujoco): every env in one figure
and the aggregate across envs (rliable: IQM, median, mean, optimality gap, performance profile,
probability of improvement) as PNG, PDF and SVG; the paired floors and the published curves as
references; ``n = k`` in every small-sample cell; without rliable, one line and the rest.

The aggregate's numbers are recomputed here from the runs' summary.json files with scipy and
numpy, not with rlzoo's or rliable's code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from scipy.stats import trim_mean

pytestmark = pytest.mark.extra("compare")  # rliable: pip install -e '.[compare]'
REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results" / "mujoco"
FLOORS_CACHE = REPO / "tests" / "fixtures" / "compare_floors.json"  # made by --floors
ENVS = ("HalfCheetah", "Hopper")
ALGOS = ("sac", "td3")
# the TD3 paper's mean at step 0 and at 1M steps (rlzoo.analysis.normalization's known ranges)
RANGES = {"HalfCheetah": (-1.5336, 9566.5633), "Hopper": (44.7622, 3390.7867)}
MAGIC = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}


def copy_runs(root: Path, seeds: dict[str, tuple[int, ...]], envs: tuple[str, ...] = ENVS
              ) -> dict[tuple[str, str], list[Path]]:
    """Committed run dirs (summary.json, eval.csv, .hydra/) copied under ``root``."""
    dirs: dict[tuple[str, str], list[Path]] = {}
    for env in envs:
        for algo, algo_seeds in seeds.items():
            for seed in algo_seeds:
                dest = root / env / f"{algo}-s{seed}"
                shutil.copytree(RESULTS / env / f"{algo}-s{seed}", dest)
                dirs.setdefault((env, algo), []).append(dest)
    return dirs


def final(run: Path) -> float:
    return float(json.loads((run / "summary.json").read_text())["final_eval_return"])


@pytest.fixture(scope="module")
def paper(tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[Path, dict[tuple[str, str], list[Path]], str]:
    """``python -m rlzoo.compare RUNS --out OUT --floors --published results/published`` (the
    floors come from a cache made by the same command, so nothing is simulated here)."""
    root = tmp_path_factory.mktemp("paper")
    dirs = copy_runs(root / "runs", {algo: (0, 1) for algo in ALGOS})
    out = root / "out"
    out.mkdir()
    shutil.copy(FLOORS_CACHE, out / "floors.json")
    proc = run_cli([str(root / "runs"), "--out", str(out), "--floors", "--published",
                    str(REPO / "results" / "published")], module="rlzoo.compare")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, dirs, proc.stderr


def test_every_env_in_one_figure_and_the_aggregate_in_three_formats(paper) -> None:
    out, _, _ = paper
    report = json.loads((out / "comparison.json").read_text())
    for figure in ("curves", "aggregate"):
        assert report["figure_files"][figure] == [f"{figure}.{f}" for f in MAGIC]
        for fmt, magic in MAGIC.items():
            assert (out / f"{figure}.{fmt}").read_bytes()[:len(magic)] == magic, (figure, fmt)
    md = (out / "comparison.md").read_text()
    assert "![every env's learning curves](curves.png)" in md
    assert "![aggregate across envs](aggregate.png)" in md


def test_the_aggregate_is_rliables_on_normalized_scores(paper) -> None:
    """IQM, median (of the per-env means, as rliable), mean and optimality gap of the TD3
    paper's normalized final returns; each point inside its CI; P(sac > td3) over the envs."""
    out, dirs, _ = paper
    agg = json.loads((out / "comparison.json").read_text())["aggregate"]
    assert agg["envs"] == sorted(ENVS) and agg["rows"] == list(ALGOS)
    scores = {}
    for algo in ALGOS:
        # [runs, envs], as rliable takes them
        scores[algo] = np.array([[(final(dirs[env, algo][i]) - RANGES[env][0])
                                  / (RANGES[env][1] - RANGES[env][0]) for env in agg["envs"]]
                                 for i in range(2)])
        np.testing.assert_allclose(agg["scores"][algo], scores[algo], rtol=1e-6)
        s = scores[algo]
        expected = {"IQM": trim_mean(s.ravel(), 0.25), "Median": np.median(s.mean(axis=0)),
                    "Mean": s.mean(), "Optimality gap": np.mean(1 - np.minimum(s, 1))}
        for metric, value in expected.items():
            assert agg["points"][algo][metric] == pytest.approx(value, rel=1e-6), metric
            low, high = agg["intervals"][algo][metric]
            assert low <= agg["points"][algo][metric] <= high, (algo, metric)
    x, y = scores["sac"], scores["td3"]
    p = np.mean([np.mean((x[:, j, None] > y[None, :, j]) + 0.5 * (x[:, j, None] == y[None, :, j]))
                 for j in range(x.shape[1])])
    (poi,) = agg["probability_of_improvement"]
    assert (poi["x"], poi["y"], poi["n_x"], poi["n_y"]) == ("sac", "td3", 2, 2)
    assert poi["p"] == pytest.approx(p) and poi["ci"][0] <= p <= poi["ci"][1]
    profile = np.asarray(agg["profiles"]["sac"])
    taus = np.asarray(agg["profile_taus"])
    np.testing.assert_allclose(profile, [(x.ravel() > t).mean() for t in taus])


def test_small_samples_are_marked_in_every_cell(paper) -> None:
    out, _, _ = paper
    md = (out / "comparison.md").read_text()
    cells = [line for line in md.splitlines()
             if line.startswith(("| sac", "| td3")) and "[" in line]
    assert len(cells) == 2 * len(ENVS) + 2 + 1  # per env, the aggregate's rows, P(X > Y)
    for line in cells:
        stats = [c for c in line.split("|") if "[" in c or "±" in c]
        assert stats and all("(n = 2" in c for c in stats), line


def test_floors_are_paired_per_seed_and_published_curves_drawn(paper) -> None:
    out, dirs, _ = paper
    report = json.loads((out / "comparison.json").read_text())
    cache = json.loads(FLOORS_CACHE.read_text())
    for env in ENVS:
        for algo in ALGOS:
            floors = report["results"][env][algo]["floors"]
            for i in range(len(dirs[env, algo])):
                (key,) = [k for k in cache if k.startswith(f"{env}/s{i}/")]
                assert floors["zero"][i] == pytest.approx(np.mean(cache[key]["zero"]))
                assert floors["random"][i] == pytest.approx(np.mean(cache[key]["random"]))
            above = sum(final(r) > z for r, z in zip(dirs[env, algo], floors["zero"]))
            assert floors["above_zero"] == above and floors["n"] == 2
        labels = [c["label"] for c in report["published"][env]]
        assert "TD3 (td3-paper), published" in labels, labels
    assert json.loads((out / "floors.json").read_text()) == cache  # read, not recomputed


@pytest.mark.parametrize("rliable", [True, False], ids=["rliable", "without-rliable"])
def test_one_env_one_seed_is_flagged_and_without_rliable_one_line(tmp_path: Path,
                                                                  rliable: bool) -> None:
    """One seed: ``n = 1`` and a degenerate interval said in the cell. Without rliable (an
    import that fails), one line on stderr and every other part of the report; with one env
    nothing is aggregated either way."""
    copy_runs(tmp_path / "runs", {"sac": (0, 1), "td3": (0,)}, envs=("Hopper",))
    env = dict(os.environ)
    if not rliable:
        shim = tmp_path / "shim" / "rliable"
        shim.mkdir(parents=True)
        (shim / "__init__.py").write_text("raise ImportError('rliable hidden by the test')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(shim.parent), str(REPO)])
    if not rliable:  # a second env: an aggregate is wanted, and cannot be made
        shutil.copytree(RESULTS / "HalfCheetah" / "sac-s0",
                        tmp_path / "runs" / "HalfCheetah" / "sac-s0")
    proc = subprocess.run([sys.executable, "-m", "rlzoo.compare", str(tmp_path / "runs"),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (tmp_path / "out" / "comparison.md").read_text()
    assert "(n = 1; degenerate CI: every resample gave this value)" in md
    assert (tmp_path / "out" / "Hopper.png").read_bytes()[:4] == MAGIC["png"]
    said = [line for line in proc.stderr.splitlines() if "rliable" in line]
    if rliable:
        assert not said and not (tmp_path / "out" / "aggregate.png").exists()
    else:  # two envs now, so an aggregate was wanted: one line says why there is none
        assert len(said) == 1 and "pip install 'rlzoo[compare]'" in said[0], proc.stderr
        assert "needs rliable" in md and not (tmp_path / "out" / "aggregate.png").exists()
