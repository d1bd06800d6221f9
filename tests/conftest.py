"""Shared test helpers: run the real CLI in a temporary run dir."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

# One thread per test process: the suite runs on 2 workers (pyproject.toml's addopts), and torch's
# OpenMP threads spin-wait, so two 2-thread workers on 2 cores would slow each other down by far
# more than 2x. Subprocesses (the CLI) inherit it.
os.environ["OMP_NUM_THREADS"] = "1"

import torch  # noqa: E402 - after OMP_NUM_THREADS, which torch reads when it loads

torch.set_num_threads(1)  # also if something imported torch before this file

REPO = Path(__file__).resolve().parents[1]
TINY = ["algo.actor.hidden=[32,32]", "critic.hidden=[32,32]"]


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def run_cli(
    args: list[str], run_dir: Path | None = None, module: str = "rlzoo.train", timeout: int = 600,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m <module> <args>`` (with ``hydra.run.dir=<run_dir>`` when given): forked
    from a fork server started in the same environment (tests/zygote.py), or a fresh
    interpreter with ``RLZOO_TESTS_FRESH=1``; the result is subprocess.run's, ``TimeoutExpired``
    included."""
    cmd = [sys.executable, "-m", module, *args]
    if run_dir is not None:
        cmd.append(f"hydra.run.dir={run_dir}")
    env = cli_env()
    if os.environ.get("RLZOO_TESTS_FRESH") != "1":
        return ForkServer.serving(env).run(cmd, env, cwd or REPO, timeout)
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or REPO, env=env
    )


def cli_env() -> dict[str, str]:
    """The environment of a CLI run: this process's, one thread, and this checkout first on
    PYTHONPATH (rlzoo and the tests.* env modules wherever the command runs)."""
    return {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def _start_state(env: dict[str, str]) -> dict[str, str]:
    """The part of ``env`` that decides which server may fork a run: all of it but
    PYTEST_CURRENT_TEST, which pytest changes with every test and nothing reads while it starts
    (the child still gets ``env`` whole)."""
    return {key: value for key, value in env.items() if key != "PYTEST_CURRENT_TEST"}


class ForkServer:
    """The client of a tests/zygote.py server. One runs per test process at a time, started in
    the environment of the run that needs it, so every child's interpreter started and imported
    in the environment it runs in; a run in another environment replaces it (a test that sets a
    variable pays one start for it, as a fresh interpreter would)."""

    _current: ForkServer | None = None

    def __init__(self, env: dict[str, str]) -> None:
        self.env = _start_state(env)
        self.log = tempfile.TemporaryFile()  # the server's own stderr (its children have theirs)
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "zygote.py")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, cwd=REPO, env=env)
        self.pending = b""  # what the server wrote after the last full line
        self.requests = 0  # the id of the last request
        try:
            self._answer(None, 300)
        except (TimeoutError, RuntimeError, ValueError):
            self.proc.kill()
            self.proc.wait()
            self.log.seek(0)
            raise RuntimeError("the fork server did not start: "
                               + self.log.read().decode(errors="replace")[-2000:]) from None

    @classmethod
    def close_current(cls) -> None:
        """End this process's server, if one runs (at exit)."""
        if cls._current is not None:
            cls._current.close()

    @classmethod
    def serving(cls, env: dict[str, str]) -> ForkServer:
        """A live server started in ``env`` (up to PYTEST_CURRENT_TEST)."""
        current = cls._current
        if current is None or current.proc.poll() is not None or current.env != _start_state(env):
            if current is not None:
                current.close()
            cls._current = cls(env)
        return cls._current

    def close(self) -> None:
        """End the server: closing its stdin ends its loop; one that does not end is killed."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
            self.proc.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        if ForkServer._current is self:
            ForkServer._current = None

    def _answer(self, request_id: int, timeout: float) -> dict:
        """The server's next line, which must answer ``request_id``, waiting at most ``timeout``
        seconds (TimeoutError)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("the fork server ended")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        answer = json.loads(line)
        if answer.get("id") != request_id:
            raise RuntimeError(f"the fork server answered {answer}, not request {request_id}")
        return answer

    def run(self, cmd: list[str], env: dict[str, str], cwd: Path,
            timeout: float) -> subprocess.CompletedProcess[str]:
        """``cmd`` (``python -m MODULE ARGS``) as a child of the server, in ``env`` and ``cwd``.
        Anything that leaves the exchange unfinished (a timeout, an interrupt) ends the server,
        so the next run starts a new one and no answer is read for the wrong request."""
        assert self.proc.stdin is not None
        if not Path(cwd).is_dir():
            raise FileNotFoundError(f"no such directory: {cwd}")  # as subprocess.run would
        self.requests += 1
        with tempfile.TemporaryDirectory(prefix="rlzoo-cli-") as tmp:
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            request = {"id": self.requests, "module": cmd[2], "args": cmd[3:], "cwd": str(cwd),
                       "env": env, "stdout": str(out), "stderr": str(err)}
            try:
                self.proc.stdin.write(json.dumps(request).encode() + b"\n")
                self.proc.stdin.flush()
                pid = self._answer(self.requests, 60)["pid"]
                try:
                    status = self._answer(self.requests, timeout)["status"]
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    # as subprocess.run(text=True) raises it: what was written so far, in bytes
                    raise subprocess.TimeoutExpired(
                        cmd, timeout, out.read_bytes(), err.read_bytes()) from None
            except BaseException:
                self.close()
                raise
            return subprocess.CompletedProcess(cmd, status, out.read_text(), err.read_text())


