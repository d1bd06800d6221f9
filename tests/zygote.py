"""A fork server for the tests' ``python -m <module>`` runs (conftest.run_cli).

Every CLI test used to pay a fresh interpreter's start, most of it importing torch, hydra and
tensorboard: ``python -m rlzoo.train algo=nope`` takes 3.8 s to its one-line error on a 2-core
CI-like machine, and 0.2 s forked (scripts/bench_test_cli.py measures whole test files). The
server is a fresh interpreter that has imported those modules and nothing else (no test code,
no torch state touched), and forks one child per run. The child is what ``python -m`` would
have been from there on: it takes the run's environment, working directory, argv and
``sys.path[0]``, runs the module as ``__main__`` with :func:`runpy.run_module`, and exits the
way the interpreter does (SystemExit's code, a traceback and 1 for an uncaught exception,
non-daemon threads joined, atexit handlers run, stdio flushed).

What a fork cannot give is what the interpreter read while it started and imported
(OMP_NUM_THREADS, MUJOCO_GL, PYTHONPATH, ...): so each server serves only runs in the environment
it was started in, and conftest.run_cli starts another for a run in another (a test that set a
variable). Tests of import-time behaviour (tests/test_threads.py) start their own processes.
``RLZOO_TESTS_FRESH=1`` turns the server off.

Protocol, one JSON object per line: the client writes ``{"id", "module", "args", "cwd", "env",
"stdout", "stderr"}`` (the last two are file paths); the server answers ``{"id", "pid": P}``
after the fork and ``{"id", "status": S}`` when the child has ended (``S`` as subprocess's
returncode: negative for a signal).

Known differences from ``python -m``, none of which a test here relies on: every child of one
server has the server's string-hash seed (see ``_fresh_randomness``); runpy puts back
``sys.argv[0]`` and ``__main__`` before the atexit handlers run; a grandchild that keeps the
run's stdout open is not waited for.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, NoReturn

PRELOAD = ("rlzoo", "torch", "hydra", "hydra.core.hydra_config", "omegaconf", "gymnasium",
           "rlzoo.errors", "rlzoo.launch.api", "rlzoo.launch.claim", "rlzoo.launch.execute",
           "rlzoo.launch.resume", "rlzoo.store.group", "rlzoo.store.rundir", "rlzoo.run.signals")
"""Imported once by the server, in this order: ``rlzoo`` first, as ``python -m rlzoo.train``
loads it before torch, then what rlzoo/train.py imports (not rlzoo.train itself, which each
child runs as ``__main__``)."""


def _finish() -> None:
    """What a finishing interpreter does before it ends: join non-daemon threads, run the atexit
    handlers, flush stdout and stderr."""
    import atexit
    import threading

    try:
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass


def _exit_like_the_interpreter(code: Any) -> NoReturn:
    """End the child as a finishing interpreter would with ``sys.exit(code)``."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        print(code, file=sys.stderr)
        status = 1
    try:
        _finish()
    finally:
        os._exit(status)


def _fresh_randomness() -> None:
    """Reseed what a fresh interpreter seeds from the OS at import (``random``, numpy's global
    generator), which every child would otherwise share with the server. String hashing cannot
    be reseeded: every child of one server has its PYTHONHASHSEED (tests that compare runs in
    different processes bit for bit use fresh interpreters: conftest's ``fresh_interpreters``)."""
    import random

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()


def _child(request: dict[str, Any]) -> NoReturn:
    """Become ``python -m <module> <args>`` in the request's cwd and environment."""
    import runpy
    import signal
    import traceback

    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for source, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(source, target)
        os.close(source)
    # the server's own stdio objects, set up by its start in this environment (buffering,
    # PYTHONIOENCODING, PYTHONUNBUFFERED) and empty at the fork, now on the run's files
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[0] = os.getcwd()  # what -m puts first
    sys.argv = [request["module"], *request["args"]]
    _fresh_randomness()
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        _exit_like_the_interpreter(stop.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        try:
            _finish()
        finally:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)  # dies by the signal, as the interpreter does
    except BaseException:  # noqa: BLE001 - the interpreter's own last resort
        traceback.print_exc()
        _exit_like_the_interpreter(1)
    _exit_like_the_interpreter(0)


def serve() -> None:
    """Answer requests from stdin until it closes; one child at a time. Each answer carries the
    request's ``id``, so a client can tell a stale answer from its own."""
    import importlib

    channel_in = os.fdopen(os.dup(0), "r")
    channel_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a stray print of the server's goes to its log, never into the channel
    for name in PRELOAD:
        importlib.import_module(name)
    channel_out.write(json.dumps({"ready": os.getpid()}) + "\n")
    channel_out.flush()
    for line in channel_in:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            channel_in.close()
            channel_out.close()
            _child(request)
        channel_out.write(json.dumps({"id": request["id"], "pid": pid}) + "\n")
        channel_out.flush()
        _, wait_status = os.waitpid(pid, 0)
        channel_out.write(json.dumps({"id": request["id"],
                                      "status": os.waitstatus_to_exitcode(wait_status)}) + "\n")
        channel_out.flush()


if __name__ == "__main__":
    serve()
