"""``torch_threads=auto`` and the OpenMP spin-wait rlzoo sets before torch loads
(``rlzoo/threads.py``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rlzoo.threads import SPIN_COUNT, run_threads


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
