"""No run lost, corrupted or mixed up: finished runs stay untouched, rejected overrides write
nothing, every launch gets its own locked run dir, values are checked before work starts,
poisoned env output never reaches a checkpoint, SIGTERM is honoured between updates."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, TINY, assert_user_error, read_summary, run_cli
from omegaconf import OmegaConf

from rlzoo.store.checkpoint import CheckpointError, list_checkpoints, load_checkpoint
from rlzoo.store.rundir import claim_new_dir

PENDULUM = ["algo=sac", "env=Pendulum", "algo.learning_starts=100", "algo.batch_size=32",
            "eval.every=200", "eval.episodes=2", "checkpoint.every=100", "log.every=50",
            "log.progress=false", "algo.buffer_size=5000", "seed=7", *TINY]


def snapshot(run_dir: Path) -> dict[str, str]:
    """Every file under ``run_dir`` (lock file aside) -> sha256 of its bytes."""
    return {
        str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != ".rlzoo.lock"
    }


def strict_json(path: Path) -> dict:
    """``json.loads`` that refuses NaN/Infinity (which are not JSON)."""
    def refuse(name: str) -> None:
        raise ValueError(f"{path} holds {name}, which is not JSON")
    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    proc = run_cli([*PENDULUM, "total_steps=300"], run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run_dir


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(run_dir, target)
    return target


# --------------------------------------------------------------------------- item 2
def test_resuming_a_finished_run_changes_nothing(finished: Path, tmp_path: Path) -> None:
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    for extra in ([], ["total_steps=300"]):
        proc = run_cli([f"resume={run_dir}", *extra])
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and "already finished at step 300" in lines[0], proc.stderr
        assert "nan" not in proc.stdout + proc.stderr
        assert snapshot(run_dir) == before
    proc = run_cli([f"resume={run_dir}", "total_steps=200"])
    assert_user_error(proc, "total_steps=200", "below step 300")
    assert snapshot(run_dir) == before
    assert strict_json(run_dir / "summary.json")["total_steps"] == 300


def test_the_last_evaluation_travels_with_the_checkpoint(finished: Path, tmp_path: Path) -> None:
    """A run killed after its final checkpoint but before summary.json: resuming writes the
    summary from the checkpoint's last evaluation, with no new evaluation."""
    run_dir = copy_of(finished, tmp_path)
    expected = strict_json(run_dir / "summary.json")
    state = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
    assert state["members"][0]["counters"]["last_eval"] == pytest.approx(
        [expected["final_eval_return"], expected["final_eval_return_std"]])
    (run_dir / "summary.json").unlink()
    proc = run_cli([f"resume={run_dir}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = strict_json(run_dir / "summary.json")
    assert summary["final_eval_return"] == expected["final_eval_return"]
    assert summary["total_steps"] == 300


def test_a_stale_summary_from_an_earlier_leg_is_rewritten(finished: Path,
                                                          tmp_path: Path) -> None:
    """Killed between an extension's final checkpoint and its summary: summary.json still holds
    the earlier leg's result, so the run is not finished until the summary says its step."""
    run_dir = copy_of(finished, tmp_path)
    stale = strict_json(run_dir / "summary.json")
    stale["total_steps"], stale["final_eval_return"] = 200, -1.0
    (run_dir / "summary.json").write_text(json.dumps(stale))
    proc = run_cli([f"resume={run_dir}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "already finished" not in proc.stderr
    summary = strict_json(run_dir / "summary.json")
    assert summary["total_steps"] == 300 and summary["final_eval_return"] != -1.0


def test_only_regular_files_count_as_checkpoints(finished: Path, tmp_path: Path) -> None:
    """A directory, a FIFO or a link to /dev/zero under a checkpoint's name is never read
    (reading it would hang or fill memory) and never pruned."""
    directory = copy_of(finished, tmp_path) / "checkpoints"
    real = list_checkpoints(directory)
    (directory / "step_0000000997.pt").mkdir()
    os.mkfifo(directory / "step_0000000998.pt")
    (directory / "step_0000000999.pt").symlink_to("/dev/zero")
    assert list_checkpoints(directory) == real
    # a link to a regular checkpoint outside the run dir (another run's) is not one either
    elsewhere = tmp_path / "elsewhere.pt"
    shutil.copyfile(real[-1], elsewhere)
    (directory / "step_0000001000.pt").symlink_to(elsewhere)
    assert list_checkpoints(directory) == real
    for name in ("step_0000000998.pt", "step_0000000999.pt"):
        with pytest.raises(CheckpointError, match="not a regular file"):
            load_checkpoint(directory / name)
    proc = run_cli([str(directory.parent), "--episodes", "1"], module="rlzoo.evaluate",
                   timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


# --------------------------------------------------------------------------- item 3
@pytest.mark.parametrize("override", ["total_steps=${oc.env:RLZOO_NO_SUCH_VAR}",
                                      "total_steps=abc", "total_steps=-3",
                                      "log.progress=${nope}"])
def test_a_rejected_resume_override_writes_nothing(finished: Path, tmp_path: Path,
                                                   override: str) -> None:
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    proc = run_cli([f"resume={run_dir}", override])
    assert_user_error(proc)
    assert snapshot(run_dir) == before
    # the run is still readable: evaluate works and a valid resume continues it
    proc = run_cli([str(run_dir), "--episodes", "1"], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run_cli([f"resume={run_dir}", "total_steps=350"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert OmegaConf.load(run_dir / ".hydra" / "config.yaml").total_steps == 350
    assert strict_json(run_dir / "summary.json")["total_steps"] == 350


# --------------------------------------------------------------------------- item 4
def test_claiming_a_taken_default_name_numbers_it_before_the_seed(tmp_path: Path) -> None:
    first = claim_new_dir(tmp_path / "runs" / "20261130-120000-s3")
    second = claim_new_dir(tmp_path / "runs" / "20261130-120000-s3")
    third = claim_new_dir(tmp_path / "runs" / "20261130-120000-s3")
    assert first.name == "20261130-120000-s3"
    assert second.name == "20261130-120000-2-s3" and third.name == "20261130-120000-3-s3"


def _launch(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "rlzoo.train", *args], cwd=cwd, env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_launches_in_the_same_second_get_their_own_run_dirs(tmp_path: Path) -> None:
    """A script looping over learning rates: each launch keeps its own config and checkpoint."""
    lrs = ["0.001", "0.0003"]
    procs = [_launch([*PENDULUM, "total_steps=150", f"algo.actor_lr={lr}"], tmp_path)
             for lr in lrs]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
    runs = sorted((tmp_path / "runs" / "Pendulum" / "sac").iterdir())
    assert len(runs) == 2
    seen = set()
    for run_dir in runs:
        assert run_dir.name.endswith("-s7")
        lr = OmegaConf.load(run_dir / ".hydra" / "config.yaml").algo.actor_lr
        state = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
        assert state["config"]["algo"]["actor_lr"] == lr
        seen.add(lr)
    assert seen == {0.001, 0.0003}


def test_a_run_dir_in_use_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    live = _launch([*PENDULUM, "total_steps=100000", "checkpoint.every=100000",
                    f"hydra.run.dir={run_dir}"], REPO)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not list(run_dir.glob("events.out.tfevents.*")):
            time.sleep(0.1)
        config = (run_dir / ".hydra" / "config.yaml").read_bytes()
        for args in ([*PENDULUM, "total_steps=200"], [f"resume={run_dir}", "total_steps=300"]):
            proc = run_cli(args, None if args[0].startswith("resume=") else run_dir)
            assert_user_error(proc, "in use", f"pid {live.pid}")
            # a new run may go elsewhere; a resume is of this dir only
            assert ("choose another" in proc.stderr) != args[0].startswith("resume="), proc.stderr
        assert (run_dir / ".hydra" / "config.yaml").read_bytes() == config
        assert live.poll() is None
    finally:
        live.send_signal(signal.SIGTERM)
        live.communicate(timeout=120)
    assert live.returncode == 0
    # once the live run has stopped, the dir can be resumed
    step = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])["counters"]["step"]
    proc = run_cli([f"resume={run_dir}", f"total_steps={step + 20}"])
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_fresh_run_into_a_dir_that_holds_a_run_is_refused(finished: Path,
                                                            tmp_path: Path) -> None:
    run_dir = copy_of(finished, tmp_path)
    before = snapshot(run_dir)
    lock = run_dir / ".rlzoo.lock"
    lock.write_text("12345\n")  # the pid of the process that trained it, long gone
    assert_user_error(run_cli([*PENDULUM, "total_steps=200"], run_dir), "already holds a run",
                      f"resume={run_dir}")
    assert snapshot(run_dir) == before
    assert lock.read_text() == "12345\n"  # a refused launch does not even take the lock


# --------------------------------------------------------------------------- item 7
@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["algo.utd=inf"], "algo.utd"),
        (["algo.utd=nan"], "algo.utd"),
        (["num_envs=200000"], "num_envs"),
        (["algo.buffer_size=1e11"], "GiB"),
        (["algo.buffer_size=100000000000"], "GiB"),
        (["seed=99999999999999999999"], "seed"),
        (["torch_threads=-1"], "torch_threads"),
        (["torch_threads=many"], "torch_threads must be auto or an integer"),
        (["eval.episodes=1000000"], "eval.episodes"),
        (["critic.hidden=[100000000]"], "critic.hidden[0]"),
        (["algo.actor.hidden=[0,64]"], "algo.actor.hidden[0]"),
        (["algo.n_step=10000000"], "algo.n_step"),
        (["critic=ensemble", "critic.n=100000"], "critic.n"),
        (["algo.critic_lr=inf"], "algo.critic_lr"),
        (["algo=td3", "algo.policy_delay=1.5"], "algo.policy_delay"),
        (["env=gym", "env.id=tests.odd_envs:ZeroObs-v0"], "empty observation"),
    ],
)
def test_values_are_checked_before_work_starts(tmp_path: Path, args: list[str],
                                               fragment: str) -> None:
    overrides = [a for a in ["env=Pendulum", "total_steps=300", *TINY]
                 if not any(a.split("=")[0] == b.split("=")[0] for b in args)]
    proc = run_cli([*overrides, *args], cwd=tmp_path, timeout=120)
    assert_user_error(proc, fragment)
    assert not (tmp_path / "runs").exists()  # a run that never started leaves no run dir


def test_sigterm_is_honoured_between_updates(tmp_path: Path) -> None:
    """utd=1000: SIGTERM in the middle of a step's updates checkpoints at once, owing the rest,
    which the resumed run makes before its next env step."""
    run_dir = tmp_path / "run"
    full_size = [a for a in PENDULUM if a not in TINY]  # 256x256: 1000 updates take seconds
    args = [*full_size, "total_steps=104", "algo.utd=1000", "checkpoint.every=1",
            "checkpoint.keep=1", "eval.every=0", "eval.episodes=1"]
    proc = _launch([*args, f"hydra.run.dir={run_dir}"], REPO)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        found = list_checkpoints(run_dir / "checkpoints")
        if found and found[-1].name == "step_0000000101.pt":
            break
        time.sleep(0.01)
    time.sleep(0.5)  # past the checkpoint, into step 102's updates
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert "stopped by SIGTERM at step 102" in err, err[-2000:]
    state = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])
    owed = state["counters"]["update_credit"]
    assert owed >= 1.0  # the step's updates were cut short, not finished first
    proc = run_cli([f"resume={run_dir}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert read_summary(run_dir)["updates"] == 4 * 1000  # nothing lost, nothing doubled


# --------------------------------------------------------------------------- item 5
def test_a_nan_reward_stops_before_it_is_stored(tmp_path: Path) -> None:
    """NaNPendulum's rewards turn NaN after 400 env steps, inside the warm-up here: the run
    stops at that step with one line, and every checkpoint left is clean."""
    run_dir = tmp_path / "run"
    args = [a for a in PENDULUM if not a.startswith(("env=", "algo.learning_starts"))]
    proc = run_cli([*args, "env=gym", "env.id=tests.nan_env:NaNPendulum-v0",
                    "algo.learning_starts=1000", "total_steps=1200", "checkpoint.keep=2"],
                   run_dir)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("rlzoo: error:")]
    assert len(line) == 1, proc.stderr
    for fragment in ("non-finite reward", "NaNPendulum-v0", "step 401", "step_0000000400.pt"):
        assert fragment in line[0], (fragment, line[0])
    for path in list_checkpoints(run_dir / "checkpoints"):
        rewards = load_checkpoint(path)["members"][0]["buffer"]["tensors"]["reward"]
        assert rewards.isfinite().all(), path


# --------------------------------------------------------------------------- item 11
def test_a_run_that_cannot_learn_says_so(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_cli(["algo=td3", "env=Pendulum", "total_steps=300", "eval.episodes=1",
                    "algo.buffer_size=5000", *TINY], run_dir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    warning = [x for x in proc.stderr.splitlines() if x.startswith("rlzoo: warning:")]
    assert len(warning) == 1 and "algo.learning_starts (10000)" in warning[0], proc.stderr
    summary = strict_json(run_dir / "summary.json")
    assert summary["updates"] == 0 and "no gradient update" in summary["warnings"][0]
