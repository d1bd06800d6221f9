"""``seeds=K`` end to end: one process, one ordinary run dir per seed, readable by every tool.

Also: ``seeds=1`` (the default) is bit-identical to a single run of the code before seed groups
existed (``fixtures/single_seed_reference.pt``, written by commit 2a3fe34 with the same
arguments; exact on the CPU kind that wrote it, else to 1e-5).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import TINY, assert_user_error, read_summary, run_cli

import rlzoo
from rlzoo.buffers.replay import ReplayBuffer
from rlzoo.store.checkpoint import list_checkpoints, load_checkpoint
from rlzoo.store.extras import POLICY_FILE

FIXTURE = Path(__file__).parent / "fixtures" / "single_seed_reference.pt"
REFERENCE = torch.load(FIXTURE, weights_only=True)
SAME_CPU = REFERENCE["meta"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
SMALL = ["env=Pendulum", "algo.learning_starts=100", "algo.batch_size=32", "eval.every=150",
         "eval.episodes=2", "checkpoint.every=150", "log.every=50", "log.progress=false",
         "torch_threads=1", *TINY]


@pytest.mark.parametrize("name", list(REFERENCE["runs"]))
@pytest.mark.usefixtures("fresh_interpreters")  # processes compared bit for bit
def test_one_seed_is_bit_identical_to_the_run_before_seed_groups(
    tmp_path: Path, name: str
) -> None:
    ref = REFERENCE["runs"][name]
    proc = run_cli(ref["args"], tmp_path / "run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = load_checkpoint(list_checkpoints(tmp_path / "run" / "checkpoints")[-1])
    assert state["algo"]["updates"] == ref["updates"] > 0
    weights = state["algo"]["modules"]  # a group of one: the seed axis first, [1, ...]
    assert weights.keys() == ref["weights"].keys()
    for key, want in ref["weights"].items():
        assert weights[key].shape == (1, *want.shape), key
        if SAME_CPU:
            assert torch.equal(weights[key][0], want), key
        else:
            torch.testing.assert_close(weights[key][0], want, rtol=0, atol=1e-5, msg=key)
    summary = read_summary(tmp_path / "run")
    assert summary["episodes"] == ref["episodes"]
    if SAME_CPU:
        assert summary["final_eval_return"] == ref["final_eval_return"]


def test_a_single_runs_checkpoint_has_a_group_members_layout(tmp_path: Path) -> None:
    """A single run saves its weights and optimizer state as a group of one: every tensor that
    is ``[2, ...]`` in a 2-seed group's checkpoint is ``[1, ...]`` in the single run's (Adam's
    one step count ``[]`` in both), and the single run's slice is what it trains with."""
    one = rlzoo.train("algo=sac", "total_steps=200", *SMALL, run_dir=tmp_path / "a-s0")
    rlzoo.train("algo=sac", "seeds=2", "total_steps=200", *SMALL, run_dir=tmp_path / "b-s0")

    def shapes(run_dir: Path) -> dict[str, tuple[int, ...]]:
        algo = load_checkpoint(list_checkpoints(run_dir / "checkpoints")[-1])["algo"]
        found = {f"modules.{k}": tuple(v.shape) for k, v in algo["modules"].items()}
        for name, opt in algo["optimizers"].items():
            for index, entries in opt["state"].items():
                found.update({f"{name}.{index}.{k}": tuple(v.shape) for k, v in entries.items()
                              if torch.is_tensor(v)})
        return found

    single, group = shapes(tmp_path / "a-s0"), shapes(tmp_path / "b-s0")
    assert single.keys() == group.keys() and len(single) > 20
    for key, shape in group.items():
        assert single[key] == ((1, *shape[1:]) if shape else ()), key
    assert sum(shape == () for shape in group.values()) >= 3  # the optimizers' step counts
    weights = load_checkpoint(list_checkpoints(tmp_path / "a-s0" / "checkpoints")[-1])["algo"]
    policy = torch.load(tmp_path / "a-s0" / POLICY_FILE, weights_only=True)["weights"]
    key = next(k for k in policy if k.startswith("actor.") and k.endswith("weight"))
    assert torch.equal(weights["modules"][key][0], policy[key])
    assert one.seeds[0].summary["total_steps"] == 200


