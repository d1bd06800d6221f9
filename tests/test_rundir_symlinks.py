"""Issue 39 item 2 and issue 44's lock: a run dir cannot reach outside itself, and a finished
run leaves no lock behind.

A downloaded or copied run dir may hold symbolic links (``train.log`` pointing at a login script,
a member's ``.hydra`` at another run's folder) or FIFOs where rlzoo keeps its own files. Every
launch refuses them in one line (exit status 2) before it writes anything: the file a link
points at is unchanged byte for byte, and so is the run dir. The writers themselves
(``rlzoo.store.writer``) refuse them again.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TINY, assert_user_error, run_cli

import rlzoo
from rlzoo.errors import UserError
from rlzoo.store.rundir import LOCK_NAME, RunLock
from rlzoo.store.writer import make_dir, open_regular, write_atomic

SMALL = ["algo=sac", "env=Pendulum", "algo.learning_starts=100", "algo.batch_size=32",
         "eval.every=150", "eval.episodes=1", "checkpoint.every=150", "log.progress=false",
         "torch_threads=1", *TINY]
SECRET = b"export PATH=/usr/bin\n# a file outside the run dir\n"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 150-step run (checkpoint at 150)."""
    root = tmp_path_factory.mktemp("finished")
    rlzoo.train("total_steps=150", *SMALL, run_dir=root / "run")
    return root / "run"


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 2-seed group of 150 steps: ``<root>/g-s0`` and ``<root>/g-s1``."""
    root = tmp_path_factory.mktemp("group")
    rlzoo.train("seeds=2", "total_steps=150", *SMALL, run_dir=root / "g-s0")
    return root


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry below ``root``: a file's bytes, a link's target, a folder's or FIFO's kind
    (links are not followed)."""
    found: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        key = str(p.relative_to(root))
        if p.is_symlink():
            found[key] = f"-> {os.readlink(p)}"
        elif p.is_fifo():
            found[key] = "fifo"
        elif p.is_dir():
            found[key] = "dir"
        else:
            found[key] = p.read_bytes()
    return found


