"""Seed groups and policy files you can trust (issue 22, and issue 23 item 6).

``group.json`` is data checked before use; a launch stopped before training leaves nothing a later
run can take for its own; resume completes what a crash at the end of a run left undone; hostile
tensors, specs and YAML end in one line; a full disk or a read-only file system ends in one line
with nothing left behind; a deleted member of a group can be rebuilt from the group's checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO, TINY, assert_user_error, read_summary, run_cli

import rlzoo
from rlzoo.errors import UserError
from rlzoo.store.checkpoint import CheckpointError, load_checkpoint, load_latest_valid
from rlzoo.store.writer import host_name

SMALL = ["algo=sac", "env=Pendulum", "algo.learning_starts=100", "algo.batch_size=32",
         "eval.every=150", "eval.episodes=2", "checkpoint.every=150", "log.every=50",
         "log.progress=false", "torch_threads=1", *TINY]


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 2-seed group (300 steps, checkpoints at 150 and 300): ``<root>/g-s0``."""
    root = tmp_path_factory.mktemp("group")
    rlzoo.train("seeds=2", "total_steps=300", *SMALL, run_dir=root / "g-s0")
    return root


def copy_group(group: Path, tmp_path: Path) -> Path:
    for d in ("g-s0", "g-s1"):
        shutil.copytree(group / d, tmp_path / d)
    return tmp_path


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (but lock files) and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".rlzoo.lock"}


def edit_group_json(root: Path, dirs: tuple[str, ...], **changes: object) -> None:
    for d in dirs:
        path = root / d / "group.json"
        record = json.loads(path.read_text())
        record.update(changes)
        path.write_text(json.dumps(record))


# --------------------------------------------------------------------------- 1. group.json


@pytest.mark.parametrize(("changes", "fragment"), [
    ({"members": ["g-s0", "../C/td3run"]}, "'../C/td3run' is not the name of a folder"),
    ({"members": ["g-s0", "/etc"]}, "'/etc' is not the name of a folder"),
    ({"home": "../B/g-s0"}, "home '../B/g-s0'"),
    ({"members": ["g-s1", "g-s0"]}, "the first member 'g-s1' is not the home"),
    ({"members": ["g-s0", "g-s0"]}, "a member is named twice"),
    ({"members": ["g-s0", "h-s1"]}, "'h-s1' is not the name of seed 1's run dir"),
    ({"seeds": [0, 7]}, "are not 2 consecutive seeds"),
    ({"seeds": [0, True]}, "seeds must be integers"),
    ({"format": 2}, "format 2"),
    ({"extra": 1}, "exactly format, home, members and seeds"),
])
def test_an_altered_group_json_is_one_line_and_nothing_is_written(
    group: Path, tmp_path: Path, changes: dict, fragment: str
) -> None:
    root = copy_group(group, tmp_path / "A")
    outside = tmp_path / "C" / "td3run"
    shutil.copytree(root / "g-s1", outside)  # a run the trick would overwrite
    (outside / ".rlzoo.lock").unlink(missing_ok=True)  # a finished run leaves none
    edit_group_json(root, ("g-s0", "g-s1"), **changes)
    before = snapshot(tmp_path)
    for target in ("g-s0", "g-s1"):
        assert_user_error(run_cli([f"resume={root / target}", "total_steps=450"]), fragment)
    assert snapshot(tmp_path) == before
    assert not (outside / ".rlzoo.lock").exists()


def test_members_disagreeing_with_configs_or_each_other_are_refused(
    group: Path, tmp_path: Path
) -> None:
    root = copy_group(group, tmp_path)
    config = root / "g-s1" / ".hydra" / "config.yaml"
    original = config.read_text()
    before = snapshot(root)
    config.write_text(original.replace("seed: 1\n", "seed: 5\n"))
    assert_user_error(run_cli([f"resume={root / 'g-s0'}", "total_steps=450"]),
                      "has seed=5 seeds=2, but group.json names it seed 1 of 2")
    assert_user_error(run_cli([str(root / "g-s1"), "--episodes", "1"], module="rlzoo.evaluate"),
                      "seed=5")
    config.write_text(original)
    edit_group_json(root, ("g-s1",), home="g-s0", members=["g-s0", "g-2-s1"])
    assert_user_error(run_cli([f"resume={root / 'g-s0'}", "total_steps=450"]),
                      "differs from the group.json of")
    config.write_text(original)
    assert {k: v for k, v in snapshot(root).items() if "group.json" not in k} == \
        {k: v for k, v in before.items() if "group.json" not in k}


