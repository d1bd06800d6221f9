"""``torch_threads=auto`` never changes a run's numbers (rlzoo/config/threads.py): on this machine's
cores (2 here) a default run equals a ``torch_threads=1`` run bit for bit, straight, stopped and
resumed, SIGKILLed and resumed, and while a busy loop takes a core; the update check
(``same_on_counts``) and the tuner's pinning when it fails; the thread record; and
``torch_threads`` far above the CPUs refused in one line.

The CLI runs are fresh interpreters without the suite's ``OMP_NUM_THREADS``, so the tuner runs.
Most of them make it switch every few update steps whatever the load (``WINDOW``/``HOLD`` small,
no idle probe): the counts change many times in each run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import assert_user_error, run_cli

from rlzoo.config import threads
from rlzoo.config.threads import ThreadTuner, same_on_counts

CLEAN = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS", "MKL_CBWR")
# Hopper's 11 observations make a [11, B] @ [B, 64] gradient product, which oneMKL splits by
# thread count unless strict (seen on a 2-core AMD EPYC); 64-wide nets keep the runs short
ARGS = ["algo=sac", "env=Hopper", "seed=3", "total_steps=400", "algo.learning_starts=200",
        "algo.batch_size=64", "algo.actor.hidden=[64,64]", "critic.hidden=[64,64]",
        "eval.every=200", "eval.episodes=1", "checkpoint.every=100", "checkpoint.keep=10",
        "log.progress=false"]
SWITCHY = ("import rlzoo.config.threads as t\n"
           "t.WINDOW, t.HOLD, t.idle_probe = 4, 1, (lambda: None)\n")  # switch by timing alone
TRAIN = """
import os, signal, sys, rlzoo
args = sys.argv[3:]
def at_checkpoint(c):
    if sys.argv[2] == 'stop' and c.step == 300:
        return True  # stop the run here (a checkpoint was just written)
    if sys.argv[2] == 'kill' and c.step == 300:
        os.kill(os.getpid(), signal.SIGKILL)
    return False
if sys.argv[2] == 'resume':
    rlzoo.resume(sys.argv[1], on_checkpoint=at_checkpoint)
else:
    rlzoo.train(*args, run_dir=sys.argv[1], on_checkpoint=at_checkpoint)
"""


def multicore() -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: nothing to switch between")


def train(run_dir: Path, how: str = "run", *extra: str, switchy: bool = True,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``rlzoo.train(*ARGS, *extra)`` (``how``: ``run``, ``stop`` or ``kill`` at step 300) or
    ``rlzoo.resume`` (``how='resume'``) in a fresh interpreter at the default threads."""
    base = {k: v for k, v in os.environ.items() if k not in CLEAN}
    code = (SWITCHY if switchy else "") + TRAIN
    return subprocess.run([sys.executable, "-c", code, str(run_dir), how, *ARGS, *extra],
                          env={**base, **(env or {})}, text=True, capture_output=True,
                          timeout=600)


def ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]


def final(run_dir: Path) -> tuple[dict, dict, float]:
    """The last checkpoint's algorithm state and member parts, and the final return."""
    newest = sorted((run_dir / "checkpoints").glob("step_*.pt"))[-1]
    assert newest.name == "step_0000000400.pt"
    state = torch.load(newest, weights_only=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    return state["algo"], state["members"], summary["final_eval_return"]


def assert_same(a: object, b: object, where: str = "") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, (where, a, b)


def test_default_runs_equal_one_thread_straight_stopped_killed_and_beside_a_busy_loop(
    tmp_path: Path,
) -> None:
    multicore()
    one = tmp_path / "one-thread"
    ok(train(one, "run", "torch_threads=1", switchy=False))
    straight = tmp_path / "straight"
    ok(train(straight))
    record = json.loads((straight / "summary.json").read_text())["torch_threads"]
    assert record["same_on_counts"] is True
    assert record["updates_on"] == [1, record["counts"][1]]  # both counts trained
    stopped = tmp_path / "stopped"
    ok(train(stopped, "stop"))
    assert not (stopped / "summary.json").exists() or \
        json.loads((stopped / "summary.json").read_text()).get("stopped_early")
    ok(train(stopped, "resume"))
    killed = tmp_path / "killed"
    assert train(killed, "kill").returncode == -9
    ok(train(killed, "resume"))
    busy = tmp_path / "busy"
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        ok(train(busy, switchy=False))  # rlzoo's own tuner, a core taken
    finally:
        loop.kill()
        loop.wait()
    reference = final(one)
    for run in (straight, stopped, killed, busy):
        assert_same(final(run), reference, run.name)


def test_the_update_check_finds_a_count_dependent_update_and_puts_everything_back() -> None:
    multicore()
    net = torch.nn.Linear(3, 2)

    class Algo:
        def state_dict(self) -> dict:
            return {"w": net.weight.detach(), "n": self.n}

        def load_state_dict(self, state: dict) -> None:
            with torch.no_grad():
                net.weight.copy_(state["w"])
            self.n = state["n"]

    algo = Algo()
    algo.n = 7
    before = (net.weight.detach().clone(), torch.get_rng_state(), torch.get_num_threads())

    def fair(batch: torch.Tensor) -> None:
        with torch.no_grad():
            net.weight.add_(torch.randn(2, 3) * batch)
        algo.n += 1

    def unfair(batch: torch.Tensor) -> None:
        fair(batch)
        with torch.no_grad():
            net.weight.add_(torch.get_num_threads())  # as a thread-split sum would, subtly

    counts = (1, 2)
    assert same_on_counts(fair, algo, torch.ones(()), counts)
    assert not same_on_counts(unfair, algo, torch.ones(()), counts)
    assert torch.equal(net.weight, before[0]) and algo.n == 7
    assert torch.equal(torch.get_rng_state(), before[1])
    assert torch.get_num_threads() == before[2]


def test_a_failed_check_pins_the_updates_to_one_thread() -> None:
    calls: list[int] = []
    tuner = ThreadTuner((1, 2), calls.append, window=2, hold=1)
    tuner.decide(False)
    for step in range(20):
        tuner.enter()
        tuner.tick(step, 1.0 if tuner.threads == 1 else 0.01)  # 2 threads "much faster"
        tuner.leave()
    assert set(calls) == {1} and tuner.history == [] and tuner.record()["updates_on"] == [1]
    free: list[int] = []
    tuner = ThreadTuner((1, 2), free.append, window=2, hold=1)
    tuner.decide(True)
    for step in range(20):
        tuner.enter()
        tuner.tick(step, 1.0 if tuner.threads == 1 else 0.01)
        tuner.leave()
    assert tuner.record()["updates_on"] == [1, 2] and free[-1] == 1  # leaves on 1 thread


def test_torch_threads_far_above_the_cpus_is_one_line(tmp_path: Path) -> None:
    far = threads.OVERSUBSCRIBE * len(os.sched_getaffinity(0)) + 1
    proc = run_cli(["algo=sac", "env=Pendulum", "total_steps=10", f"torch_threads={far}"],
                   tmp_path / "run")
    assert_user_error(proc, f"torch_threads={far} is far above")
