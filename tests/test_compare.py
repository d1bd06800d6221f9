"""End-to-end tests of `python -m rlzoo.compare` on a fake-but-real runs tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import conftest
import numpy as np
import pytest
import scipy.stats

from rlzoo.analysis import cli
from rlzoo.analysis.curves import align_curves, event_files, load_scalars

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
    """``python -m rlzoo.compare ARGS`` from the repository root (conftest.run_cli's)."""
    return conftest.run_cli(list(args), module="rlzoo.compare", timeout=120)


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
    steps, values = load_scalars(tmp_path, ["eval/return"])["eval/return"]
    assert len(steps) == 10_050
    np.testing.assert_array_equal(steps, np.arange(10_050))
    np.testing.assert_allclose(values, np.arange(10_050) * 0.5)


def test_reader_merges_resumed_run_later_file_wins(tmp_path: Path) -> None:
    write_events(tmp_path, [(0, 1.0), (100, 2.0), (200, 3.0)])
    time.sleep(0.01)
    write_events(tmp_path, [(200, 30.0), (300, 40.0)])  # resumed from step 200
    assert len(event_files(tmp_path)) == 2
    steps, values = load_scalars(tmp_path)["eval/return"]
    assert steps.tolist() == [0, 100, 200, 300]
    assert values.tolist() == [1.0, 2.0, 30.0, 40.0]


def test_align_curves_union_of_steps() -> None:
    a = (np.array([0, 10, 20, 30]), np.array([0.0, 1.0, 2.0, 3.0]))
    b = (np.array([0, 15, 30, 40]), np.array([0.0, 1.5, 3.0, 4.0]))
    grid, values = align_curves([a, b])
    assert grid.tolist() == [0, 10, 15, 20, 30]  # ends at the shorter run's last step
    assert values.tolist() == [[0.0, 1.0, 1.0, 2.0, 3.0], [0.0, 0.0, 1.5, 1.5, 3.0]]
    grid, _ = align_curves([a, b], max_points=3)
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
    assert proc.stderr.strip().splitlines()[-1].startswith("rlzoo: error: --poi group 'ppo'")


def test_usage_error_is_one_line(tmp_path: Path) -> None:
    proc = run_cli(str(tmp_path))  # --out missing
    _assert_one_line_error(proc, "--out")


# --------------------------------------------------------------------------- grouping variants


def write_composed_run(
    run_dir: Path, overrides: list[str], seed: int, final: float, hydra_dir: str = ""
) -> None:
    """A finished run whose .hydra/ files are what Hydra writes for ``overrides``.

    The config is composed from rlzoo's own YAMLs (so twin and ensemble critics, utd, total_steps
    and eval settings are the real keys); config.yaml, hydra.yaml (with the recorded choices) and
    overrides.yaml are saved unresolved, as Hydra saves them.
    """
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    task = [*overrides, f"seed={seed}"]
    hydra_overrides = [f"hydra.run.dir={hydra_dir or run_dir}"]
    with initialize_config_module(config_module="rlzoo.conf", version_base=None):
        cfg = compose(config_name="config", overrides=task + hydra_overrides,
                      return_hydra_config=True)
    hydra_node = OmegaConf.to_container(cfg.hydra, resolve=False)
    plain = OmegaConf.to_container(cfg, resolve=False)
    del plain["hydra"]
    total_steps = int(cfg.total_steps)
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(plain), run_dir / ".hydra" / "config.yaml")
    OmegaConf.save(OmegaConf.create({"hydra": hydra_node}), run_dir / ".hydra" / "hydra.yaml")
    OmegaConf.save(OmegaConf.create(task), run_dir / ".hydra" / "overrides.yaml")
    steps = [0, total_steps // 2, total_steps]
    write_events(run_dir, list(zip(steps, [0.0, final / 2, final], strict=True)), extra=False)
    summary = {"algo": plain["algo"]["name"], "env": plain["env"]["name"], "seed": seed,
               "total_steps": total_steps, "final_eval_return": final}
    (run_dir / "summary.json").write_text(json.dumps(summary))


# The variants of docs/sweeps.md launched one command each, as a user does: a plain sac run and
# one override per variant. Seeds 1 and 2 of plain sac differ only in bookkeeping keys.
PLAIN = ["algo=sac", "env=Pendulum"]
VARIANTS: dict[str, tuple[list[str], list[float]]] = {
    "sac": (PLAIN, [-150.0, -160.0, -170.0]),
    "sac critic=ensemble": ([*PLAIN, "critic=ensemble"], [-140.0, -145.0]),
    # (the root keys come before algo's in the composed config: _self_ precedes algo)
    "sac total_steps=3000": ([*PLAIN, "total_steps=3000"], [-900.0, -950.0]),
    "sac eval.episodes=5": ([*PLAIN, "eval.episodes=5"], [-155.0, -165.0]),
    "sac algo.utd=5": ([*PLAIN, "algo.utd=5"], [-130.0, -135.0]),
    "td3": (["algo=td3", "env=Pendulum"], [-300.0, -320.0]),
}
BOOKKEEPING = {
    1: ["torch_threads=2", "log.every=500", "log.progress=false", "device=cpu"],
    2: ["checkpoint.every=1000", "checkpoint.keep=1", "compile=false"],
}


@pytest.fixture(scope="module")
def variants_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("variants")
    job = 0
    for overrides, finals in VARIANTS.values():
        for seed, final in enumerate(finals):
            extra = BOOKKEEPING.get(seed, []) if overrides is PLAIN else []
            run_dir = root / "runs" / f"job{job}-s{seed}"
            write_composed_run(run_dir, [*overrides, *extra], seed, final,
                               hydra_dir=f"/elsewhere/job{job}" if seed == 2 else "")
            job += 1
    return root


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``cli.main(args)`` in this process (no interpreter start-up), as a CompletedProcess."""
    capsys.readouterr()
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, captured.out, captured.err)


def _compare(
    capsys: pytest.CaptureFixture[str], tree: Path, out: Path, *args: str
) -> tuple[dict, subprocess.CompletedProcess[str]]:
    proc = run_main(capsys, str(tree / "runs"), "--out", str(out), "--reps", "200", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "comparison.json").read_text()), proc


def test_variants_are_separate_groups_labelled_by_their_overrides(
    variants_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, proc = _compare(
        capsys, variants_tree, tmp_path / "out", "--poi", "sac critic=ensemble", "sac"
    )
    results = data["results"]["Pendulum"]
    assert list(results) == list(VARIANTS)  # every variant its own row, in a stable order
    for label, (_, finals) in VARIANTS.items():
        row = results[label]
        assert row["n_runs"] == len(finals), label
        assert sorted(row["final_eval_returns"]) == sorted(finals), label
        assert sorted(row["seeds"]) == list(range(len(finals)))
    assert results["sac critic=ensemble"]["differs_by"] == {"critic": "ensemble"}
    assert results["sac algo.utd=5"]["differs_by"] == {"algo.utd": "5"}
    assert results["sac total_steps=3000"]["total_steps"] == [3000, 3000]
    assert results["sac"]["settings"] == {
        "eval.episodes": 10, "eval.every": 10000, "total_steps": 20000
    }
    # the bookkeeping keys of seeds 1 and 2 did not split plain sac, and a note says so
    pooled = [line for line in proc.stderr.splitlines() if "are pooled" in line]
    assert len(pooled) == 1
    for key in ("checkpoint.every", "checkpoint.keep", "device", "log.every", "torch_threads"):
        assert key in pooled[0]
    assert set(data["curves"]["Pendulum"]) == set(VARIANTS)
    poi = data["probability_of_improvement"]["per_env"]["Pendulum"]
    assert (poi["x_group"], poi["y_group"], poi["p"]) == ("sac critic=ensemble", "sac", 1.0)
    md = (tmp_path / "out" / "comparison.md").read_text()
    assert "| sac critic=ensemble | 2 (0, 1) | -142.50 [" in md
    assert "| sac total_steps=3000 | 2 (0, 1) | -925.00 [" in md
    assert "Every group here: `eval.every=10000`." in md
    assert "![Pendulum learning curves](Pendulum.png)" in md


def test_ignored_keys_do_not_split_but_measurement_keys_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    # same experiment, different bookkeeping and output dirs: one group
    write_composed_run(runs / "a", PLAIN, 0, -100.0)
    write_composed_run(runs / "b", [*PLAIN, "torch_threads=2", "log.every=10"], 1, -110.0,
                       hydra_dir="/somewhere/else")
    write_composed_run(runs / "c", [*PLAIN, "checkpoint.keep=1", "device=cpu"], 2, -120.0)
    data, _ = _compare(capsys, tmp_path, tmp_path / "one")
    assert list(data["results"]["Pendulum"]) == ["sac"]
    assert data["results"]["Pendulum"]["sac"]["n_runs"] == 3
    # a different evaluation changes what is measured: a group of its own
    write_composed_run(runs / "d", [*PLAIN, "eval.every=5000"], 0, -90.0)
    data, _ = _compare(capsys, tmp_path, tmp_path / "two")
    assert list(data["results"]["Pendulum"]) == ["sac", "sac eval.every=5000"]


def test_sweep_that_sets_every_value_labels_every_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `-m critic=twin,ensemble algo.utd=1,5`: every run sets both keys, so no value is a default
    for critic in ("twin", "ensemble"):
        for utd in (1, 5):
            for seed in (0, 1):
                write_composed_run(
                    tmp_path / "runs" / f"{critic}-{utd}-s{seed}",
                    [*PLAIN, f"critic={critic}", f"algo.utd={utd}"], seed, -100.0 * utd - seed,
                )
    data, _ = _compare(capsys, tmp_path, tmp_path / "out")
    assert list(data["results"]["Pendulum"]) == [
        "sac critic=ensemble algo.utd=1",
        "sac critic=ensemble algo.utd=5",
        "sac critic=twin algo.utd=1",
        "sac critic=twin algo.utd=5",
    ]
    assert all(r["n_runs"] == 2 for r in data["results"]["Pendulum"].values())


def test_member_count_within_a_critic_choice_and_label_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    for seed in (0, 1):
        write_composed_run(runs / f"twin-s{seed}", PLAIN, seed, -150.0 - seed)
        write_composed_run(runs / f"ens-s{seed}", [*PLAIN, "critic=ensemble"], seed, -140.0)
        write_composed_run(runs / f"ens5-s{seed}", [*PLAIN, "critic=ensemble", "critic.n=5"],
                           seed, -130.0)
    data, _ = _compare(capsys, tmp_path, tmp_path / "auto")
    assert list(data["results"]["Pendulum"]) == [
        "sac", "sac critic=ensemble", "sac critic=ensemble critic.n=5"
    ]
    data, _ = _compare(
        capsys, tmp_path, tmp_path / "named", "--label", "critic.n=5=REDQ-5",
        "--label", "algo=sac critic=ensemble=REDQ-10", "--label", "{label} ({critic})",
    )
    assert list(data["results"]["Pendulum"]) == ["sac (twin)", "REDQ-10", "REDQ-5"]
    assert data["results"]["Pendulum"]["REDQ-5"]["auto_label"] == "sac critic=ensemble critic.n=5"
    md = (tmp_path / "named" / "comparison.md").read_text()
    assert "| REDQ-5 | 2 (0, 1) |" in md and "REDQ-5 = `sac critic=ensemble critic.n=5`" in md
    # a rule that matches nothing, a key no run has, two groups with one name: one-line errors
    out = str(tmp_path / "bad")
    _assert_one_line_error(
        run_cli(str(runs), "--out", out, "--label", "critic.n=7=X"), "matches no group"
    )
    _assert_one_line_error(
        run_main(capsys, str(runs), "--out", out, "--label", "critic.m=5=X"), "critic.m", "critic.n"
    )
    _assert_one_line_error(
        run_main(capsys, str(runs), "--out", out, "--label", "{algo}"),
        "the label 'sac'", "more specific",
    )
    _assert_one_line_error(
        run_main(capsys, str(runs), "--out", out, "--label", "REDQ"), "KEY=VALUE=NAME"
    )
    _assert_one_line_error(
        run_main(capsys, str(runs), "--out", out, "--poi", "sac critic=ensemble", "REDQ"),
        "--poi group",
    )
    assert not Path(out).exists()  # nothing written on an error


def test_a_value_set_with_a_choice_is_labelled_and_an_unreadable_config_is_one_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    write_composed_run(runs / "twin", PLAIN, 0, -150.0)
    write_composed_run(runs / "ens3", [*PLAIN, "critic=ensemble", "critic.n=3"], 0, -140.0)
    # a config that is not plain YAML (a python tag) is never executed: read as no config
    write_composed_run(runs / "evil", PLAIN, 1, -145.0)
    (runs / "evil" / ".hydra" / "config.yaml").write_text(
        "algo: !!python/object/apply:os.system ['echo pwned']\n"
    )
    data, proc = _compare(capsys, tmp_path, tmp_path / "out")
    assert list(data["results"]["Pendulum"]) == [
        "sac", "sac critic=ensemble critic.n=3", "sac (no config)"
    ]
    notes = [line for line in proc.stderr.splitlines() if "evil" in line]
    assert len(notes) == 1 and "grouped by env, algo and total_steps only" in notes[0]


def test_group_by_replaces_the_rule_and_never_pools_budgets(
    variants_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, proc = _compare(capsys, variants_tree, tmp_path / "out", "--group-by", "critic")
    results = data["results"]["Pendulum"]
    # utd 1 and 5 pool (asked for); 20k- and 3k-step runs and eval.episodes 10 and 5 do not
    assert {label: r["n_runs"] for label, r in results.items()} == {
        "sac": 5,
        "sac critic=ensemble": 2,
        "sac total_steps=3000": 2,
        "sac eval.episodes=5": 2,
        "td3": 2,
    }
    notes = [line for line in proc.stderr.splitlines() if line.startswith("rlzoo: note:")]
    budget = [line for line in notes if "--group-by does not name" in line]
    assert len(budget) == 1 and "total_steps" in budget[0] and "eval.episodes" in budget[0]
    pooled = [line for line in notes if "pools runs that differ in" in line]
    assert pooled == [
        "rlzoo: note: Pendulum/sac pools runs that differ in algo.utd; add them to --group-by "
        "to keep them apart"
    ]
    assert data["method"]["grouping"]["group_by"] == ["critic"]
    # naming the budget keys silences the note; the groups are the same
    data, proc = _compare(
        capsys, variants_tree, tmp_path / "out2", "--group-by", "critic", "total_steps", "eval"
    )
    assert "--group-by does not name" not in proc.stderr
    assert set(data["results"]["Pendulum"]) == set(results)
    # no keys: env and algo only, budgets still apart
    data, _ = _compare(capsys, variants_tree, tmp_path / "out3", "--group-by")
    assert data["results"]["Pendulum"]["sac"]["n_runs"] == 7


def test_group_by_unknown_key_is_an_error(variants_tree: Path, tmp_path: Path) -> None:
    proc = run_cli(str(variants_tree / "runs"), "--out", str(tmp_path / "o"), "--group-by", "critc")
    _assert_one_line_error(proc, "--group-by", "'critc'", "did you mean critic")


def test_poi_with_an_ambiguous_algo_name_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for critic in ("twin", "ensemble"):
        write_composed_run(tmp_path / "runs" / critic, [*PLAIN, f"critic={critic}"], 0, -1.0)
    proc = run_main(capsys, str(tmp_path / "runs"), "--out", str(tmp_path / "o"), "--poi", "sac",
                    "td3")
    _assert_one_line_error(proc, "ambiguous", "sac critic=ensemble")


# A subprocess in which matplotlib cannot be imported, as in an install without it.
NO_MATPLOTLIB = """
import runpy, sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Block())
sys.argv = ["rlzoo.compare", *sys.argv[1:]]
runpy.run_module("rlzoo.compare", run_name="__main__", alter_sys=True)
"""


def test_without_matplotlib_the_tables_are_written_and_one_line_says_why(
    runs_tree: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-c", NO_MATPLOTLIB, str(runs_tree / "runs"), "--out", str(out)],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("rlzoo: warning:")]
    assert warnings == [
        "rlzoo: warning: matplotlib cannot be imported (No module named 'matplotlib'), so no "
        f"learning-curve PNGs were drawn; the tables are in {out / 'comparison.md'}; install it "
        "with pip install matplotlib (or pip install 'rlzoo[compare]')"
    ]
    assert sorted(p.name for p in out.iterdir()) == ["comparison.json", "comparison.md"]
    report = json.loads((out / "comparison.json").read_text())
    assert report["figures"] == {} and report["figures_missing"] == "No module named 'matplotlib'"
    assert len(report["results"]["Pendulum-v1"]["sac"]["seeds"]) == 5  # the numbers are all there
    md = (out / "comparison.md").read_text()
    assert "| sac | 5 (0, 1, 2, 3, 4) |" in md
    assert "No learning-curve figure for Pendulum-v1: matplotlib cannot be imported" in md


def _drop_key(run_dir: Path, key: str) -> None:
    """Remove ``key`` (a top-level config node) from a run's saved config: a run made before
    that setting existed."""
    from omegaconf import OmegaConf

    path = run_dir / ".hydra" / "config.yaml"
    cfg = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    del cfg[key]
    OmegaConf.save(OmegaConf.create(cfg), path)


@pytest.mark.parametrize(("newer", "label"), [
    ([], "sac critic=ensemble"),  # the new setting at its default: not a difference
    (["normalize.obs=true"], "sac critic=ensemble normalize.obs=true"),  # set: it is one
])
def test_a_setting_older_runs_lack_is_no_difference_at_its_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], newer: list[str], label: str,
) -> None:
    runs = tmp_path / "runs"
    for seed in (0, 1):
        write_composed_run(runs / f"old{seed}", PLAIN, seed, -100.0)
        _drop_key(runs / f"old{seed}", "normalize")
    write_composed_run(runs / "new", [*PLAIN, "critic=ensemble", *newer], 0, -90.0)
    data, _ = _compare(capsys, tmp_path, tmp_path / "out")
    assert list(data["results"]["Pendulum"]) == ["sac", label]


def _drop_leaf(run_dir: Path, dotted: str) -> None:
    """Remove one leaf (``critic.dropout``) from a run's saved config."""
    from omegaconf import OmegaConf

    path = run_dir / ".hydra" / "config.yaml"
    cfg = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    *parents, leaf = dotted.split(".")
    node = cfg
    for part in parents:
        node = node[part]
    del node[leaf]
    OmegaConf.save(OmegaConf.create(cfg), path)