def outside_file(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "login.sh"
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(SECRET)
    return target


def link(path: Path, target: Path) -> None:
    """Put a symbolic link to ``target`` where ``path`` was (a file or a folder)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.symlink_to(target)


# --------------------------------------------------------------------------- one run's files
@pytest.mark.parametrize("name", [LOCK_NAME, "train.log", "summary.json", "policy.pt",
                                  ".hydra/config.yaml"])
def test_a_linked_file_is_refused_before_anything_is_written(finished: Path, tmp_path: Path,
                                                             name: str) -> None:
    """resume= of a finished run (which answered "already finished" after truncating the
    lock's target) and resume= with a larger budget (which appended to train.log's target)."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    target = outside_file(tmp_path)
    link(run_dir / name, target)
    before = snapshot(tmp_path)
    for budget in ("total_steps=150", "total_steps=300"):
        assert_user_error(run_cli([f"resume={run_dir}", budget]), str(run_dir / name),
                          "symbolic link", "nothing was written")
        assert target.read_bytes() == SECRET
        assert snapshot(tmp_path) == before
    with pytest.raises(UserError, match="symbolic link"):
        rlzoo.resume(run_dir, "total_steps=300")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", [".hydra", "checkpoints"])
def test_a_linked_folder_is_refused(finished: Path, tmp_path: Path, name: str) -> None:
    """``checkpoints`` or ``.hydra`` linked to another run's: neither is written."""
    run_dir, other = tmp_path / "run", tmp_path / "other"
    shutil.copytree(finished, run_dir)
    shutil.copytree(finished, other)
    link(run_dir / name, other / name)
    before = snapshot(tmp_path)
    assert_user_error(run_cli([f"resume={run_dir}", "total_steps=300"]), str(run_dir / name),
                      "symbolic link")
    assert snapshot(tmp_path) == before


def test_a_fresh_run_into_a_dir_with_links_is_refused_before_hydra_writes(
        tmp_path: Path) -> None:
    """A fresh run into an existing (empty of results) dir: Hydra would write ``train.log`` and
    ``.hydra/`` through the links."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    target = outside_file(tmp_path)
    (run_dir / "train.log").symlink_to(target)
    before = snapshot(tmp_path)
    assert_user_error(run_cli(["total_steps=150", *SMALL], run_dir), "train.log",
                      "symbolic link")
    assert snapshot(tmp_path) == before
    (run_dir / "train.log").unlink()
    (run_dir / ".hydra").symlink_to(target.parent)
    before = snapshot(tmp_path)
    with pytest.raises(UserError, match="symbolic link"):
        rlzoo.train("total_steps=150", *SMALL, run_dir=run_dir)
    assert snapshot(tmp_path) == before


def test_a_fifo_in_place_of_a_file_is_refused_without_waiting(finished: Path,
                                                              tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    for name in ("train.log", LOCK_NAME):
        (run_dir / name).unlink(missing_ok=True)
        os.mkfifo(run_dir / name)
        before = snapshot(tmp_path)
        assert_user_error(run_cli([f"resume={run_dir}", "total_steps=300"], timeout=120),
                          str(run_dir / name), "a FIFO")
        assert snapshot(tmp_path) == before
        (run_dir / name).unlink()


# --------------------------------------------------------------------------- seed groups
def test_a_members_linked_hydra_is_refused(group: Path, tmp_path: Path) -> None:
    """g-s1's ``.hydra`` linked to another run's: that run's config.yaml is not rewritten."""
    root, other = tmp_path / "g", tmp_path / "other"
    shutil.copytree(group, root)
    shutil.copytree(group / "g-s1", other)
    (other / ".hydra" / "config.yaml").write_text(
        (root / "g-s1" / ".hydra" / "config.yaml").read_text())
    link(root / "g-s1" / ".hydra", other / ".hydra")
    before = snapshot(tmp_path)
    for target in ("g-s0", "g-s1"):
        assert_user_error(run_cli([f"resume={root / target}", "total_steps=300"]),
                          str(root / "g-s1" / ".hydra"), "symbolic link")
    assert snapshot(tmp_path) == before


def test_a_linked_member_dir_is_refused(group: Path, tmp_path: Path) -> None:
    root, other = tmp_path / "g", tmp_path / "other"
    shutil.copytree(group, root)
    shutil.move(root / "g-s1", other)
    (root / "g-s1").symlink_to(other)
    before = snapshot(tmp_path)
    assert_user_error(run_cli([f"resume={root / 'g-s0'}", "total_steps=300"]),
                      "'g-s1' is a symbolic link")
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- the writers
def test_the_writers_refuse_links_and_special_files(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    target = outside_file(tmp_path)
    (run_dir / "summary.json").symlink_to(target)
    with pytest.raises(UserError, match="symbolic link"):
        write_atomic(run_dir / "summary.json", "{}")
    (run_dir / ".hydra").symlink_to(target.parent)
    with pytest.raises(UserError, match="symbolic link"):
        write_atomic(run_dir / ".hydra" / "login.sh", "rewritten", root=run_dir)
    with pytest.raises(UserError, match="symbolic link"):
        make_dir(run_dir / ".hydra", root=run_dir)
    with pytest.raises(UserError, match="symbolic link"):
        open_regular(run_dir / "summary.json", os.O_WRONLY | os.O_APPEND)
    os.mkfifo(run_dir / "train.log")
    with pytest.raises(UserError, match="a FIFO"):
        open_regular(run_dir / "train.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    assert target.read_bytes() == SECRET and sorted(p.name for p in tmp_path.rglob("*")) == \
        [".hydra", "login.sh", "outside", "run", "summary.json", "train.log"]
    write_atomic(run_dir / "group.json", "{}")  # a plain new file is written
    assert (run_dir / "group.json").read_text() == "{}"


# --------------------------------------------------------------------------- the lock (44.6)
def test_a_finished_or_failed_run_leaves_no_lock(finished: Path, tmp_path: Path) -> None:
    assert not (finished / LOCK_NAME).exists()
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    assert_user_error(run_cli([f"resume={run_dir}", "total_steps=100"]), "total_steps")
    assert not (run_dir / LOCK_NAME).exists()  # refused after the lock was taken: removed
    (run_dir / ".hydra" / "config.yaml").write_text("a: &x 1\nb: *x\n")  # unreadable config
    assert_user_error(run_cli([f"resume={run_dir}"]), "config.yaml")
    assert not (run_dir / LOCK_NAME).exists()


def test_a_lock_is_removed_only_by_its_holder(tmp_path: Path) -> None:
    """Another live process's lock stays; a lock file replaced since it was taken is not
    removed by the process that took the first one."""
    held = tmp_path / "held"
    held.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from rlzoo.store.rundir import RunLock; RunLock.acquire(Path(sys.argv[1])); "
         "print('held', flush=True); time.sleep(120)", str(held)],
        stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(UserError, match=f"pid {holder.pid}"):
            RunLock.acquire(held)
        assert (held / LOCK_NAME).read_text() == f"{holder.pid}\n"
    finally:
        holder.kill()
        holder.wait()
    mine = tmp_path / "mine"
    lock = RunLock.acquire(mine)
    (mine / LOCK_NAME).unlink()  # someone replaced it: that file is not this lock's
    (mine / LOCK_NAME).write_text("other\n")
    lock.release()
    assert (mine / LOCK_NAME).read_text() == "other\n"
    lock = RunLock.acquire(mine)  # a stale file (no holder) is taken over, then removed
    assert (mine / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    fd = os.open(mine / LOCK_NAME, os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held
    finally:
        os.close(fd)
    lock.release()
    assert not (mine / LOCK_NAME).exists()