def test_a_group_writes_one_ordinary_run_dir_per_seed(tmp_path: Path) -> None:
    seen = []
    run = rlzoo.train("algo=sac", "seeds=3", "seed=4", "total_steps=300", *SMALL,
                      run_dir=tmp_path / "g-s4", on_eval=lambda e: seen.append(e.run_dir.name))
    members = run.seeds
    assert [m.dir.name for m in members] == ["g-s4", "g-s5", "g-s6"]
    assert sorted(set(seen)) == ["g-s4", "g-s5", "g-s6"] and len(seen) == 6  # 2 evals each
    finals = []
    for i, member in enumerate(members):
        summary = member.summary
        assert summary["seed"] == 4 + i and summary["total_steps"] == 300
        assert summary["group_seeds"] == [4, 5, 6]
        config = (member.dir / ".hydra" / "config.yaml").read_text()
        assert f"seed: {4 + i}\n" in config and "seeds: 3\n" in config
        assert list(member.dir.glob("events.out.tfevents.*")), "no TensorBoard events"
        assert (member.dir / POLICY_FILE).is_file()
        assert json.loads((member.dir / "group.json").read_text())["home"] == "g-s4"
        finals.append(summary["final_eval_return"])
        # the policy of each seed, as a single run's would load
        policy = member.load_policy()
        obs = torch.zeros(1, 3)
        assert policy(obs).shape == (1, 1)
    assert len(set(finals)) == 3, "three seeds, three different results"
    assert not (members[1].dir / "checkpoints").exists()  # the group's checkpoint: the home's
    ckpt = load_checkpoint(list_checkpoints(members[0].dir / "checkpoints")[-1])
    assert [m["seed"] for m in ckpt["members"]] == [4, 5, 6]
    assert ckpt["algo"]["modules"]["actor.net.layers.0.weight"].shape[0] == 3

    # rlzoo.evaluate on a non-first seed reproduces that seed's last evaluation (to float
    # rounding: the loop evaluated with the group's batched kernels, evaluate with one seed's)
    proc = run_cli([str(members[2].dir), "--episodes", "2"], module="rlzoo.evaluate")
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(next(members[2].dir.glob("eval_*.json")).read_text())
    assert record["mean"] == pytest.approx(finals[2], rel=1e-6)
    assert record["step"] == 300

    # rlzoo.compare groups the three seeds as one variant
    proc = run_cli([str(tmp_path), "--out", str(tmp_path / "report")], module="rlzoo.compare")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = (tmp_path / "report" / "comparison.md").read_text()
    assert "| sac | 3 (4, 5, 6) |" in report, report[-2000:]


def test_seeds_policies_equal_the_groups_slices(tmp_path: Path) -> None:
    run = rlzoo.train("algo=td3", "seeds=2", "total_steps=200", "algo.buffer_size=400", *SMALL,
                      run_dir=tmp_path / "r-s0")
    ckpt = load_checkpoint(list_checkpoints(run.dir / "checkpoints")[-1])
    for k, member in enumerate(run.seeds):
        weights = torch.load(member.dir / POLICY_FILE, weights_only=True)["weights"]
        for key, value in weights.items():
            assert torch.equal(value, ckpt["algo"]["modules"][key][k]), key
    # each member's summary counts its own buffer: one seed's allocation (Pendulum, 400 rows)
    # and the rows it wrote (200 steps and the first observation; the episode's end may add one)
    one = ReplayBuffer(400, (3,), (1,)).nbytes
    for member in run.seeds:
        used = read_summary(member.dir)["buffer_bytes"]
        assert used["capacity"] == one and one * 201 // 400 <= used["used"] <= one * 202 // 400


