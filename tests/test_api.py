"""The Python API ``rlzoo.train(...) -> Run``: the CLI's overrides and run dir, callbacks that
stop a run early, and the same one-line errors, raised instead of printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import read_summary, run_cli

import rlzoo
from rlzoo.errors import UserError
from rlzoo.store.checkpoint import list_checkpoints

SMALL = ["algo=sac", "env=Pendulum", "algo.learning_starts=100", "eval.episodes=2",
         "log.progress=false", "algo.actor.hidden=[16]", "critic.hidden=[16]",
         "torch_threads=1"]


def test_train_writes_a_cli_run_dir_and_a_callback_stops_it(tmp_path: Path) -> None:
    seen: list[tuple[int, float]] = []

    def on_eval(ev: rlzoo.run.loop.Evaluation) -> bool:
        seen.append((ev.step, ev.mean))
        assert ev.returns.shape == (2,) and ev.run_dir == tmp_path / "run"
        return ev.step >= 200  # stop at the second evaluation

    run = rlzoo.train(*SMALL, "total_steps=1000", "eval.every=100", run_dir=tmp_path / "run",
                      on_eval=on_eval)
    assert run.dir == tmp_path / "run"
    assert [step for step, _ in seen] == [100, 200]
    summary = run.summary
    assert summary["total_steps"] == 200 and summary["stopped_early"] is True
    assert summary["final_eval_return"] == pytest.approx(seen[-1][1])
    assert [p.name for p in list_checkpoints(run.dir / "checkpoints")] == ["step_0000000200.pt"]
    assert (run.dir / "policy.pt").is_file()
    hydra = run.dir / ".hydra"
    assert {p.name for p in hydra.iterdir()} >= {"config.yaml", "hydra.yaml", "overrides.yaml"}
    assert "total_steps=1000" in (hydra / "overrides.yaml").read_text()
    # the CLI continues it: resume, evaluate
    proc = run_cli([f"resume={run.dir}", "total_steps=300"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = read_summary(run.dir)
    assert after["total_steps"] == 300 and "stopped_early" not in after
    proc = run_cli([str(run.dir), "--episodes", "2"], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_on_checkpoint_stops_and_default_run_dir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default run dir is relative: runs/<env>/<algo>/...
    paths: list[Path] = []
    run = rlzoo.train(*SMALL, "total_steps=600", "checkpoint.every=150", "eval.every=0",
                      on_checkpoint=lambda ck: paths.append(ck.path) or True)
    assert run.dir.parts[:3] == ("runs", "Pendulum", "sac") and run.dir.name.endswith("-s0")
    assert [p.name for p in paths] == ["step_0000000150.pt"]
    summary = json.loads((run.dir / "summary.json").read_text())
    assert summary["total_steps"] == 150 and summary["stopped_early"] is True


@pytest.mark.parametrize(("overrides", "fragment"), [
    (["algo=nope"], "algo"),
    (["resume=somewhere"], "continue a run with rlzoo.resume(RUN_DIR"),
    (["hydra.run.dir=/x"], "run_dir=..."),
    (["--cfg"], "key=value overrides"),
    (["total_steps=-5"], "total_steps must be >= 1"),
])
def test_mistakes_raise_one_line_user_errors(tmp_path: Path, overrides: list[str],
                                             fragment: str) -> None:
    with pytest.raises(UserError) as info:
        rlzoo.train(*overrides, run_dir=tmp_path / "run")
    message = str(info.value)
    assert fragment in message and "\n" not in message
    assert not (tmp_path / "run").exists()  # a run that never started leaves nothing


def test_a_dir_that_holds_a_run_is_refused(tmp_path: Path) -> None:
    rlzoo.train(*SMALL, "total_steps=120", run_dir=tmp_path / "run")
    before = (tmp_path / "run" / "summary.json").read_bytes()
    with pytest.raises(UserError) as info:
        rlzoo.train(*SMALL, "total_steps=120", run_dir=tmp_path / "run")
    # the Python caller's names: the run_dir argument and rlzoo.resume, not hydra.run.dir
    assert str(info.value) == (
        f"{tmp_path / 'run'} already holds a run (checkpoints or summary.json); continue it with "
        f"rlzoo.resume({str(tmp_path / 'run')!r}) or choose another run_dir")
    assert (tmp_path / "run" / "summary.json").read_bytes() == before


# rlzoo.resume: a short run continued to a larger budget equals the run made in one go
SPLIT = [*SMALL, "eval.every=0", "checkpoint.every=0", "log.every=50", "seed=3"]


def test_resume_from_python_is_bit_identical_to_an_unbroken_run(tmp_path: Path) -> None:
    from tests.test_resume_split import STATE_KEYS, assert_identical, final_checkpoint

    straight = rlzoo.train(*SPLIT, "total_steps=260", run_dir=tmp_path / "straight")
    split = rlzoo.train(*SPLIT, "total_steps=137", run_dir=tmp_path / "split")
    assert split.summary["total_steps"] == 137
    resumed = rlzoo.resume(split.dir, "total_steps=260")
    assert resumed.dir == split.dir and resumed.summary["total_steps"] == 260
    want, got = final_checkpoint(straight.dir), final_checkpoint(split.dir)
    assert want["algo"]["updates"] > 0 and got["counters"]["step"] == 260
    for key in STATE_KEYS:
        assert_identical(want[key], got[key], key)
    for key in ("total_steps", "updates", "episodes", "final_eval_return"):
        assert straight.summary[key] == resumed.summary[key], key
    # the new budget is saved, as the command line's resume saves it
    assert "total_steps: 260" in (split.dir / ".hydra" / "config.yaml").read_text()
    # a finished run comes back unchanged
    before = (split.dir / "summary.json").read_bytes()
    assert rlzoo.resume(split.dir).summary["total_steps"] == 260
    assert (split.dir / "summary.json").read_bytes() == before


@pytest.mark.parametrize(("overrides", "fragment"), [
    (["algo.utd=2"], "only total_steps=..., log.progress=..., log.progress_every_s=..."),
    (["total_steps=10"], "total_steps=10 is below step 120"),
    (["trust=[x]"], "rlzoo.resume(RUN_DIR, trust=['my_pkg'])"),
])
def test_resume_mistakes_are_one_line_and_change_nothing(
    tmp_path: Path, overrides: list[str], fragment: str
) -> None:
    run = rlzoo.train(*SMALL, "total_steps=120", run_dir=tmp_path / "run")
    files = {p: p.read_bytes() for p in run.dir.rglob("*") if p.is_file()}
    with pytest.raises(UserError) as info:
        rlzoo.resume(run.dir, *overrides)
    assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert {p: p.read_bytes() for p in run.dir.rglob("*") if p.is_file()} == files
    with pytest.raises(UserError, match="does not exist"):
        rlzoo.resume(tmp_path / "nowhere")


def test_interrupted_says_where_the_checkpoint_is_and_how_to_resume(tmp_path: Path) -> None:
    import os
    import signal

    from rlzoo.run.signals import Interrupted

    def interrupt(evaluation: rlzoo.run.loop.Evaluation) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: the loop checkpoints and stops

    with pytest.raises(Interrupted) as info:
        rlzoo.train(*SMALL, "total_steps=400", "eval.every=100", run_dir=tmp_path / "run",
                    on_eval=interrupt)
    stop = info.value
    run_dir = tmp_path / "run"
    assert stop.step == 100 and stop.path == run_dir / "checkpoints" / "step_0000000100.pt"
    assert str(stop) == (
        f"stopped by SIGINT at step 100; checkpoint {stop.path}; continue with: python -m "
        f"rlzoo.train resume={run_dir} (or rlzoo.resume({str(run_dir)!r}))")
    assert rlzoo.resume(run_dir).summary["total_steps"] == 400


def test_rlzoo_train_is_the_module_and_the_function() -> None:
    import rlzoo.train as module

    assert callable(module) and module.train.__name__ == "train"
    assert rlzoo.train is module
