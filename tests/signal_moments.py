"""``python -m tests.signal_moments --at=MOMENT [--signal=TERM] [--signals=N] TRAIN_ARGS...``:
``python -m rlzoo.train TRAIN_ARGS...`` that sends itself a signal at one chosen moment, so a
test can stop a run exactly there, every time, instead of by luck with a timer.

MOMENT is one of:

* ``fork:before:N``, ``fork:parent:N``, ``fork:child:N``: inside the N-th ``os.fork`` of the
  process, in an at-fork hook (Python's ``os.register_at_fork``, where logging keeps its own,
  and which prints and drops any exception raised in it): before the fork, after it in the
  parent, or after it in the child (which signals its parent, as a signal that lands while the
  child is being born).
* ``MODULE:QUALNAME[:after]``: on entering (or after returning from) the function or method
  looked up there, e.g. ``rlzoo.run.loop:Trainer.save``; in a worker process (a name starting
  ``rlzoo-env``) the signal goes to the training process.

``--fail-at=MODULE:QUALNAME`` instead makes that call raise ``OSError(ENOSPC)`` (a disk that
filled up there). ``--signals=N`` sends the signal N times in a row (a second Ctrl-C). Only the
first call of the moment sends. ``--pids=FILE`` appends the pid of every process forked from
this one to FILE (the env workers), so a test can check that none outlives the run.
"""

from __future__ import annotations

import errno
import functools
import importlib
import multiprocessing
import os
import signal
import sys
from typing import Any

_state = {"sent": False, "forks": 0}


def _send(sig: int, count: int) -> None:
    if _state["sent"]:
        return
    _state["sent"] = True
    in_worker = multiprocessing.current_process().name.startswith("rlzoo-env")
    target = os.getppid() if in_worker else os.getpid()
    for _ in range(count):
        os.kill(target, sig)
    # some bytecode here: Python runs its handler at the next bytecode check, inside this moment
    total = 0
    for i in range(200):
        total += i


def _fork_hook(where: str, n: int, sig: int, count: int) -> None:
    forks = {"count": 0}

    def before() -> None:
        forks["count"] += 1
        if where == "before" and forks["count"] == n:
            _send(sig, count)

    def parent() -> None:
        if where == "parent" and forks["count"] == n:
            _send(sig, count)

    def child() -> None:
        if where == "child" and forks["count"] == n:
            for _ in range(count):
                os.kill(os.getppid(), sig)

    os.register_at_fork(before=before, after_in_parent=parent, after_in_child=child)


def _record_children(path: str) -> None:
    def child() -> None:
        with open(path, "a") as f:
            f.write(f"{os.getpid()}\n")

    os.register_at_fork(after_in_child=child)


def _fail(spec: str) -> None:
    module_name, qualname = spec.split(":")
    owner: Any = importlib.import_module(module_name)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    setattr(owner, name, failing)


def _wrap(spec: str, sig: int, count: int) -> None:
    module_name, qualname, *when = spec.split(":")
    owner: Any = importlib.import_module(module_name)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    after = when == ["after"]

    @functools.wraps(original)
    def signalled(*args: Any, **kwargs: Any) -> Any:
        if not after:
            _send(sig, count)
        result = original(*args, **kwargs)
        if after:
            _send(sig, count)
        return result

    setattr(owner, name, signalled)


def main() -> None:
    args = sys.argv[1:]
    options = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if a.startswith("--")}
    rest = [a for a in args if not a.startswith("--")]
    sig = getattr(signal, "SIG" + options.get("--signal", "TERM"))
    count = int(options.get("--signals", "1"))
    at = options.get("--at", "")
    if "--pids" in options:
        _record_children(options["--pids"])
    if "--fail-at" in options:
        _fail(options["--fail-at"])
    elif at.startswith("fork:"):
        _, where, n = at.split(":")
        _fork_hook(where, int(n), sig, count)
    else:
        _wrap(at, sig, count)
    import rlzoo.train as cli

    sys.argv = ["rlzoo.train", *rest]
    cli.main()


if __name__ == "__main__":
    main()