@pytest.mark.parametrize(("newer", "groups"), [
    ([], {"sac": 4}),  # today's defaults: what the old runs did, so one group of 4 seeds
    (["normalize.obs=true"], {"sac": 2, "sac normalize.obs=true": 2}),
    (["critic.dropout=0.01"], {"sac": 2, "sac critic.dropout=0.01": 2}),
])
def test_runs_made_before_a_key_existed_pool_with_todays_at_its_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], newer: list[str], groups: dict[str, int],
) -> None:
    """Cells trained before rlzoo added a setting (no normalize section, no critic dropout, no
    env backend, no actor LayerNorm) pool with today's runs when today's run has the value the
    old one ran with (rlzoo.conf.history.ADDED, rlzoo.analysis.config.fill_added), and stay
    apart when it does not."""
    runs = tmp_path / "runs"
    for seed in (0, 1):
        write_composed_run(runs / f"old{seed}", ["algo=sac", "env=Hopper"], seed, -100.0)
        _drop_key(runs / f"old{seed}", "normalize")
        for leaf in ("critic.dropout", "critic.network", "env.backend",
                     "algo.actor.layer_norm", "algo.actor.dropout"):
            _drop_leaf(runs / f"old{seed}", leaf)
        write_composed_run(runs / f"new{seed}", ["algo=sac", "env=Hopper", *newer], seed + 2,
                           -90.0)
    data, _ = _compare(capsys, tmp_path, tmp_path / "out")
    results = data["results"]["Hopper"]
    assert {label: len(r["seeds"]) for label, r in results.items()} == groups
    assert "(unset)" not in json.dumps(data)


