"""Issue 55 item 1: one checked way to write in a run dir (``rlzoo.store.writer``), for rlzoo's own
files
and for every library that writes there (TensorBoard's event files, the MP4 writer, W&B).

A path written is absent, or a regular file with one link whose folders below the run dir are
real folders; a symbolic link, a hard link (``ln``, ``cp -al``) or a special file there is
refused in one line before anything is written, and the file it names outside is unchanged.
The walk test runs what writes into run dirs (a single run filmed, resumed and evaluated; a
two-seed group with env workers; W&B offline where wandb is installed) and checks every entry
below each run dir against the rule.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import TINY, assert_user_error, run_cli
from test_rundir_symlinks import snapshot

from rlzoo.errors import UserError
from rlzoo.store.writer import TEMP_PATTERN, check_inside, library_file, move_in, open_regular

SMALL = ["algo=sac", "env=Pendulum", "algo.learning_starts=100", "algo.batch_size=32",
         "eval.every=150", "eval.episodes=1", "checkpoint.every=150", "log.progress=false",
         "torch_threads=1", *TINY]
SECRET = b"%PDF-1.4 a file outside the run dir\n"
HAS_VIDEO = importlib.util.find_spec("imageio_ffmpeg") is not None
HAS_WANDB = importlib.util.find_spec("wandb") is not None


def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "notes.pdf"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(SECRET)
    return target


def check_rule(run_dir: Path) -> list[str]:
    """Every entry below ``run_dir``, each checked against the rule: no symbolic link, every
    file regular with one link and inside the run dir, no temporary file or private folder
    left behind. Returns the entries (relative paths)."""
    real = run_dir.resolve()
    seen = []
    for here, dirs, files in os.walk(run_dir, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(here) / name
            st = os.lstat(path)
            rel = str(path.relative_to(run_dir))
            seen.append(rel)
            assert not stat.S_ISLNK(st.st_mode), f"{rel} is a symbolic link"
            assert not TEMP_PATTERN.match(name), f"{rel} is a temporary left behind"
            assert path.resolve().is_relative_to(real), rel
            if not stat.S_ISDIR(st.st_mode):
                assert stat.S_ISREG(st.st_mode), f"{rel} is not a regular file"
                assert st.st_nlink == 1, f"{rel} has {st.st_nlink} links"
    return seen


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 150-step run (checkpoint at 150), filmed at 150 where MP4 can be written."""
    root = tmp_path_factory.mktemp("finished")
    video = ["eval.video_every=150"] if HAS_VIDEO else []
    proc = run_cli(["total_steps=150", *SMALL, *video], root / "run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root / "run"


def copy_run(finished: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    return run_dir


# ---------------------------------------------------------------------------- the walk


def test_every_file_a_run_writes_follows_the_rule(tmp_path: Path) -> None:
    """A single run (filmed where an MP4 writer is installed), resumed, then evaluated (with
    --video); a two-seed group stepped by an env worker: every entry of every run dir is a real
    folder or a regular file with one link, inside the run dir."""
    single, group = tmp_path / "single", tmp_path / "group-s0"
    video = ["eval.video_every=150"] if HAS_VIDEO else []
    proc = run_cli(["total_steps=150", *SMALL, *video], single)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run_cli([f"resume={single}", "total_steps=300"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    evaluate = ["--episodes", "1", *(["--video"] if HAS_VIDEO else [])]
    proc = run_cli([str(single), *evaluate], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run_cli(["total_steps=150", *SMALL, "seeds=2", "num_envs=2", "env_workers=1"],
                   group)
    assert proc.returncode == 0, proc.stderr[-2000:]
    written = check_rule(single)
    assert {".hydra/config.yaml", "train.log", "summary.json", "policy.pt",
            "checkpoints/step_0000000300.pt"} <= set(written)
    assert len([n for n in written if n.startswith("events.out.tfevents.")]) == 2
    assert len([n for n in written if n.startswith("eval_")]) == 1
    if HAS_VIDEO:
        assert {"videos/eval_step_150.mp4", "videos/eval_step_300.mp4"} <= set(written)
        assert any(n.startswith("videos/eval_") and n.endswith("_ep0.mp4") for n in written)
    for d in (group, tmp_path / "group-s1"):
        assert "summary.json" in check_rule(d)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["group-s0", "group-s1", "single"]


@pytest.mark.skipif(not HAS_WANDB, reason="wandb is not installed (pip install wandb)")
def test_wandb_offline_writes_only_inside_its_folder(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """W&B offline, started and resumed: its run folders end up in ``<run dir>/wandb/`` (moved
    in from the private folder it wrote in), without its symbolic links; nothing is written in
    ``WANDB_DIR``; the resumed leg has the same run id."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(elsewhere))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    run_dir = tmp_path / "runs" / "run"
    proc = run_cli(["total_steps=150", *SMALL, "log.wandb=true"], run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run_cli([f"resume={run_dir}", "total_steps=300"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    written = check_rule(run_dir)
    legs = sorted(p.name for p in (run_dir / "wandb").iterdir())
    assert len(legs) == 2 and all(n.startswith("offline-run-") for n in legs), legs
    from rlzoo.run.tracking import run_id
    assert all(n.endswith(run_id(run_dir)) for n in legs)
    assert any(n.endswith(".wandb") for n in written)
    assert "W&B's offline run is in" in proc.stderr and "wandb sync" in proc.stderr
    assert not any(elsewhere.iterdir())
    assert sorted(p.name for p in run_dir.parent.iterdir()) == ["run"]


# ---------------------------------------------------------------------------- hard links


@pytest.mark.parametrize("budget", ["total_steps=150", "total_steps=300"])
def test_a_hard_linked_lock_is_refused(finished: Path, tmp_path: Path, budget: str) -> None:
    """``ln ~/notes RUN/.rlzoo.lock`` then ``resume=RUN``: the lock used to truncate the notes
    and write a pid there (also on a finished run, which said "nothing was changed")."""
    run_dir = copy_run(finished, tmp_path)
    notes = outside(tmp_path)
    os.link(notes, run_dir / ".rlzoo.lock")
    before = snapshot(tmp_path)
    assert_user_error(run_cli([f"resume={run_dir}", budget]), str(run_dir / ".rlzoo.lock"),
                      "2 hard links", "nothing was written")
    assert notes.read_bytes() == SECRET and snapshot(tmp_path) == before


def test_a_copy_made_with_cp_al_is_refused_and_the_original_is_untouched(
        finished: Path, tmp_path: Path) -> None:
    """``cp -al RUN COPY`` then ``resume=COPY``: every file of the copy is the original's, so
    the resumed copy appended to the original's train.log (and would replace nothing else)."""
    original = copy_run(finished, tmp_path)
    subprocess.run(["cp", "-al", str(original), str(tmp_path / "copy")], check=True)
    before = snapshot(tmp_path)
    assert_user_error(run_cli([f"resume={tmp_path / 'copy'}", "total_steps=300"]),
                      "hard links", "cp -a, not cp -al")
    assert snapshot(tmp_path) == before


def test_a_hard_linked_train_log_alone_is_refused(finished: Path, tmp_path: Path) -> None:
    run_dir = copy_run(finished, tmp_path)
    notes = outside(tmp_path)
    (run_dir / "train.log").unlink()
    os.link(notes, run_dir / "train.log")
    before = snapshot(tmp_path)
    assert_user_error(run_cli([f"resume={run_dir}", "total_steps=300"]),
                      str(run_dir / "train.log"), "hard links")
    assert notes.read_bytes() == SECRET and snapshot(tmp_path) == before


@pytest.mark.skipif(not HAS_VIDEO, reason="no MP4 writer (pip install imageio-ffmpeg)")
def test_a_hard_linked_video_is_refused_before_filming(finished: Path, tmp_path: Path) -> None:
    """A hard link at the name the resumed run films next: ffmpeg used to open it in place,
    turning the outside file into an MP4."""
    run_dir = copy_run(finished, tmp_path)
    pdf = outside(tmp_path)
    os.link(pdf, run_dir / "videos" / "eval_step_300.mp4")
    before = snapshot(tmp_path)
    assert_user_error(run_cli([f"resume={run_dir}", "total_steps=300"]),
                      "eval_step_300.mp4", "hard links")
    assert pdf.read_bytes() == SECRET and snapshot(tmp_path) == before


@pytest.mark.parametrize("fresh", [False, True])
def test_a_linked_wandb_folder_is_refused(finished: Path, tmp_path: Path, fresh: bool) -> None:
    """``wandb -> /elsewhere`` in a run dir: refused whether or not the run mirrors to W&B
    (W&B would write its logs and offline run there)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if fresh:
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        (run_dir / "wandb").symlink_to(elsewhere)
        before = snapshot(tmp_path)
        proc = run_cli(["total_steps=150", *SMALL], run_dir)
    else:
        run_dir = copy_run(finished, tmp_path)
        (run_dir / "wandb").symlink_to(elsewhere)
        before = snapshot(tmp_path)
        proc = run_cli([f"resume={run_dir}", "total_steps=300"])
    assert_user_error(proc, str(run_dir / "wandb"), "symbolic link")
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- the writers


def test_appending_checks_the_open_file(tmp_path: Path) -> None:
    """open_regular: a write open of a file with two links is refused (a read open is not:
    reading a cp -al copy is harmless); a new file is created and passes."""
    notes = outside(tmp_path)
    os.link(notes, tmp_path / "train.log")
    for flags in (os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_CREAT):
        with pytest.raises(UserError, match="2 hard links"):
            open_regular(tmp_path / "train.log", flags)
    os.close(open_regular(tmp_path / "train.log", os.O_RDONLY))
    fd = open_regular(tmp_path / "new.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, b"x")
    os.close(fd)
    assert notes.read_bytes() == SECRET and (tmp_path / "new.log").read_bytes() == b"x"
    with pytest.raises(UserError, match="hard links"):
        check_inside(tmp_path, tmp_path / "train.log")


def test_a_library_writes_in_a_private_folder_then_rlzoo_renames(tmp_path: Path) -> None:
    """library_file: the library writes a name inside a fresh 0700 folder; the result replaces
    the destination (a stale file there too) by rename; on failure nothing is put in place."""
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "a.mp4").write_bytes(b"old")
    with library_file(videos / "a.mp4", tmp_path) as inner:
        assert inner.parent.parent == videos and inner.name == "a.mp4"
        assert stat.S_IMODE(inner.parent.stat().st_mode) == 0o700
        inner.write_bytes(b"new")
    assert (videos / "a.mp4").read_bytes() == b"new" and sorted(os.listdir(videos)) == ["a.mp4"]
    with pytest.raises(RuntimeError), library_file(videos / "b.mp4", tmp_path) as inner:
        inner.write_bytes(b"half")
        raise RuntimeError("the encoder failed")
    assert sorted(os.listdir(videos)) == ["a.mp4"]
    with pytest.raises(UserError, match="hard links"), \
            library_file(videos / "c.mp4", tmp_path) as inner:
        inner.write_bytes(b"x")
        os.link(inner, tmp_path / "grabbed")  # the library's file got a second name
    assert sorted(os.listdir(videos)) == ["a.mp4"]


def test_move_in_drops_links_and_refuses_hard_links(tmp_path: Path) -> None:
    src = tmp_path / ".private"
    (src / "run-1" / "logs").mkdir(parents=True)
    (src / "run-1" / "logs" / "debug.log").write_text("log")
    (src / "latest-run").symlink_to("run-1")
    (src / "run-1" / "logs" / "core.log").symlink_to("/etc/hostname")
    moved = move_in(src, tmp_path / "wandb", tmp_path)
    assert moved == [tmp_path / "wandb" / "run-1"] and not src.exists()
    assert sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "wandb").rglob("*")) == \
        ["wandb/run-1", "wandb/run-1/logs", "wandb/run-1/logs/debug.log"]
    (src / "run-1").mkdir(parents=True)
    os.link(outside(tmp_path), src / "run-1" / "x")
    with pytest.raises(UserError, match="hard links"):
        move_in(src, tmp_path / "wandb", tmp_path)


def test_tensorboard_event_files_get_names_nobody_could_plant(tmp_path: Path) -> None:
    """TensorBoard's writer opens its event file by name at every write: the name ends in 16
    random hex digits, so no link can have been put there before."""
    from rlzoo.run.logger import Logger

    names = []
    for _ in range(2):
        logger = Logger(tmp_path, 10, progress=False, text=False)
        logger.close()
        names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and all(len(n.rsplit(".", 1)[1]) == 16 for n in names), names



# ---------------------------------------------------------------------------- rlzoo.evaluate


def test_evaluate_prints_before_it_writes(finished: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A write that fails after the episodes ran (a full disk) keeps the result: it is on
    stdout already, and the one error line says it was not saved and how to save it."""
    from rlzoo import evaluate

    run_dir = copy_run(finished, tmp_path)

    def full_disk(path: Path, data: str, root: Path | None = None) -> None:
        raise UserError(f"cannot write {path} (No space left on device); {path} is unchanged")

    monkeypatch.setattr(evaluate, "write_atomic", full_disk)
    with pytest.raises(SystemExit) as stop:
        evaluate.main([str(run_dir), "--episodes", "2"])
    out, err = capsys.readouterr()
    assert stop.value.code == 2
    assert "sac on Pendulum at step 150 (deterministic):" in out and "over 2 episodes" in out
    assert err.count("\n") == 1 and "No space left on device" in err
    assert "the result printed above was not saved: pass --out PATH" in err


def test_evaluate_out_writes_elsewhere_and_a_read_only_dir_is_refused_first(
        finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--out FILE and --out FOLDER leave the run dir as it was; a run dir that cannot be
    written is refused before any episode runs, naming --out."""
    from rlzoo import evaluate

    run_dir = copy_run(finished, tmp_path)
    before = snapshot(run_dir)
    out = tmp_path / "results"
    out.mkdir()
    assert evaluate.main([str(run_dir), "--episodes", "1", "--out", str(out / "e.json")]) == 0
    assert evaluate.main([str(run_dir), "--episodes", "1", "--out", str(out)]) == 0
    records = sorted(p.name for p in out.iterdir())
    assert records[0] == "e.json" and records[1].startswith("eval_") and len(records) == 2
    record = json.loads((out / "e.json").read_text())
    assert record["episodes"] == 1 and record["run_dir"] == str(run_dir)
    assert snapshot(run_dir) == before
    capsys.readouterr()

    def no_episodes(*args: object, **kwargs: object) -> None:
        raise AssertionError("episodes ran before the output was checked")

    monkeypatch.setattr(evaluate, "run_policy", no_episodes)
    real_access = os.access
    monkeypatch.setattr(evaluate.os, "access",
                        lambda p, mode: False if Path(p) == run_dir else real_access(p, mode))
    with pytest.raises(SystemExit) as stop:
        evaluate.main([str(run_dir), "--episodes", "1"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "read-only" in err and "pass --out PATH" in err
    assert snapshot(run_dir) == before
    os.link(outside(tmp_path), out / "linked.json")
    with pytest.raises(SystemExit):
        evaluate.main([str(run_dir), "--episodes", "1", "--out", str(out / "linked.json")])
    assert "hard links" in capsys.readouterr().err