def test_a_checkpoint_of_other_seeds_is_refused_on_resume(group: Path, tmp_path: Path) -> None:
    root = copy_group(group, tmp_path)
    for path in (root / "g-s0" / "checkpoints").glob("step_*.pt"):
        state = torch.load(path, weights_only=True)
        state["members"][1]["seed"] = 9
        torch.save(state, path)
    assert_user_error(run_cli([f"resume={root / 'g-s0'}", "total_steps=450"]),
                      "holds seeds 0, 9")


# --------------------------------------------------------------------------- 2. stale groups


def test_sigterm_before_training_leaves_nothing_and_says_so(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "rlzoo.train", "seeds=2", "total_steps=300", *SMALL,
           f"hydra.run.dir={tmp_path / 'g-s0'}"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 120
    while not (tmp_path / "g-s1" / "group.json").exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith(
        "rlzoo: stopped by SIGTERM before training started; nothing was kept"), stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_fresh_launch_clears_an_unstarted_leftover(tmp_path: Path) -> None:
    """What a SIGKILLed launch leaves (member dirs with .hydra, lock, group.json): a relaunch
    reuses the member's name instead of numbering around it, and a single run placed in such a
    dir does not inherit its group.json (it writes its own, a group of one)."""
    leftover = tmp_path / "g-s1"
    (leftover / ".hydra").mkdir(parents=True)
    (leftover / ".hydra" / "config.yaml").write_text("seed: 1\n")
    (leftover / ".rlzoo.lock").write_text("999999\n")
    stale = {"format": 1, "home": "g-s0", "members": ["g-s0", "g-s1"], "seeds": [0, 1]}
    (leftover / "group.json").write_text(json.dumps(stale))
    single = tmp_path / "x-s1"
    shutil.copytree(leftover, single)
    run = rlzoo.train("seeds=2", "total_steps=150", *SMALL, run_dir=tmp_path / "g-s0")
    assert [m.dir.name for m in run.seeds] == ["g-s0", "g-s1"]
    assert read_summary(leftover)["seed"] == 1
    rlzoo.train("seed=1", "total_steps=150", *SMALL, run_dir=single)
    assert json.loads((single / "group.json").read_text()) == {
        "format": 1, "home": "x-s1", "members": ["x-s1"], "seeds": [1]}
    (single / "group.json").write_text(json.dumps(stale | {"home": "x-s0",
                                                           "members": ["x-s0", "x-s1"]}))
    assert_user_error(run_cli([str(single), "--episodes", "1"], module="rlzoo.evaluate"),
                      "is a single run's (seeds=1)", "is stale")


def test_a_single_run_is_a_group_of_one_on_disk(tmp_path: Path) -> None:
    """A single run writes the group record a group writes (one member) and names its seeds in
    summary.json; stopped mid-run and resumed under another dir name (copied, renamed) it ends
    bit for bit as the unbroken run; without group.json (a run dir written before single runs
    wrote one) it still resumes and evaluates, as a group of one."""
    whole = rlzoo.train("seed=3", "total_steps=300", *SMALL, run_dir=tmp_path / "a-s3")
    assert json.loads((whole.dir / "group.json").read_text()) == {
        "format": 1, "home": "a-s3", "members": ["a-s3"], "seeds": [3]}
    assert whole.summary["group_seeds"] == [3] and [r.dir for r in whole.seeds] == [whole.dir]
    part = rlzoo.train("seed=3", "total_steps=150", *SMALL, run_dir=tmp_path / "b-s3")
    moved = part.dir.rename(tmp_path / "renamed")  # its group.json still says b-s3
    rlzoo.resume(moved, "total_steps=225")
    (moved / "group.json").unlink()  # as old single runs were written: none
    done = rlzoo.resume(moved, "total_steps=300")
    assert not (moved / "group.json").exists()  # resuming an old run dir adds nothing to it
    assert done.summary["final_eval_return"] == whole.summary["final_eval_return"]
    want = torch.load(whole.dir / "policy.pt", weights_only=True)["weights"]
    got = torch.load(moved / "policy.pt", weights_only=True)["weights"]
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)
    proc = run_cli([str(moved), "--episodes", "1"], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr
    outside = tmp_path / "outside.json"  # a link in group.json's place is never read
    outside.write_text((whole.dir / "group.json").read_text())
    (moved / "group.json").symlink_to(outside)
    assert_user_error(run_cli([str(moved), "--episodes", "1"], module="rlzoo.evaluate"),
                      "symbolic link")


def test_a_group_member_without_group_json_says_so(group: Path, tmp_path: Path) -> None:
    """A seeds=2 member copied out alone, without group.json: evaluate and resume name the
    missing file and where to get it, instead of reading it as a single run."""
    root = copy_group(group, tmp_path)
    (root / "g-s1" / "group.json").unlink()
    for proc in (run_cli([str(root / "g-s1"), "--episodes", "1"], module="rlzoo.evaluate"),
                 run_cli([f"resume={root / 'g-s1'}"])):
        assert_user_error(proc, "has seeds=2 but", "has no group.json",
                          "restore group.json from another member's dir")


# --------------------------------------------------------------------------- 3. end of a run


def test_resume_completes_what_a_crash_at_the_end_left(group: Path, tmp_path: Path) -> None:
    """The states a SIGKILL (or ENOSPC) at the end leaves: policy.pt one checkpoint behind,
    a member without summary.json, a dead writer's temp file. resume= completes them, with the
    final weights bit for bit, instead of saying "already finished"."""
    root = copy_group(group, tmp_path)
    want = {d: torch.load(root / d / "policy.pt", weights_only=True) for d in ("g-s0", "g-s1")}
    summary = read_summary(root / "g-s1")
    behind = dict(want["g-s0"], step=150,
                  weights={k: v + 1 for k, v in want["g-s0"]["weights"].items()})
    torch.save(behind, root / "g-s0" / "policy.pt")
    (root / "g-s1" / "summary.json").unlink()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    temp = root / "g-s1" / f".policy.pt.{host_name()}.{dead}.00ff00ff00ff00ff.tmp"
    temp.write_bytes(b"PK\x03\x04partial")
    proc = run_cli([f"resume={root / 'g-s1'}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "already finished" not in proc.stderr
    for d in ("g-s0", "g-s1"):
        got = torch.load(root / d / "policy.pt", weights_only=True)
        assert got["step"] == 300
        for key, value in want[d]["weights"].items():
            assert torch.equal(got["weights"][key], value), (d, key)
    again = read_summary(root / "g-s1")
    for key in ("total_steps", "final_eval_return", "final_eval_return_std", "updates",
                "episodes", "seed", "group_seeds"):
        assert again[key] == summary[key], key
    assert not temp.exists()
    proc = run_cli([f"resume={root / 'g-s0'}"])
    assert proc.returncode == 0 and "already finished" in proc.stderr


# --------------------------------------------------------------------------- 4. hostile files


def test_a_zero_stride_tensor_is_refused_before_it_is_read(tmp_path: Path) -> None:
    huge = torch.zeros(1).expand(1 << 40)  # 4 TiB if materialised, 4 bytes in the file
    path = tmp_path / "step_0000000001.pt"
    torch.save({"format": 1, "algo": {"w": huge}}, path)
    assert path.stat().st_size < 10_000
    with pytest.raises(CheckpointError, match=r"has shape \[1099511627776\].*storage of 4 bytes"):
        load_checkpoint(path)
    overlapping = torch.zeros(4).as_strided((1 << 20, 4), (0, 1))
    torch.save({"format": 1, "algo": {"w": [{"deep": overlapping}]}}, path)
    with pytest.raises(CheckpointError, match=r"algo\.w\[0\]\.deep"):
        load_checkpoint(path)


def test_resume_falls_back_past_a_hostile_checkpoint(group: Path, tmp_path: Path) -> None:
    root = copy_group(group, tmp_path)
    newest = root / "g-s0" / "checkpoints" / "step_0000000300.pt"
    state = torch.load(newest, weights_only=True)
    key = next(iter(state["algo"]["modules"]))
    state["algo"]["modules"][key] = torch.zeros(1).expand(1 << 36)
    torch.save(state, newest)
    path, _ = load_latest_valid_quietly(root / "g-s0" / "checkpoints")
    assert path.name == "step_0000000150.pt"
    proc = run_cli([f"resume={root / 'g-s0'}", "total_steps=300"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "skipping" in proc.stderr and "zero or overlapping strides" in proc.stderr
    assert "from step_0000000150.pt" in (root / "g-s0" / "train.log").read_text()


def load_latest_valid_quietly(directory: Path):  # noqa: ANN201 - test helper
    with pytest.warns(UserWarning, match="refused"):
        return load_latest_valid(directory)


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("obs_dim", -3, "spec obs_dim=-3"), ("act_dim", 0, "spec act_dim=0"),
    ("obs_dim", 1 << 40, "spec obs_dim="), ("n_agents", True, "spec n_agents=True"),
    ("action_low", ["x"], "spec action_low"), ("bogus", 1, "unknown spec fields"),
])
def test_a_hostile_policy_spec_is_one_line(
    group: Path, tmp_path: Path, field: str, value: object, fragment: str
) -> None:
    record = torch.load(group / "g-s1" / "policy.pt", weights_only=True)
    record["spec"][field] = value
    torch.save(record, tmp_path / "policy.pt")
    with pytest.raises(UserError, match="env spec rlzoo cannot read") as err:
        rlzoo.load_policy(tmp_path / "policy.pt")
    assert fragment in str(err.value)


def test_an_unparseable_member_config_changes_nothing(group: Path, tmp_path: Path) -> None:
    root = copy_group(group, tmp_path)
    (root / "g-s1" / ".hydra" / "config.yaml").write_text("seed: [1\n  bad: {")
    before = snapshot(root)
    assert_user_error(run_cli([f"resume={root / 'g-s0'}", "total_steps=450"]),
                      "cannot read", "g-s1/.hydra/config.yaml", "nothing was changed")
    assert snapshot(root) == before


def test_evaluate_refuses_a_checkpoint_of_another_shape(group: Path, tmp_path: Path) -> None:
    single = rlzoo.train("total_steps=150", *SMALL, run_dir=tmp_path / "one")
    ckpt = next((single.dir / "checkpoints").glob("step_*.pt"))
    assert_user_error(run_cli([str(group / "g-s1"), "--checkpoint", str(ckpt)],
                              module="rlzoo.evaluate"),
                      "holds one seed, but this run is seed 1 of a 2-seed group")
    group_ckpt = group / "g-s0" / "checkpoints" / "step_0000000150.pt"
    assert_user_error(run_cli([str(single.dir), "--checkpoint", str(group_ckpt)],
                              module="rlzoo.evaluate"), "holds 2 seeds (0, 1)")
    os.mkfifo(tmp_path / "fifo")
    assert_user_error(run_cli([str(single.dir), "--checkpoint", str(tmp_path / "fifo")],
                              module="rlzoo.evaluate"), "is not a regular file")


def test_load_policy_names_a_fifo_or_device_as_such(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.pt")
    (tmp_path / "zero.pt").symlink_to("/dev/zero")
    for name in ("fifo.pt", "zero.pt"):
        with pytest.raises(UserError, match="is not a regular file or a directory"):
            rlzoo.load_policy(tmp_path / name)


# --------------------------------------------------------------------------- 5. disk, process


def limited(code: str, fsize: int) -> subprocess.CompletedProcess[str]:
    """``python -c code`` with files limited to ``fsize`` bytes (writes past it fail with
    EFBIG, as on a full disk)."""
    prelude = ("import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               f"resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize}, {fsize}))\n")
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=300)


def test_export_onto_a_full_disk_is_one_line_and_leaves_no_file(
    group: Path, tmp_path: Path
) -> None:
    out = tmp_path / "pol.pt2"
    proc = limited(f"import rlzoo\np = rlzoo.load_policy({str(group / 'g-s0')!r})\n"
                   f"try:\n    p.export({str(out)!r})\nexcept rlzoo.errors.UserError as e:\n"
                   "    print('USER', e)\n", fsize=4096)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("USER cannot write") and "no file was left" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_launch_onto_a_full_disk_is_one_line_and_leaves_no_dir(tmp_path: Path) -> None:
    args = ["total_steps=150", *SMALL, f"hydra.run.dir={tmp_path / 'run'}"]
    proc = limited(f"import sys; sys.argv = ['rlzoo.train', *{args!r}]\n"
                   "from rlzoo.train import main; main()", fsize=0)
    assert_user_error(proc, "cannot lock", "free space there")
    assert list(tmp_path.iterdir()) == []


def test_seeds_past_the_largest_seed_are_refused(tmp_path: Path) -> None:
    proc = run_cli(["seed=2147483647", "seeds=3", *SMALL], tmp_path / "big")
    assert_user_error(proc, "would train seeds up to 2147483649", "choose seed <= 2147483645")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- issue 23 item 6


def hold_lock(run_dir: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from rlzoo.store.rundir import RunLock; RunLock.acquire(Path(sys.argv[1])); "
         "print('held', flush=True); time.sleep(600)", str(run_dir)],
        stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_deleted_member_is_rebuilt_from_the_group_checkpoint(
    group: Path, tmp_path: Path
) -> None:
    """Resuming a group to 300 steps from its checkpoint at 150 with seed 1's dir deleted:
    refused with the way out, then rebuilt, with the weights of the unbroken run bit for bit."""
    half = tmp_path / "half"
    rlzoo.train("seeds=2", "total_steps=150", *SMALL, run_dir=half / "g-s0")
    shutil.rmtree(half / "g-s1")
    assert_user_error(run_cli([f"resume={half / 'g-s0'}", "total_steps=300"]),
                      "are missing", "rebuild_members=true")
    assert not (half / "g-s1").exists()
    proc = run_cli([f"resume={half / 'g-s0'}", "total_steps=300", "rebuild_members=true"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    for d in ("g-s0", "g-s1"):
        want = torch.load(group / d / "policy.pt", weights_only=True)["weights"]
        got = torch.load(half / d / "policy.pt", weights_only=True)["weights"]
        assert all(torch.equal(got[k], want[k]) for k in want), d
        assert read_summary(half / d)["final_eval_return"] == \
            read_summary(group / d)["final_eval_return"]
    assert json.loads((half / "g-s1" / "group.json").read_text()) == \
        json.loads((half / "g-s0" / "group.json").read_text())


def test_load_policy_of_a_member_still_training_says_so(group: Path, tmp_path: Path) -> None:
    root = copy_group(group, tmp_path)
    (root / "g-s1" / "policy.pt").unlink()
    shutil.rmtree(root / "g-s0" / "checkpoints")
    with pytest.raises(UserError, match="no checkpoint"):
        rlzoo.load_policy(root / "g-s1")
    holder = hold_lock(root / "g-s0")
    try:
        with pytest.raises(UserError, match=r"still training \(pid \d+\).*first checkpoint"):
            rlzoo.load_policy(root / "g-s1")
        assert_user_error(run_cli([str(root / "g-s1")], module="rlzoo.evaluate"),
                          "still training")
    finally:
        holder.kill()
        holder.wait()


def test_reproduce_names_a_live_trainer_and_never_a_dead_holder(
    group: Path, tmp_path: Path
) -> None:
    """reproduce.py rerun while the trainer its killed predecessor started still runs: the cell
    is "locked by a live trainer" (before anything is launched into the cell's log); and at
    report time a cell reported locked earlier is re-read: finished, or unfinished once its
    holder has exited, never "locked" by a dead pid."""
    from tools.reproduce import rlzoo_cells, runner
    from tools.reproduce.plan import Outcome, Plan
    from tools.reproduce.suites import SUITES

    plan = Plan(SUITES["smoke"], 2, 300, tmp_path, tmp_path / "results",
                tmp_path / "page.md", sb3="--no-sb3")
    task, row = next((t, r) for t, r in plan.suite.cells() if r.label == "sac")
    cell = plan.task_dir(task)
    for seed in (0, 1):  # the group, unfinished (its summaries gone)
        shutil.copytree(group / f"g-s{seed}", cell / f"sac-s{seed}")
        (cell / f"sac-s{seed}" / "summary.json").unlink()
    record = {"format": 1, "home": "sac-s0", "members": ["sac-s0", "sac-s1"], "seeds": [0, 1]}
    for seed in (0, 1):
        (cell / f"sac-s{seed}" / "group.json").write_text(json.dumps(record))
    holder = hold_lock(cell / "sac-s1")
    try:
        outcome = rlzoo_cells.rlzoo_cell(plan, task, row)
        assert outcome.state == "locked"
        assert outcome.note.startswith(f"locked by a live trainer: rlzoo.train (pid {holder.pid})")
        assert not (cell / "sac.log").exists()  # nothing was launched
        assert runner.still_locked(plan, outcome).startswith("locked: locked by a live trainer")
    finally:
        holder.kill()
        holder.wait()
    other = Outcome(task.name, row.label, "locked", "another reproduce.py (pid 1) is running")
    assert runner.still_locked(plan, other).startswith("unfinished: it was locked by another")
    for seed in (0, 1):
        shutil.copy(group / f"g-s{seed}" / "summary.json", cell / f"sac-s{seed}")
    assert runner.still_locked(plan, other) is None
