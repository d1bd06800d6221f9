"""scripts/bench_vs_commit.py: the structure of its result, never a timing. ``--dry`` runs the
plumbing (interleaving, pairs, ratios, the old tree, the output) with ``python -c pass`` in place
of every run; the slow test runs real tiny runs of this checkout and of the old tree."""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_vs_commit",
                                                  REPO / "scripts" / "bench_vs_commit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_structure(result: dict, repeats: int, sides: set[str]) -> None:
    assert set(result["steps_per_s"]) == sides | {"pair_a", "pair_b"}
    assert set(result["raw"]) == set(result["steps_per_s"])
    assert all(len(v) == repeats for v in result["raw"].values())
    assert len(result["loads"]) == repeats
    wanted = {"new/old", "pair/new alone", "pair sum/new alone"}
    wanted |= {f"new/{side}" for side in sides - {"new", "old"}}
    assert set(result["ratios"]) == wanted
    for name, s in {**result["steps_per_s"], **result["ratios"]}.items():
        assert set(s) == {"median", "min", "max"}, name
        assert 0 < s["min"] <= s["median"] <= s["max"], name
    raw = result["raw"]
    assert result["ratios"]["new/old"]["median"] == pytest.approx(
        statistics.median(n / o for n, o in zip(raw["new"], raw["old"])))
    assert result["ratios"]["pair/new alone"]["median"] == pytest.approx(statistics.median(
        x / n for n, a, b in zip(raw["new"], raw["pair_a"], raw["pair_b"]) for x in (a, b)))
    assert result["ratios"]["pair sum/new alone"]["max"] == pytest.approx(
        max((a + b) / n for n, a, b in zip(raw["new"], raw["pair_a"], raw["pair_b"])))
    assert {"cpu", "cores", "load", "load_after"} <= set(result["machine"])


def test_dry_run_reports_every_side_pair_and_ratio(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    result = script().main(["--dry", "--repeats", "3", "--old", str(REPO), "--json", str(out)])
    check_structure(result, 3, {"new", "old", "sb3"})
    assert json.loads(out.read_text())["raw"] == result["raw"]
    new, old, sb3 = (result["commands"][s] for s in ("new", "old", "sb3"))
    assert new[1:3] == ["-m", "rlzoo.train"] and old[1:3] == ["-m", "rlzoo.train"]
    assert {"algo=sac", "env=Hopper", "total_steps=1500", "algo.learning_starts=1000",
            "algo.batch_size=256", "algo.actor.hidden=[256,256]", "critic.hidden=[256,256]",
            "algo.utd=1", "eval.every=0", "checkpoint.every=0"} <= set(new)
    assert sb3[1] == "-c" and sb3[3:] == ["Hopper-v5", "1500", "1000", "256", "256"]
    table = capsys.readouterr().out
    assert "| new/sb3x |" in table and "| pair/new alonex |" in table


def test_old_is_a_commit_exported_with_git_archive(tmp_path: Path) -> None:
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                      capture_output=True).returncode:
        pytest.skip("not a git checkout")
    tree = script().old_tree("HEAD", tmp_path)
    assert (tree / "rlzoo" / "__init__.py").read_bytes() == \
        (REPO / "rlzoo" / "__init__.py").read_bytes()


def test_bad_step_counts_are_refused() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_vs_commit.py"),
                           "--dry", "--short", "4000"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--warmup < --short < --long" in proc.stderr


@pytest.mark.slow
def test_tiny_real_runs_of_both_trees(tmp_path: Path) -> None:
    result = script().main(["--tiny", "--no-sb3", "--old", str(REPO)])
    check_structure(result, 1, {"new", "old"})


def test_more_sides_and_no_pair(tmp_path: Path) -> None:
    result = script().main(["--dry", "--repeats", "2", "--old", str(REPO), "--no-pair",
                            "--no-sb3", "--also", f"main={REPO}", f"other={REPO}"])
    assert set(result["raw"]) == {"new", "old", "main", "other"}
    assert set(result["ratios"]) == {"new/old", "new/main", "new/other"}
    assert all(len(v) == 2 for v in result["raw"].values())
    for bad in ("main", "new=.", "=x"):
        proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_vs_commit.py"),
                               "--dry", "--also", bad], capture_output=True, text=True)
        assert proc.returncode == 2 and "want LABEL=TREE" in proc.stderr, bad
