"""The tests' fork server (tests/zygote.py) stands in for ``python -m`` only where it cannot be
told apart from it: same exit status, stdout and stderr, the same training run bit for bit, a
timeout that kills, and an interpreter started in the run's environment when a test changed
it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, TINY, ForkServer, cli_env, read_summary, run_cli

SCRIPTS = {
    "prints": "import sys; print('out', sys.argv[1:]); print('err', file=sys.stderr)",
    "exit_3": "import sys; print('partial', end=''); sys.exit(3)",
    "exit_text": "import sys; sys.exit('bye')",
    "raises": "raise ValueError('boom')",
    "interrupted": (
        "import atexit\n"
        "atexit.register(lambda: print('atexit'))\n"
        "print('before')\n"
        "raise KeyboardInterrupt"
    ),
    "thread_and_atexit": (
        "import atexit, threading, time\n"
        "atexit.register(lambda: print('atexit'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\n"
        "print('main', __name__)"
    ),
    "where": "import os, sys; print(os.getcwd() == sys.path[0], __spec__.name, sys.argv[0][-11:])",
}


def fresh(module: str, args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch
          ) -> subprocess.CompletedProcess[str]:
    monkeypatch.setenv("RLZOO_TESTS_FRESH", "1")
    try:
        return run_cli(args, module=module, cwd=cwd)
    finally:
        monkeypatch.delenv("RLZOO_TESTS_FRESH")


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_forked_run_ends_as_a_fresh_interpreter_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    (tmp_path / f"{name}.py").write_text(SCRIPTS[name] + "\n")
    forked = run_cli(["a", "b=1"], module=name, cwd=tmp_path)
    started = fresh(name, ["a", "b=1"], tmp_path, monkeypatch)
    assert (forked.returncode, forked.stdout) == (started.returncode, started.stdout), name
    # a traceback's frames above the module differ (runpy's against the server's); its end not
    assert forked.stderr.splitlines()[-1:] == started.stderr.splitlines()[-1:], forked.stderr
    assert forked.returncode == {"exit_3": 3, "exit_text": 1, "raises": 1,
                                 "interrupted": -2}.get(name, 0)


def test_a_forked_training_run_is_the_fresh_one_bit_for_bit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["algo=sac", "env=Pendulum", "total_steps=300", "algo.learning_starts=100",
            "eval.every=0", "eval.episodes=1", "checkpoint.every=0", *TINY]
    forked = run_cli(args, tmp_path / "forked")
    started = fresh("rlzoo.train", [*args, f"hydra.run.dir={tmp_path / 'fresh'}"], REPO,
                    monkeypatch)
    assert forked.returncode == started.returncode == 0, (forked.stderr, started.stderr)
    summaries = [read_summary(tmp_path / side) for side in ("forked", "fresh")]
    assert summaries[0]["final_eval_return"] == summaries[1]["final_eval_return"]
    assert summaries[0]["total_steps"] == 300


def test_a_run_past_its_timeout_is_killed_and_the_next_run_is_answered(tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text(
        "import os, time; print(os.getpid(), flush=True); time.sleep(600)\n")
    with pytest.raises(subprocess.TimeoutExpired) as stopped:
        run_cli([], module="sleeper", cwd=tmp_path, timeout=3)
    assert isinstance(stopped.value.output, bytes)  # as subprocess.run(text=True) gives it
    pid = int(stopped.value.output.split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    (tmp_path / "after.py").write_text("import sys; print('next'); sys.exit(4)\n")
    for _ in range(2):  # no answer of the killed run's is read for these
        after = run_cli([], module="after", cwd=tmp_path)
        assert (after.returncode, after.stdout) == (4, "next\n")


def test_children_do_not_share_the_servers_random_state(tmp_path: Path) -> None:
    """``random`` and numpy's global generator are seeded from the OS in each child, as a fresh
    interpreter seeds them at import."""
    (tmp_path / "draw.py").write_text(
        "import random, numpy\nprint(random.random(), numpy.random.rand())\n")
    first, second = (run_cli([], module="draw", cwd=tmp_path).stdout.split() for _ in range(2))
    assert first[0] != second[0] and first[1] != second[1]


def test_a_changed_environment_gets_a_server_started_in_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an interpreter reads while it starts and imports (OMP_NUM_THREADS, MUJOCO_GL, ...)
    it reads in the run's environment: the server that forks the run was started in it."""
    (tmp_path / "probe.py").write_text(
        "import json, os, sys\n"
        "server = open(f'/proc/{os.getppid()}/environ', 'rb').read().split(b'\\0')\n"
        "print(json.dumps([os.getppid(), 'torch' in sys.modules, os.environ.get('RLZOO_PROBE'),\n"
        "                  b'RLZOO_PROBE=1' in server]))\n")
    server, preloaded, probe, server_saw = json.loads(
        run_cli([], module="probe", cwd=tmp_path).stdout)
    assert (preloaded, probe, server_saw) == (True, None, False)
    monkeypatch.setenv("RLZOO_PROBE", "1")
    changed = json.loads(run_cli([], module="probe", cwd=tmp_path).stdout)
    assert changed[0] != server and changed[1:] == [True, "1", True]
    assert ForkServer.serving(cli_env()).proc.pid == changed[0]
