"""``torch_threads=auto``: the ThreadTuner, its idle-core gate, and the thread count a run trains
on (``rlzoo/config/threads.py``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rlzoo.config import threads
from rlzoo.config.threads import MAX_HOLD, ThreadTuner, idle_probe, run_threads, thread_tuner

CLEAN = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS")  # the suite's OpenMP variables


def fresh(code: str, *args: str, **env: str) -> list[str]:
    """Run ``code`` in a fresh interpreter with ``env`` (and without the suite's OpenMP
    variables); its printed words."""
    base = {k: v for k, v in os.environ.items() if k not in CLEAN}
    out = subprocess.run([sys.executable, "-c", code, *args], env={**base, **env}, text=True,
                         capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


def test_rlzoo_leaves_libgomps_spin_wait_alone() -> None:
    # the spin is what makes a second thread pay alone; sharing is the tuner's job
    code = "import rlzoo, rlzoo.train, torch, os; print(os.environ.get('GOMP_SPINCOUNT', '-'))"
    assert fresh(code) == ["-"]
    assert fresh(code, GOMP_SPINCOUNT="50") == ["50"]  # the user's, untouched


def test_auto_starts_on_one_thread_unless_the_environment_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert run_threads("auto") == 1
    assert [run_threads(n) for n in (0, 1, 3)] == [None, 1, 3]
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert run_threads("auto") is None  # torch read OMP_NUM_THREADS itself


@pytest.mark.parametrize(("env", "setting", "before", "want"), [
    ({"OMP_NUM_THREADS": "2"}, "auto", 0, ["2", "2"]),  # the environment's count, no tuner
    ({}, "2", 3, ["2", "3"]),  # a fixed count, then torch's count as it was
])
def test_runs_train_on_the_count_they_were_given(tmp_path: os.PathLike[str], env: dict[str, str],
                                                 setting: str, before: int,
                                                 want: list[str]) -> None:
    """A single seed and a 2-seed group alike train on the thread count ``torch_threads`` and
    the environment give them (read inside each run by its on_eval callback), and torch's
    count is restored after each."""
    code = (
        "import sys, rlzoo, torch\n"
        "seen = []\n"
        "for k in (1, 2):\n"
        "    if int(sys.argv[3]): torch.set_num_threads(int(sys.argv[3]))\n"
        "    rlzoo.train('algo=sac', 'env=Pendulum', f'seeds={k}', 'total_steps=60',\n"
        "                'algo.learning_starts=50', 'algo.batch_size=8', 'eval.every=60',\n"
        "                'eval.episodes=1', 'log.progress=false', 'checkpoint.every=0',\n"
        "                'algo.actor.hidden=[8]', 'critic.hidden=[8]',\n"
        "                'torch_threads=' + sys.argv[2], run_dir=f'{sys.argv[1]}/run{k}-s0',\n"
        "                on_eval=lambda e: seen.append(torch.get_num_threads()) and False)\n"
        "    print(max(seen), torch.get_num_threads()); seen.clear()\n"
    )
    # per seed count: threads during the run, threads after it
    assert fresh(code, str(tmp_path), setting, str(before), **env) == want * 2


class FakeMachine:
    """A probe of a machine of ``cpus`` CPUs whose idle cores at each reading are ``spare(step)``
    (a number, a function of the step, or None: the probe reads nothing)."""

    def __init__(self, spare: object, cpus: int = 2) -> None:
        self.spare, self.cpus, self.step, self.idle, self.total = spare, cpus, 0, 0.0, 0.0

    def __call__(self) -> tuple[float, float, int] | None:
        if self.spare is None:
            return None
        spare = self.spare(self.step) if callable(self.spare) else self.spare
        self.idle, self.total = self.idle + spare, self.total + self.cpus
        return self.idle, self.total, self.cpus


def simulate(rates: dict[int, float], steps: int, window: int = 10, hold: int = 3,
             change: tuple[int, dict[int, float]] | None = None,
             spare: object = 1.0, cores: int = 2) -> tuple[ThreadTuner, list[int]]:
    """Drive a ThreadTuner between 1 and ``cores`` threads: each env step's updates take
    ``1 / rates[threads]`` seconds (``change = (step, new rates)`` from that step on), with
    ``spare`` idle cores (a number, a function of the step, or None: no probe reading). Returns
    the tuner and the thread count torch was set to, in order."""
    calls: list[int] = []
    machine = FakeMachine(spare, cores)
    tuner = ThreadTuner((1, cores), calls.append, window=window, hold=hold, probe=machine)
    for step in range(1, steps + 1):
        machine.step = step
        if change and step == change[0]:
            rates = change[1]
        tuner.tick(step, 1.0 / rates[tuner.threads])
    return tuner, calls


def threads_of(tuner: ThreadTuner) -> list[int]:
    return [t for _, t, _ in tuner.history]


def test_the_tuner_keeps_the_faster_count_and_backs_off_its_retries() -> None:
    tuner, calls = simulate({1: 100.0, 2: 150.0}, steps=130)
    # window 1 on 1 thread, window 2 tries 2 (faster: kept for 3 windows), then tries 1
    # (slower: back to 2, and the next try waits twice as long: 6 windows, then 12)
    assert threads_of(tuner) == [1, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1]
    assert calls == [1, 2, 1, 2, 1, 2]
    rates = [r for _, _, r in tuner.history]
    assert rates[0] == pytest.approx(100.0) and rates[1] == pytest.approx(150.0)
    assert [s for s, _, _ in tuner.history] == list(range(10, 131, 10))
    assert tuner.hold == 12


def test_the_tuner_goes_back_when_the_other_count_is_not_faster() -> None:
    tuner, calls = simulate({1: 100.0, 2: 101.0}, steps=100)  # within MARGIN: not worth it
    assert threads_of(tuner) == [1, 2, 1, 1, 1, 1, 1, 1, 2, 1]
    assert calls == [1, 2, 1, 2, 1]
    assert tuner.threads == 1 and tuner.hold == 12


def test_the_back_off_is_capped() -> None:
    tuner, _ = simulate({1: 100.0, 2: 101.0}, steps=10 * 400, hold=8)
    assert tuner.hold == MAX_HOLD
    tries = [i for i, t in enumerate(threads_of(tuner)) if t == 2]
    assert tries[-1] - tries[-2] == MAX_HOLD + 1  # a try, then MAX_HOLD windows on 1 thread


@pytest.mark.parametrize(("cores", "spare", "tries"), [
    (2, 0.2, False), (2, 0.4, False), (2, 0.6, True),  # 1 extra thread wants 0.5 idle cores
    (4, 2.0, False), (4, 2.6, True),  # 3 extra threads want 2.5: one neighbour's core is taken
])
def test_all_cores_are_tried_only_with_as_many_idle_cores(cores: int, spare: float,
                                                            tries: bool) -> None:
    # beside jobs already running, a run does not spin on their cores
    rates = {1: 100.0, cores: 150.0}
    tuner, calls = simulate(rates, steps=100, spare=spare, cores=cores)
    assert (cores in threads_of(tuner)) == tries
    assert calls[:2] == ([1, cores] if tries else [1])


def test_a_core_that_frees_up_is_tried_at_the_next_window() -> None:
    # the neighbour finishes at step 50: the next window has a spare core, the one after tries 2
    tuner, calls = simulate({1: 100.0, 2: 150.0}, steps=80,
                            spare=lambda step: 0.0 if step <= 50 else 1.0)
    assert threads_of(tuner) == [1, 1, 1, 1, 1, 1, 2, 2]
    assert calls == [1, 2]


def test_without_a_probe_reading_the_timing_alone_decides() -> None:
    tuner, calls = simulate({1: 100.0, 2: 150.0}, steps=50, spare=None)
    assert threads_of(tuner) == [1, 2, 2, 2, 2]
    assert calls == [1, 2, 1]  # the 5th window tried 1 again


def test_a_slower_window_on_all_cores_tries_one_thread_at_once() -> None:
    # 2 threads win alone; from step 35 a neighbour makes them collapse (spinning), 1 holds up,
    # and with the neighbour's core busy the tuner does not try 2 again once the hold is over
    tuner, calls = simulate({1: 100.0, 2: 150.0}, steps=100, hold=3,
                            change=(35, {1: 90.0, 2: 40.0}),
                            spare=lambda step: 1.0 if step < 35 else 0.0)
    assert threads_of(tuner) == [1, 2, 2, 2, 1, 1, 1, 1, 1, 1]
    assert calls == [1, 2, 1]


def test_a_slower_window_on_one_thread_does_not_try_more() -> None:
    # a slower window on one thread is no reason to try all cores (only the hold is): more
    # threads would not make up for a busier machine
    tuner, calls = simulate({1: 100.0, 2: 90.0}, steps=60, hold=100,
                            change=(25, {1: 50.0, 2: 20.0}))
    assert threads_of(tuner) == [1, 2, 1, 1, 1, 1] and calls == [1, 2, 1]


def test_the_idle_probe_reads_this_machine() -> None:
    reading = idle_probe()
    if reading is None:
        pytest.skip("no /proc/stat here")
    idle, total, cpus = reading
    assert 0 <= idle <= total and cpus == len(os.sched_getaffinity(0))


STAT = """cpu  900 0 0 9000 0 0 0 0 0 0
cpu0 10 1 2 80 5 0 1 1 0 0
cpu1 50 0 0 50 0 0 0 0 0 0
cpu2 20 0 5 60 10 0 0 5 7 0
intr 12345 0 0
"""


def test_the_idle_probe_sums_idle_and_iowait_of_the_allowed_cpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str],
) -> None:
    stat = os.path.join(tmp_path, "stat")
    with open(stat, "w") as f:
        f.write(STAT)
    real_open = open
    monkeypatch.setattr(threads, "open", lambda path, *a: real_open(stat, *a), raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2})
    # cpu0: idle 80 + iowait 5 of 100 (guest time is inside user); cpu2: 60 + 10 of 100
    assert idle_probe() == (155.0, 200.0, 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {7})  # numbered otherwise
    assert idle_probe() is None


def test_the_tuner_runs_for_auto_on_cpu_without_omp_num_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    calls: list[int] = []
    tuner = thread_tuner("auto", True, 4, calls.append)
    assert tuner is not None and tuner.choices == (1, 4) and calls == [1]
    assert tuner.probe is idle_probe
    for args in (("auto", False, 4), ("auto", True, 1), (2, True, 4), (0, True, 4),
                 (1, True, 4)):
        assert thread_tuner(*args, calls.append) is None, args
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert thread_tuner("auto", True, 4, calls.append) is None
    assert calls == [1]


@pytest.mark.parametrize("seeds", [1, 2])
def test_a_run_times_both_counts_as_it_trains(tmp_path: os.PathLike[str], seeds: int) -> None:
    """Without OMP_NUM_THREADS and torch's count above one, ``torch_threads=auto`` trains a
    single seed and a seed group alike under a ThreadTuner that ticks in the learning phase
    only (the idle probe is blinded so that the suite's other worker cannot close the gate)."""
    code = (
        "import sys, rlzoo, rlzoo.config.threads, rlzoo.run.assemble as assemble, torch\n"
        "if torch.get_num_threads() < 2: print('one-core'); raise SystemExit\n"
        "rlzoo.config.threads.WINDOW, rlzoo.config.threads.HOLD = 5, 2\n"
        "rlzoo.config.threads.idle_probe = lambda: None\n"
        "made = []\n"
        "def spy(*a):\n"
        "    made.append(rlzoo.config.threads.thread_tuner(*a)); return made[-1]\n"
        "assemble.thread_tuner = spy\n"
        "rlzoo.train('algo=sac', 'env=Pendulum', 'total_steps=60', 'algo.learning_starts=30',\n"
        "            'algo.batch_size=8', 'eval.every=0', 'eval.episodes=1',\n"
        "            'seeds=' + sys.argv[2], 'log.progress=false', 'checkpoint.every=0',\n"
        "            'algo.actor.hidden=[8]', 'critic.hidden=[8]',\n"
        "            run_dir=f'{sys.argv[1]}/run-s0')\n"
        "print(*[f'{s}:{t}' for s, t, _ in made[0].history], torch.get_num_threads())\n"
    )
    words = fresh(code, str(tmp_path), str(seeds))
    if words == ["one-core"]:
        pytest.skip("torch has one thread here")
    *windows, after = words
    # steps 31-60 learn: windows of 5 steps on 1, then on torch's count (n), ...
    n = after  # the count restored after the run is torch's own
    assert windows[:2] == ["35:1", f"40:{n}"]
    assert [w.split(":")[0] for w in windows] == ["35", "40", "45", "50", "55", "60"]
    assert all(w.split(":")[1] in ("1", n) for w in windows)