atexit.register(ForkServer.close_current)


@pytest.fixture
def fresh_interpreters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give every run_cli of a test a fresh interpreter (``RLZOO_TESTS_FRESH=1``): for tests that
    compare runs in different processes bit for bit, which must also hold across string-hash
    seeds (a fork server's children share one)."""
    monkeypatch.setenv("RLZOO_TESTS_FRESH", "1")


def read_summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie waiting for its dead parent does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def assert_gone(pids: list[int], timeout: float = 10.0) -> None:
    """Within ``timeout`` seconds no process of ``pids`` is alive (:func:`alive`)."""
    deadline = time.time() + timeout
    while time.time() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)]


def assert_user_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit status 2, one ``rlzoo: error:`` line on stderr, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("rlzoo: error:")]
    assert len(lines) == 1, proc.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


# What each extra of pyproject.toml brings that tests need, by importable module. A test marked
# ``@pytest.mark.extra("sweep")`` is skipped, with the reason, where the extra is not installed,
# and fails where RLZOO_REQUIRE_EXTRAS (comma-separated extras; .ci/run sets it) names it: CI
# must run those tests, not skip them.
EXTRA_MODULES = {
    "sweep": ("hydra_plugins.hydra_joblib_launcher", "hydra_plugins.hydra_ray_launcher", "ray"),
    "compare": ("rliable", "rliable.library"),
    "vmas": ("vmas", "gym"),
}
REQUIRE_EXTRAS = "RLZOO_REQUIRE_EXTRAS"


def extra_missing(extra: str, environ: dict[str, str] | os._Environ[str] = os.environ,
                  modules: dict[str, tuple[str, ...]] = EXTRA_MODULES) -> tuple[str, str] | None:
    """None when ``extra``'s modules import; else ``("skip" | "fail", reason)``: "fail" when
    ``environ[REQUIRE_EXTRAS]`` names the extra."""
    import importlib.util

    def found(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except ImportError:  # its parent package is missing
            return False

    absent = [m for m in modules[extra] if not found(m)]
    if not absent:
        return None
    required = {e.strip() for e in environ.get(REQUIRE_EXTRAS, "").split(",")}
    if extra in required:
        return "fail", (f"{', '.join(absent)} missing, but {REQUIRE_EXTRAS} says rlzoo[{extra}] "
                        f"must be installed here (.ci/run: pip install -e '.[{extra}]')")
    return "skip", f"needs pip install -e '.[{extra}]' ({', '.join(absent)} not installed)"


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("extra"):
        missing = extra_missing(mark.args[0])
        if missing is not None:
            action, reason = missing
            (pytest.fail if action == "fail" else pytest.skip)(reason)


# ``pytest -m smoke``: did my install work? One of each kind of run (README, "Setup"): SAC on
# MuJoCo through the CLI (run dir, checkpoints, TensorBoard), MADDPG on MPE and its resume,
# rlzoo.compare (tables, figures, rliable), the README's first command.
SMOKE = (
    "tests/test_cli.py::test_smoke_run_writes_the_run_dir_contract[Hopper-sac]",
    "tests/test_first_look.py::test_a_multi_agent_run_resumes_where_it_stopped",
    "tests/test_compare_figures.py::test_one_env_one_seed_is_flagged_and_without_rliable_one_line"
    "[rliable]",
    "tests/test_first_look.py::test_the_first_look_evaluates_ten_times_and_is_under_an_hour",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The :data:`SMOKE` tests get the ``smoke`` mark. Tests marked ``cuda`` need a GPU:
    skipped, with the reason, where torch sees none."""
    for item in items:
        if item.nodeid in SMOKE:
            item.add_marker(pytest.mark.smoke)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