@pytest.mark.parametrize("net_first", [False, True])
def test_groups_that_differ_only_in_a_config_group_are_labelled_by_its_choice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], net_first: bool,
) -> None:
    # net= writes keys outside a `net` node (algo.actor.network, critic.network) that plain runs
    # lack; runs are found in path order, so the two orders of discovery are both tried
    runs = tmp_path / "runs"
    first, second = ("b", "a") if net_first else ("a", "b")
    for seed in (0, 1):
        write_composed_run(runs / f"{first}{seed}", PLAIN, seed, -150.0)
        write_composed_run(runs / f"{second}{seed}", [*PLAIN, "net=simbav2"], seed, -100.0)
        write_composed_run(runs / f"c{seed}", [*PLAIN, "net=simbav2", "total_steps=3000"],
                           seed, -500.0)
        write_composed_run(runs / f"d{seed}", ["algo=simbav2", "env=Pendulum", "net=mlp"],
                           seed, -300.0)
    write_composed_run(runs / "e0", ["algo=simbav2", "env=Pendulum"], 0, -90.0)
    data, proc = _compare(capsys, tmp_path, tmp_path / "out")
    results = data["results"]["Pendulum"]
    assert list(results) == [
        "sac", "sac net=simbav2", "sac net=simbav2 total_steps=3000", "simbav2", "simbav2 net=mlp"
    ]
    assert sorted(results["sac"]["final_eval_returns"]) == [-150.0, -150.0]
    assert sorted(results["sac net=simbav2"]["final_eval_returns"]) == [-100.0, -100.0]
    assert results["sac net=simbav2"]["differs_by"] == {"net": "simbav2"}
    assert results["simbav2 net=mlp"]["final_eval_returns"] == [-300.0, -300.0]
    assert "[2]" not in proc.stdout + proc.stderr  # never the fallback for a clash
    assert not any(label.startswith(("sac family", "sac algo_")) for label in results)


@pytest.mark.parametrize("planted", ["comparison.json", "comparison.md", "Pendulum-v1.png"])
@pytest.mark.parametrize("how", ["symlink", "hardlink"])
def test_a_link_in_the_out_folder_is_refused_and_nothing_outside_changes(
        runs_tree: Path, tmp_path: Path, planted: str, how: str) -> None:
    """compare writes its files through rlzoo's checked writer: a symbolic or hard link planted
    where a report file goes is refused in one line and the file it points at keeps its bytes."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / planted).symlink_to(outside) if how == "symlink" else (out / planted).hardlink_to(
        outside)
    proc = run_cli(str(runs_tree / "runs"), "--out", str(out), "--poi", "sac", "td3")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("rlzoo: error: ")]
    assert len(errors) == 1 and planted in errors[0], proc.stderr
    assert outside.read_text() == "keep"
