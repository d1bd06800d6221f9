"""``torch_threads=auto`` and the OpenMP spin-wait rlzoo sets before torch loads
(``rlzoo/threads.py``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rlzoo.threads import SPIN_COUNT, ThreadTuner, run_threads, thread_tuner


def spin_seen(code: str, **env: str) -> list[str]:
    """Run ``code`` in a fresh interpreter with ``env`` (and without the suite's OpenMP
    variables); its printed lines."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, text=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


PRINT = ("import os, rlzoo.threads as t; "
         "print(os.environ.get('GOMP_SPINCOUNT', '-'), t.SPIN_LIMITED)")


def test_rlzoo_before_torch_limits_the_spin_wait() -> None:
    assert spin_seen("import rlzoo, torch; " + PRINT) == [SPIN_COUNT, "True"]


def test_torch_before_rlzoo_is_left_alone() -> None:
    assert spin_seen("import torch, rlzoo; " + PRINT) == ["-", "False"]


@pytest.mark.parametrize(("env", "want"), [
    ({"GOMP_SPINCOUNT": "50"}, ["50", "True"]),
    ({"OMP_WAIT_POLICY": "passive"}, ["-", "True"]),
    ({"OMP_WAIT_POLICY": "ACTIVE"}, ["-", "False"]),
])
def test_the_users_wait_policy_wins(env: dict[str, str], want: list[str]) -> None:
    assert spin_seen("import rlzoo; " + PRINT, **env) == want


def test_auto_is_one_thread_per_seed_and_all_cores_for_a_limited_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import rlzoo.threads as threads

    monkeypatch.setattr(threads, "SPIN_LIMITED", True)
    assert [run_threads("auto", k) for k in (1, 2, 5)] == [1, None, None]
    assert [run_threads(n, 5) for n in (0, 1, 3)] == [None, 1, 3]
    monkeypatch.setattr(threads, "SPIN_LIMITED", False)  # a group would spin: one thread
    assert [run_threads("auto", k) for k in (1, 5)] == [1, 1]


def test_a_group_run_uses_torchs_thread_count(tmp_path: os.PathLike[str]) -> None:
    """In a fresh process with torch's count at 2, a single seed trains on one thread and a
    2-seed group on both (read inside each run by its on_eval callback)."""
    code = (
        "import sys, rlzoo, torch\n"  # rlzoo first, as python -m rlzoo.train does
        "seen = []\n"
        "for k in (1, 2):\n"
        "    rlzoo.train('algo=sac', 'env=Pendulum', f'seeds={k}', 'total_steps=60',\n"
        "                'algo.learning_starts=50', 'algo.batch_size=8', 'eval.every=60',\n"
        "                'eval.episodes=1', 'log.progress=false', 'checkpoint.every=0',\n"
        "                'algo.actor.hidden=[8]', 'critic.hidden=[8]',\n"
        "                run_dir=f'{sys.argv[1]}/run{k}-s0',\n"
        "                on_eval=lambda e: seen.append(torch.get_num_threads()) and False)\n"
        "    print(k, max(seen), torch.get_num_threads()); seen.clear()\n"
    )
    base = {k: v for k, v in os.environ.items()
            if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)],
                         env={**base, "OMP_NUM_THREADS": "2"}, text=True, capture_output=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    # seed count, threads during the run, threads after it (restored)
    assert out.stdout.split() == ["1", "1", "2", "2", "2", "2"]


def simulate(rates: dict[int, float], steps: int, window: int = 10, hold: int = 3,
             change: tuple[int, dict[int, float]] | None = None) -> tuple[ThreadTuner, list[int]]:
    """Drive a ThreadTuner between 1 and 2 threads: each env step's updates take
    ``1 / rates[threads]`` seconds (``change = (step, new rates)`` from that step on). Returns
    the tuner and the thread count torch was set to, in order."""
    calls: list[int] = []
    tuner = ThreadTuner((1, 2), calls.append, window=window, hold=hold)
    for step in range(1, steps + 1):
        if change and step == change[0]:
            rates = change[1]
        tuner.tick(step, 1.0 / rates[tuner.threads])
    return tuner, calls