def test_a_multirun_trains_a_group_per_job(tmp_path: Path) -> None:
    proc = run_cli(["-m", "algo=sac,td3", "seeds=2", "total_steps=150", *SMALL,
                    f"hydra.sweep.dir={tmp_path}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    summaries = sorted(tmp_path.rglob("summary.json"))
    assert len(summaries) == 4
    got = sorted((json.loads(p.read_text())["algo"], json.loads(p.read_text())["seed"])
                 for p in summaries)
    assert got == [("sac", 0), ("sac", 1), ("td3", 0), ("td3", 1)]
    # one result line per seed, each naming its own run dir and that dir's return
    lines = [line for line in proc.stdout.splitlines() if "final eval return" in line]
    assert len(lines) == 4
    for path in summaries:
        ret = json.loads(path.read_text())["final_eval_return"]
        line = next(line for line in lines if line.endswith(f"run dir {path.parent}"))
        assert f"final eval return {ret:.2f}" in line


@pytest.mark.parametrize(("value", "fragment"), [("0", "seeds must be"), ("two", "seeds")])
def test_a_bad_seeds_value_is_one_line(tmp_path: Path, value: str, fragment: str) -> None:
    proc = run_cli(["algo=sac", f"seeds={value}", *SMALL], tmp_path / "bad")
    assert_user_error(proc, fragment)
    assert not (tmp_path / "bad").exists()


def test_resume_without_group_json_is_one_line(tmp_path: Path) -> None:
    run = rlzoo.train("algo=sac", "seeds=2", "total_steps=150", *SMALL, run_dir=tmp_path / "x-s0")
    (run.dir / "group.json").unlink()
    before = sorted(p.name for p in run.dir.iterdir())
    proc = run_cli([f"resume={run.dir}", "total_steps=300"])
    assert_user_error(proc, "group.json")
    assert sorted(p.name for p in run.dir.iterdir()) == before


@pytest.mark.parametrize("where", ["actor", "check"])
def test_a_nan_in_one_seed_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Seed 8's actor turns NaN (after the first checkpoint, or just before the check at the log
    of step 200): the run stops with one message naming seed 8 only, and what went NaN first,
    the last good checkpoint kept."""
    from rlzoo.run.loop import Trainer
    from rlzoo.run.signals import NonFiniteError

    def poison(trainer: Trainer) -> None:
        with torch.no_grad():
            next(trainer.algo.actor.parameters())[1].fill_(float("nan"))  # seed 8's slice

    save, check = Trainer.save, Trainer.check_finite

    def save_then_poison(self: Trainer) -> Path:
        path = save(self)
        poison(self)
        return path

    def poison_then_check(self: Trainer, metrics: dict[str, torch.Tensor]) -> None:
        if self.clock.step >= 200:
            poison(self)
        check(self, metrics)

    if where == "actor":
        monkeypatch.setattr(Trainer, "save", save_then_poison)
        want = "the policy produced a non-finite action (NaN or inf) in training env 0 of seed 8"
    else:
        monkeypatch.setattr(Trainer, "check_finite", poison_then_check)
        want = "parameter actor.net.layers.0.weight became NaN or inf in seed 8 by step 200"
    with pytest.raises(NonFiniteError) as err:
        rlzoo.train("algo=sac", "seeds=3", "seed=7", "total_steps=450", *SMALL,
                    run_dir=tmp_path / "n-s7")
    message = str(err.value)
    assert want in message and "seed 7" not in message, message
    assert "step_0000000150.pt" in message  # saved before the NaN


def episode_events(run_dir: Path) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars("train/episode_return")]


def test_a_resumed_group_keeps_every_seeds_episode_events(tmp_path: Path) -> None:
    """InvertedPendulum's episodes end at different steps per seed, so the seeds drift apart (the
    group's clock is the slowest seed's). A group stopped at a mid-run checkpoint and resumed
    keeps each seed's TensorBoard episode returns exactly as an uninterrupted group logs them:
    the seed that was ahead at the checkpoint loses none of its events to the resume's purge."""
    args = [*SMALL, "algo=sac", "env=InvertedPendulum", "seeds=2", "seed=3", "total_steps=400",
            "checkpoint.every=173", "algo.learning_starts=300"]  # random (CPU-independent) to 300
    rlzoo.train(*args, run_dir=tmp_path / "straight-s3")
    run = rlzoo.train(*args, run_dir=tmp_path / "split-s3", on_checkpoint=lambda c: True)
    steps = [json.loads((tmp_path / f"split-s{s}" / "summary.json").read_text())["total_steps"]
             for s in (3, 4)]
    assert steps == [173, 175], steps  # stopped at the group's step 173 with seed 4 ahead...
    assert episode_events(tmp_path / "split-s4")[-1][0] == 175  # ...and an episode logged there
    proc = run_cli([f"resume={run.dir}", "total_steps=400"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    for seed in (3, 4):
        want = episode_events(tmp_path / f"straight-s{seed}")
        assert len(want) > 10
        assert episode_events(tmp_path / f"split-s{seed}") == want, seed


def test_a_member_name_a_live_run_holds_is_numbered(tmp_path: Path) -> None:
    """Seed 1's default name is held by another live process: the group numbers its dir
    instead of failing, records it in group.json, and leaves the other run's dir untouched."""
    import subprocess
    import sys

    taken = tmp_path / "g-s1"
    taken.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; "
         f"fd = os.open({str(taken / '.rlzoo.lock')!r}, os.O_CREAT | os.O_RDWR); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        run = rlzoo.train("algo=sac", "seeds=2", "total_steps=150", *SMALL,
                          run_dir=tmp_path / "g-s0")
    finally:
        holder.kill()
        holder.wait()
    assert [m.dir.name for m in run.seeds] == ["g-s0", "g-2-s1"]
    assert read_summary(tmp_path / "g-2-s1")["seed"] == 1
    assert sorted(p.name for p in taken.iterdir()) == [".rlzoo.lock"]
