"""Issue 55 item 3: every reader of a run dir is bounded, in compare, reproduce and rundirs as in
train and evaluate: YAML through the one guarded reader (``rlzoo.store.bounded``: size cap, no
aliases, nesting and interpolations bounded), JSON, CSV and event files read only from regular
files opened without following a link, checked after opening (``fstat``), at most a cap of
bytes actually read. A FIFO or a link to ``/dev/zero`` (``stat`` says 0 bytes) must not hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from rlzoo.analysis.curves import load_scalars, read_scalars_csv
from rlzoo.analysis.runs import find_runs, read_config, read_summary
from rlzoo.store.bounded import BoundError, load_json, load_yaml, parse_yaml, read_bytes
from tools.reproduce.files import read_json

# a 1 KB alias bomb: 9 ** 6 strings once expanded
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcde", "bcdef"))
CONFIG = ("algo:\n  name: sac\n  tau: 0.005\nenv:\n  name: Pendulum\ntotal_steps: 400\n"
          "seed: {seed}\n")


def write_run(run_dir: Path, seed: int, final: float) -> None:
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text(CONFIG.format(seed=seed))
    (run_dir / "summary.json").write_text(json.dumps(
        {"algo": "sac", "env": "Pendulum", "seed": seed, "final_eval_return": final,
         "total_steps": 400}))
    (run_dir / "eval.csv").write_text("step,eval/return\n0,-1000.0\n200,-500.0\n400,"
                                      f"{final}\n")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Three good runs and one hostile run of each kind below ``tmp_path/runs``."""
    root = tmp_path / "runs"
    for seed in range(3):
        write_run(root / f"good-s{seed}", seed, -200.0 - seed)
    for name in ("bomb", "fifo_summary", "zero_summary", "fifo_config", "bad_curve"):
        write_run(root / name, 9, -300.0)
    (root / "bomb" / ".hydra" / "config.yaml").write_text(BOMB)
    (root / "bomb" / ".hydra" / "hydra.yaml").write_text(BOMB)
    (root / "bomb" / ".hydra" / "overrides.yaml").write_text(BOMB)
    for name, file in (("fifo_summary", "summary.json"), ("fifo_config", ".hydra/config.yaml")):
        (root / name / file).unlink()
        os.mkfifo(root / name / file)
    (root / "zero_summary" / "summary.json").unlink()
    (root / "zero_summary" / "summary.json").symlink_to("/dev/zero")
    (root / "bad_curve" / "eval.csv").unlink()
    (root / "bad_curve" / "eval.csv").symlink_to("/dev/zero")
    return root


def test_compare_reads_hostile_runs_without_hanging(tree: Path, tmp_path: Path) -> None:
    """The alias bomb (compare used to hang on it), a FIFO and a link to /dev/zero where
    summary.json is, a FIFO as config: each is one note; the report is written."""
    proc = subprocess.run(
        [sys.executable, "-m", "rlzoo.compare", str(tree), "--out", str(tmp_path / "out"),
         "--reps", "100"], capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    notes = proc.stderr
    assert f"{tree / 'fifo_summary'}: unreadable summary.json (it is not a regular file)" in notes
    assert f"{tree / 'zero_summary'}: unreadable summary.json (it is a symbolic link" in notes
    assert "YAML alias" in notes and "fifo_config: cannot read .hydra/config.yaml" in notes
    report = json.loads((tmp_path / "out" / "comparison.json").read_text())
    counted = sum(g["n_runs"] for env in report["results"].values() for g in env.values())
    assert counted == 6, report["results"]  # 3 good, bomb, fifo_config, bad_curve


def test_each_reader_refuses_what_is_not_a_regular_file(tree: Path) -> None:
    with pytest.raises(ValueError, match="not a regular file"):
        read_summary(tree / "fifo_summary")
    with pytest.raises(ValueError, match="symbolic link"):
        read_summary(tree / "zero_summary")
    with pytest.raises(ValueError, match="YAML alias"):
        read_config(tree / "bomb")
    with pytest.raises(ValueError, match="not a regular file"):
        read_config(tree / "fifo_config")
    with pytest.raises(ValueError, match="symbolic link"):
        read_scalars_csv(tree / "bad_curve" / "eval.csv")
    for reader in (load_json, load_yaml, read_bytes):
        with pytest.raises(BoundError, match="not a regular file"):
            reader(tree / "fifo_summary" / "summary.json")
        with pytest.raises(BoundError, match="symbolic link"):
            reader(tree / "zero_summary" / "summary.json")
    assert read_json(tree / "fifo_summary" / "summary.json") is None
    assert read_json(tree / "zero_summary" / "summary.json") is None
    flat, choices, overridden = read_config(tree / "good-s0")
    assert flat["algo.tau"] == 0.005 and choices == {} and overridden is None


def test_the_cap_is_on_bytes_read_not_on_stat(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"x": "y" * 5000}))
    with pytest.raises(BoundError, match="larger than 1,000 bytes"):
        read_bytes(big, 1000)
    assert len(read_bytes(big, 6000)) == big.stat().st_size


def test_a_nested_yaml_is_refused_before_libyaml_builds_it() -> None:
    """libyaml's composer recurses: 100,000 nested brackets crashed the interpreter
    (segmentation fault) before the depth was checked on the parser's events."""
    with pytest.raises(BoundError, match="nests more than 32"):
        parse_yaml("[" * 100_000)
    with pytest.raises(BoundError, match="YAML alias"):
        parse_yaml(BOMB)
    # read as OmegaConf reads it: its float syntax, no timestamps, duplicate keys refused
    assert parse_yaml("a: 1e-3\nb: 2026-01-01\nc: [1, 2]\n") == {
        "a": 0.001, "b": "2026-01-01", "c": [1, 2]}
    with pytest.raises(Exception, match="duplicate key"):
        parse_yaml("a: 1\na: 2\n")


def test_curves_skip_linked_event_files_and_read_real_ones(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "run"
    writer = SummaryWriter(str(run))
    for step in range(5):
        writer.add_scalar("eval/return", float(step), step * 100)
    writer.close()
    (run / "events.out.tfevents.0.host.1.0").symlink_to("/dev/zero")
    steps, values = load_scalars(run, ["eval/return"])["eval/return"]
    assert steps.tolist() == [0, 100, 200, 300, 400] and values.tolist() == [0, 1, 2, 3, 4]


def test_find_runs_shows_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from rlzoo.analysis import messages

    monkeypatch.setattr(messages, "PROGRESS_EVERY_S", 0.0)  # a line at every run
    for seed in range(3):
        write_run(tmp_path / f"r-s{seed}", seed, -1.0)
    assert len(find_runs([tmp_path])) == 3
    err = capsys.readouterr().err
    assert "rlzoo: reading runs, found: 3 (0 s)" in err and err.endswith(", done\n")