def test_the_tuner_keeps_the_faster_count_and_tries_the_other_again() -> None:
    tuner, calls = simulate({1: 100.0, 2: 150.0}, steps=100)
    # window 1 on 1 thread, window 2 tries 2 (faster: kept for 3 windows), then tries 1
    # (slower: back to 2), and so on
    assert [t for _, t, _ in tuner.history] == [1, 2, 2, 2, 2, 1, 2, 2, 2, 1]
    assert calls == [1, 2, 1, 2, 1, 2]
    rates = [r for _, _, r in tuner.history]
    assert rates[0] == pytest.approx(100.0) and rates[1] == pytest.approx(150.0)
    assert [s for s, _, _ in tuner.history] == list(range(10, 101, 10))


def test_the_tuner_goes_back_when_the_other_count_is_not_faster() -> None:
    tuner, calls = simulate({1: 100.0, 2: 101.0}, steps=60)  # within MARGIN: not worth it
    assert [t for _, t, _ in tuner.history] == [1, 2, 1, 1, 1, 2]
    assert calls == [1, 2, 1, 2, 1]
    assert tuner.threads == 1


def test_a_slower_window_tries_the_other_count_at_once() -> None:
    # 2 threads win alone; from step 35 a neighbour makes them collapse (spinning), 1 holds up
    tuner, calls = simulate({1: 100.0, 2: 150.0}, steps=70,
                            change=(35, {1: 90.0, 2: 40.0}), hold=100)
    threads = [t for _, t, _ in tuner.history]
    assert threads[:3] == [1, 2, 2]
    assert threads[3:] == [2, 1, 1, 1]  # the window that collapsed, then back to 1 for good
    assert tuner.threads == 1


def test_the_tuner_only_runs_for_auto_one_seed_on_cpu_without_omp_num_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    calls: list[int] = []
    tuner = thread_tuner("auto", 1, True, 4, calls.append)
    assert tuner is not None and tuner.choices == (1, 4) and calls == [1]
    for args in (("auto", 2, True, 4), ("auto", 1, False, 4), ("auto", 1, True, 1),
                 (2, 1, True, 4), (0, 1, True, 4), (1, 1, True, 4)):
        assert thread_tuner(*args, calls.append) is None, args
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert thread_tuner("auto", 1, True, 4, calls.append) is None
    assert calls == [1]


def test_a_single_seed_run_times_both_counts_as_it_trains(tmp_path: os.PathLike[str]) -> None:
    """Without OMP_NUM_THREADS and torch's count above one, ``torch_threads=auto`` trains one
    seed under a ThreadTuner that ticks in the learning phase only."""
    code = (
        "import sys, rlzoo, rlzoo.threads, rlzoo.run.assemble as assemble, torch\n"
        "if torch.get_num_threads() < 2: print('one-core'); raise SystemExit\n"
        "rlzoo.threads.WINDOW, rlzoo.threads.HOLD = 5, 2\n"
        "made = []\n"
        "def spy(*a):\n"
        "    made.append(rlzoo.threads.thread_tuner(*a)); return made[-1]\n"
        "assemble.thread_tuner = spy\n"
        "rlzoo.train('algo=sac', 'env=Pendulum', 'total_steps=60', 'algo.learning_starts=30',\n"
        "            'algo.batch_size=8', 'eval.every=0', 'eval.episodes=1',\n"
        "            'log.progress=false', 'checkpoint.every=0', 'algo.actor.hidden=[8]',\n"
        "            'critic.hidden=[8]', run_dir=f'{sys.argv[1]}/run-s0')\n"
        "print(*[f'{s}:{t}' for s, t, _ in made[0].history], torch.get_num_threads())\n"
    )
    base = {k: v for k, v in os.environ.items()
            if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=base, text=True,
                         capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    if out.stdout.split() == ["one-core"]:
        pytest.skip("torch has one thread here")
    *windows, after = out.stdout.split()
    # steps 31-60 learn: windows of 5 steps on 1, then on torch's count (n), ...
    n = after  # the count restored after the run is torch's own
    assert windows[:2] == ["35:1", f"40:{n}"]
    assert [w.split(":")[0] for w in windows] == ["35", "40", "45", "50", "55", "60"]
    assert all(w.split(":")[1] in ("1", n) for w in windows)
