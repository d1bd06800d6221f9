"""The child processes of the reproduce tool: their environment, their logs, the signals
forwarded to them, and the file locks that keep two invocations off one cell."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from rlzoo.store.bounded import read_tail
from tools.reproduce.files import CHECKOUT


class FileLock:
    """An exclusive ``flock`` on a file for as long as it is held; the kernel drops it when the
    process dies. ``acquire(block=False)`` returns False (and ``owner``, the holder's pid) when
    another process holds it."""

    def __init__(self, path: Path) -> None:
        self.path, self.fd, self.owner = path, -1, ""

    def acquire(self, block: bool = False) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        except OSError:
            self.owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


def child_env(threads: int | None = None) -> dict[str, str]:
    """The environment of a child process: this checkout's rlzoo and tools first on
    ``PYTHONPATH`` (outside a checkout: ``PYTHONPATH`` as it is); with ``threads``,
    ``OMP_NUM_THREADS`` set to it."""
    env = dict(os.environ)
    if CHECKOUT is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT),
                                             *filter(None, [env.get("PYTHONPATH")])])
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def log_tail(path: Path, lines: int = 1) -> str:
    """The last non-empty line(s) of a log file (for a one-line failure report)."""
    try:  # its last 64 KiB, from a regular file, no link followed
        text = read_tail(path, 1 << 16).decode(errors="replace")
    except (OSError, ValueError):
        return "(no output)"
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) if kept else "(no output)"


class Stop:
    """SIGINT/SIGTERM: remember the first signal and forward each one to the running children
    (started in their own sessions, so a terminal's Ctrl-C reaches them only through here, once;
    rlzoo checkpoints on the first and exits at once on a second)."""

    def __init__(self) -> None:
        self.signum = 0
        self.children: set[subprocess.Popen[bytes]] = set()

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.handle)

    def handle(self, signum: int, frame: Any) -> None:
        self.signum = self.signum or signum
        for child in list(self.children):
            if child.poll() is None:
                try:
                    child.send_signal(signum)
                except OSError:
                    pass


STOP = Stop()


def run_child(cmd: list[str], log: Path, env: dict[str, str]) -> int:
    """Run ``cmd`` from the checkout's root (outside a checkout: the current directory), output
    appended to ``log``; its exit status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, cwd=CHECKOUT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        STOP.children.add(proc)
        if STOP.signum:  # a signal that came before the child was in the set
            proc.send_signal(STOP.signum)
        try:
            return proc.wait()
        finally:
            STOP.children.discard(proc)
